package validate

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/amk-dev/amk/ir"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// checkCoverage is docs/spec/rules.md R19's coverage rule: when every writer of a buffer that is
// read (or is a model output) is a GEMV/GEMM tile, the tiles must cover each
// element exactly once — their row bands partition the rows, and within each
// band the column ranges partition the columns. Buffers with a whole-buffer
// writer are covered by it; tiles out of bounds were reported by checkBounds
// and are skipped here.
func (c *checker) checkCoverage() {
	p := c.p
	read := make([]bool, len(p.Buffers))
	for i := range p.Tasks {
		for _, b := range p.Tasks[i].Inputs {
			if b >= 0 && b < len(read) {
				read[b] = true
			}
		}
	}
	for bid := range p.Buffers {
		buf := &p.Buffers[bid]
		ws := c.writers[bid]
		if len(ws) == 0 || (!read[bid] && buf.Kind != ir.IOOutput) {
			continue
		}
		c.coverBuffer(buf, ws)
	}
}

// tile is one writer's footprint, normalised to explicit row bounds.
type tile struct {
	task       int32
	rows, cols span
}

func (c *checker) coverBuffer(buf *ir.Buffer, ws []int32) {
	cols, rows := dim(buf, -1), rowsOf(buf)
	if v := c.region(ws[0]).view; v > 0 {
		cols, rows = v, numel(buf)/v
	}
	if cols <= 0 || rows <= 0 {
		return
	}
	if buf.Kind == ir.KVCache {
		c.coverCacheRow(buf, ws)
		return
	}
	tiles := c.tileScratch[:0]
	defer func() { c.tileScratch = tiles[:0] }()
	var parts [2]region
	for _, w := range ws {
		if c.region(w).whole {
			return // a whole-buffer writer covers it (or the tile's offsets were reported)
		}
		for _, r := range c.region(w).parts(parts[:0]) { // a paired tile: both ranges
			if r.rows.all {
				r.rows = span{lo: 0, hi: rows}
			}
			if r.cols.all {
				r.cols = span{lo: 0, hi: cols}
			}
			if r.cols.hi > cols || r.rows.hi > rows {
				return // out of bounds, reported by checkBounds
			}
			tiles = append(tiles, tile{task: w, rows: r.rows, cols: r.cols})
		}
	}
	slices.SortStableFunc(tiles, func(a, b tile) int {
		if d := cmpInt64(a.rows.lo, b.rows.lo); d != 0 {
			return d
		}
		if d := cmpInt64(a.rows.hi, b.rows.hi); d != 0 {
			return d
		}
		return cmpInt64(a.cols.lo, b.cols.lo)
	})
	// Walk the row bands in order; each band must start where the last ended.
	next := int64(0)
	for start := 0; start < len(tiles); {
		band := tiles[start].rows
		end := start
		for end < len(tiles) && tiles[end].rows == band {
			end++
		}
		switch {
		case band.lo > next:
			c.coverageGap(buf, span{lo: next, hi: band.lo}, span{lo: 0, hi: cols}, rows)
			return
		case band.lo < next:
			c.errf(CodeTileCoverage, int(tiles[start].task), buf.ID, -1, "tiles writing buffer #%d ('%s') cover rows [%d, %d) more than once (tiles must cover every column exactly once)",
				buf.ID, buf.Name, band.lo, min(next, band.hi))
			return
		}
		if !c.coverBand(buf, tiles[start:end], cols, rows) {
			return
		}
		next = band.hi
		start = end
	}
	if next < rows {
		c.coverageGap(buf, span{lo: next, hi: rows}, span{lo: 0, hi: cols}, rows)
	}
}

// coverBand checks that the column ranges of one row band (sorted) partition
// [0, cols).
func (c *checker) coverBand(buf *ir.Buffer, band []tile, cols, rows int64) bool {
	next := int64(0)
	for k, t := range band {
		switch {
		case t.cols.lo > next:
			c.coverageGap(buf, t.rows, span{lo: next, hi: t.cols.lo}, rows)
			return false
		case t.cols.lo < next:
			c.coverageOverlap(buf, band[k-1], t, rows)
			return false
		}
		next = t.cols.hi
	}
	if next < cols {
		c.coverageGap(buf, band[0].rows, span{lo: next, hi: cols}, rows)
		return false
	}
	return true
}

func (c *checker) coverageGap(buf *ir.Buffer, rows, cols span, nrows int64) {
	c.errf(CodeTileCoverage, -1, buf.ID, -1, "tiles writing buffer #%d ('%s') leave %scolumns [%d, %d) unwritten (tiles must cover every column exactly once)",
		buf.ID, buf.Name, rowText(rows, nrows), cols.lo, cols.hi)
}

func (c *checker) coverageOverlap(buf *ir.Buffer, a, b tile, nrows int64) {
	lo, hi := max(a.cols.lo, b.cols.lo), min(a.cols.hi, b.cols.hi)
	rows := span{lo: max(a.rows.lo, b.rows.lo), hi: min(a.rows.hi, b.rows.hi)}
	ta, tb := &c.p.Tasks[a.task], &c.p.Tasks[b.task]
	c.errf(CodeTileCoverage, int(b.task), buf.ID, -1, "tiles %d ('%s') and %d ('%s') both write %scolumns [%d, %d) of buffer #%d ('%s') (tiles must cover every column exactly once)",
		ta.ID, ta.Label, tb.ID, tb.Label, rowText(rows, nrows), lo, hi, buf.ID, buf.Name)
}

// rowText names a row range unless it is every row.
func rowText(rows span, nrows int64) string {
	if rows.lo == 0 && rows.hi == nrows {
		return ""
	}
	return fmt.Sprintf("rows [%d, %d) ", rows.lo, rows.hi)
}

// coverCacheRow is coverage for a KV cache written by fused append tiles:
// the rows of earlier steps are state, so the tiles must cover exactly one
// position's row (n_kv x head_dim values) of every sequence, once.
func (c *checker) coverCacheRow(buf *ir.Buffer, ws []int32) {
	row := dim(buf, -2) * dim(buf, -1)
	spans := make([]span, 0, len(ws))
	var parts [2]region
	for _, w := range ws {
		r := c.region(w)
		if r.whole || r.view != c.region(ws[0]).view {
			return // a whole-cache writer (KV_APPEND) or mixed views: the race check decides
		}
		for _, p := range r.parts(parts[:0]) { // a paired tile: both ranges
			spans = append(spans, p.cols)
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmpInt64(a.lo, b.lo) })
	lo := spans[0].lo - spans[0].lo%max(row, 1)
	next := lo
	for _, sp := range spans {
		if sp.lo != next {
			c.errf(CodeTileCoverage, -1, buf.ID, -1, "append tiles writing KV cache #%d ('%s') do not cover its row [%d, %d) exactly once (break at %d)",
				buf.ID, buf.Name, lo, lo+row, min(sp.lo, next))
			return
		}
		next = sp.hi
	}
	if next != lo+row {
		c.errf(CodeTileCoverage, -1, buf.ID, -1, "append tiles writing KV cache #%d ('%s') cover [%d, %d), not its row [%d, %d)",
			buf.ID, buf.Name, lo, next, lo, lo+row)
	}
}
