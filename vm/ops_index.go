package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// opEmbed gathers table rows: out = table[ids] (ids flattened), reshaped to
// the output. A row is the table's first dimension, as in the reference's
// index_select, which also makes the flat->head "reshape" work: ids
// [0..B-1] over a flat (B, q_dim) activation with hidden = head_dim copies
// each sequence's row into the (B, heads, head_dim) output. An id outside
// the table is an error. A table held at its stored width (a weight) is
// read row by row, never widened whole.
func opEmbed(in, out []*tensor.Tensor, _ ir.Params) error {
	ids := ints(in[0])
	table := in[1]
	if len(table.Shape) == 0 || table.Shape[0] <= 0 {
		return fmt.Errorf("EMBED: table %v has no rows", table.Shape)
	}
	n := table.FloatCount()
	if !table.DType.IsFloat() {
		vals, err := inputFloats(table)
		if err != nil {
			return err
		}
		table, n = &tensor.Tensor{DType: ir.F32, Shape: table.Shape, F: vals}, len(vals)
	}
	if n != table.Numel() {
		return fmt.Errorf("a %s%s tensor holds %d values", table.DType, shapeString(table.Shape), n)
	}
	rows := table.Shape[0]
	width := n / rows
	if out[0].Numel() != len(ids)*width {
		return fmt.Errorf("EMBED: %d ids × rows of %d values do not fill an output of %d", len(ids), width, out[0].Numel())
	}
	row := make([]float32, width)
	for i, id := range ids {
		if id < 0 || id >= int64(rows) {
			return fmt.Errorf("EMBED: id %d outside the table's %d rows", id, rows)
		}
		table.ReadFloats(row, int(id)*width)
		if err := store(out[0], i*width, row); err != nil {
			return err
		}
	}
	return nil
}

// opRoPE applies Llama rotate-half rotary embedding: half = head_dim/2,
// inv_freq[i] = 1/θ^(i/half), ang = pos·inv_freq, out = [x1·cos − x2·sin,
// x2·cos + x1·sin]. A rank-2 x [heads, head_dim] uses pos[0]; a rank-3 x
// [S, heads, head_dim] uses one position per row (len(pos) == S). A rank-2
// x [S, heads·head_dim] (a projection's flat output read as a view, no
// reshape task) also takes one position per row.
func opRoPE(in, out []*tensor.Tensor, p ir.Params) error {
	x, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	hd, err := needInt(p, "head_dim")
	if err != nil {
		return err
	}
	theta, err := floatOr(p, "theta", 10000)
	if err != nil {
		return err
	}
	flat := len(in[0].Shape) == 2 && hd > 0 && lastDim(in[0]) > hd && lastDim(in[0])%hd == 0
	if hd <= 0 || hd%2 != 0 || (lastDim(in[0]) != hd && !flat) {
		return fmt.Errorf("ROPE: head_dim %d must be even, positive and equal x's last dimension (%v) or divide a flat row", hd, in[0].Shape)
	}
	pos := ints(in[1])
	var seq int
	switch {
	case len(in[0].Shape) == 2 && !flat:
		seq = 1
		if len(pos) < 1 {
			return fmt.Errorf("ROPE: no position given")
		}
	case len(in[0].Shape) == 2 || len(in[0].Shape) == 3:
		seq = in[0].Shape[0]
		if len(pos) != seq {
			return fmt.Errorf("ROPE: %d positions for %d rows", len(pos), seq)
		}
	default:
		return fmt.Errorf("ROPE: x must have rank 2 or 3, got %v", in[0].Shape)
	}
	if out[0].Numel() != len(x) {
		return fmt.Errorf("ROPE: input has %d elements, output %d", len(x), out[0].Numel())
	}
	res := make([]float32, len(x))
	perRow := len(x) / max(seq, 1)
	for s := 0; s < seq; s++ {
		rotateHalf(x[s*perRow:(s+1)*perRow], res[s*perRow:(s+1)*perRow], hd, theta, pos[s])
	}
	return storeAll(out[0], res)
}

// rotateHalf rotates every head_dim-long run of x (whole heads) at one
// position into res: the one RoPE of the VM, used by ROPE and by the fused
// patterns' RoPE epilogue.
func rotateHalf(x, res []float32, hd int, theta float64, pos int64) {
	half := hd / 2
	cos, sin := make([]float32, half), make([]float32, half)
	fp := float32(pos)
	for i := range cos {
		e := float32(i) / float32(half)
		f := 1 / float32(math.Pow(theta, float64(e)))
		ang := float64(fp * f)
		cos[i], sin[i] = float32(math.Cos(ang)), float32(math.Sin(ang))
	}
	for h := 0; h+hd <= len(x); h += hd {
		x1, x2 := x[h:h+half], x[h+half:h+hd]
		d1, d2 := res[h:h+half], res[h+half:h+hd]
		for i := range x1 {
			d1[i] = x1[i]*cos[i] - x2[i]*sin[i]
			d2[i] = x2[i]*cos[i] + x1[i]*sin[i]
		}
	}
}

// opKVAppend writes the new k or v into the cache (inputs [new, cache],
// output the cache, in place). Rank-3 cache [max_seq, n_kv, hd]: rows
// [pos, pos+rows) get new viewed as (rows, n_kv, hd). Rank-4 cache [B,
// max_seq, n_kv, hd]: cache[:, pos] gets new viewed as (B, n_kv, hd). A
// position outside the cache is an error, never a silent write.
func opKVAppend(in, out []*tensor.Tensor, p ir.Params) error {
	pos, err := needInt(p, "pos")
	if err != nil {
		return err
	}
	src, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	cache := out[0]
	rank := len(cache.Shape)
	if rank != 3 && rank != 4 {
		return fmt.Errorf("KV_APPEND: cache must have rank 3 or 4, got %v", cache.Shape)
	}
	seq := cache.Shape[rank-3]
	rowLen := cache.Shape[rank-2] * cache.Shape[rank-1]
	if rowLen <= 0 {
		return fmt.Errorf("KV_APPEND: cache %v has empty rows", cache.Shape)
	}
	if rank == 3 {
		if len(src) == 0 || len(src)%rowLen != 0 {
			return fmt.Errorf("KV_APPEND: %d new values are not whole rows of %d", len(src), rowLen)
		}
		rows := len(src) / rowLen
		if pos < 0 || pos+rows > seq {
			return fmt.Errorf("KV_APPEND: rows [%d, %d) outside the cache's %d positions", pos, pos+rows, seq)
		}
		return store(cache, pos*rowLen, src)
	}
	batch := cache.Shape[0]
	if len(src) != batch*rowLen {
		return fmt.Errorf("KV_APPEND: %d new values, want %d sequences × %d", len(src), batch, rowLen)
	}
	if pos < 0 || pos >= seq {
		return fmt.Errorf("KV_APPEND: position %d outside the cache's %d positions", pos, seq)
	}
	for b := range batch {
		if err := store(cache, (b*seq+pos)*rowLen, src[b*rowLen:(b+1)*rowLen]); err != nil {
			return err
		}
	}
	return nil
}

// opArgmax: argmax over the last dimension (ties -> the lowest index, NaN
// counts as the largest value, as torch does). An integer output gets the
// integer index (docs/spec/rules.md R27); a float output the index as a float.
func opArgmax(in, out []*tensor.Tensor, _ ir.Params) error {
	x, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	v := lastDim(in[0])
	if v <= 0 {
		return fmt.Errorf("SAMPLE_ARGMAX: empty last dimension %v", in[0].Shape)
	}
	rows := len(x) / v
	if out[0].Numel() != rows {
		return fmt.Errorf("SAMPLE_ARGMAX: %d rows, output holds %d", rows, out[0].Numel())
	}
	for r := range rows {
		idx := argmax(x[r*v : (r+1)*v])
		if isUnpackedInt(out[0]) && r < out[0].IntCount() {
			out[0].SetInt(r, narrowInt(out[0].DType, int64(idx)))
			continue
		}
		if err := store(out[0], r, []float32{float32(idx)}); err != nil {
			return err
		}
	}
	return nil
}

func argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if row[best] != row[best] {
			break // NaN wins and keeps the lowest index
		}
		if v > row[best] || v != v {
			best = i
		}
	}
	return best
}
