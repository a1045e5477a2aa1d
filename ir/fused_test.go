package ir

import "slices"

import "testing"

// The pattern table is consistent: ids are positions, every pattern has a
// weight role and the roles its staging and epilogue read, append patterns
// carry N and pos, RoPE patterns head_dim and theta.
func TestFusedPatternTable(t *testing.T) {
	pats := FusedPatterns()
	if len(pats) < 2 || pats[0].ID != FusedNone {
		t.Fatalf("table starts with %+v", pats[0])
	}
	has := func(xs []string, x string) bool {
		return slices.Contains(xs, x)
	}
	for i, p := range pats[1:] {
		id := i + 1
		if p.ID != id {
			t.Errorf("pattern %s has id %d at position %d", p.Name, p.ID, id)
		}
		if got, ok := FusedPatternByID(id); !ok || got.Name != p.Name {
			t.Errorf("FusedPatternByID(%d) = %v, %v", id, got.Name, ok)
		}
		need := []string{RoleW}
		switch p.Staging {
		case StageRMSNorm:
			need = append(need, RoleX, RoleNormW)
		case StageSiLUMul:
			need = append(need, RoleGate, RoleUp)
		default:
			need = append(need, RoleX)
		}
		if p.Epilogue == EpilogueAdd {
			need = append(need, RoleResidual)
		}
		if p.Epilogue == EpilogueRoPE || p.Epilogue == EpilogueRoPEAppend {
			need = append(need, RolePos)
			for _, k := range []string{"head_dim", "theta"} {
				if !has(p.Required, k) {
					t.Errorf("%s: RoPE epilogue without param %s", p.Name, k)
				}
			}
		}
		if p.WritesCache() {
			for _, k := range []string{"N", "pos", "head_dim"} {
				if !has(p.Required, k) {
					t.Errorf("%s: append epilogue without param %s", p.Name, k)
				}
			}
		}
		for _, r := range need {
			if p.Role(r) < 0 {
				t.Errorf("%s: no %s input among %v", p.Name, r, p.Inputs)
			}
		}
		if len(p.Inputs) != len(need) {
			t.Errorf("%s: inputs %v, expected exactly %v", p.Name, p.Inputs, need)
		}
		if FusedPatternFlags(id)>>FusedPatternShift != int64(id) {
			t.Errorf("%s: flags round trip", p.Name)
		}
	}
	for _, bad := range []int{FusedNone, -1, len(pats), 1 << 16} {
		if _, ok := FusedPatternByID(bad); ok {
			t.Errorf("FusedPatternByID(%d) accepted", bad)
		}
	}
}

// A paired tile is named by a params.flags bit beside the pattern id: its
// stride is head_dim/2 and its ranges the two halves of N_tile; without
// the bit (every program written before it) a tile is one range.
func TestPairedTileRanges(t *testing.T) {
	flags := FusedPatternFlags(FusedGEMVRoPE)
	plain := Params{IntParam("flags", flags), IntParam("head_dim", 128)}
	paired := Params{IntParam("flags", flags|FlagPairedTile), IntParam("head_dim", 128)}
	if s := PairStride(plain); s != 0 {
		t.Errorf("contiguous tile: stride %d", s)
	}
	if s := PairStride(paired); s != 64 {
		t.Errorf("paired tile: stride %d, want 64", s)
	}
	if got := TileRanges(13, 26, 64); len(got) != 2 || got[0] != [2]int64{13, 26} || got[1] != [2]int64{77, 90} {
		t.Errorf("paired ranges %v", got)
	}
	if got := TileRanges(13, 26, 0); len(got) != 1 || got[0] != [2]int64{13, 39} {
		t.Errorf("contiguous ranges %v", got)
	}
	if id := TaskFusedPattern(&Task{Op: OpFUSED, Params: paired}); id != FusedGEMVRoPE {
		t.Errorf("the pair bit changed the pattern id to %d", id)
	}
	for _, p := range FusedPatterns()[1:] { // paired: exactly the patterns that carry head_dim
		want := false
		for _, r := range p.Required {
			want = want || r == "head_dim"
		}
		if p.Paired() != want {
			t.Errorf("%s: Paired() = %v", p.Name, p.Paired())
		}
	}
}
