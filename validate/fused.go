package validate

import "github.com/amk-dev/amk/ir"

// fused checks a FUSED task that names an ir.FusedPattern: every input
// plays its role (float activations, a float [N, K] weight, an RMSNorm
// weight of hidden values, a residual the size of the output, integer
// positions; an append's output is a KV cache), the tile lies inside the
// projection and the weight, a RoPE epilogue's tile is whole heads (the
// rotation pairs column i with i + head_dim/2, so a tile that cuts a head
// would rotate values outside its tile), and an append writes one row of
// the cache at a position inside it.
func (tc *taskCheck) fused(pat ir.FusedPattern) {
	role := func(r string) *ir.Buffer {
		if i := pat.Role(r); i >= 0 {
			return tc.in[i]
		}
		return nil
	}
	x := role(ir.RoleX)
	if x == nil {
		x = role(ir.RoleGate)
	}
	w, o := role(ir.RoleW), tc.out[0]
	for _, a := range []*ir.Buffer{x, role(ir.RoleUp), role(ir.RoleResidual)} {
		if a != nil && !a.DType.IsFloat() {
			tc.fail(CodeDTypeMismatch, a, "input #%d ('%s') has dtype %s; pattern %s reads floating-point activations", a.ID, a.Name, a.DType, pat.Name)
		}
	}
	_, si, quant := ir.TileQuant(tc.t)
	if !(w.DType.IsFloat() || quant) || w.Kind != ir.Weight || len(w.Shape) != 2 {
		tc.fail(CodeFusedPattern, w, "input #%d ('%s') must be a floating-point (or, with qdtype, quantised) [N, K] WEIGHT for pattern %s (got %s %s %s)", w.ID, w.Name, pat.Name, w.Kind, w.DType, pyInts(w.Shape))
		return
	}
	if up := role(ir.RoleUp); up != nil && numel(up) != numel(x) {
		tc.fail(CodeShapeMismatch, up, "up #%d ('%s') has %d elements, gate #%d has %d", up.ID, up.Name, numel(up), x.ID, numel(x))
	}
	k, ok := tc.param("K")
	if !ok || k <= 0 || k != dim(x, -1) || k != dim(w, -1) {
		tc.fail(CodeBadK, x, "K=%d must equal the last dimension of input #%d ('%s', %d) and of weight #%d ('%s', %d)", k, x.ID, x.Name, dim(x, -1), w.ID, w.Name, dim(w, -1))
		return
	}
	if nw := role(ir.RoleNormW); nw != nil {
		if h, ok := tc.param("hidden"); ok && (h != k || numel(nw) != h) {
			tc.fail(CodeShapeMismatch, nw, "hidden=%d must equal K=%d and the %d elements of norm weight #%d ('%s')", h, k, numel(nw), nw.ID, nw.Name)
		}
	}
	if p := role(ir.RolePos); p != nil && !isIndexType(p.DType) {
		tc.fail(CodeDTypeMismatch, p, "positions #%d ('%s') have dtype %s; they must be an integer type", p.ID, p.Name, p.DType)
	}
	m := numel(x) / k
	n := tc.projectionWidth(pat, o, m)
	if n <= 0 {
		return
	}
	nOff, ok1 := tc.param("n_off")
	nTile, ok2 := tc.param("N_tile")
	if !ok1 || !ok2 {
		return
	}
	if nOff < 0 || nTile <= 0 {
		tc.fail(CodeTileBounds, o, "tile n_off=%d N_tile=%d is not a column range", nOff, nTile)
		return
	}
	hd, hasHD := tc.param("head_dim")
	rope := pat.Epilogue == ir.EpilogueRoPE || pat.Epilogue == ir.EpilogueRoPEAppend
	last := nOff + nTile // one past the tile's last column
	if flags, _ := tc.param("flags"); flags&ir.FlagPairedTile != 0 {
		if !tc.pairedTile(pat, o, nOff, nTile, hd, hasHD) {
			return
		}
		last = nOff + hd/2 + nTile/2
		rope = false // a paired tile holds every rotation pair of its columns
	}
	switch {
	case last > n:
		tc.fail(CodeTileBounds, o, "tile columns [%d, %d) exceed the %d columns of the projection writing #%d ('%s')", nOff, last, n, o.ID, o.Name)
		return
	case last > dim(w, 0):
		tc.fail(CodeTileBounds, w, "tile columns [%d, %d) exceed the %d rows of weight #%d ('%s')", nOff, last, dim(w, 0), w.ID, w.Name)
		return
	}
	if quant {
		tc.quantScales(w, tc.in[si], k, last)
	}
	if rope && hasHD && (hd <= 0 || hd%2 != 0 || nOff%hd != 0 || nTile%hd != 0) {
		tc.fail(CodeTileBounds, o, "RoPE epilogue of tile [%d, %d) needs whole heads of an even head_dim=%d, or a paired tile (it would rotate columns outside its tile)", nOff, nOff+nTile, hd)
	}
	if pat.Epilogue == ir.EpilogueRoPE || pat.Epilogue == ir.EpilogueRoPEAppend {
		if p := role(ir.RolePos); numel(p) != 1 && numel(p) != m {
			tc.fail(CodeShapeMismatch, p, "positions #%d ('%s') hold %d entries for %d rows", p.ID, p.Name, numel(p), m)
		}
	}
}

// pairedTile checks a paired tile's shape (ir.PairStride): a pattern with
// head_dim, an even head_dim and N_tile, and two ranges of N_tile/2
// columns inside one head, the first in its first half (so the second,
// head_dim/2 further, is its rotation partners in the second half).
func (tc *taskCheck) pairedTile(pat ir.FusedPattern, o *ir.Buffer, nOff, nTile, hd int64, hasHD bool) bool {
	switch {
	case !pat.Paired():
		tc.fail(CodeFusedPattern, o, "pattern %s cannot be a paired tile (params.flags bit %d): only the q/k/v patterns, which carry head_dim, can", pat.Name, ir.FlagPairedTile)
		return false
	case !hasHD || hd <= 0 || hd%2 != 0 || nTile%2 != 0:
		tc.fail(CodeTileBounds, o, "paired tile n_off=%d N_tile=%d needs an even N_tile and an even head_dim (got %d)", nOff, nTile, hd)
		return false
	case nOff%hd+nTile/2 > hd/2:
		tc.fail(CodeTileBounds, o, "paired tile [%d, %d) + %d is not inside the first half of one head of head_dim %d (its second range would cut rotation pairs)", nOff, nOff+nTile/2, hd/2, hd)
		return false
	}
	return true
}

// projectionWidth is N for the tile's bounds: the output viewed as [m, N],
// or params.N for a cache-writing pattern, whose output must be a KV cache
// of m sequences, rows of N values and the position; 0 after a reported
// problem.
func (tc *taskCheck) projectionWidth(pat ir.FusedPattern, o *ir.Buffer, m int64) int64 {
	if !pat.WritesCache() {
		if res := tc.in[max(pat.Role(ir.RoleResidual), 0)]; pat.Role(ir.RoleResidual) >= 0 && numel(res) != numel(o) {
			tc.fail(CodeShapeMismatch, res, "residual #%d ('%s') has %d elements, output #%d ('%s') %d", res.ID, res.Name, numel(res), o.ID, o.Name, numel(o))
		}
		if m <= 0 || numel(o)%m != 0 {
			tc.fail(CodeShapeMismatch, o, "output #%d ('%s') of %d elements is not %d rows", o.ID, o.Name, numel(o), m)
			return 0
		}
		return numel(o) / m
	}
	if o.Kind != ir.KVCache {
		tc.fail(CodeFusedPattern, o, "pattern %s appends to a KV cache: output #%d ('%s') is a %s buffer", pat.Name, o.ID, o.Name, o.Kind)
		return 0
	}
	rank := len(o.Shape)
	batch := int64(1)
	if rank == 4 {
		batch = dim(o, 0)
	}
	n, ok := tc.param("N")
	row := dim(o, -2) * dim(o, -1)
	switch {
	case rank != 3 && rank != 4:
		tc.fail(CodeShapeMismatch, o, "KV cache #%d ('%s') has shape %s; expected [max_seq, n_kv, head_dim] or [B, max_seq, n_kv, head_dim]", o.ID, o.Name, pyInts(o.Shape))
		return 0
	case !ok || n != row:
		tc.fail(CodeShapeMismatch, o, "N=%d must equal a row (n_kv x head_dim = %d) of KV cache #%d ('%s')", n, row, o.ID, o.Name)
		return 0
	case batch != m:
		tc.fail(CodeShapeMismatch, o, "KV cache #%d ('%s') holds %d sequences, the tile reads %d rows", o.ID, o.Name, batch, m)
		return 0
	}
	if pos, ok := tc.param("pos"); ok && (pos < 0 || pos >= dim(o, -3)) {
		tc.fail(CodeKVPos, o, "pos=%d outside [0, %d) of KV cache #%d ('%s')", pos, dim(o, -3), o.ID, o.Name)
		return 0
	}
	return n
}
