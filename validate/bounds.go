package validate

import (
	"github.com/amk-dev/amk/ir"
)

// checkBounds is amk's docs/spec/rules.md R19 pass over every task: tile and KV bounds, K, and
// the consistency of params, shapes and dtypes, accepting every shape the
// reference lowering emits. A task whose arity is wrong or that names a
// missing buffer is skipped (step 1 has reported it), and so is each check
// whose param is absent or badly typed.
func (c *checker) checkBounds() {
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		spec, ok := t.Op.Spec()
		if !ok || len(t.Inputs) < spec.MinInputs || (spec.MaxInputs != ir.Variadic && len(t.Inputs) > spec.MaxInputs) ||
			len(t.Outputs) != spec.NOutputs {
			continue
		}
		in, out, ok := c.resolve(t)
		if !ok {
			continue
		}
		tc := taskCheck{c: c, t: t, in: in, out: out}
		switch t.Op {
		case ir.OpGEMVTile, ir.OpGEMMTile:
			tc.projection()
		case ir.OpEMBED:
			tc.embed()
		case ir.OpRMSNORM, ir.OpLAYERNORM:
			tc.norm()
		case ir.OpROPE:
			tc.rope()
		case ir.OpKVAppend:
			tc.kvAppend()
		case ir.OpAttentionTile:
			tc.attention()
		case ir.OpAttentionCombine:
			tc.combine()
		case ir.OpCOPY, ir.OpADD, ir.OpMUL, ir.OpSiLUMul, ir.OpGELU, ir.OpSOFTMAX, ir.OpAllreduceShard:
			tc.elementwise()
		case ir.OpSampleArgmax:
			tc.argmax()
		case ir.OpFUSED:
			if pat, ok := ir.FusedPatternByID(ir.TaskFusedPattern(t)); ok && len(t.Inputs) == pat.TaskArity(t) {
				tc.fused(pat)
			}
		}
	}
}

// resolve maps a task's buffer ids to buffers; ok is false if one is missing.
// The slices are reused by the next call.
func (c *checker) resolve(t *ir.Task) (in, out []*ir.Buffer, ok bool) {
	in, out = c.in[:0], c.out[:0]
	defer func() { c.in, c.out = in, out }()
	for _, b := range t.Inputs {
		buf := c.buffer(b)
		if buf == nil {
			return nil, nil, false
		}
		in = append(in, buf)
	}
	for _, b := range t.Outputs {
		buf := c.buffer(b)
		if buf == nil {
			return nil, nil, false
		}
		out = append(out, buf)
	}
	return in, out, true
}

// taskCheck holds one task's resolved buffers while its docs/spec/rules.md R19 checks run.
type taskCheck struct {
	c       *checker
	t       *ir.Task
	in, out []*ir.Buffer
}

func (tc *taskCheck) fail(code string, buf *ir.Buffer, format string, args ...any) {
	bid := -1
	if buf != nil {
		bid = buf.ID
	}
	tc.c.errf(code, tc.t.ID, bid, -1, "task %d (%s) "+format, append([]any{tc.t.ID, tc.t.Label}, args...)...)
}

func (tc *taskCheck) param(key string) (int64, bool) { return intParam(tc.t, key) }

// projection checks GEMV_TILE / GEMM_TILE: K, the tile's columns (and GEMM
// rows) inside the output and the weight, rows of x and out, dtypes.
func (tc *taskCheck) projection() {
	x, w, o := tc.in[0], tc.in[1], tc.out[0]
	if k, ok := tc.param("K"); ok {
		switch {
		case k <= 0:
			tc.fail(CodeBadK, x, "K=%d must be positive", k)
		case k != dim(x, -1):
			tc.fail(CodeBadK, x, "K=%d != last dimension %d of input #%d ('%s')", k, dim(x, -1), x.ID, x.Name)
		case k != dim(w, -1):
			tc.fail(CodeBadK, w, "K=%d != last dimension %d of weight #%d ('%s')", k, dim(w, -1), w.ID, w.Name)
		}
	}
	nOff, ok1 := tc.param("n_off")
	nTile, ok2 := tc.param("N_tile")
	if ok1 && ok2 {
		switch {
		case nOff < 0 || nTile <= 0:
			tc.fail(CodeTileBounds, o, "tile n_off=%d N_tile=%d is not a column range (needs n_off >= 0 and N_tile > 0)", nOff, nTile)
		case nOff+nTile > dim(o, -1):
			tc.fail(CodeTileBounds, o, "tile columns [%d, %d) exceed the %d columns of output #%d ('%s')", nOff, nOff+nTile, dim(o, -1), o.ID, o.Name)
		case nOff+nTile > rowsOf(w):
			// The weight is read as rows of K values, whatever its rank.
			tc.fail(CodeTileBounds, w, "tile columns [%d, %d) exceed the %d rows of weight #%d ('%s')", nOff, nOff+nTile, rowsOf(w), w.ID, w.Name)
		}
	}
	if tc.t.Op == ir.OpGEMMTile {
		tc.gemmRows(o)
	}
	if k, ok := tc.param("K"); ok && k > 0 && k == dim(x, -1) && rowsOf(x) != rowsOf(o) {
		tc.fail(CodeShapeMismatch, o, "input #%d ('%s') has %d rows of K=%d but output #%d ('%s') has %d rows", x.ID, x.Name, rowsOf(x), k, o.ID, o.Name, rowsOf(o))
	}
	if !x.DType.IsFloat() {
		tc.fail(CodeDTypeMismatch, x, "input #%d ('%s') has dtype %s; a projection reads a floating-point activation", x.ID, x.Name, x.DType)
	}
	_, si, quantized := ir.TileQuant(tc.t)
	switch {
	case quantized:
		if k, ok := tc.param("K"); ok && k > 0 && k == dim(w, -1) && ok1 && ok2 && nOff >= 0 && nTile > 0 {
			tc.quantScales(w, tc.in[si], k, nOff+nTile)
		}
	case !w.DType.IsFloat():
		tc.fail(CodeDTypeMismatch, w, "weight #%d ('%s') has dtype %s; an unquantized projection needs a floating-point weight (quantized tiles carry qdtype 6 or 7 and a scales input)", w.ID, w.Name, w.DType)
	}
}

// gemmRows checks a GEMM tile's row range: M_tile > 0, and [m_off,
// m_off+M_tile) inside the output's rows (all rows when m_off is absent).
func (tc *taskCheck) gemmRows(o *ir.Buffer) {
	mTile, ok := tc.param("M_tile")
	if !ok {
		return
	}
	rows := rowsOf(o)
	if mTile <= 0 {
		tc.fail(CodeTileBounds, o, "tile M_tile=%d must be positive", mTile)
		return
	}
	if !tc.t.Params.Has("m_off") {
		if mTile > rows {
			tc.fail(CodeTileBounds, o, "tile M_tile=%d exceeds the %d rows of output #%d ('%s')", mTile, rows, o.ID, o.Name)
		}
		return
	}
	mOff, ok := tc.param("m_off")
	if !ok {
		return
	}
	if mOff < 0 || mOff+mTile > rows {
		tc.fail(CodeTileBounds, o, "tile rows [%d, %d) exceed the %d rows of output #%d ('%s')", mOff, mOff+mTile, rows, o.ID, o.Name)
	}
}

// embed checks EMBED [ids, table] -> out: integer ids, hidden equal to the
// output's last dimension, a table that is a whole number of hidden-wide
// rows, and out = ids x table row (this also covers the reference's
// flat -> head reshape, whose table is the flat activation).
func (tc *taskCheck) embed() {
	ids, table, o := tc.in[0], tc.in[1], tc.out[0]
	if !isIndexType(ids.DType) {
		tc.fail(CodeDTypeMismatch, ids, "ids #%d ('%s') have dtype %s; EMBED ids must be an integer type", ids.ID, ids.Name, ids.DType)
	}
	if len(table.Shape) == 0 || table.Shape[0] <= 0 {
		tc.fail(CodeShapeMismatch, table, "table #%d ('%s') has shape %s; EMBED gathers rows of its first dimension, so it needs one", table.ID, table.Name, pyInts(table.Shape))
		return
	}
	h, ok := tc.param("hidden")
	if !ok {
		return
	}
	switch {
	case h <= 0 || h != dim(o, -1):
		tc.fail(CodeShapeMismatch, o, "hidden=%d != last dimension %d of output #%d ('%s')", h, dim(o, -1), o.ID, o.Name)
	case numel(table)%h != 0:
		tc.fail(CodeShapeMismatch, table, "table #%d ('%s') of %d elements is not a whole number of hidden=%d rows", table.ID, table.Name, numel(table), h)
	default:
		row := numel(table)
		if d0 := dim(table, 0); len(table.Shape) > 0 && d0 > 0 {
			row = numel(table) / d0
		}
		if want := numel(ids) * row; row > 0 && numel(o) != want {
			tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements, expected %d ids x %d per table row = %d", o.ID, o.Name, numel(o), numel(ids), row, want)
		}
	}
}

// norm checks RMSNORM / LAYERNORM: hidden is x's last dimension, the weight
// (and bias) hold hidden elements, the output matches x.
func (tc *taskCheck) norm() {
	x, o := tc.in[0], tc.out[0]
	if h, ok := tc.param("hidden"); ok {
		if h <= 0 || h != dim(x, -1) {
			tc.fail(CodeShapeMismatch, x, "hidden=%d != last dimension %d of input #%d ('%s')", h, dim(x, -1), x.ID, x.Name)
		} else {
			for _, w := range tc.in[1:] {
				if numel(w) != h {
					tc.fail(CodeShapeMismatch, w, "weight #%d ('%s') has %d elements, expected hidden=%d", w.ID, w.Name, numel(w), h)
				}
			}
		}
	}
	if numel(o) != numel(x) {
		tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements but input #%d ('%s') has %d", o.ID, o.Name, numel(o), x.ID, x.Name, numel(x))
	}
}

// rope checks ROPE [x, positions]: integer positions, x head-shaped (rank 2
// with one position, or rank 3 with one position per leading row) or a flat
// projection [S, heads x head_dim] read as a view (one position per row), an
// even head_dim, the output matching x.
func (tc *taskCheck) rope() {
	x, pos, o := tc.in[0], tc.in[1], tc.out[0]
	if !isIndexType(pos.DType) {
		tc.fail(CodeDTypeMismatch, pos, "positions #%d ('%s') have dtype %s; ROPE positions must be an integer type", pos.ID, pos.Name, pos.DType)
	}
	hd, hasHD := tc.param("head_dim")
	flat := len(x.Shape) == 2 && hasHD && hd > 0 && dim(x, -1) > hd && dim(x, -1)%hd == 0
	switch len(x.Shape) {
	case 2:
		if flat && numel(pos) != dim(x, 0) {
			tc.fail(CodeShapeMismatch, pos, "positions #%d ('%s') hold %d entries, expected %d (one per row of the flat input #%d)", pos.ID, pos.Name, numel(pos), dim(x, 0), x.ID)
		}
		if numel(pos) < 1 {
			tc.fail(CodeShapeMismatch, pos, "positions #%d ('%s') are empty", pos.ID, pos.Name)
		}
	case 3:
		if numel(pos) != dim(x, 0) {
			tc.fail(CodeShapeMismatch, pos, "positions #%d ('%s') hold %d entries, expected %d (one per row of input #%d)", pos.ID, pos.Name, numel(pos), dim(x, 0), x.ID)
		}
	default:
		tc.fail(CodeShapeMismatch, x, "input #%d ('%s') has shape %s; ROPE takes [heads, head_dim] or [S, heads, head_dim]", x.ID, x.Name, pyInts(x.Shape))
	}
	if hasHD && (hd <= 0 || hd%2 != 0 || (hd != dim(x, -1) && !flat)) {
		tc.fail(CodeShapeMismatch, x, "head_dim=%d must be even, positive and equal to (or, for a flat [S, heads x head_dim] view, divide) the last dimension %d of input #%d ('%s')", hd, dim(x, -1), x.ID, x.Name)
	}
	if numel(o) != numel(x) {
		tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements but input #%d ('%s') has %d", o.ID, o.Name, numel(o), x.ID, x.Name, numel(x))
	}
}

// kvAppend checks KV_APPEND [new, cache] -> cache: the cache is [max_seq,
// n_kv, hd] (new is a whole number of rows, written at pos) or [B, max_seq,
// n_kv, hd] (new is B x n_kv x hd); pos within [0, max_seq).
func (tc *taskCheck) kvAppend() {
	src, cache := tc.in[0], tc.out[0]
	var maxSeq, rows int64
	switch len(cache.Shape) {
	case 3:
		maxSeq = dim(cache, 0)
		slot := dim(cache, 1) * dim(cache, 2)
		if slot <= 0 || numel(src) == 0 || numel(src)%slot != 0 {
			tc.fail(CodeShapeMismatch, src, "new k/v #%d ('%s') of %d elements is not a whole number of rows of KV cache #%d ('%s') shape %s", src.ID, src.Name, numel(src), cache.ID, cache.Name, pyInts(cache.Shape))
			rows = 1
		} else {
			rows = numel(src) / slot
		}
	case 4:
		maxSeq, rows = dim(cache, 1), 1
		if want := dim(cache, 0) * dim(cache, 2) * dim(cache, 3); numel(src) != want {
			tc.fail(CodeShapeMismatch, src, "new k/v #%d ('%s') has %d elements, expected %d (B x n_kv x head_dim of KV cache #%d ('%s'))", src.ID, src.Name, numel(src), want, cache.ID, cache.Name)
		}
	default:
		tc.fail(CodeShapeMismatch, cache, "KV cache #%d ('%s') has shape %s; expected [max_seq, n_kv, head_dim] or [B, max_seq, n_kv, head_dim]", cache.ID, cache.Name, pyInts(cache.Shape))
		return
	}
	pos, ok := tc.param("pos")
	if !ok {
		return
	}
	switch {
	case pos < 0 || pos >= maxSeq:
		tc.fail(CodeKVPos, cache, "pos=%d outside [0, %d) of KV cache #%d ('%s')", pos, maxSeq, cache.ID, cache.Name)
	case pos+rows > maxSeq:
		tc.fail(CodeKVPos, cache, "pos=%d + %d rows exceed the %d rows of KV cache #%d ('%s')", pos, rows, maxSeq, cache.ID, cache.Name)
	}
}

// attention checks ATTENTION_TILE [q, k_cache, v_cache]: q [n_heads, hd]
// with rank-3 caches or q [B, n_heads, hd] with rank-4 caches, head counts
// (GQA: n_heads a multiple of n_kv_heads), the KV window inside the cache,
// a KV-head slice (n_off, N_tile) inside the KV heads, and the output size
// (a [n_heads, hd+2] flash partial with flags bit 1, [B, n_heads, hd+2] for
// a batch).
func (tc *taskCheck) attention() {
	q, k, v, o := tc.in[0], tc.in[1], tc.in[2], tc.out[0]
	hd, ok1 := tc.param("head_dim")
	nh, ok2 := tc.param("n_heads")
	nkv, ok3 := tc.param("n_kv_heads")
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if nh <= 0 || nkv <= 0 || nh%nkv != 0 || hd <= 0 {
		tc.fail(CodeShapeMismatch, q, "head_dim=%d, n_heads=%d, n_kv_heads=%d: all must be positive and n_heads a multiple of n_kv_heads", hd, nh, nkv)
		return
	}
	qRank := len(q.Shape)
	if (qRank != 2 && qRank != 3) || dim(q, -1) != hd || dim(q, -2) != nh {
		tc.fail(CodeShapeMismatch, q, "q #%d ('%s') has shape %s; expected [n_heads=%d, head_dim=%d] or [B, %d, %d]", q.ID, q.Name, pyInts(q.Shape), nh, hd, nh, hd)
		return
	}
	batch := int64(1)
	if qRank == 3 {
		batch = dim(q, 0)
	}
	for _, cache := range []*ir.Buffer{k, v} {
		if len(cache.Shape) != qRank+1 || dim(cache, -1) != hd || dim(cache, -2) != nkv || (qRank == 3 && dim(cache, 0) != batch) {
			tc.fail(CodeShapeMismatch, cache, "KV cache #%d ('%s') has shape %s; with q %s expected [%smax_seq, n_kv_heads=%d, head_dim=%d]", cache.ID, cache.Name, pyInts(cache.Shape), pyInts(q.Shape), batchPrefix(qRank, batch), nkv, hd)
			return
		}
	}
	if dim(k, -3) != dim(v, -3) {
		tc.fail(CodeShapeMismatch, v, "k cache #%d ('%s') and v cache #%d ('%s') differ in shape: %s vs %s", k.ID, k.Name, v.ID, v.Name, pyInts(k.Shape), pyInts(v.Shape))
		return
	}
	maxSeq := dim(k, -3)
	kvStart, ok1 := tc.param("kv_start")
	kvLen, ok2 := tc.param("kv_len")
	if ok1 && ok2 {
		switch {
		case kvLen <= 0:
			tc.fail(CodeKVBounds, k, "kv_len=%d must be positive", kvLen)
		case kvStart < 0:
			tc.fail(CodeKVBounds, k, "kv_start=%d must be >= 0", kvStart)
		case kvStart+kvLen > maxSeq:
			tc.fail(CodeKVBounds, k, "KV window [%d, %d) exceeds the %d rows of KV cache #%d ('%s')", kvStart, kvStart+kvLen, maxSeq, k.ID, k.Name)
		}
	}
	if off, cnt, sliced := attentionSlice(tc.t, nkv); sliced && (off < 0 || cnt <= 0 || off+cnt > nkv) {
		tc.fail(CodeTileBounds, o, "KV-head slice n_off=%d N_tile=%d outside the %d KV heads", off, cnt, nkv)
	}
	want := batch * nh * hd
	if flags, ok := tc.param("flags"); ok && flags&ir.FlagPartialWrite != 0 {
		want = batch * nh * (hd + 2) // [n_heads, hd+2], or [B, n_heads, hd+2] for a batch
	}
	if numel(o) != want {
		tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements, expected %d", o.ID, o.Name, numel(o), want)
	}
}

func batchPrefix(qRank int, batch int64) string {
	if qRank == 3 {
		return "B=" + itoa(batch) + ", "
	}
	return ""
}

// combine checks ATTENTION_COMBINE over flash partials [n_heads, hd+2] (or
// a batch's [B, n_heads, hd+2]): all partials the same size, a whole number
// of sequences, and the output B x n_heads x hd.
func (tc *taskCheck) combine() {
	o := tc.out[0]
	first := tc.in[0]
	for _, part := range tc.in[1:] {
		if numel(part) != numel(first) {
			tc.fail(CodeShapeMismatch, part, "partial #%d ('%s') has %d elements but partial #%d ('%s') has %d", part.ID, part.Name, numel(part), first.ID, first.Name, numel(first))
			return
		}
	}
	var nh, hd int64
	if h, ok := tc.param("head_dim"); ok {
		hd = h
		if hd <= 0 {
			tc.fail(CodeShapeMismatch, first, "head_dim=%d must be positive", hd)
			return
		}
		if n, ok := tc.param("n_heads"); ok {
			nh = n
		} else {
			nh = numel(first) / (hd + 2)
		}
		if nh <= 0 || numel(first) == 0 || numel(first)%(nh*(hd+2)) != 0 {
			tc.fail(CodeShapeMismatch, first, "partial #%d ('%s') has %d elements, expected n_heads=%d x (head_dim+2=%d) per sequence", first.ID, first.Name, numel(first), nh, hd+2)
			return
		}
		nh = numel(first) / (hd + 2) // every sequence's heads
	} else {
		cols := dim(first, -1)
		if cols <= 2 {
			tc.fail(CodeShapeMismatch, first, "partial #%d ('%s') has shape %s; a flash partial is [n_heads, head_dim+2]", first.ID, first.Name, pyInts(first.Shape))
			return
		}
		nh, hd = rowsOf(first), cols-2
	}
	if numel(o) != nh*hd {
		tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements, expected B x n_heads x head_dim = %d", o.ID, o.Name, numel(o), nh*hd)
	}
}

// elementwise checks the sizes amk's VM and kernels compute with (the
// reference's torch ops broadcast more freely): a one-input op (COPY,
// GELU, SOFTMAX, MUL by params.scale) writes as many elements as it reads;
// a two-input op (ADD, MUL, SILU_MUL) takes operands of one size, or whose
// smaller shape (leading 1s dropped) is a suffix of the larger's, and
// writes the larger's size (SILU_MUL: equal sizes only); ALLREDUCE_SHARD's
// shards and output all have one size. SOFTMAX's dim lies within x's rank.
func (tc *taskCheck) elementwise() {
	o, x := tc.out[0], tc.in[0]
	switch {
	case len(tc.in) == 1:
		if numel(x) != numel(o) {
			tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements but input #%d ('%s') has %d", o.ID, o.Name, numel(o), x.ID, x.Name, numel(x))
		}
		if d, ok := tc.param("dim"); ok && tc.t.Op == ir.OpSOFTMAX {
			if rank := int64(max(len(x.Shape), 1)); d < -rank || d >= rank {
				tc.fail(CodeShapeMismatch, x, "dim=%d outside the %d dimension(s) of input #%d ('%s')", d, rank, x.ID, x.Name)
			}
		}
	case tc.t.Op == ir.OpAllreduceShard:
		for _, shard := range tc.in {
			if numel(shard) != numel(o) {
				tc.fail(CodeShapeMismatch, shard, "shard #%d ('%s') has %d elements but output #%d ('%s') has %d", shard.ID, shard.Name, numel(shard), o.ID, o.Name, numel(o))
			}
		}
	default:
		a, b := tc.in[0], tc.in[1]
		n, ok := suffixBroadcast(a, b)
		switch {
		case !ok || (tc.t.Op == ir.OpSiLUMul && numel(a) != numel(b)):
			tc.fail(CodeShapeMismatch, b, "inputs #%d ('%s') shape %s and #%d ('%s') shape %s do not combine (equal sizes, or the smaller's shape without leading 1s a suffix of the larger's; SILU_MUL: equal sizes)", a.ID, a.Name, pyInts(a.Shape), b.ID, b.Name, pyInts(b.Shape))
		case numel(o) != n:
			tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements, the result has %d", o.ID, o.Name, numel(o), n)
		}
	}
}

// suffixBroadcast is the VM's pairing of two operands: equal sizes, or the
// smaller's shape, leading 1s dropped, a suffix of the larger's (it then
// repeats); n is the larger size.
func suffixBroadcast(a, b *ir.Buffer) (n int64, ok bool) {
	na, nb := numel(a), numel(b)
	if na == nb {
		return na, true
	}
	big, small := a, b
	if nb > na {
		big, small = b, a
	}
	ss := small.Shape
	for len(ss) > 0 && ss[0] == 1 {
		ss = ss[1:]
	}
	if numel(small) <= 0 || len(ss) > len(big.Shape) {
		return 0, false
	}
	for i := 1; i <= len(ss); i++ {
		if ss[len(ss)-i] != big.Shape[len(big.Shape)-i] {
			return 0, false
		}
	}
	return numel(big), true
}

// argmax checks one output element per row of the logits.
func (tc *taskCheck) argmax() {
	x, o := tc.in[0], tc.out[0]
	if want := rowsOf(x); numel(o) != want {
		tc.fail(CodeShapeMismatch, o, "output #%d ('%s') has %d elements, expected %d (one per row of input #%d)", o.ID, o.Name, numel(o), want, x.ID)
	}
}
