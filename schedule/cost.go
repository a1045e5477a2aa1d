package schedule

import (
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// Cost model constants (the formulas are in doc.go).
const (
	// AchievableBWFraction of the spec HBM bandwidth is the one pool every
	// SM's streams share (R16).
	AchievableBWFraction = 0.80
	// AchievableFlopFraction of the spec fp16 rate, split evenly over SMs.
	AchievableFlopFraction = 0.70

	dispatchUS      = 0.25 // dequeue, decode the instruction, block barrier
	signalUS        = 0.50 // __syncthreads + device-scope fence + atomicAdd on the out_counter
	wakeUS          = 0.60 // a satisfied counter seen by a polling waiter (acquire load + backoff)
	tileFixedUS     = 0.10 // GEMV/GEMM tile: 2 barriers around the x cache, warp reduction
	l2BWFactor      = 2.5  // L2 bandwidth as a multiple of the spec HBM bandwidth (x-cache reloads)
	hbmLatencyUS    = 0.60 // one HBM round trip
	inflightPerLane = 64   // bytes one thread keeps in flight (4 x 16-byte vector loads): 2048 per 32-wide warp
	prefetchIssueUS = 0.04 // per look-ahead slot per GEMV/GEMM tile: issuing L2 prefetches
	pipelineGain    = 0.6  // exposed fraction of a tile's bytes: max(0.5, 1/(1+0.6*depth))
	minExposed      = 0.5
)

// Regions of the breakdown.
const (
	RegionAttention = "attention"
	RegionMLP       = "mlp"
	RegionLMHead    = "lm_head"
	RegionOther     = "other"
)

// Regions lists the breakdown's regions in report order.
var Regions = []string{RegionAttention, RegionMLP, RegionLMHead, RegionOther}

// Cost is the analytic prediction for one program on one target.
type Cost struct {
	PredictedUS      float64 // the headline: max(MakespanUS, BandwidthBoundUS, BytesBoundUS)
	MakespanUS       float64 // simulated end of the last task
	TotalWorkUS      float64 // every task run alone on one SM, summed
	BandwidthBoundUS float64 // weights / spec HBM bandwidth: the roofline floor
	BytesBoundUS     float64 // Σ est_bytes / achievable HBM bandwidth
	FlopsBoundUS     float64 // Σ est_flops / achievable fp16 rate
	RegionUS         map[string]float64
	NTasks           int
	NSMsUsed         int
	Notes            []string
}

// Predict estimates the single-stream decode latency of a program on a
// target under a point's timing knobs (pipelining_depth, threads_per_block;
// sm_assignment places the tasks of a program that carries no SMs). It is
// deterministic and never below either HBM floor (R16).
func Predict(p *ir.Program, t *ir.GpuTarget, pt Point) Cost {
	c := Cost{NTasks: len(p.Tasks), RegionUS: map[string]float64{}}
	for _, r := range Regions {
		c.RegionUS[r] = 0
	}
	if t == nil {
		c.PredictedUS, c.MakespanUS = math.NaN(), math.NaN()
		c.Notes = append(c.Notes, "no GPU target: nothing to predict against")
		return c
	}
	m := newCostModel(t, pt)
	var totalBytes, totalFlops float64
	for i := range p.Tasks {
		b, f := taskBytesFlops(p, &p.Tasks[i])
		totalBytes += float64(b)
		totalFlops += float64(f)
	}
	c.BytesBoundUS = totalBytes / m.bw
	c.FlopsBoundUS = totalFlops / (m.flopsPerSM * float64(m.numSMs))
	c.BandwidthBoundUS = t.BandwidthBoundUS(p.TotalWeightBytes())
	if p.TotalWeightBytes() == 0 || math.IsNaN(c.BandwidthBoundUS) {
		c.BandwidthBoundUS = c.BytesBoundUS
	}

	s, notes := m.simulate(p)
	c.Notes = append(c.Notes, notes...)
	c.TotalWorkUS = s.work
	c.NSMsUsed = s.smsUsed
	regionWork := map[string]float64{}
	for i := range p.Tasks {
		regionWork[classifyRegion(&p.Tasks[i])] += s.alone[i]
	}
	switch {
	case len(p.Tasks) == 0:
		c.MakespanUS = dispatchUS + signalUS
		c.RegionUS[RegionOther] = c.MakespanUS
	case s.deadlocked:
		c.MakespanUS = s.work
		for r, v := range regionWork {
			c.RegionUS[r] = v
		}
		c.Notes = append(c.Notes, "the per-SM queues deadlock in simulation; the serial work is used")
	default:
		c.MakespanUS = s.makespan
		for r, v := range s.chain {
			c.RegionUS[r] = v
		}
	}
	c.PredictedUS = max(c.MakespanUS, c.BandwidthBoundUS, c.BytesBoundUS)
	if c.PredictedUS > c.MakespanUS && c.MakespanUS > 0 {
		scale := c.PredictedUS / c.MakespanUS
		for r := range c.RegionUS {
			c.RegionUS[r] *= scale
		}
		c.Notes = append(c.Notes, "prediction raised to the HBM floor")
	}
	return c
}

// costModel holds the per-target rates and the point's timing knobs.
type costModel struct {
	bw         float64 // shared achievable HBM bytes per µs
	flopsPerSM float64 // flops per µs per SM
	numSMs     int
	warps      int     // warps (AMD: wavefronts) per block
	inflight   float64 // bytes one warp/wavefront keeps in flight
	depth      int
	l2Share    float64 // L2 (or Infinity Cache) bytes per SM: a bound on what one SM can prefetch
	l2PerSM    float64 // L2 bytes per µs per SM
	exposed    float64 // exposed fraction of a prefetchable tile
	policy     ir.SMAssignment
}

func newCostModel(t *ir.GpuTarget, pt Point) *costModel {
	numSMs := max(1, t.NumSMs)
	depth := max(0, pt.Config.PipeliningDepth)
	return &costModel{
		bw:         max(t.HBMBandwidthGBs, 1e-9) * 1e3 * AchievableBWFraction,
		flopsPerSM: max(t.MatrixPeakTFLOPS("fp16"), 1e-9) * 1e6 * AchievableFlopFraction / float64(numSMs),
		numSMs:     numSMs,
		warps:      max(1, pt.Config.ThreadsPerBlock/t.Wavefront()),
		inflight:   float64(inflightPerLane * t.Wavefront()),
		depth:      depth,
		l2Share:    float64(t.PrefetchCacheBytes()) / float64(numSMs),
		l2PerSM:    max(t.HBMBandwidthGBs, 1e-9) * 1e3 * l2BWFactor / float64(numSMs),
		exposed:    max(minExposed, 1/(1+float64(depth)*pipelineGain)),
		policy:     pt.Config.SMAssignment,
	}
}

// taskBytesFlops trusts the lowering's estimates and otherwise derives them
// as the reference does: bytes of WEIGHT/KV_CACHE inputs; 2*M*K*N_tile
// flops for GEMV/GEMM (an untagged tile assumed fp16); 4*heads*kv_len*hd
// for attention.
func taskBytesFlops(p *ir.Program, t *ir.Task) (int64, int64) {
	if t.EstBytes != 0 || t.EstFlops != 0 {
		return max(0, t.EstBytes), max(0, t.EstFlops)
	}
	var bytes, flops int64
	for _, id := range t.Inputs {
		if b := p.Buffer(id); b != nil && (b.Kind == ir.Weight || b.Kind == ir.KVCache) {
			bytes += b.NBytes()
		}
	}
	switch t.Op {
	case ir.OpGEMVTile, ir.OpGEMMTile:
		k, n := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0)
		flops = 2 * t.Params.IntOr("M_tile", 1) * k * n
		if bytes == 0 && k > 0 && n > 0 {
			bytes = 2 * k * n
		}
	case ir.OpAttentionTile:
		flops = 4 * t.Params.IntOr("n_heads", 1) * t.Params.IntOr("kv_len", 0) * t.Params.IntOr("head_dim", 0)
	}
	return max(0, bytes), max(0, flops)
}

// classifyRegion buckets a task (§4): by label first, then by op.
func classifyRegion(t *ir.Task) string {
	l := strings.ToLower(t.Label)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(l, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("lm_head", "lmhead", "logits", "classifier"):
		return RegionLMHead
	case has("attn", "attention", "rope", "kv", ".q", ".k", ".v", ".o[", "o_proj") || strings.HasPrefix(l, "q"):
		return RegionAttention
	case has("mlp", "ffn", "gate", "up", "down", "swiglu", "silu"):
		return RegionMLP
	}
	switch t.Op {
	case ir.OpSampleArgmax:
		return RegionLMHead
	case ir.OpAttentionTile, ir.OpAttentionCombine, ir.OpROPE, ir.OpKVAppend, ir.OpSOFTMAX:
		return RegionAttention
	case ir.OpSiLUMul, ir.OpGELU:
		return RegionMLP
	}
	return RegionOther
}
