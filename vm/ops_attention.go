package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// attnGeom is an ATTENTION_TILE's checked geometry.
type attnGeom struct {
	batch, heads, kvHeads, hd int
	seq                       int // cache rows per sequence (max_seq)
	start, length             int // the KV window [start, start+length)
	scale                     float32
	partial                   bool
	kvFirst, kvCount          int // the KV-head slice (n_off, N_tile): all KV heads when absent
}

func attentionGeometry(in, out []*tensor.Tensor, p ir.Params) (attnGeom, error) {
	var g attnGeom
	var err error
	if g.hd, err = needInt(p, "head_dim"); err != nil {
		return g, err
	}
	if g.hd <= 0 {
		return g, fmt.Errorf("head_dim must be >= 1, got %d", g.hd)
	}
	k, v := in[1], in[2]
	if !sameShape(k.Shape, v.Shape) {
		return g, fmt.Errorf("the K cache %v and the V cache %v differ", k.Shape, v.Shape)
	}
	switch len(k.Shape) {
	case 3: // [max_seq, n_kv, hd]
		g.batch, g.seq = 1, k.Shape[0]
	case 4: // [B, max_seq, n_kv, hd]: B independent decode attentions
		g.batch, g.seq = k.Shape[0], k.Shape[1]
	default:
		return g, fmt.Errorf("KV caches must have rank 3 or 4, got %v", k.Shape)
	}
	cacheKV := k.Shape[len(k.Shape)-2]
	if lastDim(k) != g.hd {
		return g, fmt.Errorf("KV cache rows have %d values, head_dim is %d", lastDim(k), g.hd)
	}
	if g.kvHeads, err = intOr(p, "n_kv_heads", cacheKV); err != nil {
		return g, err
	}
	if g.kvHeads != cacheKV {
		return g, fmt.Errorf("n_kv_heads %d, the KV cache holds %d heads", g.kvHeads, cacheKV)
	}
	qn := in[0].Numel()
	if g.batch == 0 || g.kvHeads <= 0 {
		return g, fmt.Errorf("empty KV cache %v", k.Shape)
	}
	if g.heads, err = intOr(p, "n_heads", qn/(g.batch*g.hd)); err != nil {
		return g, err
	}
	if g.heads <= 0 || g.heads%g.kvHeads != 0 {
		return g, fmt.Errorf("n_heads %d is not a positive multiple of n_kv_heads %d", g.heads, g.kvHeads)
	}
	if qn != g.batch*g.heads*g.hd {
		return g, fmt.Errorf("q holds %d values, want %d×%d heads×%d", qn, g.batch, g.heads, g.hd)
	}
	if g.start, err = intOr(p, "kv_start", 0); err != nil {
		return g, err
	}
	if g.length, err = intOr(p, "kv_len", g.seq-g.start); err != nil {
		return g, err
	}
	if g.start < 0 || g.length < 0 || g.start+g.length > g.seq {
		return g, fmt.Errorf("KV window [%d, %d) outside the cache's %d rows", g.start, g.start+g.length, g.seq)
	}
	scale, err := floatOr(p, "scale", 1/math.Sqrt(float64(g.hd)))
	if err != nil {
		return g, err
	}
	g.scale = float32(scale)
	flags, err := intOr(p, "flags", 0)
	if err != nil {
		return g, err
	}
	g.partial = flags&ir.FlagPartialWrite != 0
	g.kvFirst, g.kvCount = 0, g.kvHeads
	if p.Has("n_off") || p.Has("N_tile") {
		if g.kvFirst, err = intOr(p, "n_off", 0); err != nil {
			return g, err
		}
		if g.kvCount, err = intOr(p, "N_tile", g.kvHeads-g.kvFirst); err != nil {
			return g, err
		}
		if g.kvFirst < 0 || g.kvCount <= 0 || g.kvFirst+g.kvCount > g.kvHeads {
			return g, fmt.Errorf("KV-head slice [%d, %d) outside the %d KV heads", g.kvFirst, g.kvFirst+g.kvCount, g.kvHeads)
		}
	}
	width := g.hd
	if g.partial {
		width = g.hd + 2
	}
	if want := g.batch * g.heads * width; out[0].Numel() != want {
		return g, fmt.Errorf("output holds %d values, want %d", out[0].Numel(), want)
	}
	return g, nil
}

// opAttention: GQA decode attention over the window [kv_start,
// kv_start+kv_len) of the caches. Query head h uses KV head h/(n_heads/
// n_kv_heads); scores are (q·k)·scale, softmax over the window, out = p·V.
// With params n_off / N_tile the task is the KV-head slice [n_off,
// n_off+N_tile) and writes only its query heads (the GQA group of each KV
// head), so several tasks split one attention per KV head.
// With flags bit1 (PARTIAL_WRITE) each head writes the un-normalised flash
// partial [acc = Σ exp(s−m)·v | m = max s | l = Σ exp(s−m)]; an empty window
// writes acc 0, m −inf, l 0 (and a whole-window task writes zeros).
func opAttention(in, out []*tensor.Tensor, p ir.Params) error {
	g, err := attentionGeometry(in, out, p)
	if err != nil {
		return err
	}
	q, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	kc, err := inputFloats(in[1])
	if err != nil {
		return err
	}
	vc, err := inputFloats(in[2])
	if err != nil {
		return err
	}
	rep := g.heads / g.kvHeads
	rowLen := g.kvHeads * g.hd
	width := g.hd
	if g.partial {
		width = g.hd + 2
	}
	res := make([]float32, g.batch*g.heads*width)
	scores := make([]float32, g.length)
	h0, h1 := g.kvFirst*rep, (g.kvFirst+g.kvCount)*rep // the query heads of the KV-head slice
	for b := 0; b < g.batch; b++ {
		cacheBase := (b*g.seq + g.start) * rowLen
		for h := h0; h < h1; h++ {
			qh := q[(b*g.heads+h)*g.hd : (b*g.heads+h+1)*g.hd]
			off := (h / rep) * g.hd
			dst := res[(b*g.heads+h)*width : (b*g.heads+h+1)*width]
			acc := dst[:g.hd]
			if g.length == 0 {
				if g.partial {
					dst[g.hd] = float32(math.Inf(-1))
				}
				continue
			}
			m := float32(math.Inf(-1))
			for j := range scores {
				r := cacheBase + j*rowLen + off
				s := dot(qh, kc[r:r+g.hd]) * g.scale
				scores[j] = s
				if s > m || s != s {
					m = s
				}
			}
			var l float32
			for j, s := range scores {
				e := float32(math.Exp(float64(s - m)))
				scores[j] = e
				l += e
			}
			if !g.partial {
				for j := range scores {
					scores[j] /= l
				}
			}
			for j, w := range scores {
				r := cacheBase + j*rowLen + off
				axpy(w, vc[r:r+g.hd], acc)
			}
			if g.partial {
				dst[g.hd], dst[g.hd+1] = m, l
			}
		}
	}
	if h0 == 0 && h1 == g.heads {
		return storeAll(out[0], res)
	}
	for b := 0; b < g.batch; b++ { // a slice writes only its heads: other slices write the rest
		lo, hi := (b*g.heads+h0)*width, (b*g.heads+h1)*width
		if err := store(out[0], lo, res[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// opCombine: ATTENTION_COMBINE merges P split-KV partials, each [rows,
// head_dim+2] = [acc | m | l]: m = max_p m_p; w_p = exp(m_p − m) if l_p > 0
// else 0; out = Σ acc_p·w_p / max(Σ l_p·w_p, 1e-20).
func opCombine(in, out []*tensor.Tensor, p ir.Params) error {
	hd, err := needInt(p, "head_dim")
	if err != nil {
		return err
	}
	if hd <= 0 {
		return fmt.Errorf("head_dim must be >= 1, got %d", hd)
	}
	width := hd + 2
	parts := make([][]float32, len(in))
	for i, t := range in {
		if parts[i], err = inputFloats(t); err != nil {
			return err
		}
		if len(parts[i]) != len(parts[0]) || len(parts[i])%width != 0 {
			return fmt.Errorf("partial %d holds %d values, want a multiple of head_dim+2 = %d equal across partials", i, len(parts[i]), width)
		}
	}
	rows := len(parts[0]) / width
	if nh, ok, err := paramInt(p, "n_heads"); err != nil {
		return err
	} else if ok && (nh <= 0 || rows%nh != 0) {
		return fmt.Errorf("partials hold %d heads, n_heads is %d", rows, nh)
	}
	if out[0].Numel() != rows*hd {
		return fmt.Errorf("output holds %d values, want %d heads × %d", out[0].Numel(), rows, hd)
	}
	res := make([]float32, rows*hd)
	for r := range rows {
		m := float32(math.Inf(-1))
		for _, pt := range parts {
			if mp := pt[r*width+hd]; mp > m || mp != mp {
				m = mp
			}
		}
		acc := res[r*hd : (r+1)*hd]
		var l float32
		for _, pt := range parts {
			row := pt[r*width : (r+1)*width]
			mp, lp := row[hd], row[hd+1]
			if !(lp > 0) {
				continue
			}
			w := float32(math.Exp(float64(mp - m)))
			l += lp * w
			axpy(w, row[:hd], acc)
		}
		den := l
		if den < 1e-20 {
			den = 1e-20
		}
		for i := range acc {
			acc[i] /= den
		}
	}
	return storeAll(out[0], res)
}
