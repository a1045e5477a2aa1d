package validate

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// quantGEMV is two int4 projections of one activation x [1, 64] in groups
// of 32: q (two tiles of 8 rows) and o (one tile), each reading its own F16
// scales [16, 2]. edit mutates the program before it is returned.
func quantGEMV(t testing.TB, edit func(p *ir.Program, qs, os int)) *ir.Program {
	b := newBuilder(t, "h100")
	x := b.bufOf("x", ir.IOInput, ir.BF16, 1, 64)
	weight := func(name string) (int, int) {
		w := b.bufOf(name, ir.Weight, ir.I4, 16, 64)
		b.p.Buffers[w].Source = new(name)
		s := b.bufOf(name+ir.ScalesSuffix, ir.Weight, ir.F16, 16, 2)
		b.p.Buffers[s].Source = new(name + ir.ScalesSuffix)
		return w, s
	}
	qw, qs := weight("q.weight")
	ow, os := weight("o.weight")
	q := b.bufOf("q", ir.IOOutput, ir.BF16, 1, 16)
	o := b.bufOf("o", ir.IOOutput, ir.BF16, 1, 16)
	cq, co := b.ctr(), b.ctr()
	quant := []ir.Param{iP("qdtype", int64(ir.I4)), iP("group", 32)}
	for i := range int64(2) {
		b.task(ir.OpGEMVTile, ints(x, qw, qs), ints(q), cq, nil, "q[t"+string(rune('0'+i))+"]",
			append(gemvParams(64, 8, 8*i), quant...)...)
	}
	b.task(ir.OpGEMVTile, ints(x, ow, os), ints(o), co, nil, "o[t0]", append(gemvParams(64, 16, 0), quant...)...)
	if edit != nil {
		edit(b.p, qs, os)
	}
	return b.p
}

// The two mutations docs/spec/quantization.md names: a scale buffer one
// group short, and a tile reading another tile's scales (o's scales have
// q's shape, so only their source tells them apart); then a row short, a
// zero group, and a quantised fused tile without its scales input.
func TestQuantScalesMutations(t *testing.T) {
	if r := Validate(quantGEMV(t, nil)); !r.OK {
		t.Fatalf("the int4 program is rejected: %s", r.Reason(4))
	}
	cases := map[string]struct {
		edit func(p *ir.Program, qs, os int)
		code string
		msg  string
	}{
		"scales one group short": {func(p *ir.Program, qs, _ int) { p.Buffers[qs].Shape = []int{16, 1} }, CodeQuantScales,
			"needs [16, 2] (one scale per row and group)"},
		"a tile reading another tile's scales": {func(p *ir.Program, _, os int) { p.Tasks[1].Inputs[2] = os }, CodeQuantScales,
			"are not the scales of weight #1 ('q.weight'): they must be 'q.weight.scales'"},
		"scales a row short": {func(p *ir.Program, qs, _ int) { p.Buffers[qs].Shape = []int{15, 2} }, CodeQuantScales, "needs [16, 2]"},
		"group 0": {func(p *ir.Program, _, _ int) { p.Tasks[0].Params = append(p.Tasks[0].Params, iP("group", 0)) }, CodeQuantScales,
			"must be a positive number"},
		"scales of an integer dtype": {func(p *ir.Program, qs, _ int) { p.Buffers[qs].DType = ir.I8 }, CodeQuantScales,
			"scales must be a floating-point WEIGHT"},
		"qdtype int8 on an int4 weight": {func(p *ir.Program, _, _ int) { p.Tasks[2].Params = append(p.Tasks[2].Params, iP("qdtype", 6)) },
			CodeDTypeMismatch, "has dtype I4, but qdtype=6 is I8"},
	}
	for name, c := range cases {
		r := Validate(quantGEMV(t, c.edit))
		found := false
		for _, d := range r.Errors {
			found = found || (d.Code == c.code && strings.Contains(d.Message, c.msg))
		}
		if r.OK || !found {
			t.Errorf("%s: want %s %q, got %s", name, c.code, c.msg, r.Reason(6))
		}
	}
}
