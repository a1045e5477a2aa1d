package schedule

import (
	"slices"
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

// allJoin is FullyFused with one all-join counter over the q|k|v phase.
func allJoin() Point {
	p := FullyFused()
	p.Config.DeleteTile("attention", "head_counters")
	return p
}

// counterOf names the counter a task signals.
func counterOf(p *ir.Program, t *ir.Task) string { return p.Counters[t.OutCounter].Note }

// With per-KV-head counters, the attention slice of KV head g waits on one
// counter, and that counter's producers are exactly the q tiles of g's
// query heads and the k and v tiles of head g; head_counters off (or no
// RoPE epilogue) keeps the single all-join counter.
func TestHeadCountersSplitTheQKVJoin(t *testing.T) {
	m := mustPreset(t, "toy-2L") // 4 query heads, 2 KV heads, head_dim 16
	p := fusedProgram(t)
	producers := map[int][]*ir.Task{}
	for i := range p.Tasks {
		producers[p.Tasks[i].OutCounter] = append(producers[p.Tasks[i].OutCounter], &p.Tasks[i])
	}
	rep, hd := m.NHeads/m.NKVHeads, m.HeadDim
	for g := 0; g < m.NKVHeads; g++ {
		a := findTask(t, p, "L0.attention.h"+itoa(g))
		if len(a.Waits) != 1 {
			t.Fatalf("KV head %d: %d waits, want one (its own counter)", g, len(a.Waits))
		}
		w := a.Waits[0]
		tiles := producers[w.Counter]
		if w.Threshold != len(tiles) || !strings.Contains(p.Counters[w.Counter].Note, "KV head "+itoa(g)) {
			t.Fatalf("KV head %d waits on %q >= %d (%d producers)", g, p.Counters[w.Counter].Note, w.Threshold, len(tiles))
		}
		cols := map[string]int64{}
		for _, tile := range tiles {
			off, width := tile.Params.IntOr("n_off", -1), tile.Params.IntOr("N_tile", 0)
			name := tile.Label[:strings.Index(tile.Label, "[")]
			lo, hi := int64(g*hd), int64((g+1)*hd)
			if name == "L0.q_proj" {
				lo, hi = int64(g*rep*hd), int64((g+1)*rep*hd)
			}
			if off < lo || off+width > hi {
				t.Errorf("KV head %d's counter counts %s [%d, %d), outside [%d, %d)", g, tile.Label, off, off+width, lo, hi)
			}
			cols[name] += width
		}
		if cols["L0.q_proj"] != int64(rep*hd) || cols["L0.k_proj"] != int64(hd) || cols["L0.v_proj"] != int64(hd) {
			t.Errorf("KV head %d's counter covers %v, want q %d, k %d, v %d columns", g, cols, rep*hd, hd, hd)
		}
	}
	for _, pt := range []Point{allJoin(), func() Point { p := DeviceDefault(); p.Config.SetTile("attention", "head_counters", 1); return p }()} {
		q := mustLower(t, m, mustTarget(t, "h100"), pt, LowerOptions{Pos: 3})
		if r := validate.Validate(q); !r.OK {
			t.Fatalf("rejected: %s", r.Reason(4))
		}
		a0, a1 := findTask(t, q, "L0.attention.h0"), findTask(t, q, "L0.attention.h1")
		if !slices.Equal(a0.Waits, a1.Waits) {
			t.Errorf("without per-head counters the slices wait alike, got %v and %v", a0.Waits, a1.Waits)
		}
	}
}

// Mutations of the per-KV-head sync are rejected with the rule they break:
// a slice that stops waiting, or waits on another head's counter, reads q
// columns and cache rows whose writers it does not wait for (race-raw,
// race-kv); a tile signalling another head's counter breaks both heads'
// joins (partial-join, unsatisfiable-wait); a q tile writing into the next
// group's columns overlaps its tiles (tile-coverage) and is not waited for
// by that group's slice (race-raw).
func TestMutatedHeadCountersAreRejected(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, p *ir.Program)
		codes  []string
	}{
		{"a slice's wait dropped", func(t *testing.T, p *ir.Program) {
			findTask(t, p, "L0.attention.h1").Waits = nil
		}, []string{validate.CodeRaceRAW, validate.CodeRaceKV}},
		{"a slice waiting on another KV head's counter", func(t *testing.T, p *ir.Program) {
			a0, a1 := findTask(t, p, "L0.attention.h0"), findTask(t, p, "L0.attention.h1")
			a1.Waits = append([]ir.Wait(nil), a0.Waits...)
		}, []string{validate.CodeRaceRAW, validate.CodeRaceKV}},
		{"a slice waiting for one tile less of its head's counter", func(t *testing.T, p *ir.Program) {
			a := findTask(t, p, "L0.attention.h1")
			ws := append([]ir.Wait(nil), a.Waits...)
			ws[0].Threshold--
			a.Waits = ws
		}, []string{validate.CodePartialJoin}},
		{"a k tile signalling the other KV head's counter", func(t *testing.T, p *ir.Program) {
			k0 := findTask(t, p, "L0.k_proj[t0]")
			k1 := otherHeadTile(t, p, k0)
			k1.OutCounter = k0.OutCounter
		}, []string{validate.CodePartialJoin, validate.CodeUnsatisfiable}},
		{"a q tile's epilogue writing the next group's heads", func(t *testing.T, p *ir.Program) {
			q := findTask(t, p, "L0.q_proj[t0]")
			setParam(q, "n_off", 2*16) // query heads 2-3: KV head 1's group
		}, []string{validate.CodeTileCoverage, validate.CodeRaceRAW}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fusedProgram(t)
			if rep := validate.Validate(p); !rep.OK {
				t.Fatalf("unmutated program rejected: %s", rep.Reason(4))
			}
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

// head_counters is a knob of its own (fine counters vs the all-join) where
// it acts, and normalised away where it cannot (no RoPE epilogue, or no
// attention per KV head), so one program keeps one normalised id.
func TestHeadCountersKnob(t *testing.T) {
	if FullyFused().Normalize().ID() == allJoin().Normalize().ID() {
		t.Error("per-KV-head and all-join counters share an id")
	}
	if v, _ := FullyFused().KnobValue(PathHeadCounters).Int64(); v != 1 {
		t.Errorf("FullyFused: head_counters = %d, want 1", v)
	}
	inert := DeviceDefault()
	if !inert.SetKnob(PathHeadCounters, intV(1)) {
		t.Fatal("SetKnob refused head_counters")
	}
	if inert.Normalize().ID() != DeviceDefault().Normalize().ID() {
		t.Error("head_counters without the RoPE epilogue changed the id")
	}
	noSplit := FullyFused()
	noSplit.Config.DeleteTile("attention", "kv_head_split")
	plain := allJoin()
	plain.Config.DeleteTile("attention", "kv_head_split")
	if noSplit.Normalize().ID() != plain.Normalize().ID() {
		t.Error("head_counters without kv_head_split changed the id")
	}
}

// otherHeadTile is the first tile of tile's projection that signals
// another counter than tile (the next KV head's, with per-KV-head counters).
func otherHeadTile(t *testing.T, p *ir.Program, tile *ir.Task) *ir.Task {
	t.Helper()
	name := tile.Label[:strings.Index(tile.Label, "[")+1]
	for i := range p.Tasks {
		if o := &p.Tasks[i]; strings.HasPrefix(o.Label, name) && o.OutCounter != tile.OutCounter {
			return o
		}
	}
	t.Fatalf("every %s* tile signals %q", name, counterOf(p, tile))
	return nil
}

// dropTask removes task i, renumbering the tasks after it and lowering the
// waits on its counter by one, so that only the missing tile's columns
// tell it was there.
func dropTask(p *ir.Program, i int) {
	ctr := p.Tasks[i].OutCounter
	p.Tasks = append(p.Tasks[:i], p.Tasks[i+1:]...)
	for k := range p.Tasks {
		p.Tasks[k].ID = k
		ws := append([]ir.Wait(nil), p.Tasks[k].Waits...)
		for j := range ws {
			if ws[j].Counter == ctr {
				ws[j].Threshold--
			}
		}
		p.Tasks[k].Waits = ws
	}
}

// taskIndex is the index of the first task labelled label.
func taskIndex(t *testing.T, p *ir.Program, label string) int {
	t.Helper()
	for i := range p.Tasks {
		if p.Tasks[i].Label == label {
			return i
		}
	}
	t.Fatalf("no task %s", label)
	return -1
}

// With tiles_per_sm, the RoPE epilogue's q|k|v phase is paired tiles: each
// covers columns [i, i+w) and [i+hd/2, i+hd/2+w) of one head, every head
// of q, k and v splits alike, and together they fill the SMs.
func TestFullyFusedTilesArePaired(t *testing.T) {
	for _, c := range []struct {
		model   string
		perHead int // tiles per head: tiles_per_sm x 132 SMs / heads of the phase
	}{{"toy-2L", 8}, {"small", 5}, {"llama-1b", 2}} {
		m := mustPreset(t, c.model)
		p := mustLower(t, m, mustTarget(t, "h100"), FullyFused(), LowerOptions{Pos: 3})
		if rep := validate.Validate(p); !rep.OK {
			t.Fatalf("%s: rejected: %s", c.model, rep.Reason(4))
		}
		hd := int64(m.HeadDim)
		perHead := map[string]int{}
		for i := range p.Tasks {
			tk := &p.Tasks[i]
			if !strings.HasPrefix(tk.Label, "L0.q_proj") && !strings.HasPrefix(tk.Label, "L0.k_proj") && !strings.HasPrefix(tk.Label, "L0.v_proj") {
				continue
			}
			off, w := tk.Params.IntOr("n_off", -1), tk.Params.IntOr("N_tile", 0)
			if ir.PairStride(tk.Params) != hd/2 || w%2 != 0 || off%hd+w/2 > hd/2 {
				t.Fatalf("%s: %s (n_off %d, N_tile %d, flags %#x) is not a paired tile of head_dim %d", c.model, tk.Label,
					off, w, tk.Params.IntOr("flags", 0), hd)
			}
			perHead[tk.Label[:strings.Index(tk.Label, "[")]+"/"+itoa(int(off/hd))]++
		}
		heads := m.NHeads + 2*m.NKVHeads
		if len(perHead) != heads {
			t.Fatalf("%s: paired tiles on %d heads, want %d", c.model, len(perHead), heads)
		}
		for h, n := range perHead {
			if n != c.perHead {
				t.Errorf("%s: head %s has %d tiles, want %d", c.model, h, n, c.perHead)
			}
		}
		if tiles := heads * c.perHead; tiles > 132 {
			t.Errorf("%s: %d q|k|v tiles for 132 SMs", c.model, tiles)
		}
	}
}

// Mutated paired tiles are rejected with the rule they break.
func TestMutatedPairedTilesAreRejected(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, p *ir.Program)
		codes  []string
	}{
		{"a paired tile moved into the second half of its head (its pairs cut)", func(t *testing.T, p *ir.Program) {
			q := findTask(t, p, "L0.q_proj[t0]")
			setParam(q, "n_off", q.Params.IntOr("head_dim", 0)/2)
		}, []string{validate.CodeTileBounds}},
		{"a paired tile straddling the middle of its head", func(t *testing.T, p *ir.Program) {
			k := findTask(t, p, "L0.k_proj[t0]") // two columns each side: [hd/2-1, hd/2+1) and its partners
			setParam(k, "N_tile", 4)
			setParam(k, "n_off", k.Params.IntOr("head_dim", 0)/2-1)
		}, []string{validate.CodeTileBounds}},
		{"a paired tile of an odd width", func(t *testing.T, p *ir.Program) {
			v := findTask(t, p, "L0.v_proj[t0]")
			setParam(v, "N_tile", v.Params.IntOr("N_tile", 0)+1)
		}, []string{validate.CodeTileBounds}},
		{"a paired q tile read as contiguous (flag dropped)", func(t *testing.T, p *ir.Program) {
			q := findTask(t, p, "L0.q_proj[t0]")
			setParam(q, "flags", q.Params.IntOr("flags", 0)&^ir.FlagPairedTile)
		}, []string{validate.CodeTileBounds, validate.CodeTileCoverage}},
		{"a paired v tile read as contiguous (flag dropped)", func(t *testing.T, p *ir.Program) {
			v := findTask(t, p, "L0.v_proj[t0]")
			setParam(v, "flags", v.Params.IntOr("flags", 0)&^ir.FlagPairedTile)
		}, []string{validate.CodeTileCoverage}},
		{"two paired tiles overlapping", func(t *testing.T, p *ir.Program) {
			k0, k1 := findTask(t, p, "L0.k_proj[t0]"), findTask(t, p, "L0.k_proj[t1]")
			setParam(k1, "n_off", k0.Params.IntOr("n_off", 0))
		}, []string{validate.CodeRaceWAW, validate.CodeTileCoverage}},
		{"a missing paired tile", func(t *testing.T, p *ir.Program) {
			dropTask(p, taskIndex(t, p, "L0.q_proj[t1]"))
		}, []string{validate.CodeTileCoverage}},
		{"a missing paired k tile (the KV row left short)", func(t *testing.T, p *ir.Program) {
			dropTask(p, taskIndex(t, p, "L0.k_proj[t3]"))
		}, []string{validate.CodeTileCoverage}},
		{"the pair flag on an o tile", func(t *testing.T, p *ir.Program) {
			o := findTask(t, p, "L0.o_proj[t0]")
			setParam(o, "flags", o.Params.IntOr("flags", 0)|ir.FlagPairedTile)
		}, []string{validate.CodeFusedPattern}},
		{"a paired tile on the next KV head's columns, signalling its own head's counter", func(t *testing.T, p *ir.Program) {
			k := findTask(t, p, "L0.k_proj[t0]")
			setParam(k, "n_off", k.Params.IntOr("n_off", 0)+k.Params.IntOr("head_dim", 0))
		}, []string{validate.CodeTileCoverage, validate.CodeRaceKV}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fusedProgram(t)
			if rep := validate.Validate(p); !rep.OK {
				t.Fatalf("unmutated program rejected: %s", rep.Reason(4))
			}
			c.mutate(t, p)
			rep := validate.Validate(p)
			if rep.OK {
				t.Fatal("mutated program accepted")
			}
			t.Logf("rejected: %v", rep.Codes())
			for _, code := range c.codes {
				if !rep.Has(code) {
					t.Errorf("want %s among %v", code, rep.Codes())
				}
			}
		})
	}
}
