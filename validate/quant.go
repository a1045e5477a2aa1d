package validate

import "github.com/amk-dev/amk/ir"

// quantScales checks a quantised projection tile's weight and scales
// (ir.TileQuant, docs/spec/quantization.md) like any other operand: the
// weight has the dtype params.qdtype names; params.group is a positive
// int; the scales are a float WEIGHT of shape [N, ceil(K/group)], N the
// weight's rows (so every row the tile reads has its scales, and every
// group of its K columns), and they are the weight's own: their source is
// the weight's source + ir.ScalesSuffix (a tile reading another
// projection's scales, which may well have the same shape, is refused).
// k is the tile's K (already checked against the weight), last one past
// the last weight row it reads.
func (tc *taskCheck) quantScales(w, s *ir.Buffer, k, last int64) {
	qd, _, _ := ir.TileQuant(tc.t)
	if w.DType != qd {
		tc.fail(CodeDTypeMismatch, w, "quantized weight #%d ('%s') has dtype %s, but qdtype=%d is %s", w.ID, w.Name, w.DType, int(qd), qd)
		return
	}
	if !s.DType.IsFloat() || s.Kind != ir.Weight {
		tc.fail(CodeQuantScales, s, "scales #%d ('%s') are a %s %s buffer; scales must be a floating-point WEIGHT", s.ID, s.Name, s.Kind, s.DType)
		return
	}
	group, ok := tc.param("group")
	if !ok || group <= 0 {
		tc.fail(CodeQuantScales, s, "params.group=%d must be a positive number of input columns per scale", group)
		return
	}
	rows := dim(w, 0)
	groups := ir.QuantGroups(k, group)
	switch {
	case len(s.Shape) != 2 || dim(s, 0) != rows || dim(s, 1) != groups:
		tc.fail(CodeQuantScales, s, "scales #%d ('%s') have shape %s; weight #%d ('%s') of %d rows, K=%d and group=%d needs [%d, %d] (one scale per row and group)",
			s.ID, s.Name, pyInts(s.Shape), w.ID, w.Name, rows, k, group, rows, groups)
	case last > dim(s, 0):
		tc.fail(CodeQuantScales, s, "tile rows up to %d exceed the %d rows of scales #%d ('%s')", last, dim(s, 0), s.ID, s.Name)
	case w.Source != nil && (s.Source == nil || *s.Source != *w.Source+ir.ScalesSuffix):
		src := "no source"
		if s.Source != nil {
			src = "source '" + *s.Source + "'"
		}
		tc.fail(CodeQuantScales, s, "scales #%d ('%s', %s) are not the scales of weight #%d ('%s'): they must be '%s%s'",
			s.ID, s.Name, src, w.ID, w.Name, *w.Source, ir.ScalesSuffix)
	}
}
