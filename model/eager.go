package model

import (
	"context"
	"fmt"
	"runtime"

	"github.com/amk-dev/amk/ir"
)

// Eager is the correctness oracle: a direct implementation of one Llama
// decode step with a KV cache, written from the model's definition and not
// from any task DAG. Each op computes in float32 and rounds its output to the
// model dtype when stored (see the package doc). An Eager is not safe for
// concurrent use.
//
// The projection and embedding weights are read in place from the Weights
// it was built from (which must not change afterwards), at their stored
// width: a step reads as many weight bytes as the device does. Only the
// norm weights (a few vectors of hidden values) are widened into float32.
type Eager struct {
	cfg     Config
	dt      ir.DType
	workers int

	embed, lmHead *matrix
	layers        []eagerLayer
	finalNorm     []float32
	invFreq       []float32

	// kc[l], vc[l] hold n rows of n_kv·head_dim values at the dtype.
	kc, vc [][]float32
	n      int

	// Scratch; the x-side vectors of projections are padded to a multiple
	// of 4 with zeros (see matrix.dot).
	h, xn, q, k, v, attn, o, gate, up, act, down, scores []float32
}

type eagerLayer struct {
	inputNorm, postNorm        []float32
	q, k, v, o, gate, up, down *matrix
}

// NewEager checks weights against cfg (every key, shape and dtype) and
// prepares the eager pass with an empty KV cache.
func NewEager(cfg Config, w Weights) (*Eager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := w.Check(cfg); err != nil {
		return nil, err
	}
	e := &Eager{cfg: cfg, dt: cfg.DType, workers: runtime.GOMAXPROCS(0)}
	names := KeyNames(cfg)
	mat := func(key string) *matrix {
		if t := w[key]; t.DType == ir.I8 || t.DType == ir.I4 { // Check found its scales
			return newQuantMatrix(t, w[key+ir.ScalesSuffix], cfg.Quant.GroupOf(t.Shape[1]))
		}
		return newMatrix(w[key])
	}
	e.embed = newMatrix(w[names.Embed])
	e.lmHead = e.embed
	if !cfg.LMHeadShared() {
		e.lmHead = mat(names.LMHead)
	}
	for _, ln := range names.Layers {
		e.layers = append(e.layers, eagerLayer{
			inputNorm: w[ln.InputNorm].Floats(), postNorm: w[ln.PostNorm].Floats(),
			q: mat(ln.Q), k: mat(ln.K), v: mat(ln.V), o: mat(ln.O),
			gate: mat(ln.Gate), up: mat(ln.Up), down: mat(ln.Down),
		})
	}
	e.finalNorm = w[names.FinalNorm].Floats()
	e.invFreq = invFreqs(cfg.HeadDim, cfg.RopeTheta)
	e.kc = make([][]float32, cfg.NLayers)
	e.vc = make([][]float32, cfg.NLayers)
	vec := func(n int) []float32 { return make([]float32, pad4(n))[:n] }
	e.h, e.xn, e.o, e.down = vec(cfg.Hidden), vec(cfg.Hidden), vec(cfg.Hidden), vec(cfg.Hidden)
	e.q, e.attn = vec(cfg.QDim()), vec(cfg.QDim())
	e.k, e.v = vec(cfg.KVDim()), vec(cfg.KVDim())
	e.gate, e.up, e.act = vec(cfg.Intermediate), vec(cfg.Intermediate), vec(cfg.Intermediate)
	return e, nil
}

// Config is the model the pass runs.
func (e *Eager) Config() Config { return e.cfg }

// Len is the number of positions in the KV cache (the next step's pos).
func (e *Eager) Len() int { return e.n }

// Reset empties the KV cache.
func (e *Eager) Reset() {
	e.n = 0
	for l := range e.kc {
		e.kc[l] = e.kc[l][:0]
		e.vc[l] = e.vc[l][:0]
	}
}

// padded is x extended to its padded length (zeros past len(x)).
func padded(x []float32) []float32 { return x[:pad4(len(x))] }

// Step runs one decode step for token at position pos, which must equal
// Len() (steps are consecutive) and be below max_seq, appends the step's K
// and V to the cache and returns the logits (float32 values rounded to the
// dtype, a fresh slice).
func (e *Eager) Step(token int32, pos int) ([]float32, error) {
	return e.StepContext(context.Background(), token, pos)
}

// StepContext is Step that gives up with ctx's error, checked before every
// layer; the KV cache is left as it was before the step.
func (e *Eager) StepContext(ctx context.Context, token int32, pos int) ([]float32, error) {
	cfg := &e.cfg
	if pos != e.n {
		return nil, fmt.Errorf("eager: step at pos %d, but the KV cache holds %d positions (steps must be consecutive; Reset to start over)", pos, e.n)
	}
	if pos >= cfg.MaxSeq {
		return nil, fmt.Errorf("eager: pos %d is beyond max_seq %d", pos, cfg.MaxSeq)
	}
	if token < 0 || int(token) >= cfg.Vocab {
		return nil, fmt.Errorf("eager: token %d is outside the vocabulary [0, %d)", token, cfg.Vocab)
	}
	dt, hd := e.dt, cfg.HeadDim
	cos, sin := ropeTables(e.invFreq, pos)
	e.embed.row(int(token), e.h)
	if cap(e.scores) < pos+1 {
		e.scores = make([]float32, pos+1, max(2*(pos+1), 16))
	}
	for l := range e.layers {
		if err := ctx.Err(); err != nil {
			for j := range l {
				e.kc[j] = e.kc[j][:pos*cfg.KVDim()]
				e.vc[j] = e.vc[j][:pos*cfg.KVDim()]
			}
			return nil, err
		}
		ly := &e.layers[l]
		rmsnorm(dt, e.xn, e.h, ly.inputNorm, cfg.RMSEps)
		x := padded(e.xn)
		matvecs(dt, e.workers, matvec{ly.q, x, e.q}, matvec{ly.k, x, e.k}, matvec{ly.v, x, e.v})
		rope(dt, e.q, cos, sin)
		rope(dt, e.k, cos, sin)
		e.kc[l] = append(e.kc[l], e.k...)
		e.vc[l] = append(e.vc[l], e.v...)
		attention(dt, e.attn, e.q, e.kc[l], e.vc[l], pos+1, cfg.NHeads, cfg.NKVHeads, hd, e.scores[:cap(e.scores)])
		matvecs(dt, e.workers, matvec{ly.o, padded(e.attn), e.o})
		addInto(dt, e.h, e.o)
		rmsnorm(dt, e.xn, e.h, ly.postNorm, cfg.RMSEps)
		matvecs(dt, e.workers, matvec{ly.gate, x, e.gate}, matvec{ly.up, x, e.up})
		siluMul(dt, e.act, e.gate, e.up)
		matvecs(dt, e.workers, matvec{ly.down, padded(e.act), e.down})
		addInto(dt, e.h, e.down)
	}
	rmsnorm(dt, e.xn, e.h, e.finalNorm, cfg.RMSEps)
	logits := make([]float32, cfg.Vocab)
	matvecs(dt, e.workers, matvec{e.lmHead, padded(e.xn), logits})
	e.n++
	return logits, nil
}

// Greedy resets the cache, feeds the prompt one token per step and then
// decodes maxTokens tokens greedily (Argmax), returning only the generated
// tokens. It needs len(prompt)+maxTokens−1 ≤ max_seq positions.
func (e *Eager) Greedy(prompt []int32, maxTokens int) ([]int32, error) {
	return e.GreedyContext(context.Background(), prompt, maxTokens)
}

// GreedyContext is Greedy that gives up with ctx's error between steps.
func (e *Eager) GreedyContext(ctx context.Context, prompt []int32, maxTokens int) ([]int32, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("eager: greedy decoding needs a non-empty prompt")
	}
	if maxTokens < 0 {
		return nil, fmt.Errorf("eager: maxTokens must be non-negative, got %d", maxTokens)
	}
	if maxTokens == 0 {
		return []int32{}, nil
	}
	if need := len(prompt) + maxTokens - 1; need > e.cfg.MaxSeq {
		return nil, fmt.Errorf("eager: %d prompt tokens + %d generated need %d positions, max_seq is %d",
			len(prompt), maxTokens, need, e.cfg.MaxSeq)
	}
	e.Reset()
	var logits []float32
	var err error
	for i, tok := range prompt {
		if logits, err = e.StepContext(ctx, tok, i); err != nil {
			return nil, err
		}
	}
	out := make([]int32, 0, maxTokens)
	for {
		next := Argmax(logits)
		out = append(out, next)
		if len(out) == maxTokens {
			return out, nil
		}
		if logits, err = e.StepContext(ctx, next, e.n); err != nil {
			return nil, err
		}
	}
}
