package fib

import "math"

// The semantics of the Definitions Export writes, in plain float64 Go,
// written from their PyTorch references (not from amk's VM): the reference
// VM's op implementations are checked against these.

// RMSNorm is rmsnorm_h*: each of the rows of x (width h) times
// rsqrt(mean(x²) + eps), times weight.
func RMSNorm(x []float64, h int, weight []float64, eps float64) []float64 {
	out := make([]float64, len(x))
	for r := 0; r+h <= len(x); r += h {
		var ss float64
		for _, v := range x[r : r+h] {
			ss += v * v
		}
		rstd := 1 / math.Sqrt(ss/float64(h)+eps)
		for i := range h {
			out[r+i] = x[r+i] * rstd * weight[i]
		}
	}
	return out
}

// GEMM is gemm_n*_k*: C[M, N] = A[M, K] @ B[N, K].T.
func GEMM(a []float64, m, k int, b []float64, n int) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for t := range k {
				s += a[i*k+t] * b[j*k+t]
			}
			c[i*n+j] = s
		}
	}
	return c
}

// GQADecode is gqa_contiguous_decode_*: for each sequence and query head h,
// softmax(q·k / scale-free dot × scale) over the first kvLen cache rows of
// KV head h / (hq / hkv), times v. q is [batch, hq, hd]; the caches are
// [batch, seqRows, hkv, hd]; the output is [batch, hq, hd].
func GQADecode(q []float64, batch, hq, hd int, k, v []float64, seqRows, kvLen, hkv int, scale float64) []float64 {
	out := make([]float64, batch*hq*hd)
	group := hq / hkv
	scores := make([]float64, kvLen)
	for b := range batch {
		for h := range hq {
			qv := q[(b*hq+h)*hd : (b*hq+h+1)*hd]
			kvh := h / group
			row := func(cache []float64, t int) []float64 {
				off := ((b*seqRows+t)*hkv + kvh) * hd
				return cache[off : off+hd]
			}
			m := math.Inf(-1)
			for t := range kvLen {
				var s float64
				for i, kv := range row(k, t) {
					s += qv[i] * kv
				}
				scores[t] = s * scale
				m = math.Max(m, scores[t])
			}
			var l float64
			for t := range kvLen {
				scores[t] = math.Exp(scores[t] - m)
				l += scores[t]
			}
			o := out[(b*hq+h)*hd : (b*hq+h+1)*hd]
			for t := range kvLen {
				for i, vv := range row(v, t) {
					o[i] += scores[t] / l * vv
				}
			}
		}
	}
	return out
}

// SiLUMul is silu_mul_*: gate / (1 + exp(-gate)) * up.
func SiLUMul(gate, up []float64) []float64 {
	out := make([]float64, len(gate))
	for i, g := range gate {
		out[i] = g / (1 + math.Exp(-g)) * up[i]
	}
	return out
}

// Add is add_*: a + b.
func Add(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// Embedding is embedding_*: the table rows (width h) of the ids.
func Embedding(ids []int64, table []float64, h int) []float64 {
	out := make([]float64, 0, len(ids)*h)
	for _, id := range ids {
		out = append(out, table[int(id)*h:int(id+1)*h]...)
	}
	return out
}

// RoPE is rope_*: each head row (width hd) of x rotated rotate-half style
// at position pos with base theta.
func RoPE(x []float64, hd int, pos int64, theta float64) []float64 {
	out := make([]float64, len(x))
	half := hd / 2
	for r := 0; r+hd <= len(x); r += hd {
		for i := range half {
			angle := float64(pos) * math.Pow(theta, -2*float64(i)/float64(hd))
			c, s := math.Cos(angle), math.Sin(angle)
			x1, x2 := x[r+i], x[r+half+i]
			out[r+i] = x1*c - x2*s
			out[r+half+i] = x2*c + x1*s
		}
	}
	return out
}

// KVAppend is kv_append_*: the cache [batch, seqRows, width] with row pos
// of each sequence replaced by that sequence's new row.
func KVAppend(cache []float64, batch, seqRows, width int, rows []float64, pos int) []float64 {
	out := append([]float64(nil), cache...)
	for b := range batch {
		copy(out[(b*seqRows+pos)*width:(b*seqRows+pos+1)*width], rows[b*width:(b+1)*width])
	}
	return out
}
