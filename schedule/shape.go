package schedule

import (
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

// Depth is the longest dependency chain of a program, counted in tasks:
// the number of dependent hops (signal, L2 round trip, dispatch) a decode
// step pays on its critical path, whatever the bandwidth. 0 for a cyclic
// program.
func Depth(p *ir.Program) int {
	g := ir.BuildGraph(p)
	order := g.TopologicalOrder()
	if order == nil {
		return 0
	}
	depth := make([]int, len(p.Tasks))
	best := 0
	for _, t := range order {
		d := 0
		for _, pr := range g.Pred(int(t)) {
			d = max(d, depth[pr])
		}
		depth[t] = d + 1
		best = max(best, depth[t])
	}
	return best
}

// HopsPerLayer is what one more decoder layer adds to Depth at the point
// (B = 1, pos 0): the dependent hops of a layer. -1 when the model cannot
// be lowered.
func HopsPerLayer(cfg model.Config, t *ir.GpuTarget, p Point) int {
	one, more := cfg, cfg
	one.NLayers, more.NLayers = 1, 2
	a, err1 := Lower(one, t, p, LowerOptions{})
	b, err2 := Lower(more, t, p, LowerOptions{})
	if err1 != nil || err2 != nil {
		return -1
	}
	return Depth(b) - Depth(a)
}

// PhaseTiles maps every counter of a program that GEMV/GEMM or fused tiles
// signal to its tile count: how many SMs can stream that projection (or
// phase) at once.
func PhaseTiles(p *ir.Program) map[string]int {
	out := map[string]int{}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		tiled := t.Op == ir.OpGEMVTile || t.Op == ir.OpGEMMTile || ir.TaskFusedPattern(t) != ir.FusedNone
		if tiled && t.OutCounter >= 0 && t.OutCounter < len(p.Counters) {
			out[p.Counters[t.OutCounter].Note]++
		}
	}
	return out
}

// Streaming constants of today's GEMV (kernels/cuda/ops_gemv.cuh): a
// cp.async chunk is 32 lanes x 16 bytes, and a warp keeps cpa_stages - 1
// chunks of each of its cpa_cols weight rows in flight; without cp.async
// each lane has one 16-byte load per column in flight.
const (
	cpAsyncChunkBytes = 512
	vectorLoadBytes   = 16
)

// BytesInFlightPerSM is the weight bytes one SM keeps in flight while a
// GEMV tile streams, at the point's threads_per_block and kernel knobs
// (Little's law: the per-SM stream rate is this over the HBM latency).
// The per-tile cp.async ring starts after the tile's dependency wait and
// drains at its end; the streaming ring (ring_stages > 0) keeps warps x
// (ring_stages - 1) x ring_tile bytes in flight across task ends and waits
// (RingBytesAheadPerSM).
func BytesInFlightPerSM(p Point) int {
	if r := RingBytesAheadPerSM(p); r > 0 {
		return r
	}
	warps := max(p.Config.ThreadsPerBlock/32, 1)
	knob := func(name string) int { return p.knob(name) }
	if knob("cpasync") != 0 {
		return warps * max(knob("cpa_stages")-1, 1) * knob("cpa_cols") * cpAsyncChunkBytes
	}
	return warps * 32 * vectorLoadBytes * knob("cols_per_warp")
}

// RingBytesAheadPerSM is what the streaming ring of kernels/cuda/ring.cuh
// keeps in flight per SM, the next tasks' weights included (issued before
// their dependency waits): warps x (ring_stages - 1) x ring_tile; 0 when
// the point leaves the ring off (ring_stages 0, the default).
func RingBytesAheadPerSM(p Point) int {
	stages := p.knob("ring_stages")
	if stages <= 1 {
		return 0
	}
	return max(p.Config.ThreadsPerBlock/32, 1) * (stages - 1) * p.knob("ring_tile")
}

// knob is a kernel knob of the point, its default when absent.
func (p Point) knob(name string) int {
	if v, ok := p.Knobs[name]; ok {
		return v
	}
	k, _ := findKernelKnob(name)
	return k.def
}
