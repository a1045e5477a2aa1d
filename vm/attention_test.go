package vm

import (
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func TestAttentionHandCase(t *testing.T) {
	// One head, head_dim 2, scale 1. Scores [0, ln 3] -> probs [1/4, 3/4];
	// out = 1/4·[4 0] + 3/4·[0 8] = [1 6].
	q := ft(t, ir.F32, shp(1, 2), 1, 0)
	k := ft(t, ir.F32, shp(3, 1, 2), 0, 0, float32(math.Log(3)), 0, 99, 99)
	v := ft(t, ir.F32, shp(3, 1, 2), 4, 0, 0, 8, 99, 99)
	out := tensor.New(ir.F32, 1, 2)
	kernel(t, ir.OpAttentionTile, []*tensor.Tensor{q, k, v}, out, ip("head_dim", 2), ip("kv_start", 0),
		ip("kv_len", 2), fp("scale", 1), ip("n_heads", 1), ip("n_kv_heads", 1))
	near(t, "attention", out.F, []float64{1, 6}, 1e-6)
}

// attnRef is an independent float64 GQA attention over [start, start+n).
func attnRef(q, k, v []float32, heads, kvHeads, hd, start, n int, scale float64) []float64 {
	out := make([]float64, heads*hd)
	rep := heads / kvHeads
	for h := range heads {
		kv := h / rep
		s := make([]float64, n)
		m := math.Inf(-1)
		for j := range s {
			for d := range hd {
				s[j] += float64(q[h*hd+d]) * float64(k[((start+j)*kvHeads+kv)*hd+d])
			}
			s[j] *= scale
			m = math.Max(m, s[j])
		}
		var l float64
		for j := range s {
			s[j] = math.Exp(s[j] - m)
			l += s[j]
		}
		for j := range s {
			for d := range hd {
				out[h*hd+d] += s[j] / l * float64(v[((start+j)*kvHeads+kv)*hd+d])
			}
		}
	}
	return out
}

func wave(n int, f float64) []float32 {
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i)*f + 0.3))
	}
	return xs
}

func attnParams(hd, start, n, heads, kv int, extra ...ir.Param) []ir.Param {
	return append([]ir.Param{ip("head_dim", int64(hd)), ip("kv_start", int64(start)), ip("kv_len", int64(n)),
		fp("scale", 1/math.Sqrt(float64(hd))), ip("n_heads", int64(heads)), ip("n_kv_heads", int64(kv))}, extra...)
}

func TestAttentionGQAAndSplitKV(t *testing.T) {
	const heads, kvh, hd, seq = 4, 2, 4, 6
	qv, kv, vv := wave(heads*hd, 0.9), wave(seq*kvh*hd, 0.37), wave(seq*kvh*hd, 0.61)
	q := ft(t, ir.F32, shp(heads, hd), qv...)
	k := ft(t, ir.F32, shp(seq, kvh, hd), kv...)
	v := ft(t, ir.F32, shp(seq, kvh, hd), vv...)

	whole := tensor.New(ir.F32, 1, heads*hd)
	kernel(t, ir.OpAttentionTile, []*tensor.Tensor{q, k, v}, whole, attnParams(hd, 0, 5, heads, kvh)...)
	near(t, "whole window", whole.F, attnRef(qv, kv, vv, heads, kvh, hd, 0, 5, 0.5), 1e-6)

	window := tensor.New(ir.F32, 1, heads*hd)
	kernel(t, ir.OpAttentionTile, []*tensor.Tensor{q, k, v}, window, attnParams(hd, 2, 3, heads, kvh)...)
	near(t, "window [2,5)", window.F, attnRef(qv, kv, vv, heads, kvh, hd, 2, 3, 0.5), 1e-6)

	// Split-KV: shards [0,2), [2,5) and an empty one, then combine.
	var parts []*tensor.Tensor
	for _, sh := range [][2]int{{0, 2}, {2, 3}, {5, 0}} {
		p := tensor.New(ir.F32, heads, hd+2)
		kernel(t, ir.OpAttentionTile, []*tensor.Tensor{q, k, v}, p, attnParams(hd, sh[0], sh[1], heads, kvh, ip("flags", ir.FlagPartialWrite))...)
		parts = append(parts, p)
	}
	empty := parts[2].F
	for h := range heads {
		row := empty[h*(hd+2) : (h+1)*(hd+2)]
		if row[hd] != float32(math.Inf(-1)) || row[hd+1] != 0 || row[0] != 0 {
			t.Fatalf("empty shard head %d = %v, want acc 0, m -inf, l 0", h, row)
		}
	}
	combined := tensor.New(ir.F32, 1, heads*hd)
	kernel(t, ir.OpAttentionCombine, parts, combined, ip("head_dim", hd), ip("n_heads", heads), ip("n_kv_heads", kvh))
	near(t, "split-KV combine", combined.F, attnRef(qv, kv, vv, heads, kvh, hd, 0, 5, 0.5), 1e-6)
}

func TestAttentionCombineHandCase(t *testing.T) {
	// head_dim 1: partials [acc m l] = [2 0 1] and [e 1 e]. m = 1;
	// w = [e^-1, 1]; out = (2/e + e) / (1/e + e).
	e := math.E
	p0 := ft(t, ir.F32, shp(1, 3), 2, 0, 1)
	p1 := ft(t, ir.F32, shp(1, 3), float32(e), 1, float32(e))
	out := tensor.New(ir.F32, 1, 1)
	kernel(t, ir.OpAttentionCombine, []*tensor.Tensor{p0, p1}, out, ip("head_dim", 1))
	near(t, "combine", out.F, []float64{(2/e + e) / (1/e + e)}, 1e-6)

	// All shards empty: no weight anywhere, the output is 0 (never NaN).
	z := ft(t, ir.F32, shp(1, 3), 0, float32(math.Inf(-1)), 0)
	kernel(t, ir.OpAttentionCombine, []*tensor.Tensor{z, z}, out, ip("head_dim", 1))
	same(t, "all-empty combine", out.F, []float32{0})
}

func TestAttentionBatched(t *testing.T) {
	// B = 2 independent sequences with rank-4 caches [B, max_seq, n_kv, hd].
	const b, seq, heads, kvh, hd = 2, 4, 2, 1, 2
	qv, kv, vv := wave(b*heads*hd, 0.8), wave(b*seq*kvh*hd, 0.5), wave(b*seq*kvh*hd, 0.45)
	out := tensor.New(ir.F32, b, heads*hd)
	kernel(t, ir.OpAttentionTile, []*tensor.Tensor{
		ft(t, ir.F32, shp(b, heads, hd), qv...), ft(t, ir.F32, shp(b, seq, kvh, hd), kv...), ft(t, ir.F32, shp(b, seq, kvh, hd), vv...),
	}, out, attnParams(hd, 0, 3, heads, kvh)...)
	per := seq * kvh * hd
	var want []float64
	for i := range b {
		want = append(want, attnRef(qv[i*heads*hd:(i+1)*heads*hd], kv[i*per:(i+1)*per], vv[i*per:(i+1)*per], heads, kvh, hd, 0, 3, 1/math.Sqrt(2))...)
	}
	near(t, "batched attention", out.F, want, 1e-6)
}

func TestAttentionErrors(t *testing.T) {
	q := ft(t, ir.F32, shp(4, 4), wave(16, 1)...)
	k := tensor.New(ir.F32, 6, 2, 4)
	out := tensor.New(ir.F32, 1, 16)
	for name, ps := range map[string][]ir.Param{
		"window past the cache": attnParams(4, 3, 4, 4, 2),
		"negative kv_start":     attnParams(4, -1, 2, 4, 2),
		"heads not a multiple":  attnParams(4, 0, 2, 3, 2),
		"kv heads mismatch":     attnParams(4, 0, 2, 4, 1),
		"head_dim mismatch":     attnParams(2, 0, 2, 4, 2),
	} {
		if err := kernelErr(ir.OpAttentionTile, []*tensor.Tensor{q, k, k}, out, ps...); err == nil {
			t.Errorf("%s: succeeded", name)
		}
	}
}
