package vm

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// runPattern executes a FUSED task that names an ir.FusedPattern, with the
// numerics the pattern table documents: staging through the unfused op's
// kernel into a scratch of the activation's dtype, the tile's dot products
// in float32 (the one opLinear), then the epilogue. Every step reuses the
// unfused kernels and rounds where the unfused chain stores, so a fused
// program computes its unfused twin's values bit for bit.
//
// A quantised tile (params.qdtype I8/I4, ir.TileQuant) carries its weight's
// scales after the pattern's inputs; its dot products dequantise the
// weight's rows as GEMV_TILE does (the one opLinear).
func runPattern(pat ir.FusedPattern, in, out []*tensor.Tensor, p ir.Params) error {
	_, quant := ir.QuantDTypeOf(p)
	if n := pat.Arity(quant); len(in) != n {
		return fmt.Errorf("%s takes %d inputs %v (+ scales when quantised), got %d", pat.Name, n, pat.Inputs, len(in))
	}
	if len(out) != 1 {
		return fmt.Errorf("%s writes 1 output, got %d", pat.Name, len(out))
	}
	staged, err := stage(pat, in, p)
	if err != nil {
		return err
	}
	K, err := needInt(p, "K")
	if err != nil {
		return err
	}
	nOff, err := needInt(p, "n_off")
	if err != nil {
		return err
	}
	nTile, err := needInt(p, "N_tile")
	if err != nil {
		return err
	}
	if K <= 0 || staged.Numel()%K != 0 {
		return fmt.Errorf("%s: K=%d does not divide the staged activation %v", pat.Name, K, staged.Shape)
	}
	M := staged.Numel() / K
	N, err := projectionWidth(pat, out[0], p, M)
	if err != nil {
		return err
	}
	ranges, err := tileRanges(pat, p, nOff, nTile)
	if err != nil {
		return err
	}
	sums := tensor.New(ir.F32, M, N)
	operands := []*tensor.Tensor{staged, in[pat.Role(ir.RoleW)]}
	if quant {
		operands = append(operands, in[len(pat.Inputs)])
	}
	for _, r := range ranges {
		// One range at a time through the one GEMV kernel (params n_off
		// and N_tile overridden: Params.Get reads the last entry).
		pr := append(p[:len(p):len(p)], ir.IntParam("n_off", r[0]), ir.IntParam("N_tile", r[1]-r[0]))
		if err := opLinear(operands, []*tensor.Tensor{sums}, pr); err != nil {
			return fmt.Errorf("%s: %w", pat.Name, err)
		}
	}
	tile := make([]float32, 0, nTile)
	for m := range M {
		tile = tile[:0]
		for _, r := range ranges {
			tile = append(tile, sums.F[m*N+int(r[0]):m*N+int(r[1])]...)
		}
		if err := epilogue(pat, in, out[0], p, staged.DType, m, M, N, ranges, tile); err != nil {
			return err
		}
	}
	return nil
}

// tileRanges is the tile's column ranges (ir.TileRanges): a paired tile
// (ir.PairStride) must be two equal ranges inside one head, the first in
// its first half, for a pattern that carries head_dim.
func tileRanges(pat ir.FusedPattern, p ir.Params, nOff, nTile int) ([][2]int64, error) {
	stride := ir.PairStride(p)
	if p.IntOr("flags", 0)&ir.FlagPairedTile != 0 {
		hd := int(2 * stride)
		switch {
		case !pat.Paired():
			return nil, fmt.Errorf("%s cannot be a paired tile (no head_dim)", pat.Name)
		case hd <= 0 || p.IntOr("head_dim", 0) != int64(hd) || nTile%2 != 0 || nOff%hd+nTile/2 > hd/2:
			return nil, fmt.Errorf("%s: paired tile n_off=%d N_tile=%d is not two matching ranges in one head of head_dim %d",
				pat.Name, nOff, nTile, p.IntOr("head_dim", 0))
		}
	}
	return ir.TileRanges(int64(nOff), int64(nTile), stride), nil
}

// stage returns the activation the tile's dot products read.
func stage(pat ir.FusedPattern, in []*tensor.Tensor, p ir.Params) (*tensor.Tensor, error) {
	switch pat.Staging {
	case ir.StageRMSNorm:
		x := in[pat.Role(ir.RoleX)]
		s := tensor.New(x.DType, x.Shape...)
		if err := opRMSNorm([]*tensor.Tensor{x, in[pat.Role(ir.RoleNormW)]}, []*tensor.Tensor{s}, p); err != nil {
			return nil, fmt.Errorf("%s staging: %w", pat.Name, err)
		}
		return s, nil
	case ir.StageSiLUMul:
		g := in[pat.Role(ir.RoleGate)]
		s := tensor.New(g.DType, g.Shape...)
		if err := opSiLUMul([]*tensor.Tensor{g, in[pat.Role(ir.RoleUp)]}, []*tensor.Tensor{s}, nil); err != nil {
			return nil, fmt.Errorf("%s staging: %w", pat.Name, err)
		}
		return s, nil
	}
	return in[pat.Role(ir.RoleX)], nil
}

// projectionWidth is N, the full width of the projection the tile belongs
// to: the output viewed as [M, N], or params.N for a cache-writing pattern.
func projectionWidth(pat ir.FusedPattern, out *tensor.Tensor, p ir.Params, M int) (int, error) {
	if pat.WritesCache() {
		N, err := needInt(p, "N")
		if err != nil {
			return 0, err
		}
		if N <= 0 {
			return 0, fmt.Errorf("%s: N=%d must be positive", pat.Name, N)
		}
		return N, nil
	}
	if M <= 0 || out.Numel()%M != 0 {
		return 0, fmt.Errorf("%s: output %v is not %d rows", pat.Name, out.Shape, M)
	}
	return out.Numel() / M, nil
}

// epilogue finishes row m of the tile (float32 sums of its column ranges,
// one after the other) into the output.
func epilogue(pat ir.FusedPattern, in []*tensor.Tensor, out *tensor.Tensor, p ir.Params, act ir.DType, m, M, N int, ranges [][2]int64, tile []float32) error {
	switch pat.Epilogue {
	case ir.EpilogueAdd:
		res, err := inputFloats(in[pat.Role(ir.RoleResidual)])
		if err != nil {
			return err
		}
		if len(res) != M*N {
			return fmt.Errorf("%s: residual holds %d values, want %d×%d", pat.Name, len(res), M, N)
		}
		nOff := int(ranges[0][0])
		for j := range tile {
			tile[j] = tensor.Round(act, tile[j]) + res[m*N+nOff+j]
		}
	case ir.EpilogueRoPE, ir.EpilogueRoPEAppend:
		if err := ropeTile(pat, in, p, act, m, M, ranges, tile); err != nil {
			return err
		}
	case ir.EpilogueAppend:
		for j := range tile {
			tile[j] = tensor.Round(act, tile[j])
		}
	}
	base := m * N
	if pat.WritesCache() {
		off, err := cacheOffset(pat, out, p, m, M, N)
		if err != nil {
			return err
		}
		base = off
	}
	for _, r := range ranges {
		n := int(r[1] - r[0])
		if err := store(out, base+int(r[0]), tile[:n]); err != nil {
			return err
		}
		tile = tile[n:]
	}
	return nil
}

// ropeTile rotates row m of a tile in place: whole heads, or a paired
// tile's two half-head ranges (placed in one head-sized row, so the one
// rotateHalf rotates every pair as the unfused ROPE does).
func ropeTile(pat ir.FusedPattern, in []*tensor.Tensor, p ir.Params, act ir.DType, m, M int, ranges [][2]int64, tile []float32) error {
	hd, err := needInt(p, "head_dim")
	if err != nil {
		return err
	}
	theta, err := floatOr(p, "theta", 10000)
	if err != nil {
		return err
	}
	nOff := int(ranges[0][0])
	if hd <= 0 || hd%2 != 0 || (len(ranges) == 1 && (nOff%hd != 0 || len(tile)%hd != 0)) {
		return fmt.Errorf("%s: tile [%d, %d) is not whole heads of head_dim %d", pat.Name, nOff, nOff+len(tile), hd)
	}
	pos := ints(in[pat.Role(ir.RolePos)])
	if len(pos) != 1 && len(pos) != M {
		return fmt.Errorf("%s: %d positions for %d rows", pat.Name, len(pos), M)
	}
	at := pos[min(m, len(pos)-1)]
	for j := range tile {
		tile[j] = tensor.Round(act, tile[j])
	}
	if len(ranges) == 1 {
		rotated := make([]float32, len(tile))
		rotateHalf(tile, rotated, hd, theta, at)
		for j := range rotated {
			tile[j] = tensor.Round(act, rotated[j])
		}
		return nil
	}
	// A paired tile: columns [i0, i0+w) of the head's first half and
	// their partners w values later in the tile.
	head, rotated := make([]float32, hd), make([]float32, hd)
	i0, w, half := nOff%hd, len(tile)/2, hd/2
	copy(head[i0:i0+w], tile[:w])
	copy(head[half+i0:half+i0+w], tile[w:])
	rotateHalf(head, rotated, hd, theta, at)
	for j := range w {
		tile[j] = tensor.Round(act, rotated[i0+j])
		tile[w+j] = tensor.Round(act, rotated[half+i0+j])
	}
	return nil
}

// cacheOffset is where sequence m's row at params.pos starts in a cache
// [max_seq, n_kv, hd] (M == 1) or [B, max_seq, n_kv, hd] (M == B).
func cacheOffset(pat ir.FusedPattern, cache *tensor.Tensor, p ir.Params, m, M, N int) (int, error) {
	pos, err := needInt(p, "pos")
	if err != nil {
		return 0, err
	}
	r := len(cache.Shape)
	if r != 3 && r != 4 {
		return 0, fmt.Errorf("%s: cache must have rank 3 or 4, got %v", pat.Name, cache.Shape)
	}
	seq, row := cache.Shape[r-3], cache.Shape[r-2]*cache.Shape[r-1]
	batch := 1
	if r == 4 {
		batch = cache.Shape[0]
	}
	switch {
	case row != N:
		return 0, fmt.Errorf("%s: a cache row holds %d values, the projection %d", pat.Name, row, N)
	case batch != M:
		return 0, fmt.Errorf("%s: cache %v holds %d sequences, the tile %d rows", pat.Name, cache.Shape, batch, M)
	case pos < 0 || pos >= seq:
		return 0, fmt.Errorf("%s: position %d outside the cache's %d positions", pat.Name, pos, seq)
	}
	return (m*seq + pos) * row, nil
}
