package pipeline

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func target(t testing.TB, name string) *ir.GpuTarget {
	t.Helper()
	tg, err := ir.Target(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// The seed's claim, in the model: rotating the leading quadrants' fragment
// loads into the previous half hides the LDS latency of each half's first
// MMA, which the ping-pong shape exposes.
func TestSimulatorRanks4WaveAbovePingPong(t *testing.T) {
	for _, g := range []string{"mi300x", "mi325x", "mi355x"} {
		tg := target(t, g)
		four, err := Simulate(load(t, "amd-4wave-fp8"), tg)
		if err != nil {
			t.Fatal(err)
		}
		pp, err := Simulate(load(t, "pingpong-default"), tg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range []Timing{four, pp} {
			if tm.MMAUtilisation <= 0 || tm.MMAUtilisation > 1 || tm.Kind != "predicted" ||
				tm.CyclesPerIteration < tm.MMABusyPerIter {
				t.Errorf("%s %s: %+v", g, tm.Schedule, tm)
			}
		}
		if four.MMAUtilisation <= pp.MMAUtilisation || four.StallLDS >= pp.StallLDS {
			t.Errorf("%s: 4-wave %.3f (LDS stall %.0f) vs ping-pong %.3f (LDS stall %.0f)", g,
				four.MMAUtilisation, four.StallLDS, pp.MMAUtilisation, pp.StallLDS)
		}
	}
}

// Slower LDS loads cost the ping-pong shape more cycles than the 4-wave.
func TestSimulatorReadsTheTargetsLatencies(t *testing.T) {
	tg := target(t, "mi355x")
	slow := *tg
	pt := *tg.Pipeline
	pt.LDSLoad.Latency *= 4
	slow.Pipeline = &pt
	for _, f := range []string{"amd-4wave-fp8", "pingpong-default"} {
		a, _ := Simulate(load(t, f), tg)
		b, _ := Simulate(load(t, f), &slow)
		if b.CyclesPerIteration < a.CyclesPerIteration {
			t.Errorf("%s: 4x LDS latency made it faster: %.0f -> %.0f", f, a.CyclesPerIteration, b.CyclesPerIteration)
		}
		if f == "pingpong-default" && b.CyclesPerIteration == a.CyclesPerIteration {
			t.Errorf("%s: LDS latency has no effect", f)
		}
	}
}

func TestSimulateRefuses(t *testing.T) {
	if _, err := Simulate(load(t, "4wave-mutant-no-cross-half"), target(t, "mi355x")); err == nil ||
		!strings.Contains(err.Error(), "hazards") {
		t.Errorf("a schedule with hazards simulated: %v", err)
	}
	if _, err := Simulate(load(t, "amd-4wave-fp8"), target(t, "h100")); err == nil ||
		!strings.Contains(err.Error(), "no pipeline timing") {
		t.Errorf("a target without timing data simulated: %v", err)
	}
}

func TestTuneProvesAndRanks(t *testing.T) {
	cs, err := Tune(target(t, "mi355x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(Variants()) || len(cs) != 24*3*2 {
		t.Fatalf("%d candidates", len(cs))
	}
	names := map[string]bool{}
	safe, seedRank := 0, -1
	for i, c := range cs {
		if names[c.Variant.Name()] {
			t.Errorf("duplicate variant %s", c.Variant.Name())
		}
		names[c.Variant.Name()] = true
		if (c.Timing != nil) != (len(c.Hazards) == 0) {
			t.Errorf("%s: timed %v with %d hazards", c.Variant.Name(), c.Timing != nil, len(c.Hazards))
		}
		if c.Timing != nil {
			safe++
			if i > 0 && cs[i-1].Timing.MMAUtilisation < c.Timing.MMAUtilisation {
				t.Errorf("ranking out of order at %d", i)
			}
		}
		if c.Variant == Seed4Wave {
			seedRank = i
		}
		// A rotated body under the reorder always puts a cross-stage
		// fragment before a same-partition MMA.
		if c.Variant.Rotation && c.Variant.Ordering == DoubleBufferReorder && c.Timing != nil {
			t.Errorf("%s passed", c.Variant.Name())
		}
	}
	if safe == 0 || safe == len(cs) {
		t.Fatalf("%d of %d safe: the checker is not discriminating", safe, len(cs))
	}
	if seedRank < 0 || cs[seedRank].Timing == nil || cs[seedRank].Timing.MMAUtilisation < cs[0].Timing.MMAUtilisation {
		t.Fatalf("the seed's 4-wave variant is not among the best (rank %d)", seedRank)
	}
}

func TestRenderings(t *testing.T) {
	tm, err := Simulate(load(t, "amd-4wave-fp8"), target(t, "mi355x"))
	if err != nil {
		t.Fatal(err)
	}
	text := tm.Text()
	for _, want := range []string{"amd-4wave-fp8 on mi355x", "predicted MMA utilisation", "LDS fragment 72/8/8",
		"MMA 80/64/4", "latency_kind: predicted", "nothing here was measured"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	lines := Check(load(t, "4wave-mutant-no-cross-half")).Lines()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "[reg-raw] half ") || !strings.HasPrefix(lines[len(lines)-1], "note: [dead-prologue]") {
		t.Errorf("lines: %q", lines)
	}
}

func TestSummarise(t *testing.T) {
	tg := target(t, "mi355x")
	cs, err := Tune(tg, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarise(cs, tg, 3)
	rejected := 0
	for _, n := range s.RejectedBy {
		rejected += n
	}
	if s.Safe+s.Rejected != s.Variants || rejected != s.Rejected || len(s.Best) != 3 || s.Best[0].Rank != 1 ||
		s.Seed4Wave == nil || s.LatencyKind != "predicted" || s.RejectedBy[RuleReorder] == 0 {
		t.Fatalf("%+v", s)
	}
}
