package vm

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// pairedCase is one RoPE(+append) projection run tile by tile.
type pairedCase struct {
	hd, heads, K int
}

// runTiles runs pattern pat over the projection in the given tiles
// (n_off, N_tile, paired) and returns the output.
func (c pairedCase) runTiles(t *testing.T, pat int, tiles [][3]int) *tensor.Tensor {
	t.Helper()
	N := c.hd * c.heads
	x := ft(t, ir.BF16, shp(1, c.K), wave(c.K, 1.1)...)
	w := ft(t, ir.BF16, shp(N, c.K), wave(N*c.K, 0.3)...)
	pos := it(t, ir.I32, shp(1), 7)
	var out *tensor.Tensor
	var in []*tensor.Tensor
	extra := []ir.Param{fp("theta", 10000)}
	if pat == ir.FusedGEMVRoPE {
		out, in = tensor.New(ir.BF16, c.heads, c.hd), []*tensor.Tensor{x, w, pos}
	} else {
		out, in = tensor.New(ir.BF16, 4, c.heads, c.hd), []*tensor.Tensor{x, w, pos}
		extra = append(extra, ip("N", int64(N)), ip("pos", 2))
	}
	spec, _ := ir.FusedPatternByID(pat)
	for _, tl := range tiles {
		flags := ir.FusedPatternFlags(pat)
		if tl[2] != 0 {
			flags |= ir.FlagPairedTile
		}
		ps := append(ir.Params{ip("K", int64(c.K)), ip("N_tile", int64(tl[1])), ip("n_off", int64(tl[0])),
			ip("head_dim", int64(c.hd)), ip("flags", flags)}, extra...)
		if err := runPattern(spec, in, []*tensor.Tensor{out}, ps); err != nil {
			t.Fatalf("tile %v: %v", tl, err)
		}
	}
	return out
}

// pairedTiles splits every head into paired tiles of w columns per half.
func (c pairedCase) pairedTiles(w int) [][3]int {
	var ts [][3]int
	for h := 0; h < c.heads; h++ {
		for i := 0; i < c.hd/2; i += w {
			ts = append(ts, [3]int{h*c.hd + i, 2 * min(w, c.hd/2-i), 1})
		}
	}
	return ts
}

// A projection computed in paired tiles (any width, the last of a head
// narrower) equals the same projection in whole-head tiles bit for bit,
// for the RoPE and the RoPE + append epilogues.
func TestPairedTilesEqualWholeHeads(t *testing.T) {
	c := pairedCase{hd: 16, heads: 3, K: 24}
	for _, pat := range []int{ir.FusedGEMVRoPE, ir.FusedGEMVRoPEAppend} {
		whole := c.runTiles(t, pat, [][3]int{{0, c.hd * c.heads, 0}})
		for _, w := range []int{1, 3, 5, 8} {
			got := c.runTiles(t, pat, c.pairedTiles(w))
			same(t, "paired tiles", got.Floats(), whole.Floats())
		}
	}
}

// Malformed paired tiles are errors, never silent writes.
func TestMalformedPairedTilesAreErrors(t *testing.T) {
	c := pairedCase{hd: 16, heads: 2, K: 8}
	x := ft(t, ir.BF16, shp(1, c.K), wave(c.K, 1.1)...)
	w := ft(t, ir.BF16, shp(32, c.K), wave(32*c.K, 0.3)...)
	pos := it(t, ir.I32, shp(1), 7)
	rope, _ := ir.FusedPatternByID(ir.FusedGEMVRoPE)
	add, _ := ir.FusedPatternByID(ir.FusedGEMVAdd)
	paired := func(id int) ir.Param { return ip("flags", ir.FusedPatternFlags(id)|ir.FlagPairedTile) }
	for _, tc := range []struct {
		name string
		pat  ir.FusedPattern
		in   []*tensor.Tensor
		ps   ir.Params
		want string
	}{
		{"first range past the middle of the head", rope, []*tensor.Tensor{x, w, pos},
			ir.Params{ip("K", 8), ip("N_tile", 4), ip("n_off", 7), ip("head_dim", 16), paired(ir.FusedGEMVRoPE)}, "one head"},
		{"odd width", rope, []*tensor.Tensor{x, w, pos},
			ir.Params{ip("K", 8), ip("N_tile", 3), ip("n_off", 0), ip("head_dim", 16), paired(ir.FusedGEMVRoPE)}, "one head"},
		{"a pattern without head_dim", add, []*tensor.Tensor{x, w, tensor.New(ir.BF16, 1, 32)},
			ir.Params{ip("K", 8), ip("N_tile", 4), ip("n_off", 0), paired(ir.FusedGEMVAdd)}, "cannot be a paired tile"},
	} {
		err := runPattern(tc.pat, tc.in, []*tensor.Tensor{tensor.New(ir.BF16, 1, 32)}, tc.ps)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
