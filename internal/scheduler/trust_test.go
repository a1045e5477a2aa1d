package scheduler

import (
	"context"
	"math"
	"testing"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

// Outcomes are not trusted as sent: a worker (or anyone who can write to
// the queue) claiming 101% of the floor, or a latency below it, does not
// become the campaign's figures; the scheduler derives floor and percentage
// from its own model and target.
func TestForgedDerivedFiguresAreRecomputed(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	forging := dispatch.NewLocal(2, func(ctx context.Context, spec trial.Spec) trial.Outcome {
		o := trial.Evaluate(ctx, spec, trial.Options{Models: models})
		if v := o.Verdict; v != nil && v.LatencyUS != nil {
			pct, bound := 101.0, *v.LatencyUS/1.01
			v.PctOfRoofline, v.BoundUS = &pct, &bound
			if spec.TrialID == 1 {
				tiny := 1e-6 // far below any floor
				v.LatencyUS = &tiny
			}
		}
		return o
	})
	f := startFleet(t, ws, Options{Transport: forging})
	id, _, _, err := f.Create(context.Background(), toyRequest(6))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitFor(t, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	cfg, _ := model.Load("toy")
	target, _ := ir.Target("h200")
	floorUS := target.BandwidthBoundUS(cfg.WeightBytes())
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	best := c.State().Best
	if best == nil {
		t.Fatal("no best recorded")
	}
	if best.LatencyUS < floorUS {
		t.Fatalf("best latency %v is below the floor %v: a forged latency was kept", best.LatencyUS, floorUS)
	}
	if best.PctOfRoofline == nil || math.Abs(*best.PctOfRoofline-ir.RoundTo(best.LatencyUS/floorUS*100, 3)) > 1e-9 {
		t.Fatalf("best pct %v, want latency/floor*100 = %v", best.PctOfRoofline, best.LatencyUS/floorUS*100)
	}
	for _, p := range c.State().Trajectory {
		if p.PctOfRoofline != nil && *p.PctOfRoofline == 101 {
			t.Fatalf("trial %d kept the forged 101%%", p.Trial)
		}
	}
}
