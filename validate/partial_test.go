package validate

import (
	"testing"

	"github.com/amk-dev/amk/ir"
)

// splitTiles writes y [1, 8] with two GEMV tiles on two counters, [0, w0)
// and [off1, 8), and a reader that waits for both.
func splitTiles(t *testing.T, w0, off1 int64) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8, 8)
	y := b.buf("y", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, cout := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpGEMVTile, ints(x, w), ints(y), c0, nil, "left", gemvParams(8, w0, 0)...)
	b.task(ir.OpGEMVTile, ints(x, w), ints(y), c1, nil, "right", gemvParams(8, 8-off1, off1)...)
	b.task(ir.OpCOPY, ints(y), ints(o), cout, waits(c0, 1, c1, 1), "reader")
	return b.p
}

// Writers of one buffer whose tiles are disjoint need not share a counter
// (per-KV-head counters give each head group its own); overlapping
// unordered writers are a WAW race whatever their counters.
func TestDisjointWritersOnSeveralCounters(t *testing.T) {
	if rep := Validate(splitTiles(t, 4, 4)); !rep.OK {
		t.Fatalf("disjoint tiles on two counters rejected: %s", rep.Reason(4))
	}
	rep := Validate(splitTiles(t, 6, 4))
	if !rep.Has(CodeRaceWAW) {
		t.Fatalf("overlapping unordered tiles: want %s among %v", CodeRaceWAW, rep.Codes())
	}
}

// mayTouch places a writer's footprint on the rows a partial reader reads,
// and errs towards "touches" whenever it cannot place it.
func TestMayTouch(t *testing.T) {
	cache := &ir.Buffer{Shape: []int{256, 2, 16}} // rows of 2 KV heads x 16
	row := int64(32)
	appendTile := func(pos, off, n int64) region {
		return region{rows: span{all: true}, cols: span{lo: pos*row + off, hi: pos*row + off + n}, view: 256 * row}
	}
	head0, head1 := span{lo: 0, hi: 16}, span{lo: 16, hi: 32}
	cases := []struct {
		name string
		r    region
		cols span
		want bool
	}{
		{"head 1's append vs head 0's reader", appendTile(7, 16, 16), head0, false},
		{"head 1's append vs head 1's reader", appendTile(7, 16, 16), head1, true},
		{"an append across two cache rows", appendTile(7, 16, 32), head0, true},
		{"a whole-buffer writer", region{whole: true}, head0, true},
		{"a view that is no multiple of the row", region{rows: span{all: true}, cols: span{lo: 16, hi: 24}, view: 24}, head0, true},
		{"the natural view (last dim 16) vs rows of 32", region{rows: span{all: true}, cols: span{lo: 0, hi: 8}}, head1, true},
		{"a paired tile of head 0 vs head 1's reader", pairedTile(appendTile(7, 2, 3), 8), head1, false},
		{"a paired tile of head 1 vs head 1's reader", pairedTile(appendTile(7, 18, 3), 8), head1, true},
		{"a paired tile whose second range reaches head 1", pairedTile(appendTile(7, 2, 3), 16), head1, true},
	}
	for _, c := range cases {
		if got := c.r.mayTouch(cache, row, c.cols); got != c.want {
			t.Errorf("%s: mayTouch = %v, want %v", c.name, got, c.want)
		}
	}
}

// pairedTile is r with its columns repeated stride further (a paired tile).
func pairedTile(r region, stride int64) region {
	r.pair = stride
	return r
}

// A paired tile's footprint is its two ranges: tiles whose ranges
// interleave are disjoint, a range meeting another tile's second range is
// not, and a paired tile and a contiguous tile compare the same way.
func TestPairedFootprints(t *testing.T) {
	cols := func(lo, hi int64) region { return region{rows: span{all: true}, cols: span{lo: lo, hi: hi}} }
	// One head of 16 columns in paired tiles of 3 + 3 and 5 + 5 columns.
	a, b := pairedTile(cols(0, 3), 8), pairedTile(cols(3, 8), 8)
	if !a.disjoint(b) || !b.disjoint(a) {
		t.Error("the paired tiles [0,3)+[8,11) and [3,8)+[11,16) overlap")
	}
	if !pairwiseDisjoint([]region{a, b, pairedTile(cols(16, 24), 8)}) {
		t.Error("a head in paired tiles and the next head's paired tile overlap")
	}
	for _, c := range []struct {
		name string
		x, y region
	}{
		{"a shifted paired tile", a, pairedTile(cols(2, 8), 8)},
		{"a contiguous tile over a second range", a, cols(9, 10)},
		{"a paired tile's second range over a contiguous tile", cols(12, 13), b},
	} {
		if c.x.disjoint(c.y) || c.y.disjoint(c.x) || pairwiseDisjoint([]region{c.x, c.y}) {
			t.Errorf("%s: reported disjoint", c.name)
		}
	}
}
