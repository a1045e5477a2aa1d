package ir

import "testing"

func TestTileQuant(t *testing.T) {
	gemv := func(q int64, inputs int) *Task {
		return &Task{Op: OpGEMVTile, Inputs: make([]int, inputs), Params: Params{IntParam("qdtype", q)}}
	}
	fused := func(q int64, pat int) *Task {
		return &Task{Op: OpFUSED, Inputs: make([]int, 4), Params: Params{IntParam("qdtype", q), IntParam("flags", FusedPatternFlags(pat))}}
	}
	cases := []struct {
		name   string
		task   *Task
		ok     bool
		dt     DType
		scales int
	}{
		{"int8 gemv", gemv(int64(I8), 3), true, I8, 2},
		{"int4 gemv with zeros", gemv(int64(I4), 4), true, I4, 2},
		{"gemv without a scales input", gemv(int64(I8), 2), false, 0, -1},
		{"fp gemv", gemv(0, 2), false, 0, -1},
		{"qdtype that is no weight format", gemv(int64(BF16), 3), false, 0, -1},
		{"int4 norm-staged q tile", fused(int64(I4), FusedNormGEMVRoPE), true, I4, 4},
		{"int8 GEMV_ADD", fused(int64(I8), FusedGEMVAdd), true, I8, 3},
		{"recipe FUSED", fused(int64(I8), FusedNone), false, 0, -1},
		{"embed", &Task{Op: OpEMBED, Inputs: make([]int, 3), Params: Params{IntParam("qdtype", int64(I8))}}, false, 0, -1},
	}
	for _, c := range cases {
		dt, s, ok := TileQuant(c.task)
		if ok != c.ok || dt != c.dt || s != c.scales {
			t.Errorf("%s: TileQuant = %s, %d, %v; want %s, %d, %v", c.name, dt, s, ok, c.dt, c.scales, c.ok)
		}
	}
	pat, _ := FusedPatternByID(FusedSiLUGEMVAdd)
	if pat.Arity(false) != 4 || pat.Arity(true) != 5 || pat.TaskArity(fused(int64(I8), FusedSiLUGEMVAdd)) != 5 {
		t.Errorf("SILU_GEMV_ADD arity %d / %d", pat.Arity(false), pat.Arity(true))
	}
	if QuantGroups(2048, 128) != 16 || QuantGroups(100, 32) != 4 || QuantGroups(0, 32) != 0 || QuantGroups(10, 0) != 0 {
		t.Error("QuantGroups")
	}
}
