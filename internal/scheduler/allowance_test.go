package scheduler

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// embeddedRun creates a campaign in ws and runs it the way `amkctl
// autoresearch --iters ITERS` does (one trial in flight); killed ends the
// run after its first experiment, as a killed process would. The
// campaign's own budget (30 experiments) is far above the run's iters.
func embeddedRun(t *testing.T, ws *runner.Workspace, name string, iters int, killed bool) string {
	t.Helper()
	start := campaign.Start{Time: time.Now().UTC(), Model: "toy", GPU: "h200", Device: "cpu", Cold: true, Name: name,
		Settings: campaign.DefaultSettings(), Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
	start.Settings.Overnight = true
	start.Settings.Budget.Iterations = 30
	l, _, err := ws.Create(start)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := dispatch.NewLocal(1, evaluate(0))
	defer d.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drv := &runner.Driver{Ledger: l, Dispatcher: d, Workers: 1}
	if killed {
		drv.Recorded = func(trial.Outcome) { cancel() }
	}
	if _, err := drv.Run(ctx, runner.Limits{Iterations: iters}); err != nil {
		t.Fatal(err)
	}
	want := iters
	if killed {
		want = 1
	}
	if st := l.Campaign().State(); st.ExperimentsRun != want || st.NextTrial != want || len(st.InFlight) != 0 {
		t.Fatalf("the embedded run left %d experiments, %d trials issued, %d in flight; want %d, %d, 0",
			st.ExperimentsRun, st.NextTrial, len(st.InFlight), want, want)
	}
	return l.ID()
}

// A campaign an embedded `amkctl autoresearch --iters 2` left in a
// scheduler's workspace is driven by a scheduler run with --adopt only for
// what is left of those 2: one killed after its first experiment gets
// exactly one more, one that ran both is not driven at all, and a
// restarted scheduler drives neither further. It runs in a synctest
// bubble, so the scans of the windows below have all run when it looks.
func TestAdoptionDrivesOnlyWhatIsLeftOfTheLastRun(t *testing.T) {
	synctest.Test(t, testAdoptionDrivesOnlyWhatIsLeftOfTheLastRun)
}

func testAdoptionDrivesOnlyWhatIsLeftOfTheLastRun(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	killed := embeddedRun(t, ws, "killed", 2, true)
	finished := embeddedRun(t, ws, "finished", 2, false)

	f := startFleet(t, ws, Options{RescanEvery: 10 * time.Millisecond, AdoptAll: true})
	waitfor.Cond(t, time.Minute, "the killed run's second experiment", func() bool {
		r := status(t, f, killed)
		return r.ExperimentsRun >= 2 && len(r.InFlight) == 0
	})
	time.Sleep(time.Second) // a hundred scans and ticks, on the bubble's clock
	synctest.Wait()
	if got := status(t, f, killed).ExperimentsRun; got != 2 {
		t.Fatalf("the adopted campaign of a run asked for 2 ran %d experiments, want 2", got)
	}
	if f.Drives(killed) {
		t.Fatal("the fleet still holds a campaign whose last run's allowance it has used")
	}
	if f.Drives(finished) || status(t, f, finished).ExperimentsRun != 2 {
		t.Fatalf("a campaign whose run used its 2 iterations was driven (%d experiments)", status(t, f, finished).ExperimentsRun)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f2 := startFleet(t, ws, Options{RescanEvery: 10 * time.Millisecond, AdoptAll: true})
	time.Sleep(time.Second)
	synctest.Wait()
	for _, id := range []string{killed, finished} {
		if f2.Drives(id) || status(t, f2, id).ExperimentsRun != 2 {
			t.Fatalf("a restarted scheduler drove %s past its run's 2 (%d experiments)", id, status(t, f2, id).ExperimentsRun)
		}
		checkLedger(t, ws, id, 2)
	}
}

// The fix the no_driver alert gives for a campaign an embedded run left in
// a scheduler's workspace says what a scheduler run with --adopt would do
// with it: drive what is left of that run's limits, or, once they are used
// up, nothing (amkctl start then drives it without them).
func TestNoDriverFixSaysWhatAdoptionWouldDo(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	killed := embeddedRun(t, ws, "killed", 2, true)
	finished := embeddedRun(t, ws, "finished", 2, false)
	f := startFleet(t, ws, Options{RescanEvery: -1})
	for _, c := range []struct {
		id, want, not string
	}{
		{killed, "amkctl start toy --gpu h200 --device cpu --name killed --server URL (or run the scheduler with --adopt, which drives only what is left of the limits of the run that last opened it: 1 iteration(s))", ""},
		{finished, "amkctl start toy --gpu h200 --device cpu --name finished --server URL (the limits of the run that last opened it, 2 iteration(s), are used up, so a scheduler run with --adopt leaves it as it is;", "(or run the scheduler with --adopt"},
	} {
		rep, err := f.Campaigns().Status(context.Background(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Alerts) != 1 || rep.Alerts[0].Kind != campaign.AlertNoDriver {
			t.Fatalf("%s: alerts %+v, want no_driver", c.id, rep.Alerts)
		}
		if fix := rep.Alerts[0].Fix; !strings.Contains(fix, c.want) || (c.not != "" && strings.Contains(fix, c.not)) {
			t.Errorf("%s: fix %q\nwant it to say %q", c.id, fix, c.want)
		}
	}
}

// Starting a campaign through the scheduler (amkctl start) while the
// scheduler drives it for what is left of another run's limits (--adopt)
// makes it the scheduler's: it is driven on past those limits, to its own
// budget, and a restarted scheduler drives it too.
func TestStartLiftsTheLimitOfAnAdoption(t *testing.T) {
	synctest.Test(t, testStartLiftsTheLimitOfAnAdoption)
}

func testStartLiftsTheLimitOfAnAdoption(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	id := embeddedRun(t, ws, "lifted", 6, true) // 1 experiment of 6: 5 left
	f := startFleet(t, ws, Options{RescanEvery: 100 * time.Millisecond, AdoptAll: true,
		Transport: dispatch.NewLocal(1, evaluate(time.Second))})
	waitfor.Cond(t, time.Minute, "the adoption", func() bool { return f.Drives(id) })
	if got := status(t, f, id).ExperimentsRun; got >= 6 {
		t.Fatalf("%d experiments before the start: the test proves nothing", got)
	}
	got, created, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h200", Device: "cpu", Name: "lifted", Cold: true, Overnight: true})
	if err != nil || created || got != id {
		t.Fatalf("start of the adopted campaign: %q created %v, %v", got, created, err)
	}
	waitfor.Cond(t, time.Minute, "experiments past the adopted run's 6", func() bool { return status(t, f, id).ExperimentsRun >= 10 })
	if !f.Drives(id) || !hasSettings(ws.CampaignDir(id)) {
		t.Fatalf("after the start: driven %v, the scheduler's settings file %v", f.Drives(id), hasSettings(ws.CampaignDir(id)))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f2 := startFleet(t, ws, Options{RescanEvery: 100 * time.Millisecond})
	waitfor.Cond(t, time.Minute, "a restarted scheduler to drive it", func() bool { return f2.Drives(id) })
}
