package ir

// Quantised projection tiles (docs/spec/quantization.md). A projection tile
// reads a quantised weight when params.qdtype names I8 (6) or I4 (7) and the
// task carries the weight's scales as one more input:
//
//   - GEMV_TILE / GEMM_TILE: inputs [x, qW, scales(, zeros)];
//   - FUSED (a pattern of FusedPatterns): the pattern's inputs, then scales
//     as the last input.
//
// qW is [N, K] of the stored dtype (I4 packs two columns per byte, low
// nibble first); scales is a float [N, ceil(K/group)] WEIGHT whose source is
// the weight's source plus ScalesSuffix; params.group is the input columns
// per scale. Every executor dequantises in registers inside the tile: there
// is no DEQUANT task per tile.

// RoleScales names the scales input of a quantised FUSED tile, after the
// pattern's own roles.
const RoleScales = "scales"

// ScalesSuffix is appended to a quantised weight's state-dict key to name
// its scales.
const ScalesSuffix = ".scales"

// QuantDTypeOf returns the quantised weight dtype params.qdtype names (I8 or
// I4); ok is false for an absent, non-integer or other value.
func QuantDTypeOf(ps Params) (DType, bool) {
	q, ok := ps.Int("qdtype")
	if !ok || (q != int64(I8) && q != int64(I4)) {
		return 0, false
	}
	return DType(q), true
}

// TileQuant reports whether t is a projection tile that reads a quantised
// weight, with the weight's dtype and the index of its scales input: a
// GEMV/GEMM tile with params.qdtype I8/I4 and at least three inputs (scales
// at 2), or a FUSED pattern task with params.qdtype I8/I4 (scales after the
// pattern's inputs; the task must carry exactly one input more than the
// pattern, which the validator checks).
func TileQuant(t *Task) (dt DType, scales int, ok bool) {
	dt, ok = QuantDTypeOf(t.Params)
	if !ok {
		return 0, -1, false
	}
	switch t.Op {
	case OpGEMVTile, OpGEMMTile:
		if len(t.Inputs) >= 3 {
			return dt, 2, true
		}
	case OpFUSED:
		if pat, known := FusedPatternByID(TaskFusedPattern(t)); known {
			return dt, len(pat.Inputs), true
		}
	}
	return 0, -1, false
}

// Arity is the input count of a task of the pattern: its roles, plus the
// scales input of a quantised tile.
func (p FusedPattern) Arity(quant bool) int {
	if quant {
		return len(p.Inputs) + 1
	}
	return len(p.Inputs)
}

// TaskArity is the input count a FUSED task of the pattern must carry:
// Arity of whether its params.qdtype names a quantised weight.
func (p FusedPattern) TaskArity(t *Task) int {
	_, q := QuantDTypeOf(t.Params)
	return p.Arity(q)
}

// QuantGroups is the number of scales per weight row: ceil(k / group) (0
// for a non-positive k or group).
func QuantGroups(k, group int64) int64 {
	if k <= 0 || group <= 0 {
		return 0
	}
	return (k + group - 1) / group
}
