package calibrate

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

// synthPoints are the schedule points the round trip times: the
// reference default, the device default, fully fused, tiles_per_sm 0/1/2
// and the streaming ring on (the device default has it off).
func synthPoints() map[string]schedule.Point {
	pts := map[string]schedule.Point{
		"reference-default": schedule.Default(),
		"device-default":    schedule.DeviceDefault(),
		"fully-fused":       schedule.FullyFused(),
	}
	untiled := schedule.DeviceDefault()
	untiled.Config.DeleteTile("gemv", "tiles_per_sm")
	pts["tiles_per_sm=0"] = untiled
	two := schedule.DeviceDefault()
	two.Config.SetTile("gemv", "tiles_per_sm", 2)
	pts["tiles_per_sm=2"] = two
	ring := schedule.DeviceDefault()
	ring.Knobs["ring_stages"] = 8
	pts["ring"] = ring
	return pts
}

// trueCosts is the record the synthetic "measurements" come from: the
// defaults perturbed in every quantity DefaultFit moves.
func trueCosts() schedule.CostParams {
	c := schedule.DefaultCostParams()
	c.AchievableBW = 0.70
	c.MaxSMStreamGBs = 25
	c.DispatchUS, c.SignalUS, c.WakeUS = c.DispatchUS*1.6, c.SignalUS*1.6, c.WakeUS*1.6
	c.TileFixedUS = 0.25
	return c
}

// synthMeasurements lowers every model x point at two positions and
// "measures" it as trueCosts predicts it, times exp(noise x u), u uniform
// in [-1, 1] from a fixed seed. SYNTHETIC test data, not a measurement.
func synthMeasurements(t testing.TB, tg *ir.GpuTarget, costs schedule.CostParams, noise float64) []Measurement {
	rng := rand.New(rand.NewPCG(20261124, 1))
	var ms []Measurement
	for _, name := range []string{"toy", "small", "llama-1b"} {
		cfg, err := model.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		pts := synthPoints()
		for _, key := range []string{"reference-default", "device-default", "fully-fused", "tiles_per_sm=0", "tiles_per_sm=2", "ring"} {
			for _, pos := range []int{0} {
				p := pts[key]
				prog, err := schedule.Lower(cfg, tg, p, schedule.LowerOptions{Pos: pos})
				if err != nil {
					t.Fatalf("%s %s: %v", name, key, err)
				}
				us := schedule.PredictWith(prog, tg, p, costs).PredictedUS * math.Exp(noise*(2*rng.Float64()-1))
				ms = append(ms, Measurement{Label: name + " " + key, Program: prog, Point: p, MeasuredUS: us, Device: "synthetic"})
			}
		}
	}
	return ms
}

func mustTarget(t testing.TB, name string) *ir.GpuTarget {
	tg, err := ir.Target(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// The round trip: measurements synthesised from a known record (+1% noise)
// give that record back within tolerance, and the errors shrink.
func TestFitRecoversPerturbedCosts(t *testing.T) {
	tg := mustTarget(t, "h100")
	truth := trueCosts()
	ms := synthMeasurements(t, tg, truth, 0.01)
	res, err := Fit(tg, ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", res.Markdown())
	want := map[string]float64{"achievable_bw": truth.AchievableBW, "max_sm_stream_gbs": truth.MaxSMStreamGBs, "hop": 1.6, "tile_fixed_us": truth.TileFixedUS}
	tol := map[string]float64{"achievable_bw": 0.05, "max_sm_stream_gbs": 0.05, "hop": 0.10, "tile_fixed_us": 0.25}
	for _, p := range res.Params {
		t.Logf("| %s | %.4g | %.4g | %.4g | %+.1f%% |", p.Name, p.Default, want[p.Name], p.Fitted, (p.Fitted/want[p.Name]-1)*100)
		if !p.Identified {
			t.Errorf("%s: not identified (sensitivity %.4g)", p.Name, p.Sensitivity)
			continue
		}
		if rel := math.Abs(p.Fitted/want[p.Name] - 1); rel > tol[p.Name] {
			t.Errorf("%s: fitted %.4g, true %.4g (%.1f%% off, tolerance %.0f%%)", p.Name, p.Fitted, want[p.Name], rel*100, tol[p.Name]*100)
		}
	}
	if !(res.RMSAfter < 0.02) || !(res.RMSAfter < res.RMSBefore/5) || res.Worse() {
		t.Errorf("RMS log error %.4f before, %.4f after: want after < 0.02 and < before/5", res.RMSBefore, res.RMSAfter)
	}
}

// toyMeasurements are toy's points only (fast): SYNTHETIC, from truth.
func toyMeasurements(t *testing.T, tg *ir.GpuTarget, pts []schedule.Point, positions []int, truth schedule.CostParams) []Measurement {
	cfg, err := model.Preset("toy")
	if err != nil {
		t.Fatal(err)
	}
	var ms []Measurement
	for _, p := range pts {
		for _, pos := range positions {
			prog, err := schedule.Lower(cfg, tg, p, schedule.LowerOptions{Pos: pos})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, Measurement{Label: "toy", Program: prog, Point: p, MeasuredUS: schedule.PredictWith(prog, tg, p, truth).PredictedUS, Device: "synthetic"})
		}
	}
	return ms
}

func TestFitDeterministic(t *testing.T) {
	tg := mustTarget(t, "h100")
	ms := toyMeasurements(t, tg, []schedule.Point{schedule.Default(), schedule.DeviceDefault(), schedule.FullyFused()}, []int{0, 100}, trueCosts())
	a, err := Fit(tg, ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fit(tg, ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Markdown() != b.Markdown() || a.After != b.After {
		t.Fatalf("two fits of the same points differ:\n%s\n%s", a.Markdown(), b.Markdown())
	}
}

// Points of one schedule cannot tell the per-tile cost from the hop (every
// tile pays both, in the same proportion at every position): the fit keeps
// tile_fixed_us at its default, says so, and leaves it out of the record.
func TestFitKeepsUnidentifiedAtDefault(t *testing.T) {
	tg := mustTarget(t, "h100")
	truth := trueCosts()
	ms := toyMeasurements(t, tg, []schedule.Point{schedule.Default()}, []int{0, 10, 50, 100, 200, 250}, truth)
	res, err := Fit(tg, ms, []string{"hop", "tile_fixed_us"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", res.Markdown())
	var kept []string
	for _, p := range res.Params {
		if !p.Identified {
			kept = append(kept, p.Name)
			if p.Fitted != p.Default {
				t.Errorf("%s: not identified but %g, default %g", p.Name, p.Fitted, p.Default)
			}
		}
	}
	if len(kept) != 1 {
		t.Fatalf("kept at default: %v, want one of hop and tile_fixed_us", kept)
	}
	rec := res.Record(schedule.CostProvenance{Date: "2026-11-24", Device: "synthetic", Command: "test"})
	if _, ok := rec.Params[kept[0]]; ok || len(rec.Provenance.KeptDefault) == 0 {
		t.Errorf("record %+v keeps %s", rec, kept[0])
	}
	if _, err := schedule.ParseCostRecords(mustMarshal(t, schedule.CostRecords{"h100": rec})); err != nil {
		t.Errorf("the record does not check: %v", err)
	}
	if res.Worse() {
		t.Errorf("RMS %.4f after, %.4f before", res.RMSAfter, res.RMSBefore)
	}
}

func mustMarshal(t *testing.T, recs schedule.CostRecords) []byte {
	b, err := recs.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFitRefuses(t *testing.T) {
	tg := mustTarget(t, "h100")
	ms := toyMeasurements(t, tg, []schedule.Point{schedule.Default()}, []int{0, 1, 2}, trueCosts())
	if _, err := Fit(tg, ms, nil); err == nil || !strings.Contains(err.Error(), "cannot fit 4 parameters") {
		t.Errorf("3 points, 4 parameters: %v", err)
	}
	for _, names := range [][]string{{"bw"}, {"hop", "hop"}} {
		if _, err := Fit(tg, ms, names); err == nil {
			t.Errorf("fit %v accepted", names)
		}
	}
	ms[0].MeasuredUS = math.NaN()
	if _, err := Fit(tg, ms, []string{"hop"}); err == nil {
		t.Error("a NaN measurement accepted")
	}
}

func TestWorse(t *testing.T) {
	for _, c := range []struct {
		before, after float64
		worse         bool
	}{{0.3, 0.1, false}, {0.1, 0.1, false}, {0.1, 0.3, true}, {0.1, math.NaN(), true}} {
		if got := (&Result{RMSBefore: c.before, RMSAfter: c.after}).Worse(); got != c.worse {
			t.Errorf("before %g after %g: worse %v", c.before, c.after, got)
		}
	}
}
