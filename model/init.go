package model

import (
	"context"
	"hash/fnv"
	"math"

	"github.com/amk-dev/amk/tensor"
)

// golden is splitmix64's increment (2^64 / φ).
const golden = 0x9E3779B97F4A7C15

// mix64 is splitmix64's output function.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// streamSeed is the splitmix64 state of one tensor's stream: the run seed
// mixed with the FNV-1a hash of the state-dict key.
func streamSeed(seed uint64, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return mix64(seed ^ h.Sum64())
}

// uniformAt is element i of a stream as a float64 in [-1, 1): the (i+1)-th
// splitmix64 output (state s + (i+1)·golden, so any element is computed
// directly), top 53 bits scaled.
func uniformAt(s uint64, i int) float64 {
	u := mix64(s + uint64(i+1)*golden)
	return float64(u>>11)*(1.0/(1<<53))*2 - 1
}

// initChunk is how many elements one unit of parallel generation fills.
const initChunk = 1 << 18

// InitVersion names the InitWeights recipe: it changes whenever the values
// InitWeights generates for some config and seed change, so weights stored
// by an earlier recipe are not taken for today's. Version 2 draws a tied
// embedding at TiedEmbeddingScale (version 1 drew it at 1).
const InitVersion = 2

// TiedEmbeddingScale is the half-width of the uniform distribution a tied
// embedding table is drawn from: 1/sqrt(hidden), the scale of an untied LM
// head, since the table is also the model's output projection.
func TiedEmbeddingScale(cfg Config) float64 { return 1 / math.Sqrt(float64(cfg.Hidden)) }

// InitWeights generates deterministic weights for cfg from seed. Tensor
// "key" draws element i from the (i+1)-th output u of splitmix64 seeded with
// mix64(seed ^ FNV-1a(key)); with v = u's top 53 bits mapped to [-1, 1):
//
//   - embedding: v (activations start O(1)); a tied embedding (the table
//     is also the LM head) v / sqrt(hidden) instead, the LM head's scale,
//     so logits stay O(1) (an O(1) table read as the LM head gives logits
//     of O(sqrt(hidden)) and a token's own logit of O(hidden) — about 26
//     and 1,100 at hidden 2048 — where the bf16 rounding noise of any two
//     correct implementations exceeds the dtype tolerance on the small
//     logits: see TiedEmbeddingScale);
//   - RMSNorm weights: 1 + 0.1·v (near 1);
//   - projections and lm_head [N, K]: v / sqrt(K), so y = x·Wᵀ keeps x's scale
//     within a factor ~1/sqrt(3) and activations stay O(1) through many
//     layers.
//
// Values are computed in float64, converted to float32 and rounded to the
// dtype (bf16/fp16 round-to-nearest-even, held at that width:
// tensor.NewStored). Chunks are generated on every core; the result does
// not depend on how many there are.
func InitWeights(cfg Config, seed uint64) (Weights, error) {
	return InitWeightsContext(context.Background(), cfg, seed)
}

// InitWeightsContext is InitWeights that stops with ctx's error as soon as
// ctx ends: before each tensor is allocated and before each chunk of values
// is generated, so a cancelled trial gives its memory and cores back within
// one chunk's work instead of after the whole model.
func InitWeightsContext(ctx context.Context, cfg Config, seed uint64) (Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Quant.On() { // amk's own weights of the float model, quantised
		base, err := InitWeightsContext(ctx, cfg.Float(), seed)
		if err != nil {
			return nil, err
		}
		return QuantizeContext(ctx, cfg, base)
	}
	specs := Keys(cfg)
	w := make(Weights, len(specs))
	type job struct {
		t          *tensor.Tensor
		s          uint64
		scale, mid float64
		lo, hi     int
	}
	var jobs []job
	for _, spec := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := tensor.NewStored(cfg.DType, spec.Shape...)
		w[spec.Key] = t
		scale, mid := 1.0, 0.0
		switch spec.Role {
		case RoleEmbed:
			if cfg.TiedEmbeddings {
				scale = TiedEmbeddingScale(cfg)
			}
		case RoleNorm:
			scale, mid = 0.1, 1
		case RoleLinear, RoleLMHead:
			scale = 1 / math.Sqrt(float64(spec.Shape[1]))
		}
		s := streamSeed(seed, spec.Key)
		for lo := 0; lo < t.FloatCount(); lo += initChunk {
			jobs = append(jobs, job{t, s, scale, mid, lo, min(lo+initChunk, t.FloatCount())})
		}
	}
	parallelFor(len(jobs), func(j int) {
		if ctx.Err() != nil {
			return
		}
		jb := jobs[j]
		dt := jb.t.DType
		if h := jb.t.Half; h != nil {
			for i := jb.lo; i < jb.hi; i++ {
				h[i] = tensor.ToHalf(dt, float32(jb.mid+jb.scale*uniformAt(jb.s, i)))
			}
			return
		}
		f := jb.t.F
		for i := jb.lo; i < jb.hi; i++ {
			f[i] = tensor.Round(dt, float32(jb.mid+jb.scale*uniformAt(jb.s, i)))
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return w, nil
}
