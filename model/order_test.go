package model

import (
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/amk-dev/amk/tensor"
)

// This file measures how far the logits of a seeded bf16 model move when
// the float32 sums inside a decode step are taken in another order: the
// order of the CUDA megakernel (kernels/cuda) instead of the reference VM's
// eight lanes. Nothing here is a production path: orderedStep is a second
// eager step written for this measurement only, with the three reductions
// of a step (projection dot products, RMSNorm's sum of squares, attention
// scores) supplied by a reductionOrder; everything else is the eager
// pass's own code (rope, siluMul, addInto, the softmax steps).

// reductionOrder is how one decode step adds up its float32 products.
type reductionOrder struct {
	name string
	// gemv is Σ w[i]·x[i] for a projection row (w widened from the dtype).
	gemv func(w, x []float32) float32
	// sumSquares is Σ x[i]² for RMSNorm.
	sumSquares func(x []float32) float32
	// score is q·k for one attention score.
	score func(q, k []float32) float32
}

// vmOrder is the reference VM's (and the eager pass's) order: dotF32.
var vmOrder = reductionOrder{
	name:       "vm",
	gemv:       dotF32,
	sumSquares: func(x []float32) float32 { return dotF32(x, x) },
	score:      dotF32,
}

// gpuThreads is AMK_THREADS (kernels/cuda/common.cuh), the block size.
const gpuThreads = 256

// fma32 is a float32 fused multiply-add: a·b is exact in float64, so one
// float64 add rounded to float32 is fmaf except in rare double roundings,
// which do not matter to a noise measurement.
func fma32(a, b, c float32) float32 { return float32(float64(a)*float64(b) + float64(c)) }

// butterfly adds n partial sums (n a power of two) the way a warp's xor
// shuffle leaves them in lane 0: v[i] += v[i+off] for off = n/2, …, 1.
func butterfly(v []float32) float32 {
	for off := len(v) / 2; off >= 1; off /= 2 {
		for i := 0; i < off; i++ {
			v[i] += v[i+off]
		}
	}
	return v[0]
}

// gpuOrder follows kernels/cuda: a GEMV row is one warp's, each of the 32
// lanes reading 8-element vectors v ≡ lane (mod 32) and accumulating with
// fmaf, then a butterfly (ops_gemv.cuh, the vector path); RMSNorm's sum of
// squares is strided over the block's threads with fmaf, each warp's
// butterfly, then the warp totals added in warp order (amk_block_sum in
// common.cuh); an attention score is one warp's, lanes strided by one
// element, fmaf, butterfly. Not modelled: rsqrtf, expf, the scalar and
// split-K GEMV paths.
var gpuOrder = reductionOrder{
	name: "gpu",
	gemv: func(w, x []float32) float32 {
		var lanes [32]float32
		for k := range w {
			l := (k / 8) % 32
			lanes[l] = fma32(w[k], x[k], lanes[l])
		}
		return butterfly(lanes[:])
	},
	sumSquares: func(x []float32) float32 {
		var threads [gpuThreads]float32
		for k, v := range x {
			threads[k%gpuThreads] = fma32(v, v, threads[k%gpuThreads])
		}
		var sum float32
		for wp := range gpuThreads / 32 {
			sum += butterfly(threads[wp*32 : (wp+1)*32])
		}
		return sum
	},
	score: func(q, k []float32) float32 {
		var lanes [32]float32
		for i := range q {
			lanes[i%32] = fma32(q[i], k[i], lanes[i%32])
		}
		return butterfly(lanes[:])
	},
}

// orderedPass is a decode pass over Eager's weights and KV layout whose
// reductions follow ord.
type orderedPass struct {
	e   *Eager
	ord reductionOrder
}

func (p *orderedPass) matvec(m *matrix, x, out []float32) {
	const rowsPerJob = 64
	parallelFor((m.rows+rowsPerJob-1)/rowsPerJob, func(j int) {
		row := make([]float32, m.cols)
		for r := j * rowsPerJob; r < min((j+1)*rowsPerJob, m.rows); r++ {
			m.row(r, row)
			out[r] = tensor.Round(p.e.dt, p.ord.gemv(row, x[:m.cols]))
		}
	})
}

func (p *orderedPass) rmsnorm(out, x, w []float32) {
	mean := p.ord.sumSquares(x) / float32(len(x))
	r := float32(1 / math.Sqrt(float64(mean+float32(p.e.cfg.RMSEps))))
	for i, v := range x {
		out[i] = tensor.Round(p.e.dt, v*r*w[i])
	}
}

// attention is the eager attention with ord's scores.
func (p *orderedPass) attention(out, q, kc, vc []float32, n int) {
	cfg := &p.e.cfg
	hd := cfg.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	rep := cfg.NHeads / cfg.NKVHeads
	kvDim := cfg.KVDim()
	scores := make([]float32, n)
	acc := make([]float32, hd)
	for h := range cfg.NHeads {
		g := h / rep
		qh := q[h*hd : (h+1)*hd]
		m := float32(math.Inf(-1))
		for t := range n {
			scores[t] = p.ord.score(qh, kc[t*kvDim+g*hd:t*kvDim+(g+1)*hd]) * scale
			m = max(m, scores[t])
		}
		var l float32
		for t := range n {
			scores[t] = float32(math.Exp(float64(scores[t] - m)))
			l += scores[t]
		}
		clear(acc)
		for t := range n {
			pr := scores[t] / l
			v := vc[t*kvDim+g*hd : t*kvDim+(g+1)*hd]
			for d := range acc {
				acc[d] += pr * v[d]
			}
		}
		for d, a := range acc {
			out[h*hd+d] = tensor.Round(p.e.dt, a)
		}
	}
}

// step is Eager.StepContext with ord's reductions (same steps and roundings).
func (p *orderedPass) step(token int32, pos int) []float32 {
	e, cfg := p.e, &p.e.cfg
	cos, sin := ropeTables(e.invFreq, pos)
	e.embed.row(int(token), e.h)
	for l := range e.layers {
		ly := &e.layers[l]
		p.rmsnorm(e.xn, e.h, ly.inputNorm)
		p.matvec(ly.q, e.xn, e.q)
		p.matvec(ly.k, e.xn, e.k)
		p.matvec(ly.v, e.xn, e.v)
		rope(e.dt, e.q, cos, sin)
		rope(e.dt, e.k, cos, sin)
		e.kc[l] = append(e.kc[l], e.k...)
		e.vc[l] = append(e.vc[l], e.v...)
		p.attention(e.attn, e.q, e.kc[l], e.vc[l], pos+1)
		p.matvec(ly.o, e.attn, e.o)
		addInto(e.dt, e.h, e.o)
		p.rmsnorm(e.xn, e.h, ly.postNorm)
		p.matvec(ly.gate, e.xn, e.gate)
		p.matvec(ly.up, e.xn, e.up)
		siluMul(e.dt, e.act, e.gate, e.up)
		p.matvec(ly.down, e.act, e.down)
		addInto(e.dt, e.h, e.down)
	}
	p.rmsnorm(e.xn, e.h, e.finalNorm)
	logits := make([]float32, cfg.Vocab)
	p.matvec(e.lmHead, e.xn, logits)
	e.n++
	return logits
}

// orderNoise is the distance between the logits of two reduction orders.
type orderNoise struct {
	maxAbs, rms float64
	// worst is max |a−b| / (atol + rtol·|a|) at the bf16 tolerance
	// (atol = rtol = 2e-2): 1 is the edge of vm.Compare's allclose.
	worst float64
	top1  bool
}

func measureOrderNoise(a, b []float32) orderNoise {
	const tol = 2e-2
	var n orderNoise
	var sq float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		n.maxAbs = max(n.maxAbs, d)
		n.worst = max(n.worst, d/(tol+tol*math.Abs(float64(a[i]))))
		sq += float64(a[i]) * float64(a[i])
	}
	n.rms = math.Sqrt(sq / float64(len(a)))
	n.top1 = Argmax(a) == Argmax(b)
	return n
}

// orderNoiseAt decodes tokens 0..last of a fixed sequence with cfg's seeded
// weights in the VM's and the GPU's reduction orders and returns the noise
// at each position of check.
func orderNoiseAt(t *testing.T, cfg Config, last int, check []int) map[int]orderNoise {
	t.Helper()
	w, err := InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	passes := make([]*orderedPass, 2)
	for i, ord := range []reductionOrder{vmOrder, gpuOrder} {
		e, err := NewEager(cfg, w)
		if err != nil {
			t.Fatal(err)
		}
		passes[i] = &orderedPass{e, ord}
	}
	ref, err := NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]orderNoise{}
	for pos := 0; pos <= last; pos++ {
		token := int32((7*7 + pos*13 + 1) % cfg.Vocab)
		vm := passes[0].step(token, pos)
		gpu := passes[1].step(token, pos)
		want, err := ref.Step(token, pos)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if vm[i] != want[i] {
				t.Fatalf("pos %d: the VM-order pass differs from Eager at logit %d (%g vs %g): orderedPass no longer mirrors Eager.Step", pos, i, vm[i], want[i])
			}
		}
		for _, c := range check {
			if c == pos {
				n := measureOrderNoise(vm, gpu)
				out[pos] = n
				t.Logf("%s pos %d: max_abs_err %.4f, logit RMS %.3f, worst |d|/(atol+rtol|x|) %.3f, top-1 same %v",
					cfg.Name, pos, n.maxAbs, n.rms, n.worst, n.top1)
			}
		}
	}
	return out
}

// TestGPUReductionOrderNoiseOfTheSeededModels: the seeded models' logits
// in the megakernel's summation order (gpuOrder) against the VM order's, as
// a share of vm.Compare's bf16 tolerance (1 is its edge). toy-2L and small
// must stay inside it (small sits at about half). llama-1b does not: order
// noise alone reaches 0.7–1.02 of it (docs/results/oracle-drift.md), so it
// is held only to twice the tolerance and the same top-1, a canary for a
// change that makes the seeded models more sensitive to summation order.
//
// By default (`make test`) it is the smoke: toy-2L and small at positions 0
// and 5. With AMK_ORDER_STUDY=1 (`make order-noise`, several CPU-minutes) it
// is the whole study: the three models at positions 0, 5 and a later one
// (AMK_ORDER_LATE_POS, default 20).
func TestGPUReductionOrderNoiseOfTheSeededModels(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes seeded model steps three times")
	}
	study := os.Getenv("AMK_ORDER_STUDY") != ""
	late := 20
	if s := os.Getenv("AMK_ORDER_LATE_POS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 5 {
			t.Fatalf("AMK_ORDER_LATE_POS=%q: want an integer above 5", s)
		}
		late = v
	}
	models := []struct {
		name  string
		bound float64 // the largest share of the tolerance allowed
	}{{"toy-2L", 1}, {"small", 1}, {"llama-1b", 2}}
	checks := []int{0, 5, late}
	if !study {
		models, checks = models[:2], checks[:2]
		t.Log("the smoke: toy-2L and small at positions 0 and 5; AMK_ORDER_STUDY=1 (make order-noise) adds llama-1b and a later position")
	}
	for _, m := range models {
		cfg, err := Preset(m.name)
		if err != nil {
			t.Fatal(err)
		}
		if m.name == "llama-1b" {
			cfg.Vocab = 512 // the shape of trial's tied llama-1b test
		}
		last := checks[len(checks)-1]
		if last >= cfg.MaxSeq {
			t.Fatalf("AMK_ORDER_LATE_POS=%d is beyond %s's max_seq %d", last, m.name, cfg.MaxSeq)
		}
		noise := orderNoiseAt(t, cfg, last, checks)
		if len(noise) != len(checks) {
			t.Fatalf("%s: measured %d positions, want %v", m.name, len(noise), checks)
		}
		for pos, n := range noise {
			if n.worst > m.bound || !n.top1 {
				t.Errorf("%s pos %d: GPU-order logits are %.2f of the bf16 tolerance (max_abs_err %.4f; allowed %.0f), top-1 same %v",
					m.name, pos, n.worst, n.maxAbs, m.bound, n.top1)
			}
		}
	}
}
