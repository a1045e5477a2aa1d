package scheduler

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// campaignFloors lowers the default point the way trial.Evaluate lowers a
// trial's and states both floors: the streamed-bytes floor a fleet
// outcome's bound_us must equal, and the seed's all-weights floor.
func campaignFloors(t *testing.T, modelName, gpu string, w trial.Workload) (streamedUS, allWeightsUS float64) {
	t.Helper()
	cfg, err := model.Load(modelName)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target(gpu)
	if err != nil {
		t.Fatal(err)
	}
	ctxCfg, err := trial.ContextConfig(cfg, modelName, w)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.Positions() {
		prog, err := schedule.Lower(ctxCfg, target, schedule.Default(), schedule.LowerOptions{Pos: p.Pos, B: w.B()})
		if err != nil {
			t.Fatal(err)
		}
		streamedUS += p.Weight * target.BandwidthBoundUS(prog.StreamedBytes())
	}
	allWeightsUS = target.BandwidthBoundUS(cfg.WeightBytes())
	if !(streamedUS > 0 && streamedUS < allWeightsUS) {
		t.Fatalf("%s/%s: streamed floor %v not below the all-weights floor %v: the test cannot tell them apart", modelName, gpu, streamedUS, allWeightsUS)
	}
	return streamedUS, allWeightsUS
}

// Outcomes are not trusted as sent: a worker (or anyone who can write to
// the queue) claiming 101% of the floor, or a latency below it, does not
// become the campaign's figures; the scheduler derives both floors and the
// percentage from its own model, target and decode position. The floor is
// the streamed-bytes one: a latency between it and the all-weights floor is
// shown, with its percentage of the streamed-bytes floor.
func TestForgedDerivedFiguresAreRecomputed(t *testing.T) {
	req := toyRequest(6)
	// A short context: toy's weights are tiny, and at the default
	// workload's 640 positions its KV rows outweigh them.
	req.Workload = &trial.Workload{PromptLens: []int{0}, GenLen: 16}
	streamedUS, allWeightsUS := campaignFloors(t, req.Model, req.GPU, *req.Workload)
	between := (streamedUS + allWeightsUS) / 2
	ws, _ := runner.OpenWorkspace(t.TempDir())
	forging := dispatch.NewLocal(2, func(ctx context.Context, spec trial.Spec) trial.Outcome {
		o := trial.Evaluate(ctx, spec, trial.Options{Models: models})
		if v := o.Verdict; v != nil && v.LatencyUS != nil {
			pct, bound, all := 101.0, *v.LatencyUS/1.01, 1e9
			v.PctOfRoofline, v.BoundUS, v.AllWeightsBoundUS = &pct, &bound, &all
			switch spec.TrialID {
			case 1:
				tiny := 1e-6 // far below any floor
				v.LatencyUS = &tiny
			case 2:
				v.LatencyUS = &between
			}
		}
		return o
	})
	f := startFleet(t, ws, Options{Transport: forging})
	id, _, _, err := f.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if st.BoundUS == nil || *st.BoundUS != ir.RoundTo(streamedUS, 4) {
		t.Errorf("campaign bound_us %v, want the streamed-bytes floor %v (all-weights %v)", value(st.BoundUS), streamedUS, allWeightsUS)
	}
	if st.AllWeightsBoundUS == nil || *st.AllWeightsBoundUS != ir.RoundTo(allWeightsUS, 4) {
		t.Errorf("campaign all_weights_bound_us %v, want %v", value(st.AllWeightsBoundUS), allWeightsUS)
	}
	best := st.Best
	if best == nil {
		t.Fatal("no best recorded")
	}
	if best.LatencyUS < streamedUS {
		t.Fatalf("best latency %v is below the floor %v: a forged latency was kept", best.LatencyUS, streamedUS)
	}
	if best.PctOfRoofline == nil || math.Abs(*best.PctOfRoofline-ir.RoundTo(best.LatencyUS/streamedUS*100, 3)) > 1e-9 {
		t.Fatalf("best pct %v, want latency/floor*100 = %v", value(best.PctOfRoofline), best.LatencyUS/streamedUS*100)
	}
	if best.BoundUS == nil || *best.BoundUS != ir.RoundTo(streamedUS, 4) {
		t.Errorf("best bound_us %v, want the streamed-bytes floor %v", value(best.BoundUS), streamedUS)
	}
	shown := false
	for _, p := range st.Trajectory {
		if p.PctOfRoofline != nil && *p.PctOfRoofline == 101 {
			t.Fatalf("trial %d kept the forged 101%%", p.Trial)
		}
		switch p.Trial {
		case 1:
			if p.LatencyUS != nil {
				t.Errorf("trial 1's latency %v below the floor was shown", *p.LatencyUS)
			}
		case 2:
			shown = p.LatencyUS != nil && *p.LatencyUS == between && p.PctOfRoofline != nil &&
				*p.PctOfRoofline == ir.RoundTo(between/streamedUS*100, 3)
			if !shown {
				t.Errorf("trial 2's latency %v (between the floors, %v) is not shown against the streamed floor: latency %v, pct %v",
					between, streamedUS, value(p.LatencyUS), value(p.PctOfRoofline))
			}
		}
	}
	if !shown {
		t.Error("trial 2 (a latency between the two floors) has no row")
	}
}

// recompute states both floors, shows a latency at or above the
// streamed-bytes floor as a percentage of it (even below the all-weights
// floor), and withholds one below it.
func TestRecomputeAgainstTheStreamedFloor(t *testing.T) {
	f := floor{streamedUS: 100, allWeightsUS: 130, streamedBytes: 480e6, weightBytes: 624e6}
	verdict := func(lat float64) *trial.Verdict {
		correct, kind := true, trial.KindPredicted
		forged := 1.0
		return &trial.Verdict{Valid: true, Correct: &correct, LatencyUS: &lat, LatencyKind: &kind,
			BoundUS: &forged, AllWeightsBoundUS: &forged, PctOfRoofline: &forged, WeightMB: 1, StreamedMB: 1}
	}
	between := trial.Outcome{Verdict: verdict(120)}
	recompute(&between, f, trial.KindPredicted)
	v := between.Verdict
	switch {
	case v.BoundUS == nil || *v.BoundUS != 100, v.AllWeightsBoundUS == nil || *v.AllWeightsBoundUS != 130:
		t.Errorf("floors bound_us %v, all_weights_bound_us %v; want 100 and 130", value(v.BoundUS), value(v.AllWeightsBoundUS))
	case v.StreamedMB != 480 || v.WeightMB != 624:
		t.Errorf("streamed_mb %v, weight_mb %v; want 480 and 624", v.StreamedMB, v.WeightMB)
	case v.LatencyUS == nil || *v.LatencyUS != 120 || v.PctOfRoofline == nil || *v.PctOfRoofline != 120:
		t.Errorf("a latency between the floors: latency %v, pct %v; want 120us at 120%%", value(v.LatencyUS), value(v.PctOfRoofline))
	}
	below := trial.Outcome{Verdict: verdict(99)}
	recompute(&below, f, trial.KindPredicted)
	v = below.Verdict
	if v.LatencyUS != nil || v.LatencyKind != nil || v.PctOfRoofline != nil {
		t.Errorf("a latency below the streamed-bytes floor was kept: latency %v, pct %v", value(v.LatencyUS), value(v.PctOfRoofline))
	}
	if len(v.Notes) == 0 || !strings.Contains(v.Notes[len(v.Notes)-1], "below the streamed-bytes floor") {
		t.Errorf("withheld without saying why: %q", v.Notes)
	}
	measured := trial.Outcome{Verdict: verdict(500)}
	*measured.Verdict.LatencyKind = trial.KindMeasuredGPU
	recompute(&measured, f, trial.KindPredicted)
	if v := measured.Verdict; v.LatencyUS != nil || v.PctOfRoofline != nil || !strings.Contains(v.Notes[len(v.Notes)-1], "not this campaign's") {
		t.Errorf("a measured-gpu latency in a predicted campaign was kept: latency %v, notes %q", value(v.LatencyUS), v.Notes)
	}
	unknown := trial.Outcome{Verdict: verdict(500)}
	recompute(&unknown, floor{streamedUS: math.NaN(), allWeightsUS: math.NaN()}, "")
	if v := unknown.Verdict; v.LatencyUS != nil || v.BoundUS != nil || v.AllWeightsBoundUS != nil || v.PctOfRoofline != nil {
		t.Errorf("with no floor known, figures were kept: %+v", v)
	}
}

// floorFor states the floors trial.Evaluate states for the same model,
// target, position and batch, and refuses what it cannot lower.
func TestFloorForMatchesTheTrialPipeline(t *testing.T) {
	for _, tc := range []struct {
		model, gpu string
		pos, batch int
	}{{"toy", "h200", 0, 0}, {"toy-2L", "h100", 37, 2}} {
		fl, err := floorFor(tc.model, tc.gpu, tc.pos, tc.batch, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		v := trial.Evaluate(context.Background(), trial.Spec{Model: tc.model, GPU: tc.gpu, Device: schedule.DeviceCPU,
			Point: json.RawMessage(`{}`), Token: 7, Pos: tc.pos, Batch: tc.batch}, trial.Options{Models: models}).Verdict
		if v == nil || v.BoundUS == nil || v.AllWeightsBoundUS == nil {
			t.Fatalf("%+v: the trial pipeline stated no floors: %+v", tc, v)
		}
		if got := ir.RoundTo(fl.streamedUS, 4); got != *v.BoundUS {
			t.Errorf("%+v: streamed-bytes floor %v, the trial's bound_us %v", tc, got, *v.BoundUS)
		}
		if got := ir.RoundTo(fl.allWeightsUS, 4); got != *v.AllWeightsBoundUS {
			t.Errorf("%+v: all-weights floor %v, the trial's all_weights_bound_us %v", tc, got, *v.AllWeightsBoundUS)
		}
	}
	if _, err := floorFor("toy", "h200", 1<<20, 1, nil); err == nil {
		t.Error("a position beyond the model's context gave a floor")
	}
	if _, err := floorFor("no-such-model", "h200", 0, 1, nil); err == nil {
		t.Error("an unknown model gave a floor")
	}
}

// For a workload campaign the scheduler states the floors the trial
// pipeline states, overall and per position; it keeps a workload verdict's
// latency only when every position is the campaign's and at or above its
// floor.
func TestWorkloadFloorsMatchTheTrialPipeline(t *testing.T) {
	w := trial.Workload{PromptLens: []int{100, 400}, GenLen: 9, Batch: 2}
	fl, err := floorFor("toy-2L", "h100", 0, 0, &w)
	if err != nil {
		t.Fatal(err)
	}
	out := trial.Evaluate(context.Background(), trial.Spec{Model: "toy-2L", GPU: "h100", Device: schedule.DeviceCPU,
		Point: json.RawMessage(`{}`), Token: 7, Workload: &w}, trial.Options{Models: models})
	v := out.Verdict
	if v == nil || v.BoundUS == nil || v.LatencyUS == nil || len(v.Positions) != 6 {
		t.Fatalf("the trial pipeline's verdict: %+v", v)
	}
	if got := ir.RoundTo(fl.streamedUS, 4); math.Abs(got-*v.BoundUS) > 1e-4 {
		t.Errorf("streamed-bytes floor %v, the trial's bound_us %v", got, *v.BoundUS)
	}
	want := *v
	want.Positions = append([]trial.PositionVerdict(nil), v.Positions...)
	recompute(&out, fl, trial.KindPredicted)
	if v.LatencyUS == nil || *v.LatencyUS != *want.LatencyUS {
		t.Fatalf("the scheduler withheld a sound workload latency: %v", v.Notes)
	}
	for i, p := range v.Positions {
		if p.BoundUS == nil || *p.BoundUS != *want.Positions[i].BoundUS || p.PctOfRoofline == nil {
			t.Errorf("position %d: floor %v, the trial's %v", p.Pos, value(p.BoundUS), value(want.Positions[i].BoundUS))
		}
	}
	// A position below its floor withholds the whole latency.
	low := trial.Outcome{Verdict: &want}
	want.Positions[1].LatencyUS = new(*want.Positions[1].BoundUS / 2)
	recompute(&low, fl, trial.KindPredicted)
	if low.Verdict.LatencyUS != nil || low.Verdict.Positions[0].LatencyUS != nil {
		t.Errorf("a position below its floor kept the latencies: %+v", low.Verdict)
	}
}

// value is what a figure says, for messages: its number, or nil.
func value(x *float64) any {
	if x == nil {
		return nil
	}
	return *x
}
