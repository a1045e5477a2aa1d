package model

import (
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// The element-wise and attention steps of the eager pass. Each computes in
// float32 from already-rounded inputs and rounds its output once to dt.

// rmsnorm: out = round(x · r · w), r = 1/sqrt(mean(x²) + eps), the sum of
// squares in dotF32's order.
func rmsnorm(dt ir.DType, out, x, w []float32, eps float64) {
	mean := dotF32(x, x) / float32(len(x))
	r := float32(1 / math.Sqrt(float64(mean+float32(eps))))
	for i, v := range x {
		out[i] = tensor.Round(dt, v*r*w[i])
	}
}

// ropeTables returns cos and sin of pos·inv_freq[i] for i < half (see
// invFreqs), the angle being the float32 product.
func ropeTables(invFreq []float32, pos int) (cos, sin []float32) {
	cos = make([]float32, len(invFreq))
	sin = make([]float32, len(invFreq))
	for i, f := range invFreq {
		ang := float64(float32(pos) * f)
		cos[i] = float32(math.Cos(ang))
		sin[i] = float32(math.Sin(ang))
	}
	return cos, sin
}

// invFreqs is inv_freq[i] = 1/θ^(i/half), i < half = headDim/2, in the
// reference VM's steps: the exponent i/half in float32, θ^e in float64
// rounded to float32, its reciprocal in float32.
func invFreqs(headDim int, theta float64) []float32 {
	half := headDim / 2
	out := make([]float32, half)
	for i := range out {
		e := float32(i) / float32(half)
		out[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	return out
}

// rope rotates every head of x ([heads·headDim]) in place, Llama
// rotate-half: with x1 = x[:half], x2 = x[half:],
// out = [x1·cos − x2·sin, x2·cos + x1·sin].
func rope(dt ir.DType, x, cos, sin []float32) {
	half := len(cos)
	for h := 0; h+2*half <= len(x); h += 2 * half {
		x1, x2 := x[h:h+half], x[h+half:h+2*half]
		for i := range half {
			a, b := x1[i], x2[i]
			x1[i] = tensor.Round(dt, a*cos[i]-b*sin[i])
			x2[i] = tensor.Round(dt, b*cos[i]+a*sin[i])
		}
	}
}

// attention computes decode attention for every query head over n cached
// positions: query head h reads KV head h / (nHeads/nKV); scores are
// (q·k)·scale in float32 (dotF32's order); softmax in float32 (exp via
// float64); the output Σ p_t·v_t is rounded once. kc and vc hold n rows of nKV·headDim values.
func attention(dt ir.DType, out, q, kc, vc []float32, n, nHeads, nKV, headDim int, scratch []float32) {
	scale := float32(1 / math.Sqrt(float64(headDim)))
	rep := nHeads / nKV
	kvDim := nKV * headDim
	scores := scratch[:n]
	acc := make([]float32, headDim)
	for h := range nHeads {
		g := h / rep
		qh := q[h*headDim : (h+1)*headDim]
		m := float32(math.Inf(-1))
		for t := range n {
			k := kc[t*kvDim+g*headDim : t*kvDim+(g+1)*headDim]
			scores[t] = dotF32(qh, k) * scale
			m = max(m, scores[t])
		}
		var l float32
		for t := range n {
			scores[t] = float32(math.Exp(float64(scores[t] - m)))
			l += scores[t]
		}
		clear(acc)
		for t := range n {
			p := scores[t] / l
			v := vc[t*kvDim+g*headDim : t*kvDim+(g+1)*headDim]
			for d := range acc {
				acc[d] += p * v[d]
			}
		}
		for d, a := range acc {
			out[h*headDim+d] = tensor.Round(dt, a)
		}
	}
}

// siluMul: out = round(silu(g)·u), silu(g) = g·sigmoid(g) = g/(1+e^−g)
// computed in float64 and rounded to float32 before the product, as the
// reference VM does.
func siluMul(dt ir.DType, out, g, u []float32) {
	for i, gv := range g {
		v := float64(gv)
		out[i] = tensor.Round(dt, float32(v/(1+math.Exp(-v)))*u[i])
	}
}

// addInto: x = round(x + y) (the residual add).
func addInto(dt ir.DType, x, y []float32) {
	for i := range x {
		x[i] = tensor.Round(dt, x[i]+y[i])
	}
}

// Argmax is the index of the largest value, the lowest index on ties (NaN
// values are skipped; all-NaN or empty gives 0).
func Argmax(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if v == v && (best < 0 || v > logits[best]) {
			best = i
		}
	}
	return int32(max(best, 0))
}
