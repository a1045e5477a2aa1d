package control

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// startRequest is a create request with every setting a run takes away from
// its default.
func startRequest() CreateRequest {
	restart, epsilon, batch := 4, 0.2, 2
	return CreateRequest{Model: "toy", GPU: "H200", Name: "same", Seed: 7, Cold: true, Overnight: true,
		RestartAfter: &restart, Epsilon: &epsilon, Batch: &batch, Workers: 1}
}

// A campaign created without running it (amkctl start, the MCP server's
// create) and one a run starts (amkctl autoresearch and loop, the MCP
// loop and autoresearch tools) from the same request are the same campaign:
// one id, the same settings, seed, shape and environment.
func TestStartRunAndCreateMakeTheSameCampaign(t *testing.T) {
	created, ran := newLocal(t), newLocal(t)
	resp, err := New(created).Create(context.Background(), startRequest())
	if err != nil {
		t.Fatal(err)
	}
	run, err := ran.StartRun(startRequest(), RunOptions{Launcher: trial.CPULauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if !run.Created || !resp.Created || run.Ledger.ID() != resp.ID || resp.ID != campaign.ID("toy", "h200", schedule.DeviceCPU, "same") {
		t.Fatalf("ids: run %q (created %v), create %q (created %v)", run.Ledger.ID(), run.Created, resp.ID, resp.Created)
	}
	c, err := created.Workspace.View(resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, got := c.State(), run.Ledger.Campaign().State()
	if got.Settings.Workload == nil || got.Settings.Workload.Batch != 2 || got.Settings.RestartAfter != 4 || got.Settings.Epsilon != 0.2 || !got.Settings.Overnight {
		t.Errorf("the request's settings were not kept: %+v", got.Settings)
	}
	if !reflect.DeepEqual(got.Settings, want.Settings) {
		t.Errorf("settings differ:\nrun    %+v\ncreate %+v", got.Settings, want.Settings)
	}
	if got.Seed != want.Seed || got.Cold != want.Cold || got.Shape != want.Shape || got.LatencyKind != want.LatencyKind || got.Env != want.Env {
		t.Errorf("campaigns differ:\nrun    %+v\ncreate %+v", got, want)
	}
	// The CPU launcher's name is its device's, so both name the device alike.
	if got.Env.DeviceName != "cpu@"+hostName() || got.Env.AMKVersion != "test" || got.Env.Target != "h200" {
		t.Errorf("env %+v", got.Env)
	}
	if run.Workers != 1 {
		t.Errorf("workers %d, want the request's 1", run.Workers)
	}
}

// A run holds its campaign: a second one is refused with runner.ErrLocked
// (and its launcher released); after Close the campaign resumes where the
// run left it, and a done campaign comes back Done.
func TestStartRunResumesAndLocks(t *testing.T) {
	l := newLocal(t)
	l.Now = nil // the driver's clock: a fixed one would trip max_minutes
	req := CreateRequest{Model: "toy", GPU: "h200", Cold: true}
	released := 0
	opts := RunOptions{Launcher: trial.CPULauncher{}, ReleaseLauncher: func() { released++ }}
	run, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := runner.DefaultWorkers(schedule.DeviceCPU); run.Workers != want {
		t.Errorf("workers %d, want the default %d", run.Workers, want)
	}
	if _, err := l.StartRun(req, opts); !errors.Is(err, runner.ErrLocked) || !errors.Is(err, ErrConflict) || released != 1 {
		t.Fatalf("a second run of a running campaign: %v (launcher released %d times)", err, released)
	}
	sum, err := run.Drive(context.Background(), runner.Limits{Iterations: 2})
	if err != nil || sum.Recorded != 2 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	run.Close()
	run.Close()
	if released != 2 {
		t.Errorf("launcher released %d times, want once more by Close", released)
	}
	// Seeded weights are kept in the workspace for the next run.
	if files, _ := filepath.Glob(filepath.Join(l.WeightsDir(), "*.safetensors")); len(files) == 0 {
		t.Errorf("no generated weights in %s", l.WeightsDir())
	}

	again, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Done() || again.Ledger.Campaign().State().ExperimentsRun != 2 {
		t.Fatalf("resumed: created %v done %v, %d experiments", again.Created, again.Done(), again.Ledger.Campaign().State().ExperimentsRun)
	}
	again.Close()
	if _, err := New(l).Command(context.Background(), run.Ledger.ID(), campaign.OpStop, CommandRequest{Note: "enough"}); err != nil {
		t.Fatal(err)
	}
	done, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer done.Close()
	if !done.Done() {
		t.Fatalf("a stopped campaign is not Done: %s", done.Ledger.Campaign().Status())
	}
}

// A request the workspace cannot start is refused before anything is
// locked, and the launcher is released.
func TestStartRunRefusesABadRequest(t *testing.T) {
	l := newLocal(t)
	released := 0
	opts := RunOptions{Launcher: trial.CPULauncher{}, ReleaseLauncher: func() { released++ }}
	for _, req := range []CreateRequest{{Model: "toy", GPU: "no-such-gpu"}, {Model: "no-such-model", GPU: "h100"}, {Model: "toy", GPU: "h100", Device: "tpu"}} {
		if run, err := l.StartRun(req, opts); err == nil {
			run.Close()
			t.Errorf("%+v started", req)
		}
	}
	if released != 3 {
		t.Errorf("launcher released %d times, want 3", released)
	}
}

// On the CPU trials run as they are; on a GPU under the watchdog, which
// reports a wedged device.
func TestDeviceEvaluator(t *testing.T) {
	if _, wedged := DeviceEvaluator(schedule.DeviceCPU, trial.Options{Launcher: trial.CPULauncher{}}, nil); wedged != nil {
		t.Error("a CPU evaluator has a wedge channel")
	}
	if _, wedged := DeviceEvaluator(schedule.DeviceCUDA, trial.Options{Launcher: trial.CPULauncher{}}, nil); wedged == nil {
		t.Error("a GPU evaluator has no watchdog")
	}
}

// While its run drives it, a campaign takes this process's events through
// the driver; between drives, directly: either way once, and a refusal is
// answered at once, not retried.
func TestRunTakesEventsWhileDrivingAndBetween(t *testing.T) {
	l := newLocal(t)
	l.Now = nil // the driver's clock
	cs := New(l)
	req := CreateRequest{Model: "toy", GPU: "h200", Cold: true, Overnight: true, Budget: &campaign.Budget{Iterations: 100000}, Workers: 1}
	run, err := l.StartRun(req, RunOptions{Launcher: trial.CPULauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := run.ID()
	if l.Run(id) != run {
		t.Fatal("the run is not registered")
	}
	// Between drives: applied to the ledger this run holds.
	if _, err := cs.Command(ctx, id, campaign.OpPause, CommandRequest{Note: "before"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Command(ctx, id, campaign.OpPause, CommandRequest{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second pause between drives: %v", err)
	}
	driveCtx, stop := context.WithCancel(ctx)
	drove := make(chan error, 1)
	go func() {
		_, err := run.Drive(driveCtx, runner.Limits{Daemon: true})
		drove <- err
	}()
	if _, err := cs.Command(ctx, id, campaign.OpResume, CommandRequest{}); err != nil {
		t.Fatalf("resume while driving: %v", err)
	}
	if _, err := cs.Record(ctx, id, RecordRequest{Status: "sideways"}); !errors.Is(err, ErrBadValue) {
		t.Fatalf("a refused record while driving: %v", err)
	}
	rec, err := cs.Record(ctx, id, RecordRequest{Status: "failed", Description: "while driving"})
	if err != nil || len(rec.Rows) != 1 {
		t.Fatalf("record while driving: %+v %v", rec, err)
	}
	if _, err := cs.Command(ctx, id, campaign.OpNote, CommandRequest{Note: "while driving"}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-drove; err != nil {
		t.Fatalf("drive: %v", err)
	}
	if _, err := cs.Command(ctx, id, campaign.OpStop, CommandRequest{Note: "after"}); err != nil {
		t.Fatalf("stop after the drive: %v", err)
	}
	var notes, recorded int
	var status campaign.Status
	run.Ledger.Read(func(c *campaign.Campaign) {
		notes, status = len(c.State().Notes), c.Status()
		for _, p := range c.State().Trajectory {
			if p.Trial < 0 {
				recorded++
			}
		}
	})
	if notes != 1 || recorded != 1 || status != campaign.StatusDone {
		t.Fatalf("%d notes, %d recorded rows, status %s: want 1, 1, done", notes, recorded, status)
	}
	run.Close()
	if l.Run(id) != nil {
		t.Fatal("a closed run is still registered")
	}
	// Closed, the campaign takes events under its lock again.
	if _, err := cs.Command(ctx, id, campaign.OpNote, CommandRequest{Note: "closed"}); err != nil {
		t.Fatal(err)
	}
}

// Reopen adds experiments to a campaign a run finds done: it goes live
// again (its log carrying the note), and the next drive runs on from where it
// stopped. A campaign whose own budget is spent stays done, and the
// refusal says the budget is a total and which one adds 20; a campaign
// that is not done is not reopened.
func TestRunReopenAddsExperimentsToADoneCampaign(t *testing.T) {
	l := newLocal(t)
	l.Now = nil // the driver's clock: a fixed one would trip max_minutes
	ctx := context.Background()
	req := CreateRequest{Model: "toy", GPU: "h200", Cold: true}
	opts := RunOptions{Launcher: trial.CPULauncher{}}
	run, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Reopen(ctx, "too early"); !errors.Is(err, ErrConflict) {
		t.Errorf("a live campaign reopened: %v", err)
	}
	if sum, err := run.Drive(ctx, runner.Limits{Iterations: 2}); err != nil || sum.Recorded != 2 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	run.Close()
	id := run.ID()
	if _, err := New(l).Command(ctx, id, campaign.OpStop, CommandRequest{}); err != nil {
		t.Fatal(err)
	}

	again, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Done() {
		t.Fatalf("a stopped campaign is not Done: %s", again.Ledger.Campaign().Status())
	}
	resp, err := again.Reopen(ctx, "demo rerun")
	if err != nil {
		t.Fatal(err)
	}
	if again.Done() || resp.Campaign.Status != campaign.StatusOptimizing {
		t.Fatalf("after Reopen: done %v, status %s", again.Done(), resp.Campaign.Status)
	}
	if !slices.Contains(resp.Log, "reopened: demo rerun") {
		t.Errorf("the reopen's log does not carry its note: %q", resp.Log)
	}
	if sum, err := again.Drive(ctx, runner.Limits{Iterations: 2}); err != nil || sum.Recorded != 2 {
		t.Fatalf("the reopened run: %+v %v", sum, err)
	}
	if n := again.Ledger.Campaign().State().ExperimentsRun; n != 4 {
		t.Fatalf("%d experiments after reopening, want 2 + 2", n)
	}
	again.Close()

	// A total budget of 4, spent: reopening without a new one is refused.
	if _, err := New(l).Command(ctx, id, campaign.OpBudget, CommandRequest{Budget: &campaign.Budget{Iterations: 4}}); err != nil {
		t.Fatal(err)
	}
	spent, err := l.StartRun(req, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer spent.Close()
	if !spent.Done() {
		t.Fatalf("a campaign whose budget is spent is not Done: %s", spent.Ledger.Campaign().Status())
	}
	_, err = spent.Reopen(ctx, "more")
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "a budget of 24 experiments") || !spent.Done() {
		t.Fatalf("reopening a campaign whose budget is spent: %v (done %v)", err, spent.Done())
	}
}
