package trial

import (
	"math/rand/v2"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
)

// The seeded KV cache. A trial that checks a decode step at position p
// starts the reference VM and the eager oracle from the same KV cache
// filled to p rows, instead of running the p steps that would fill it: a
// long context costs one step. Rows are drawn from fixed streams (one per
// layer, K or V, and batch sequence, seeded with KVSeed), standard normal
// values rounded to the model dtype, so every evaluator of a fleet starts
// from the same cache, and the first n rows of a longer cache are the
// cache of n rows. Rows p and later are zero; the step appends row p.

// KVSeed seeds the KV cache streams.
const KVSeed = 0x6b76 // "kv"

type kvStream struct {
	layer, seq int
	v          bool
}

// seededRows returns the first n rows (n x kvDim values) of a stream. The
// values depend only on the stream and the row.
func seededRows(cfg *model.Config, s kvStream, n int) []float32 {
	kind := uint64(0)
	if s.v {
		kind = 1
	}
	rng := rand.New(rand.NewPCG(KVSeed, uint64(s.layer)<<33|uint64(s.seq)<<1|kind))
	out := make([]float32, n*cfg.KVDim())
	for i := range out {
		out[i] = tensor.Round(cfg.DType, float32(rng.NormFloat64()))
	}
	return out
}

// kvFor returns the KV caches (by buffer name) a step at pos of a b-sequence
// program lowered for cfg starts from: rows 0..pos-1 of every sequence
// seeded, the rest zero.
func seededKV(cfg *model.Config, pos, b int) map[string]*tensor.Tensor {
	kd := cfg.KVDim()
	out := make(map[string]*tensor.Tensor, 2*cfg.NLayers)
	for l := 0; l < cfg.NLayers; l++ {
		for _, v := range []bool{false, true} {
			shape := []int{cfg.MaxSeq, cfg.NKVHeads, cfg.HeadDim}
			if b > 1 {
				shape = []int{b, cfg.MaxSeq, cfg.NKVHeads, cfg.HeadDim}
			}
			t := tensor.New(cfg.DType, shape...)
			for r := range b {
				copy(t.F[r*cfg.MaxSeq*kd:], seededRows(cfg, kvStream{layer: l, seq: r, v: v}, pos))
			}
			name := schedule.KCacheName(l)
			if v {
				name = schedule.VCacheName(l)
			}
			out[name] = t
		}
	}
	return out
}

// eagerPrefill returns sequence seq's seeded rows 0..pos-1 of every layer,
// as model.Eager.Prefill takes them.
func seededPrefill(cfg *model.Config, seq, pos int) (k, v [][]float32) {
	for l := 0; l < cfg.NLayers; l++ {
		k = append(k, seededRows(cfg, kvStream{layer: l, seq: seq}, pos))
		v = append(v, seededRows(cfg, kvStream{layer: l, seq: seq, v: true}, pos))
	}
	return k, v
}
