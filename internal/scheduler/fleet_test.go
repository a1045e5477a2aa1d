package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

var models = trial.NewModelCache(0)

// evaluate is the real pipeline, slowed down so that trials are in flight
// when a test stops the fleet.
func evaluate(delay time.Duration) dispatch.Evaluator {
	return func(ctx context.Context, spec trial.Spec) trial.Outcome {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
		}
		return trial.Evaluate(ctx, spec, trial.Options{Models: models})
	}
}

func startFleet(t *testing.T, ws *runner.Workspace, opts Options) *Fleet {
	t.Helper()
	opts.Workspace = ws
	if opts.Transport == nil {
		opts.Transport = dispatch.NewLocal(2, evaluate(0))
	}
	if opts.TickEvery == 0 {
		opts.TickEvery = 50 * time.Millisecond
	}
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func toyRequest(iters int) control.CreateRequest {
	return control.CreateRequest{Model: "toy", GPU: "h200", Device: "cpu", Cold: true, Overnight: true,
		Budget: &campaign.Budget{Iterations: iters}, Workers: 2}
}

func status(t *testing.T, f *Fleet, id string) campaign.StatusReport {
	t.Helper()
	var r campaign.StatusReport
	if err := f.Read(id, func(c *campaign.Campaign) { r = c.StatusReport(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkLedger asserts results.tsv numbers experiments 1..n with no gap and
// that no trial was recorded twice.
func checkLedger(t *testing.T, ws *runner.Workspace, id string, n int) {
	t.Helper()
	rows, err := flywheel.ReadRows(ws.CampaignDir(id) + "/results.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d results.tsv rows, want %d", len(rows), n)
	}
	for i, r := range rows {
		if r.Experiment != i+1 {
			t.Fatalf("row %d is experiment %d", i+1, r.Experiment)
		}
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range c.State().Trajectory {
		if p.Trial >= 0 && seen[p.Trial] {
			t.Fatalf("trial %d recorded twice", p.Trial)
		}
		seen[p.Trial] = true
	}
	if st := c.State(); st.ExperimentsRun != n || len(st.InFlight) != 0 {
		t.Fatalf("ledger: %d experiments, %d in flight; want %d, 0", st.ExperimentsRun, len(st.InFlight), n)
	}
}

func TestFleetRunsACampaignToItsBudget(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{})
	id, created, workers, err := f.Create(context.Background(), toyRequest(10))
	if err != nil || !created || workers != 2 {
		t.Fatalf("create: %s %v %d %v", id, created, workers, err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	checkLedger(t, ws, id, 10)
	if got, _ := f.IDs(); len(got) != 1 || got[0] != id {
		t.Fatalf("IDs %v", got)
	}
	samples := f.Samples()
	if len(samples) != 1 || samples[0].Experiments != 10 || samples[0].Status != campaign.StatusDone || samples[0].BestUS == nil {
		t.Fatalf("samples %+v", samples)
	}
	if readSettings(ws.CampaignDir(id)).Workers != 2 {
		t.Fatal("workers setting not stored beside the ledger")
	}
}

// A campaign for a workload other than the default, batched, on the
// fleet: named after its workload, and every trial evaluated by the real
// pipeline at each of the workload's positions, each correct.
func TestFleetRunsAWorkloadCampaign(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{})
	req := toyRequest(4)
	req.Workload, req.Batch = &trial.Workload{PromptLens: []int{40, 8}, GenLen: 5}, new(2)
	resp, err := f.Campaigns().Create(context.Background(), req)
	if err != nil || !resp.Created || resp.ID != "toy-h200-cpu-p40_8-g5-b2" {
		t.Fatalf("create: %+v %v", resp, err)
	}
	id := resp.ID
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	checkLedger(t, ws, id, 4)
	data, err := os.ReadFile(filepath.Join(ws.CampaignDir(id), "trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := trial.Workload{PromptLens: []int{40, 8}, GenLen: 5, Batch: 2}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d trials logged, want 4", len(lines))
	}
	valid := 0
	for _, ln := range lines {
		var o trial.Outcome
		if err := json.Unmarshal([]byte(ln), &o); err != nil || o.Verdict == nil {
			t.Fatalf("trial %s: %v", ln, err)
		}
		v := o.Verdict
		if v.Workload == nil || !v.Workload.Equal(want) || len(v.Positions) != 6 {
			t.Fatalf("trial %d: workload %+v, %d positions", o.TrialID, v.Workload, len(v.Positions))
		}
		for i, p := range v.Positions {
			if p.Pos != want.Positions()[i].Pos || p.KVLen != p.Pos+1 || (v.Valid && (p.Correct == nil || !*p.Correct)) {
				t.Errorf("trial %d at position %d (KV length %d): correct %v", o.TrialID, p.Pos, p.KVLen, p.Correct)
			}
		}
		if v.Valid {
			valid++
		}
	}
	if valid == 0 {
		t.Error("no trial was valid: nothing was checked")
	}
}

func TestFleetCreateOfAnExistingCampaignResumesIt(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{})
	id, _, _, err := f.Create(context.Background(), toyRequest(3))
	if err != nil {
		t.Fatal(err)
	}
	again := toyRequest(50)
	again.Workers = 7
	id2, created, workers, err := f.Create(context.Background(), again)
	if err != nil || created || id2 != id || workers != 2 {
		t.Fatalf("second create: %s created=%v workers=%d %v", id2, created, workers, err)
	}
	if b := status(t, f, id).Settings.Budget.Iterations; b != 3 {
		t.Fatalf("budget changed to %d by a second create", b)
	}
}

func TestFleetRefusesBadRequests(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Targets: []string{"h200"}})
	for name, req := range map[string]control.CreateRequest{
		"unknown model":   {Model: "no-such-model", GPU: "h200", Device: "cpu"},
		"unknown gpu":     {Model: "toy", GPU: "v100", Device: "cpu"},
		"target not here": {Model: "toy", GPU: "h100", Device: "cpu"},
	} {
		if _, _, _, err := f.Create(context.Background(), req); !errors.Is(err, control.ErrBadValue) {
			t.Errorf("%s: %v, want ErrBadValue", name, err)
		}
	}
	for _, id := range []string{"nope", "../campaigns/x", "..", "", "a/b", "UPPER"} {
		if err := f.Read(id, func(*campaign.Campaign) {}); !errors.Is(err, control.ErrNotFound) {
			t.Errorf("read of campaign %q: %v", id, err)
		}
	}
	if _, err := f.Do(context.Background(), "nope", campaign.Command{Op: campaign.OpPause}); !errors.Is(err, control.ErrNotFound) {
		t.Errorf("command to an unknown campaign: %v", err)
	}
	if _, err := f.Workers(context.Background()); !errors.Is(err, control.ErrUnsupported) {
		t.Errorf("workers of a local transport: %v", err)
	}
}

func TestFleetRestartRecordsEveryTrialOnce(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Transport: dispatch.NewLocal(2, evaluate(30*time.Millisecond))})
	req := toyRequest(14)
	req.Workers = 3
	id, _, _, err := f.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "a few experiments", func() bool { return status(t, f, id).ExperimentsRun >= 4 })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	left := len(c.State().InFlight)
	if left == 0 {
		t.Fatal("no trial was in flight at the stop; the test proves nothing")
	}
	if c.Status() == campaign.StatusDone {
		t.Fatal("the campaign finished before the stop")
	}
	// A new scheduler over the same workspace picks the campaign up.
	f2 := startFleet(t, ws, Options{})
	if readSettings(ws.CampaignDir(id)).Workers != 3 {
		t.Fatal("workers setting lost")
	}
	waitfor.Cond(t, time.Minute, "the resumed campaign to finish", func() bool {
		r := status(t, f2, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	checkLedger(t, ws, id, 14)
	t.Logf("%d trial(s) were in flight at the stop", left)
}

func TestFleetAdoptsACampaignOnceReleased(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	start := campaign.Start{Time: time.Now().UTC(), Model: "toy", GPU: "h200", Device: "cpu", Cold: true,
		Settings: campaign.DefaultSettings(), Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
	start.Settings.Budget.Iterations = 4
	held, _, err := ws.Create(start) // another process (autoresearch) holds it
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, ws, Options{RescanEvery: 20 * time.Millisecond, AdoptAll: true})
	id := held.ID()
	if got, _ := f.IDs(); len(got) != 1 || got[0] != id {
		t.Fatalf("IDs %v", got)
	}
	if r := status(t, f, id); r.ID != id {
		t.Fatalf("a held campaign is not readable: %+v", r)
	}
	if _, err := f.Do(context.Background(), id, campaign.Command{Op: campaign.OpPause}); !errors.Is(err, control.ErrConflict) {
		t.Fatalf("command to a held campaign: %v, want ErrConflict", err)
	}
	if _, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h200", Device: "cpu"}); !errors.Is(err, control.ErrConflict) {
		t.Fatalf("create of a held campaign: %v, want ErrConflict", err)
	}
	held.Close()
	waitfor.Cond(t, time.Minute, "the released campaign to be adopted and finish", func() bool {
		r := status(t, f, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	checkLedger(t, ws, id, 4)
}

// A campaign created beside the scheduler (the demo's, one amkctl
// autoresearch left) is not the fleet's: it is left as it is, until a
// start through the fleet asks for it to be driven; from then on it is
// the fleet's, across restarts. It runs in a synctest bubble, so the ten
// scans of the window below have all run when the test looks.
func TestFleetLeavesCampaignsItDidNotStart(t *testing.T) {
	synctest.Test(t, testFleetLeavesCampaignsItDidNotStart)
}

func testFleetLeavesCampaignsItDidNotStart(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	start := campaign.Start{Time: time.Now().UTC(), Model: "toy", GPU: "h200", Device: "cpu", Cold: true,
		Settings: campaign.DefaultSettings(), Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
	start.Settings.Budget.Iterations = 4
	beside, _, err := ws.Create(start)
	if err != nil {
		t.Fatal(err)
	}
	id := beside.ID()
	beside.Close()
	f := startFleet(t, ws, Options{RescanEvery: 10 * time.Millisecond})
	time.Sleep(100 * time.Millisecond) // ten scans, on the bubble's clock
	synctest.Wait()
	if f.Drives(id) || status(t, f, id).ExperimentsRun != 0 {
		t.Fatalf("the fleet drives a campaign it was not asked to (%d experiments)", status(t, f, id).ExperimentsRun)
	}
	if _, err := f.Do(context.Background(), id, campaign.Command{Op: campaign.OpPause}); !errors.Is(err, control.ErrConflict) || !strings.Contains(err.Error(), "--adopt") {
		t.Fatalf("a command to a campaign left alone: %v, want a conflict naming --adopt", err)
	}
	// Starting it through the fleet is the request to drive it.
	if _, created, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h200", Device: "cpu"}); err != nil || created {
		t.Fatalf("start of the existing campaign: created=%v %v", created, err)
	}
	waitfor.Cond(t, time.Minute, "the adopted campaign to finish", func() bool {
		r := status(t, f, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	checkLedger(t, ws, id, 4)
	if !hasSettings(ws.CampaignDir(id)) {
		t.Fatal("an adopted campaign does not carry the scheduler's settings: a restarted scheduler would leave it")
	}
}

// TestFleetCommandsGoThroughTheDriver runs in a synctest bubble, so the
// paused window below is on the bubble's clock: every tick of it has run
// when the test looks, and not one experiment may have been added.
func TestFleetCommandsGoThroughTheDriver(t *testing.T) {
	synctest.Test(t, testFleetCommandsGoThroughTheDriver)
}

func testFleetCommandsGoThroughTheDriver(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{})
	req := toyRequest(0) // unbounded, overnight: runs until stopped
	id, _, _, err := f.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpPause}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpPause}); !errors.Is(err, campaign.ErrInvalid) {
		t.Fatalf("second pause: %v", err)
	}
	waitfor.Cond(t, time.Minute, "the paused campaign to drain", func() bool { return len(status(t, f, id).InFlight) == 0 })
	synctest.Wait()
	before := status(t, f, id).ExperimentsRun
	time.Sleep(100 * time.Millisecond) // two ticks of the fleet
	synctest.Wait()
	if after := status(t, f, id).ExperimentsRun; after != before {
		t.Fatalf("a paused campaign ran %d more experiments", after-before)
	}
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpBudget, Budget: &campaign.Budget{Iterations: before + 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpResume}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the new budget to be spent", func() bool {
		r := status(t, f, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	if n := status(t, f, id).ExperimentsRun; n < before+3 {
		t.Fatalf("%d experiments, want at least %d", n, before+3)
	}
	files, err := f.Campaigns().WriteReport(ctx, id)
	// the aggregate report, report.json, .md and .svg, and the best's config
	if err != nil || len(files.Files) != 5 || filepath.Base(files.Files[4]) != campaign.BestConfigFile {
		t.Fatalf("report: %+v %v", files, err)
	}
	lat := 1.0
	if _, err := f.Do(ctx, id, campaign.Record{Time: time.Now(), Status: "kept", LatencyUS: &lat, Kind: trial.KindPredicted}); !errors.Is(err, campaign.ErrDone) {
		t.Fatalf("record into a done campaign: %v", err)
	}
	f.Close()
	if err := f.Health(ctx); err == nil {
		t.Fatal("a closed fleet reports healthy")
	}
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpReopen}); err == nil {
		t.Fatal("a closed fleet took a command")
	}
}

// flaky fails its first submissions, as a transport that lost Redis does.
type flaky struct {
	dispatch.Dispatcher
	mu       sync.Mutex
	failures int
}

func (f *flaky) Submit(ctx context.Context, spec trial.Spec) error {
	f.mu.Lock()
	if f.failures > 0 {
		f.failures--
		f.mu.Unlock()
		return errors.New("redis: connection refused")
	}
	f.mu.Unlock()
	return f.Dispatcher.Submit(ctx, spec)
}

func TestFleetRestartsAFailedDriver(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	tr := &flaky{Dispatcher: dispatch.NewLocal(2, evaluate(0)), failures: 3}
	f := startFleet(t, ws, Options{Transport: tr, RestartDelay: 5 * time.Millisecond, Logger: log})
	id, _, _, err := f.Create(context.Background(), toyRequest(6))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish despite the failures", func() bool {
		r := status(t, f, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	checkLedger(t, ws, id, 6)
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "campaign driver stopped; restarting it"); n < 1 {
		t.Fatalf("no driver restart logged:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestLogWriterQuietsRepeats(t *testing.T) {
	var buf bytes.Buffer
	w := &logWriter{log: slog.New(slog.NewTextHandler(&buf, nil))}
	for _, chunk := range []string{"waiting on", " the last trial\nwaiting on the last trial\n", "waiting on the last trial\n", "done\n", "\n"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	got := buf.String()
	if strings.Count(got, "waiting on the last trial") != 1 || strings.Count(got, "msg=done") != 1 || strings.Count(got, "level=") != 2 {
		t.Fatalf("logged:\n%s", got)
	}
}

// A failed driver waiting out its backoff restarts as soon as the
// transport, unhealthy meanwhile, answers again. In a synctest bubble the
// probes' ticks are the bubble's clock: the outage is seen without waiting.
func TestDriverRestartFollowsTheTransportBack(t *testing.T) {
	synctest.Test(t, testDriverRestartFollowsTheTransportBack)
}

func testDriverRestartFollowsTheTransportBack(t *testing.T) {
	var healthy atomic.Bool
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Health: func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("redis down")
	}})
	done := make(chan bool, 1)
	go func() {
		ok, recovered := f.waitRestart(time.Hour, time.Now())
		done <- ok && recovered
	}()
	time.Sleep(3 * healthProbeEvery) // the outage is seen
	healthy.Store(true)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("waitRestart did not report the transport's recovery")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the restart waited out its backoff although the transport was back")
	}
}

// A driver that fails only once the transport is back (its Redis client
// still reporting the dial error of an outage that had ended) restarts as
// soon as a probe answers, not after its backoff: the fleet's health
// watcher saw the outage although no restart wait was probing then.
func TestDriverFailingAfterTheOutageRestartsAtOnce(t *testing.T) {
	synctest.Test(t, testDriverFailingAfterTheOutageRestartsAtOnce)
}

func testDriverFailingAfterTheOutageRestartsAtOnce(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Health: func(context.Context) error {
		if healthy.Load() {
			return nil
		}
		return errors.New("redis down")
	}})
	began := time.Now() // the driver runs
	time.Sleep(time.Second)
	healthy.Store(false) // an outage, which the driver does not notice
	time.Sleep(3 * time.Second)
	healthy.Store(true)
	time.Sleep(500 * time.Millisecond) // the driver fails now, Redis being back
	waited := time.Now()
	ok, recovered := f.waitRestart(time.Hour, began)
	if !ok || !recovered || time.Since(waited) > time.Second {
		t.Fatalf("waitRestart: ok %v, recovered %v after %v; want a restart within a probe, the outage having been seen", ok, recovered, time.Since(waited))
	}
	// A driver failing with no outage since it began waits its backoff.
	time.Sleep(2 * outageGrace)
	waited = time.Now()
	if ok, recovered := f.waitRestart(time.Minute, time.Now()); !ok || recovered || time.Since(waited) < time.Minute {
		t.Fatalf("waitRestart with no outage: ok %v, recovered %v after %v; want the whole backoff", ok, recovered, time.Since(waited))
	}
}
