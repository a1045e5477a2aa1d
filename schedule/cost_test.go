package schedule

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// docs/spec/rules.md R16: every prediction is at or above both bandwidth floors (streamed
// bytes, task bytes), for every target and preset shape, at random points; and it is
// deterministic.
func TestPredictNeverBelowFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	models := []string{"toy", "toy-2L", "small", "llama-1b", "tinyllama", "llama-8b"}
	for _, name := range ir.TargetNames() {
		tg := mustTarget(t, name)
		for mi, m := range models {
			cfg := mustPreset(t, m)
			p := Random(rng, tg, []Device{DeviceCPU, DeviceCUDA}[mi%2])
			if m == "llama-8b" && name != "h100" && name != "rtx5090" {
				p = Default() // keep the test quick: one 8B point per other target
			}
			prog := mustLower(t, cfg, tg, p, LowerOptions{Pos: rng.IntN(cfg.MaxSeq)})
			c := Predict(prog, tg, p)
			floor := max(c.BandwidthBoundUS, c.BytesBoundUS)
			if !(c.PredictedUS >= floor) || math.IsInf(c.PredictedUS, 0) || floor <= 0 {
				t.Fatalf("%s on %s: predicted %v below floor %v (bandwidth %v, bytes %v)", m, name,
					c.PredictedUS, floor, c.BandwidthBoundUS, c.BytesBoundUS)
			}
			if c.NTasks != len(prog.Tasks) || c.NSMsUsed < 1 || c.NSMsUsed > tg.NumSMs {
				t.Fatalf("%s on %s: %d tasks, %d SMs used", m, name, c.NTasks, c.NSMsUsed)
			}
			sum := 0.0
			for _, r := range Regions {
				sum += c.RegionUS[r]
			}
			if len(c.RegionUS) != len(Regions) || math.Abs(sum-c.PredictedUS) > 1e-6*c.PredictedUS {
				t.Fatalf("%s on %s: regions %v sum to %v, predicted %v", m, name, c.RegionUS, sum, c.PredictedUS)
			}
			if again := Predict(prog, tg, p); again.PredictedUS != c.PredictedUS {
				t.Fatalf("%s on %s: not deterministic (%v then %v)", m, name, c.PredictedUS, again.PredictedUS)
			}
		}
	}
}

// The reference predicted 89 / 87 / 85 / 101 µs for small bf16; its
// all-weights floors are 695 / 401 / 186 / 2076 µs (and 129.8 on h200). The
// streamed-bytes floor drops the 131 MB embedding table but one row (small
// streams 491.8 of its 622.9 MB of weights at pos 0).
func TestPredictSmallAboveReferenceFloors(t *testing.T) {
	cfg := mustPreset(t, "small")
	for _, c := range []struct {
		gpu   string
		floor float64
	}{{"rtx5090", 695}, {"a100", 401}, {"h100", 186}, {"l4", 2076}, {"h200", 129.8}} {
		tg := mustTarget(t, c.gpu)
		cost := Predict(mustLower(t, cfg, tg, Default(), LowerOptions{}), tg, Default())
		if cost.PredictedUS < c.floor {
			t.Errorf("small on %s: predicted %.1f µs < floor %.1f", c.gpu, cost.PredictedUS, c.floor)
		}
		if math.Abs(cost.AllWeightsBoundUS-c.floor) > 0.5 {
			t.Errorf("small on %s: all-weights floor %.2f, want about %.1f", c.gpu, cost.AllWeightsBoundUS, c.floor)
		}
		if want := c.floor * 491831296 / 622891008; math.Abs(cost.BandwidthBoundUS-want) > 0.5 {
			t.Errorf("small on %s: streamed floor %.2f, want about %.1f", c.gpu, cost.BandwidthBoundUS, want)
		}
	}
}

// programKey is a program's encoding without its recorded config, so that
// two programs compare by what the kernels would run.
func programKey(p *ir.Program) string {
	q := *p
	q.Config = nil
	return string(ir.Encode(&q))
}

type knobOutcome struct {
	program   string
	predicted float64
}

func outcome(t *testing.T, model, gpu string, p Point, pos int) knobOutcome {
	t.Helper()
	tg := mustTarget(t, gpu)
	prog := mustLower(t, mustPreset(t, model), tg, p, LowerOptions{Pos: pos})
	return knobOutcome{programKey(prog), Predict(prog, tg, p).PredictedUS}
}

func with(path string, v int) Point {
	p := Default()
	p.SetKnob(path, intV(v))
	return p
}

// Each effective knob moves the program or the prediction (docs/spec/rules.md R15).
func TestEffectiveKnobsChangeProgramOrPrediction(t *testing.T) {
	rr := Default()
	rr.Config.SMAssignment = ir.SMAssignment{Policy: PolicyRoundRobin}
	cases := []struct {
		knob          string
		model, gpu    string
		pos           int
		a, b          Point
		changeProgram bool
	}{
		{PathNTile, "small", "h100", 0, with(PathNTile, 64), with(PathNTile, 16), true},
		{PathNPartitions, "toy", "h100", 120, Default(), with(PathNPartitions, 4), true},
		{PathSMAssignment, "small", "h200", 0, Default(), rr, true},
		{PathDepth, "small", "rtx5090", 0, with(PathDepth, 0), with(PathDepth, 2), false},
		{PathTPB, "small", "h100", 0, with(PathTPB, 256), with(PathTPB, 128), false},
	}
	for _, c := range cases {
		a := outcome(t, c.model, c.gpu, c.a, c.pos)
		b := outcome(t, c.model, c.gpu, c.b, c.pos)
		if (a.program != b.program) != c.changeProgram {
			t.Errorf("%s: program changed = %v, want %v", c.knob, a.program != b.program, c.changeProgram)
		}
		if a.predicted == b.predicted {
			t.Errorf("%s: prediction unchanged at %.2f µs", c.knob, a.predicted)
		}
	}
	// Physically plausible directions.
	thin, fat := outcome(t, "llama-8b", "h100", with(PathNTile, 32), 0), outcome(t, "llama-8b", "h100", with(PathNTile, 512), 0)
	if thin.predicted >= fat.predicted {
		t.Errorf("8B on h100: N_tile 32 (%.0f µs) not faster than 512 (%.0f µs)", thin.predicted, fat.predicted)
	}
	if d0, d2 := outcome(t, "toy", "h100", with(PathDepth, 0), 0), outcome(t, "toy", "h100", with(PathDepth, 2), 0); d2.predicted >= d0.predicted {
		t.Errorf("pipelining depth 2 (%.2f) not faster than 0 (%.2f)", d2.predicted, d0.predicted)
	}
	if w4, w8 := outcome(t, "small", "h100", with(PathTPB, 128), 0), outcome(t, "small", "h100", with(PathTPB, 256), 0); w8.predicted >= w4.predicted {
		t.Errorf("8 warps (%.1f) not faster than 4 (%.1f)", w8.predicted, w4.predicted)
	}
}

// Kernel-build knobs change the point (its id: a distinct VM build) but
// neither the program nor the CPU prediction: that is why they are
// effective on "cuda" only.
func TestKernelBuildKnobs(t *testing.T) {
	base := outcome(t, "toy", "h100", Default(), 3)
	for _, k := range Space(mustTarget(t, "h100"), "cuda") {
		if k.Scope != ScopeKernelBuild {
			continue
		}
		p, ref := Default(), Default()
		if k.Path == knobPrefix+"ring_tile" {
			// The slot size builds something only with the ring on.
			p.SetKnob(knobPrefix+"ring_stages", intV(8))
			ref = p.Clone()
		}
		for _, v := range k.Choices {
			if valueKey(v) != valueKey(k.Default) {
				p.SetKnob(k.Path, v)
				break
			}
		}
		if p.ID() == ref.ID() {
			t.Errorf("%s: id unchanged", k.Path)
		}
		o := outcome(t, "toy", "h100", p, 3)
		if strings.HasPrefix(k.Path, knobPrefix+"ring_") {
			// The streaming ring is a build knob the cost model reads
			// (TestStreamingRingPrediction); the program stays the same.
			if o.program != base.program {
				t.Errorf("%s: changed the program", k.Path)
			}
			continue
		}
		if o != base {
			t.Errorf("%s: changed the program or the CPU prediction", k.Path)
		}
	}
}

// The streaming ring keeps warps x (ring_stages - 1) x ring_tile bytes in
// flight per SM across waits; the cost model streams them before a tile's
// wait, so the prediction of the device default falls, and a ring with
// stages 0 is the default point exactly.
func TestStreamingRingPrediction(t *testing.T) {
	tg := mustTarget(t, "h100")
	cfg := mustPreset(t, "small")
	base := DeviceDefault()
	ring := DeviceDefault()
	ring.SetKnob(knobPrefix+"ring_stages", intV(12))
	if got, want := BytesInFlightPerSM(ring), 8*11*2048; got != want {
		t.Errorf("ring bytes in flight per SM = %d, want %d", got, want)
	}
	if BytesInFlightPerSM(base) != 24*1024 {
		t.Errorf("default bytes in flight per SM = %d, want 24 KiB", BytesInFlightPerSM(base))
	}
	off := DeviceDefault()
	off.SetKnob(knobPrefix+"ring_tile", intV(1024))
	a := Predict(mustLower(t, cfg, tg, base, LowerOptions{}), tg, base).PredictedUS
	b := Predict(mustLower(t, cfg, tg, ring, LowerOptions{}), tg, ring).PredictedUS
	c := Predict(mustLower(t, cfg, tg, off, LowerOptions{}), tg, off).PredictedUS
	if !(b < a) {
		t.Errorf("ring 12 x 2 KiB predicted %.1f µs, not below the default's %.1f µs", b, a)
	}
	if c != a {
		t.Errorf("ring_tile without ring_stages moved the prediction: %.1f vs %.1f µs", c, a)
	}
	if ring.ID() == base.ID() {
		t.Error("the ring does not change the id")
	}
	if off.ID() != base.ID() {
		t.Error("ring_tile without ring_stages changed the id (it builds nothing)")
	}
	if Default().ID() != Point.Normalize(Default()).ID() {
		t.Error("default id not stable")
	}
}

// Reserved knobs change neither the program nor the prediction nor the id.
func TestReservedKnobsChangeNothing(t *testing.T) {
	tg := mustTarget(t, "h100")
	for _, model := range []string{"toy", "small"} {
		base := outcome(t, model, "h100", Default(), 20)
		for _, k := range Space(tg, "cuda") {
			if k.Effective {
				continue
			}
			for _, v := range k.Choices {
				p := Default()
				if !p.SetKnob(k.Path, v) {
					t.Fatalf("%s: cannot set %s", k.Path, valueKey(v))
				}
				if o := outcome(t, model, "h100", p, 20); o != base {
					t.Errorf("%s=%s changed the %s program or prediction", k.Path, valueKey(v), model)
				}
				if p.Normalize().ID() != Default().ID() {
					t.Errorf("%s=%s changed the id of the normalised point", k.Path, valueKey(v))
				}
			}
		}
	}
}

// The CPU landscape is not flat and has interior optima: pipelining depth
// on small/h200, N_tile on llama-8b/h100.
func TestLandscapeHasInteriorOptima(t *testing.T) {
	argmin := func(xs []float64) int {
		best := 0
		for i, x := range xs {
			if x < xs[best] {
				best = i
			}
		}
		return best
	}
	var depth []float64
	for _, d := range depthChoices {
		depth = append(depth, outcome(t, "small", "h200", with(PathDepth, d), 0).predicted)
	}
	if i := argmin(depth); i == 0 || i == len(depth)-1 {
		t.Errorf("depth optimum at the boundary: %v", depth)
	}
	tg := mustTarget(t, "h100")
	cfg := mustPreset(t, "llama-8b")
	var tiles []float64
	for _, nt := range []int{16, 32, 128} {
		p := with(PathNTile, nt)
		tiles = append(tiles, Predict(mustLower(t, cfg, tg, p, LowerOptions{}), tg, p).PredictedUS)
	}
	if argmin(tiles) != 1 {
		t.Errorf("llama-8b N_tile 16/32/128: %v, want the optimum at 32", tiles)
	}
}

func TestPredictEdgeCases(t *testing.T) {
	tg := mustTarget(t, "h100")
	prog := mustLower(t, mustPreset(t, "toy"), tg, Default(), LowerOptions{})
	assigned := Predict(prog, tg, Default())
	// Without SMs, the point's policy places the tasks: same result.
	bare := *prog
	bare.Tasks = append([]ir.Task(nil), prog.Tasks...)
	for i := range bare.Tasks {
		bare.Tasks[i].SM = nil
	}
	if c := Predict(&bare, tg, Default()); c.PredictedUS != assigned.PredictedUS || len(c.Notes) == 0 {
		t.Errorf("unassigned program: %v (notes %v), assigned %v", c.PredictedUS, c.Notes, assigned.PredictedUS)
	}
	// A wait nobody can satisfy deadlocks the queues: the serial work is used.
	stuck := bare
	stuck.Tasks = append([]ir.Task(nil), bare.Tasks...)
	stuck.Tasks[5].Waits = []ir.Wait{{Counter: stuck.Tasks[5].OutCounter, Threshold: 1}}
	c := Predict(&stuck, tg, Default())
	if c.MakespanUS != c.TotalWorkUS || c.PredictedUS < c.BytesBoundUS {
		t.Errorf("deadlocked program: makespan %v, work %v", c.MakespanUS, c.TotalWorkUS)
	}
	empty := ir.NewProgram()
	if c := Predict(empty, tg, Default()); !(c.PredictedUS > 0) {
		t.Errorf("empty program predicted %v", c.PredictedUS)
	}
	if c := Predict(prog, nil, Default()); !math.IsNaN(c.PredictedUS) || len(c.Notes) == 0 {
		t.Errorf("nil target predicted %v", c.PredictedUS)
	}
}
