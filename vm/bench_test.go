package vm

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// bf16Values returns n bf16-representable values in [-0.5, 0.5) held as
// float32, cheaply.
func bf16Values(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = tensor.Round(ir.BF16, r.Float32()-0.5)
	}
	return vals
}

// bf16Weight returns a bf16 weight held at its stored width, values in
// [offset-0.5, offset+0.5), cheaply.
func bf16Weight(shape []int, seed uint64, offset float32) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	t := tensor.NewStored(ir.BF16, shape...)
	for i := range t.Half {
		t.Half[i] = tensor.FloatToBF16(offset + r.Float32() - 0.5)
	}
	return t
}

// BenchmarkGEMVTile runs one GEMV_TILE (K 2048, N_tile 512) per iteration,
// walking 64 tiles of a 128 MiB bf16 weight (stored width) so each tile
// streams from memory. MB/s counts weight bytes.
func BenchmarkGEMVTile(b *testing.B) {
	const K, nTile, tiles = 2048, 512, 64
	N := nTile * tiles
	wt := bf16Weight([]int{N, K}, 1, 0)
	x := &tensor.Tensor{DType: ir.BF16, Shape: []int{1, K}, F: bf16Values(K, 2)}
	out := []*tensor.Tensor{tensor.New(ir.BF16, 1, N)}
	in := []*tensor.Tensor{x, wt}
	params := make([]ir.Params, tiles)
	for i := range params {
		params[i] = ir.Params{ip("K", K), ip("N_tile", nTile), ip("n_off", int64(i*nTile))}
	}
	b.SetBytes(K * nTile * 2)
	i := 0
	for b.Loop() {
		if err := runOp(ir.OpGEMVTile, in, out, params[i]); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % tiles
	}
}

func benchRun(b *testing.B, cfg toyCfg, weights func(p *ir.Program) map[string]*tensor.Tensor) (*VM, time.Duration) {
	p := toyProgram(cfg, 5)
	v, err := New(p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := v.BindWeights(weights(p)); err != nil {
		b.Fatal(err)
	}
	bindStep(b, v, 7, 5)
	start := time.Now()
	n := 0
	for b.Loop() {
		if _, err := v.Run(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	per := time.Since(start) / time.Duration(max(n, 1))
	b.ReportMetric(float64(len(p.Tasks)), "tasks/op")
	b.ReportMetric(float64(per.Nanoseconds())/float64(len(p.Tasks)), "ns/task")
	return v, per
}

// BenchmarkRunToyLike runs one decode step of a hand-built two-layer
// program (hidden 256, 64-wide tiles: a few hundred tasks) per iteration.
func BenchmarkRunToyLike(b *testing.B) {
	cfg := toyCfg{layers: 2, hidden: 256, heads: 8, kvHeads: 4, headDim: 32, ffn: 512, vocab: 1024, maxSeq: 64, nTile: 64, dt: ir.F32}
	benchRun(b, cfg, func(p *ir.Program) map[string]*tensor.Tensor { return toyWeights(b, p) })
}

// BenchmarkRunSmallShape runs one decode step at the shape of the `small`
// preset (4 layers, hidden 2048, 16/4 heads of 128, intermediate 5632,
// vocab 32000, bf16: 623 MB of weights held at their stored width) and
// reports it against the time to read those weights once with every core
// (x-floor).
func BenchmarkRunSmallShape(b *testing.B) {
	cfg := toyCfg{layers: 4, hidden: 2048, heads: 16, kvHeads: 4, headDim: 128, ffn: 5632, vocab: 32000, maxSeq: 256, nTile: 64, dt: ir.BF16}
	var all []*tensor.Tensor
	weights := func(p *ir.Program) map[string]*tensor.Tensor {
		ws := map[string]*tensor.Tensor{}
		for i := range p.Buffers {
			buf := &p.Buffers[i]
			if buf.Kind == ir.Weight {
				var offset float32
				if len(buf.Shape) == 1 { // norm weights around 1
					offset = 1
				}
				t := bf16Weight(buf.Shape, uint64(i), offset)
				ws[*buf.Source] = t
				all = append(all, t)
			}
		}
		return ws
	}
	_, step := benchRun(b, cfg, weights)
	floor := readOnce(all)
	b.ReportMetric(float64(floor.Microseconds())/1e3, "floor-ms")
	b.ReportMetric(float64(step)/float64(floor), "x-floor")
}

// readOnce times one parallel pass over every stored weight value, summed
// as uint16 (best of 3).
func readOnce(ts []*tensor.Tensor) time.Duration {
	workers := runtime.GOMAXPROCS(0)
	best := time.Duration(1 << 62)
	var sink [64]uint64
	for range 3 {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < len(ts); i += workers {
					var s0, s1, s2, s3 uint64
					h := ts[i].Half
					for k := 0; k+4 <= len(h); k += 4 {
						q := h[k : k+4 : k+4]
						s0 += uint64(q[0])
						s1 += uint64(q[1])
						s2 += uint64(q[2])
						s3 += uint64(q[3])
					}
					sink[w%64] += s0 + s1 + s2 + s3
				}
			})
		}
		wg.Wait()
		best = min(best, time.Since(start))
	}
	return best
}
