package schedule

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/validate"
)

// fusedProgram lowers toy-2L with every fusion on and attention per KV head.
func fusedProgram(t *testing.T) *ir.Program {
	t.Helper()
	return mustLower(t, mustPreset(t, "toy-2L"), mustTarget(t, "h100"), FullyFused(), LowerOptions{Pos: 3})
}

// findTask returns the first task whose label starts with prefix.
func findTask(t *testing.T, p *ir.Program, prefix string) *ir.Task {
	t.Helper()
	for i := range p.Tasks {
		if strings.HasPrefix(p.Tasks[i].Label, prefix) {
			return &p.Tasks[i]
		}
	}
	t.Fatalf("no task labelled %s*", prefix)
	return nil
}

// The fully fused layer is five hops of fused tasks (the device default,
// without the RoPE epilogue, seven), and the validator proves it.
func TestFullyFusedIsFusedAndValid(t *testing.T) {
	p := fusedProgram(t)
	if rep := validate.Validate(p); !rep.OK {
		t.Fatalf("device default rejected: %s", rep.Reason(4))
	}
	ops := map[ir.Op]int{}
	pats := map[int]int{}
	for i := range p.Tasks {
		ops[p.Tasks[i].Op]++
		pats[ir.TaskFusedPattern(&p.Tasks[i])]++
	}
	for _, op := range []ir.Op{ir.OpRMSNORM, ir.OpROPE, ir.OpKVAppend, ir.OpADD, ir.OpSiLUMul, ir.OpGEMVTile} {
		if ops[op] != 0 {
			t.Errorf("%d %s tasks left in the fully fused program", ops[op], op)
		}
	}
	for _, id := range []int{ir.FusedNormGEMVRoPE, ir.FusedNormGEMVRoPEApp, ir.FusedNormGEMVAppend, ir.FusedGEMVAdd,
		ir.FusedNormGEMV, ir.FusedSiLUGEMVAdd} {
		if pats[id] == 0 {
			pat, _ := ir.FusedPatternByID(id)
			t.Errorf("no %s task", pat.Name)
		}
	}
	if h := HopsPerLayer(mustPreset(t, "toy-2L"), mustTarget(t, "h100"), FullyFused()); h != 5 {
		t.Errorf("fully fused: %d hops per layer, want 5", h)
	}
	if h := HopsPerLayer(mustPreset(t, "toy-2L"), mustTarget(t, "h100"), DeviceDefault()); h != 7 {
		t.Errorf("device default: %d hops per layer, want 7", h)
	}
}

// Mutated fused programs are rejected: a reader that stops waiting for a
// part of the tiles on a shared counter, a tile whose signal goes to a
// counter nobody waits on, epilogues writing outside their tile.
func TestMutatedFusedProgramsAreRejected(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, p *ir.Program)
		codes  []string
	}{
		{"attention waits for one tile less of the shared qkv counter", func(t *testing.T, p *ir.Program) {
			a := findTask(t, p, "L0.attention")
			ws := append([]ir.Wait(nil), a.Waits...)
			ws[0].Threshold--
			a.Waits = ws
		}, []string{validate.CodePartialJoin}},
		{"a k tile signals a counter nobody waits on", func(t *testing.T, p *ir.Program) {
			k := findTask(t, p, "L0.k_proj[t0]")
			k.OutCounter = p.AddCounter("stray")
		}, []string{validate.CodeUnsatisfiable}},
		{"a k tile's append shifted onto its neighbour's heads", func(t *testing.T, p *ir.Program) {
			k := findTask(t, p, "L0.k_proj[t0]")
			setParam(k, "n_off", k.Params.IntOr("N_tile", 0))
		}, []string{validate.CodeTileCoverage}},
		{"a q tile's RoPE epilogue cutting a head", func(t *testing.T, p *ir.Program) {
			q := findTask(t, p, "L0.q_proj[t0]")
			setParam(q, "N_tile", q.Params.IntOr("N_tile", 0)-1)
		}, []string{validate.CodeTileBounds}},
		{"a v tile's append at another position", func(t *testing.T, p *ir.Program) {
			v := findTask(t, p, "L0.v_proj[t0]")
			setParam(v, "pos", 5)
		}, []string{validate.CodeTileCoverage}},
		{"an o tile writing past its projection", func(t *testing.T, p *ir.Program) {
			o := findTask(t, p, "L0.o_proj[t0]")
			setParam(o, "n_off", 1<<20)
		}, []string{validate.CodeTileBounds}},
		{"an unknown pattern id", func(t *testing.T, p *ir.Program) {
			o := findTask(t, p, "L0.o_proj[t0]")
			setParam(o, "flags", ir.FusedPatternFlags(999))
		}, []string{validate.CodeFusedPattern}},
		{"two KV-head attention slices on the same heads", func(t *testing.T, p *ir.Program) {
			a := findTask(t, p, "L0.attention.h1")
			setParam(a, "n_off", 0)
		}, []string{validate.CodeTileCoverage}},
		{"a KV-head slice past the KV heads", func(t *testing.T, p *ir.Program) {
			a := findTask(t, p, "L0.attention.h1")
			setParam(a, "N_tile", 2)
		}, []string{validate.CodeTileBounds}},
		{"a norm-staged tile missing its norm weight", func(t *testing.T, p *ir.Program) {
			g := findTask(t, p, "L0.gate_proj[t0]")
			g.Inputs = []int{g.Inputs[0], g.Inputs[2]}
		}, []string{validate.CodeFusedPattern}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fusedProgram(t)
			c.mutate(t, p)
			rep := validate.Validate(p)
			if rep.OK {
				t.Fatal("mutated program accepted")
			}
			for _, code := range c.codes {
				if !rep.Has(code) {
					t.Errorf("want %s among %v", code, rep.Codes())
				}
			}
		})
	}
}
