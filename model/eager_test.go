package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestRMSNormHand(t *testing.T) {
	out := make([]float32, 2)
	rmsnorm(ir.F32, out, []float32{3, 4}, []float32{1, 2}, 1e-6)
	r := 1 / math.Sqrt(12.5+1e-6)
	if !near(float64(out[0]), 3*r, 1e-6) || !near(float64(out[1]), 8*r, 1e-6) {
		t.Errorf("rmsnorm = %v, want [%v %v]", out, 3*r, 8*r)
	}
	// One rounding at the end: x·r·w in fp32, then bf16.
	rmsnorm(ir.BF16, out, []float32{3, 4}, []float32{1, 2}, 1e-6)
	if want := tensor.Round(ir.BF16, float32(8*r)); out[1] != want {
		t.Errorf("bf16 rmsnorm = %v, want %v", out[1], want)
	}
}

func TestRopeRotateHalfHand(t *testing.T) {
	inv := invFreqs(4, 10000) // [1, 1/100]
	if inv[0] != 1 || !near(float64(inv[1]), 0.01, 1e-7) {
		t.Fatalf("inv_freq = %v", inv)
	}
	cos, sin := ropeTables(inv, 1)
	c1, s1 := math.Cos(1), math.Sin(1)
	cases := []struct{ in, want []float64 }{
		{[]float64{1, 0, 0, 0}, []float64{c1, 0, s1, 0}},                         // x1 → x1·cos, x2 gets +x1·sin
		{[]float64{0, 0, 1, 0}, []float64{-s1, 0, c1, 0}},                        // x2 → −x2·sin in the first half
		{[]float64{0, 1, 0, 0}, []float64{0, math.Cos(0.01), 0, math.Sin(0.01)}}, // second frequency
		{[]float64{1, 2, 3, 4}, []float64{c1 - 3*s1, 2*math.Cos(0.01) - 4*math.Sin(0.01), 3*c1 + s1, 4*math.Cos(0.01) + 2*math.Sin(0.01)}},
	}
	for _, tc := range cases {
		x := make([]float32, 8) // two heads, both rotated the same way
		for i, v := range tc.in {
			x[i], x[4+i] = float32(v), float32(v)
		}
		rope(ir.F32, x, cos, sin)
		for i, w := range tc.want {
			if !near(float64(x[i]), w, 1e-6) || x[i] != x[4+i] {
				t.Errorf("rope(%v)[%d] = %v (second head %v), want %v", tc.in, i, x[i], x[4+i], w)
			}
		}
	}
	c0, s0 := ropeTables(inv, 0)
	x := []float32{1, 2, 3, 4}
	rope(ir.F32, x, c0, s0)
	if !slices.Equal(x, []float32{1, 2, 3, 4}) {
		t.Errorf("rope at pos 0 changed x: %v", x)
	}
}

func TestAttentionHand(t *testing.T) {
	// One head, head_dim 2, two cached positions.
	q := []float32{1, 0}
	kc := []float32{0, 0, 2, 0}
	vc := []float32{1, 0, 0, 1}
	out := make([]float32, 2)
	attention(ir.F32, out, q, kc, vc, 2, 1, 1, 2, make([]float32, 2))
	s := 2 / math.Sqrt(2)
	p1 := math.Exp(s) / (1 + math.Exp(s))
	if !near(float64(out[0]), 1-p1, 1e-6) || !near(float64(out[1]), p1, 1e-6) {
		t.Errorf("attention = %v, want [%v %v]", out, 1-p1, p1)
	}
	// GQA: 4 query heads on 2 KV heads; heads 0,1 read KV head 0 and 2,3
	// read KV head 1 (h / rep, not h mod n_kv).
	q4 := make([]float32, 8)
	kc1 := make([]float32, 4)
	vc1 := []float32{1, 2, 3, 4}
	out4 := make([]float32, 8)
	attention(ir.F32, out4, q4, kc1, vc1, 1, 4, 2, 2, make([]float32, 1))
	if !slices.Equal(out4, []float32{1, 2, 1, 2, 3, 4, 3, 4}) {
		t.Errorf("GQA head mapping: %v", out4)
	}
}

func TestSiluMulAndArgmax(t *testing.T) {
	out := make([]float32, 3)
	siluMul(ir.F32, out, []float32{0, 1, -1}, []float32{5, 2, 3})
	want := []float64{0, 2 / (1 + math.Exp(-1)), -3 / (1 + math.E)}
	for i := range want {
		if !near(float64(out[i]), want[i], 1e-6) {
			t.Errorf("silu_mul[%d] = %v, want %v", i, out[i], want[i])
		}
	}
	nan := float32(math.NaN())
	if Argmax([]float32{1, 3, 3, 2}) != 1 || Argmax([]float32{nan, -1, -2}) != 1 || Argmax(nil) != 0 {
		t.Error("argmax: ties must pick the lowest index and NaN must be skipped")
	}
}

// handWeights builds the tiny model with zero q/k/gate/up/down, v rows of
// (j+1)/8, o and lm_head identities, norms of ones and embedding row t equal
// to [t+1, 1, 1, 1, 1, 1, 1, 1].
func handWeights(t *testing.T, cfg Config) Weights {
	t.Helper()
	w := Weights{}
	for _, spec := range Keys(cfg) {
		w[spec.Key] = tensor.New(cfg.DType, spec.Shape...)
	}
	n := KeyNames(cfg)
	set := func(key string, f func(r, c int) float32) {
		tt := w[key]
		cols := tt.Shape[len(tt.Shape)-1]
		for i := range tt.F {
			tt.F[i] = tensor.Round(cfg.DType, f(i/cols, i%cols))
		}
	}
	one := func(r, c int) float32 { return 1 }
	eye := func(r, c int) float32 {
		if r == c {
			return 1
		}
		return 0
	}
	set(n.Embed, func(r, c int) float32 {
		if c == 0 {
			return float32(r + 1)
		}
		return 1
	})
	set(n.Layers[0].InputNorm, one)
	set(n.Layers[0].PostNorm, one)
	set(n.FinalNorm, one)
	set(n.Layers[0].V, func(r, c int) float32 { return float32(r+1) / 8 })
	set(n.Layers[0].O, eye)
	set(n.LMHead, eye)
	return w
}

func TestEagerHandComputedStep(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	e, err := NewEager(cfg, handWeights(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	// Token t embeds as x = [t+1, 1 ×7]; RMSNorm gives x·r_t with
	// r_t = 1/sqrt(((t+1)²+7)/8 + eps), so v_j = (j+1)/8 · r_t · (t+8).
	// q = k = 0 gives every cached position the same weight: the attention
	// output of a head on KV group g is the mean over positions of v_j with
	// j = 2g+d; query heads 0,1 use group 0 and heads 2,3 group 1. o is the
	// identity, the MLP adds 0, lm_head is the identity, so the logits are
	// the final RMSNorm of h = x + attn.
	tokens := []int32{0, 2, 5}
	vsum := make([]float64, 4)
	for pos, tok := range tokens {
		logits, err := e.Step(tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		tf := float64(tok + 1)
		rt := 1 / math.Sqrt((tf*tf+7)/8+1e-6)
		for j := range vsum {
			vsum[j] += float64(j+1) / 8 * rt * (tf + 7)
		}
		jOf := []int{0, 1, 0, 1, 2, 3, 2, 3}
		h := make([]float64, 8)
		var ss float64
		for i := range h {
			x := 1.0
			if i == 0 {
				x = tf
			}
			h[i] = x + vsum[jOf[i]]/float64(pos+1)
			ss += h[i] * h[i]
		}
		rf := 1 / math.Sqrt(ss/8+1e-6)
		for i := range h {
			if !near(float64(logits[i]), h[i]*rf, 3e-6) {
				t.Errorf("pos %d: logits[%d] = %v, want %v", pos, i, logits[i], h[i]*rf)
			}
		}
	}
	if e.Len() != 3 || len(e.kc[0]) != 3*cfg.KVDim() || len(e.vc[0]) != 3*cfg.KVDim() {
		t.Errorf("KV cache: Len %d, k %d, v %d values", e.Len(), len(e.kc[0]), len(e.vc[0]))
	}
}

func toyEager(t *testing.T, preset string, seed uint64) *Eager {
	t.Helper()
	cfg, err := Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	w, err := InitWeights(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEagerKVCacheAndPositions(t *testing.T) {
	e := toyEager(t, "toy-2L", 0)
	var steps [][]float32
	for pos := range 5 {
		logits, err := e.Step(9, pos)
		if err != nil {
			t.Fatal(err)
		}
		if len(logits) != 256 || e.Len() != pos+1 || len(e.kc[1]) != (pos+1)*e.cfg.KVDim() {
			t.Fatalf("after pos %d: %d logits, Len %d, layer-1 cache %d", pos, len(logits), e.Len(), len(e.kc[1]))
		}
		for i, prev := range steps {
			if slices.Equal(prev, logits) {
				t.Errorf("the same token gives identical logits at pos %d and %d", i, pos)
			}
		}
		steps = append(steps, logits)
	}
	e.Reset()
	again, err := e.Step(9, 0)
	if err != nil || !slices.Equal(again, steps[0]) || e.Len() != 1 {
		t.Errorf("after Reset the first step differs (err %v)", err)
	}
	// The cached history matters: token 9 at pos 1 after 3 ≠ after 9.
	e.Reset()
	e.Step(3, 0)
	other, _ := e.Step(9, 1)
	if slices.Equal(other, steps[1]) {
		t.Error("logits at pos 1 ignore the cached position 0")
	}
}

// A cache put in place by Prefill is the cache the steps would have left:
// the next step's logits are the same, and bad shapes are refused.
func TestEagerPrefill(t *testing.T) {
	a := toyEager(t, "toy-2L", 0)
	for pos := range 6 {
		if _, err := a.Step(int32(pos+3), pos); err != nil {
			t.Fatal(err)
		}
	}
	k, v := slices.Clone(a.kc), slices.Clone(a.vc)
	want, err := a.Step(11, 6)
	if err != nil {
		t.Fatal(err)
	}
	b := toyEager(t, "toy-2L", 0)
	if err := b.Prefill(k, v); err != nil || b.Len() != 6 {
		t.Fatalf("prefill: %v, Len %d", err, b.Len())
	}
	got, err := b.Step(11, 6)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the step after Prefill differs from the decoded one (err %v)", err)
	}
	kd := b.cfg.KVDim()
	for _, bad := range [][2][][]float32{
		{k[:1], v[:1]},
		{{k[0], k[1][:kd]}, v},
		{k, {v[0][:kd], v[1]}},
		{{make([]float32, 256*kd), make([]float32, 256*kd)}, {make([]float32, 256*kd), make([]float32, 256*kd)}},
	} {
		if err := b.Prefill(bad[0], bad[1]); err == nil {
			t.Errorf("a prefill of %d/%d layers, %d K values passed", len(bad[0]), len(bad[1]), len(bad[0][0]))
		}
	}
}

func TestEagerStepErrors(t *testing.T) {
	e := toyEager(t, "toy", 0)
	for _, tc := range []struct {
		tok  int32
		pos  int
		want string
	}{
		{1, 1, "steps must be consecutive"},
		{-1, 0, "outside the vocabulary"},
		{256, 0, "outside the vocabulary"},
	} {
		if _, err := e.Step(tc.tok, tc.pos); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Step(%d, %d) = %v, want %q", tc.tok, tc.pos, err, tc.want)
		}
	}
	if e.Len() != 0 {
		t.Errorf("a failed step grew the cache to %d", e.Len())
	}
	cfg := tinyConfig(ir.F32)
	cfg.MaxSeq = 2
	short, _ := NewEager(cfg, mustInit(t, cfg))
	short.Step(1, 0)
	short.Step(1, 1)
	if _, err := short.Step(1, 2); err == nil || !strings.Contains(err.Error(), "beyond max_seq 2") {
		t.Errorf("step past max_seq: %v", err)
	}
	if _, err := short.Greedy([]int32{1, 2}, 2); err == nil || !strings.Contains(err.Error(), "need 3 positions") {
		t.Errorf("greedy past max_seq: %v", err)
	}
	if _, err := short.Greedy(nil, 1); err == nil {
		t.Error("empty prompt accepted")
	}
	bad := mustInit(t, cfg)
	delete(bad, "final_norm")
	if _, err := NewEager(cfg, bad); err == nil || !strings.Contains(err.Error(), "final_norm") {
		t.Errorf("NewEager with a missing key: %v", err)
	}
}

func TestEagerGreedyDeterministic(t *testing.T) {
	e := toyEager(t, "toy-2L", 4)
	prompt := []int32{1, 17, 200}
	a, err := e.Greedy(prompt, 12)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := toyEager(t, "toy-2L", 4).Greedy(prompt, 12)
	if len(a) != 12 || !slices.Equal(a, b) {
		t.Fatalf("greedy runs differ: %v vs %v", a, b)
	}
	// The same sequence by hand: steps and argmax.
	e.Reset()
	var logits []float32
	for i, tok := range prompt {
		logits, _ = e.Step(tok, i)
	}
	for i, want := range a {
		if got := Argmax(logits); got != want {
			t.Fatalf("token %d: manual argmax %d, Greedy %d", i, got, want)
		}
		logits, _ = e.Step(want, e.Len())
	}
	if none, err := e.Greedy(prompt, 0); err != nil || len(none) != 0 {
		t.Errorf("Greedy(…, 0) = %v, %v", none, err)
	}
}

// midConfig is a BF16 model big enough for the projections to run in
// parallel, with a hidden size that is not a multiple of 4.
func midConfig() Config {
	return Config{
		Name: "mid", Hidden: 130, NHeads: 4, NKVHeads: 2, HeadDim: 32, Intermediate: 262, Vocab: 1000,
		NLayers: 2, RMSEps: 1e-5, RopeTheta: 10000, MaxSeq: 32, DType: ir.BF16, KeyScheme: SchemeHF,
	}
}

func TestEagerWorkerCountDoesNotChangeResults(t *testing.T) {
	cfg := midConfig()
	w := mustInit(t, cfg)
	run := func(workers int) [][]float32 {
		e, err := NewEager(cfg, w)
		if err != nil {
			t.Fatal(err)
		}
		e.workers = workers
		var out [][]float32
		for pos, tok := range []int32{5, 999, 0, 42} {
			l, err := e.Step(tok, pos)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	one, three := run(1), run(3)
	for i := range one {
		for j := range one[i] {
			if math.Float32bits(one[i][j]) != math.Float32bits(three[i][j]) {
				t.Fatalf("step %d logit %d: %v with 1 worker, %v with 3", i, j, one[i][j], three[i][j])
			}
		}
	}
}

func TestEagerDTypesAgree(t *testing.T) {
	// The same bf16-representable weights run as a BF16, F16 and F32 model:
	// the lower-precision passes stay within a few percent of the F32 one.
	cfg := midConfig()
	w := mustInit(t, cfg)
	logitsFor := func(dt ir.DType) []float32 {
		c := cfg
		c.DType = dt
		ww := Weights{}
		for k, tt := range w {
			ww[k] = &tensor.Tensor{DType: dt, Shape: tt.Shape, F: tt.Floats()}
		}
		e, err := NewEager(c, ww)
		if err != nil {
			t.Fatal(err)
		}
		var l []float32
		for pos, tok := range []int32{7, 8, 9} {
			if l, err = e.Step(tok, pos); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	ref := logitsFor(ir.F32)
	for _, dt := range []ir.DType{ir.BF16, ir.F16} {
		got := logitsFor(dt)
		var num, den float64
		for i := range ref {
			d := float64(got[i] - ref[i])
			num += d * d
			den += float64(ref[i]) * float64(ref[i])
			if tensor.Round(dt, got[i]) != got[i] {
				t.Fatalf("%s logit %d = %v is not rounded to the dtype", dt, i, got[i])
			}
		}
		if rel := math.Sqrt(num / den); rel > 0.03 || rel == 0 {
			t.Errorf("%s logits differ from F32 by %.4f (relative L2)", dt, rel)
		}
	}
}

// The eager pass reading bf16 and fp16 weights at their stored width gives
// the logits, bit for bit, of the same weights widened to float32 (rows of
// 130 and 262 values exercise the tails).
func TestEagerStoredWidthSameAsFloat32(t *testing.T) {
	for _, dt := range []ir.DType{ir.BF16, ir.F16} {
		cfg := midConfig()
		cfg.DType = dt
		w := mustInit(t, cfg)
		wide := Weights{}
		for k, tt := range w {
			if tt.Half == nil {
				t.Fatalf("%s %s is not held at its stored width", dt, k)
			}
			wide[k] = &tensor.Tensor{DType: dt, Shape: tt.Shape, F: tt.Floats()}
		}
		a, err1 := NewEager(cfg, w)
		b, err2 := NewEager(cfg, wide)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for pos, tok := range []int32{5, 999, 0} {
			la, err1 := a.Step(tok, pos)
			lb, err2 := b.Step(tok, pos)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			for i := range la {
				if math.Float32bits(la[i]) != math.Float32bits(lb[i]) {
					t.Fatalf("%s pos %d logit %d: %v at stored width, %v from float32", dt, pos, i, la[i], lb[i])
				}
			}
		}
	}
}
