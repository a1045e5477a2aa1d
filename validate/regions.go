package validate

import (
	"slices"

	"github.com/amk-dev/amk/ir"
)

// span is a half-open interval [lo, hi); all marks an unbounded one.
type span struct {
	lo, hi int64
	all    bool
}

func (a span) overlaps(b span) bool { return a.all || b.all || (a.lo < b.hi && b.lo < a.hi) }

// region is the footprint a writer covers in its output: rows x cols of
// the output viewed as rows of width view (0: its natural [rows, last dim]
// view), and with pair > 0 (a paired tile, ir.PairStride) also the columns
// cols shifted by pair. whole marks a writer that covers the whole buffer
// (every non-tile op, or a tile whose offsets are unusable), which overlaps
// everything.
type region struct {
	rows, cols span
	view       int64
	pair       int64
	whole      bool
}

// parts appends the region's contiguous parts to dst: itself, or a paired
// tile's two column ranges.
func (a region) parts(dst []region) []region {
	if a.pair <= 0 || a.whole || a.cols.all {
		return append(dst, a)
	}
	b := a
	b.cols = span{lo: a.cols.lo + a.pair, hi: a.cols.hi + a.pair}
	a.pair, b.pair = 0, 0
	return append(dst, a, b)
}

// splitParts is regs with every paired region split into its parts (regs
// itself when none is paired).
func splitParts(regs []region) []region {
	for _, r := range regs {
		if r.pair > 0 {
			out := make([]region, 0, len(regs)+len(regs)/2)
			for _, x := range regs {
				out = x.parts(out)
			}
			return out
		}
	}
	return regs
}

func (a region) disjoint(b region) bool {
	if a.whole || b.whole || a.view != b.view {
		return false
	}
	if a.pair > 0 || b.pair > 0 {
		var pa, pb [2]region
		for _, x := range a.parts(pa[:0]) {
			for _, y := range b.parts(pb[:0]) {
				if !x.disjoint(y) {
					return false
				}
			}
		}
		return true
	}
	return !a.rows.overlaps(b.rows) || !a.cols.overlaps(b.cols)
}

// writeRegion is the reference's footprint of a writer: GEMV/GEMM tiles cover
// columns [n_off, n_off+N_tile) (n_off >= 0, N_tile > 0, else the whole
// buffer); a GEMM tile also covers rows [m_off, m_off+M_tile) when both are
// valid, otherwise all rows. A fused-pattern tile covers the same columns of
// its output viewed as [M, numel/M] rows (M = the staged activation's rows),
// or, writing a KV cache, columns [pos·row + n_off, pos·row + n_off + N_tile)
// of the cache viewed as one row of max_seq·row values per sequence.
func (c *checker) writeRegion(t *ir.Task) region {
	pat, fused := ir.FusedPatternByID(ir.TaskFusedPattern(t))
	if t.Op == ir.OpAttentionTile {
		return c.attentionRegion(t)
	}
	if t.Op != ir.OpGEMVTile && t.Op != ir.OpGEMMTile && !fused {
		return region{whole: true}
	}
	nOff, ok1 := paramInt(t, "n_off")
	nTile, ok2 := paramInt(t, "N_tile")
	if !ok1 || !ok2 || nOff < 0 || nTile <= 0 || nOff > maxInt64-nTile {
		return region{whole: true}
	}
	r := region{rows: span{all: true}, cols: span{lo: nOff, hi: nOff + nTile}}
	if fused {
		if flags, _ := paramInt(t, "flags"); flags&ir.FlagPairedTile != 0 {
			// A paired tile: N_tile/2 columns at n_off and at n_off + stride.
			stride := ir.PairStride(t.Params)
			if stride <= 0 || nTile%2 != 0 || nOff > maxInt64-stride-nTile {
				return region{whole: true}
			}
			r.cols.hi, r.pair = nOff+nTile/2, stride
		}
		return c.fusedRegion(t, pat, r)
	}
	if t.Op == ir.OpGEMMTile {
		mOff, ok1 := paramInt(t, "m_off")
		mTile, ok2 := paramInt(t, "M_tile")
		if ok1 && ok2 && mOff >= 0 && mTile > 0 && mOff <= maxInt64-mTile {
			r.rows = span{lo: mOff, hi: mOff + mTile}
		}
	}
	return r
}

// fusedRegion places a fused tile's columns r in its output's view.
func (c *checker) fusedRegion(t *ir.Task, pat ir.FusedPattern, r region) region {
	if len(t.Outputs) != 1 || len(t.Inputs) != pat.TaskArity(t) {
		return region{whole: true}
	}
	out := c.buffer(t.Outputs[0])
	if out == nil {
		return region{whole: true}
	}
	if !pat.WritesCache() {
		rows := c.stagedRows(t, pat)
		if rows <= 0 || numel(out)%rows != 0 {
			return region{whole: true}
		}
		r.view = numel(out) / rows
		return r
	}
	rank := len(out.Shape)
	pos, ok := paramInt(t, "pos")
	if (rank != 3 && rank != 4) || !ok || pos < 0 || pos >= dim(out, -3) {
		return region{whole: true}
	}
	row := dim(out, -2) * dim(out, -1)
	r.view = dim(out, -3) * row
	r.cols = span{lo: pos*row + r.cols.lo, hi: pos*row + r.cols.hi}
	return r
}

// attentionSlice reads an ATTENTION_TILE's KV-head slice (params n_off,
// N_tile); sliced is false when the task covers every KV head.
func attentionSlice(t *ir.Task, nkv int64) (off, cnt int64, sliced bool) {
	o, ok1 := paramInt(t, "n_off")
	n, ok2 := paramInt(t, "N_tile")
	if !ok1 && !ok2 {
		return 0, nkv, false
	}
	if !ok1 {
		o = 0
	}
	if !ok2 {
		n = nkv - o
	}
	return o, n, true
}

// attentionRegion is a KV-head slice's footprint: the query heads of its
// KV heads, i.e. columns [h0·hd, h1·hd) of a [B, n_heads·hd] output, rows
// [h0, h1) of a [n_heads, hd+2] flash partial (both natural views), or
// columns [h0·(hd+2), h1·(hd+2)) of a batch's [B, n_heads, hd+2] partials
// viewed as rows of n_heads·(hd+2). A task
// over every KV head covers its whole output.
func (c *checker) attentionRegion(t *ir.Task) region {
	hd, ok1 := paramInt(t, "head_dim")
	nh, ok2 := paramInt(t, "n_heads")
	nkv, ok3 := paramInt(t, "n_kv_heads")
	if !ok1 || !ok2 || !ok3 || hd <= 0 || nkv <= 0 || nh%nkv != 0 || len(t.Outputs) != 1 {
		return region{whole: true}
	}
	off, cnt, sliced := attentionSlice(t, nkv)
	if !sliced || off < 0 || cnt <= 0 || off+cnt > nkv {
		return region{whole: true}
	}
	rep := nh / nkv
	h0, h1 := off*rep, (off+cnt)*rep
	if flags, ok := paramInt(t, "flags"); ok && flags&ir.FlagPartialWrite != 0 {
		if out := c.buffer(t.Outputs[0]); out != nil && len(out.Shape) == 3 {
			// a batch's partials [B, n_heads, hd+2]: the same heads of every sequence
			w := hd + 2
			return region{rows: span{all: true}, cols: span{lo: h0 * w, hi: h1 * w}, view: nh * w}
		}
		return region{rows: span{lo: h0, hi: h1}, cols: span{all: true}}
	}
	out := c.buffer(t.Outputs[0])
	if out == nil || dim(out, -1) != nh*hd {
		return region{whole: true}
	}
	return region{rows: span{all: true}, cols: span{lo: h0 * hd, hi: h1 * hd}}
}

// readSlice is the part of input slot in that task t reads when it reads
// only a part of it: columns cols of every row of width width of the
// buffer. An ATTENTION_TILE over a KV-head slice (n_off, N_tile) reads the
// columns of its query heads in q (rows of n_heads·head_dim) and those of
// its KV heads in every cache row (rows of n_kv_heads·head_dim); ok is
// false for a whole read (every other task and input, or unusable params).
func (c *checker) readSlice(t *ir.Task, in int) (width int64, cols span, ok bool) {
	if t.Op != ir.OpAttentionTile || in < 0 || in > 2 || in >= len(t.Inputs) {
		return 0, span{}, false
	}
	hd, ok1 := paramInt(t, "head_dim")
	nh, ok2 := paramInt(t, "n_heads")
	nkv, ok3 := paramInt(t, "n_kv_heads")
	buf := c.buffer(t.Inputs[in])
	if !ok1 || !ok2 || !ok3 || hd <= 0 || nkv <= 0 || nh%nkv != 0 || buf == nil || dim(buf, -1) != hd {
		return 0, span{}, false
	}
	off, cnt, sliced := attentionSlice(t, nkv)
	if !sliced || off < 0 || cnt <= 0 || off+cnt > nkv {
		return 0, span{}, false
	}
	heads, unit := nkv, hd // a cache row
	if in == 0 {
		heads, unit = nh, nh/nkv*hd // q: a GQA group's query heads per KV head
	}
	if dim(buf, -2) != heads {
		return 0, span{}, false
	}
	return heads * hd, span{lo: off * unit, hi: (off + cnt) * unit}, true
}

// mayTouch reports whether writer footprint r can meet columns cols of a
// row of width w of buf. r is placed on those rows when its own row width
// (its view, or buf's last dimension) is a multiple of w and its columns
// stay inside one such row; any other footprint counts as touching (the
// answer errs on the side of demanding a wait, never of dropping one). A
// paired tile touches when either of its parts does.
func (r region) mayTouch(buf *ir.Buffer, w int64, cols span) bool {
	if r.whole || r.cols.all || w <= 0 {
		return true
	}
	if r.pair > 0 {
		var ps [2]region
		for _, x := range r.parts(ps[:0]) {
			if x.mayTouch(buf, w, cols) {
				return true
			}
		}
		return false
	}
	rw := r.view
	if rw == 0 {
		rw = dim(buf, -1)
	}
	if rw <= 0 || rw%w != 0 || r.cols.lo < 0 || r.cols.hi <= r.cols.lo {
		return true
	}
	base := r.cols.lo / w * w
	if r.cols.hi-base > w {
		return true
	}
	return span{lo: r.cols.lo - base, hi: r.cols.hi - base}.overlaps(cols)
}

// touching keeps the writers of buf whose footprints may meet the columns
// cols of its rows of width w (readSlice); ws itself when all of them may.
func (c *checker) touching(ws []int32, buf *ir.Buffer, w int64, cols span) []int32 {
	for k, x := range ws {
		if c.region(x).mayTouch(buf, w, cols) {
			continue
		}
		out := append(make([]int32, 0, len(ws)-1), ws[:k]...)
		for _, y := range ws[k+1:] {
			if c.region(y).mayTouch(buf, w, cols) {
				out = append(out, y)
			}
		}
		return out
	}
	return ws
}

// stagedRows is M, the rows of the activation a fused tile reads (x or
// gate viewed as [M, K]); 0 when K is unusable.
func (c *checker) stagedRows(t *ir.Task, pat ir.FusedPattern) int64 {
	k, ok := paramInt(t, "K")
	role := pat.Role(ir.RoleX)
	if role < 0 {
		role = pat.Role(ir.RoleGate)
	}
	x := c.buffer(t.Inputs[role])
	if !ok || k <= 0 || x == nil || numel(x)%k != 0 {
		return 0
	}
	return numel(x) / k
}

const maxInt64 = int64(^uint64(0) >> 1)

// region returns task i's write footprint, computed once per run.
func (c *checker) region(i int32) region {
	if c.regions == nil {
		c.regions = make([]region, len(c.p.Tasks))
		c.regionOK = make([]bool, len(c.p.Tasks))
	}
	if !c.regionOK[i] {
		c.regions[i] = c.writeRegion(&c.p.Tasks[i])
		c.regionOK[i] = true
	}
	return c.regions[i]
}

// pairwiseDisjoint reports whether no two regions overlap. Regions are grouped by
// identical row span; within a group column spans are compared after a sort,
// across groups with overlapping rows by a merge, so the common cases cost
// O(k log k).
func pairwiseDisjoint(regs []region) bool {
	regs = splitParts(regs)
	sameRows, sorted := true, true
	for i, r := range regs {
		if (r.whole || r.view != regs[0].view) && len(regs) > 1 {
			return false
		}
		if i > 0 {
			sameRows = sameRows && r.rows == regs[0].rows
			sorted = sorted && r.cols.lo >= regs[i-1].cols.lo
		}
	}
	if sameRows && sorted { // the lowering's tiles: one row span, ascending n_off
		for i := 1; i < len(regs); i++ {
			if regs[i-1].cols.hi > regs[i].cols.lo {
				return false
			}
		}
		return true
	}
	type group struct {
		rows span
		idx  []int // positions, sorted by column start
	}
	var groups []group
	byRows := map[span]int{}
	for i, r := range regs {
		g, seen := byRows[r.rows]
		if !seen {
			g = len(groups)
			byRows[r.rows] = g
			groups = append(groups, group{rows: r.rows})
		}
		groups[g].idx = append(groups[g].idx, i)
	}
	for gi := range groups {
		idx := groups[gi].idx
		slices.SortFunc(idx, func(x, y int) int { return cmpInt64(regs[x].cols.lo, regs[y].cols.lo) })
		for k := 1; k < len(idx); k++ {
			if regs[idx[k-1]].cols.hi > regs[idx[k]].cols.lo {
				return false
			}
		}
	}
	// Groups in row order (the all-rows group first): a group can only
	// overlap the following groups that start before it ends.
	slices.SortFunc(groups, func(x, y group) int {
		if x.rows.all != y.rows.all {
			if x.rows.all {
				return -1
			}
			return 1
		}
		return cmpInt64(x.rows.lo, y.rows.lo)
	})
	for gi := range groups {
		for gj := gi + 1; gj < len(groups); gj++ {
			if !groups[gi].rows.all && groups[gj].rows.lo >= groups[gi].rows.hi {
				break
			}
			if !groups[gi].rows.overlaps(groups[gj].rows) {
				continue
			}
			if mergeOverlap(regs, groups[gi].idx, groups[gj].idx) {
				return false
			}
		}
	}
	return true
}

// mergeOverlap finds two column spans, one from each sorted list, that overlap.
func mergeOverlap(regs []region, xs, ys []int) bool {
	i, j := 0, 0
	for i < len(xs) && j < len(ys) {
		a, b := regs[xs[i]].cols, regs[ys[j]].cols
		if a.overlaps(b) {
			return true
		}
		if a.hi <= b.lo {
			i++
		} else {
			j++
		}
	}
	return false
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
