package calibrate

import (
	"math"
	"math/rand/v2"
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
	for _, n := range []int{0, 2} {
		p := schedule.DeviceDefault()
		p.Config.SetTile("gemv", "tiles_per_sm", n)
		pts["tiles_per_sm="+string(rune('0'+n))] = p
	}
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
