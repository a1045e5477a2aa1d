package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/trial"
)

var models = trial.NewModelCache(0)

func toyStart(seed uint64) campaign.Start {
	s := campaign.DefaultSettings()
	s.Overnight = true
	return campaign.Start{Time: time.Now().UTC(), Model: "toy-2L", GPU: "h100", Device: "cpu",
		Seed: seed, Cold: true, Settings: s,
		Shape: flywheel.Shape{Hidden: 64, NLayers: 2, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
}

func evaluator(ctx context.Context, spec trial.Spec) trial.Outcome {
	return trial.Evaluate(ctx, spec, trial.Options{Models: models})
}

func runCampaign(t testing.TB, ws *Workspace, iters int) RunSummary {
	l, _, err := ws.Create(toyStart(5))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := dispatch.NewLocal(2, evaluator)
	defer d.Close()
	sum, err := (&Driver{Ledger: l, Dispatcher: d, Workers: 2}).Run(context.Background(), Limits{Iterations: iters})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestRunRecordsEveryTrialOnce(t *testing.T) {
	ws, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sum := runCampaign(t, ws, 10)
	if sum.Proposed != 10 || sum.Recorded != 10 {
		t.Fatalf("proposed %d recorded %d, want 10/10", sum.Proposed, sum.Recorded)
	}
	sum = runCampaign(t, ws, 5) // resume
	if sum.Recorded != 5 {
		t.Fatalf("resumed run recorded %d, want 5", sum.Recorded)
	}
	id := campaign.ID("toy-2L", "h100", "cpu", "")
	rows, err := flywheel.ReadRows(ws.CampaignDir(id) + "/results.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 15 {
		t.Fatalf("%d rows, want 15", len(rows))
	}
	for i, r := range rows {
		if r.Experiment != i+1 {
			t.Fatalf("row %d has experiment %d", i, r.Experiment)
		}
	}
}

func TestOneDriverPerCampaign(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	l, _, err := ws.Create(toyStart(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := ws.Open(l.ID()); err == nil {
		t.Fatal("a second driver opened a locked campaign")
	}
	if _, err := ws.View(l.ID()); err != nil {
		t.Fatalf("read-only view refused: %v", err)
	}
	if _, err := ws.Open("nope"); err == nil {
		t.Fatal("opened a campaign that does not exist")
	}
}

// A crash between the ledger write and the appends leaves an outbox; the
// next Open appends it exactly once.
func TestOutboxIsRepairedExactlyOnce(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	runCampaign(t, ws, 4)
	id := campaign.ID("toy-2L", "h100", "cpu", "")
	results := ws.CampaignDir(id) + "/results.tsv"
	rows, _ := flywheel.ReadRows(results)
	// Simulate the crash: drop the last row from results.tsv (its ledger
	// outbox still holds it).
	data, _ := os.ReadFile(results)
	cut := len(data) - len(rows[len(rows)-1].Line())
	if err := os.WriteFile(results, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // repairing twice must not duplicate
		l, err := ws.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	after, err := flywheel.ReadRows(results)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(rows) || after[len(after)-1].Experiment != rows[len(rows)-1].Experiment {
		t.Fatalf("after repair %d rows (last %d), want %d", len(after), after[len(after)-1].Experiment, len(rows))
	}
}

func TestCancelledRunLeavesTrialsInFlightForTheNextRun(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	l, _, err := ws.Create(toyStart(2))
	if err != nil {
		t.Fatal(err)
	}
	block := make(chan struct{})
	d := dispatch.NewLocal(2, func(ctx context.Context, spec trial.Spec) trial.Outcome {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "stopped"}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := (&Driver{Ledger: l, Dispatcher: d, Workers: 2}).Run(ctx, Limits{Iterations: 10}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	inflight := len(l.Campaign().State().InFlight)
	l.Close()
	if inflight != 2 {
		t.Fatalf("%d trials in flight after cancel, want 2", inflight)
	}
	l, err = ws.Open(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d2 := dispatch.NewLocal(2, evaluator)
	defer d2.Close()
	sum, err := (&Driver{Ledger: l, Dispatcher: d2, Workers: 2}).Run(context.Background(), Limits{Iterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resubmitted != 2 || sum.Recorded != 5 {
		t.Fatalf("resubmitted %d recorded %d, want 2 and 5", sum.Resubmitted, sum.Recorded)
	}
}

func TestReportSVG(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	runCampaign(t, ws, 6)
	id := campaign.ID("toy-2L", "h100", "cpu", "")
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(ws.CampaignDir(id), c, time.Now()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(ws.CampaignDir(id), "report.svg"))
	if err != nil {
		t.Fatal(err)
	}
	svg := string(data)
	for _, want := range []string{"<svg", "streamed-bytes floor", "baseline", "best so far", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

// BenchmarkEmbeddedLoop reports trials per second of the embedded loop
// (campaign + ledger + local evaluators) on toy-2L with the CPU evaluator.
func BenchmarkEmbeddedLoop(b *testing.B) {
	ws, _ := OpenWorkspace(b.TempDir())
	b.ResetTimer()
	start := time.Now()
	runCampaign(b, ws, b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "trials/s")
}

// TestDaemonServesCommands runs in a synctest bubble: the driver's ticks
// and the sleeps below are on the bubble's clock, so "paused for 100 ms"
// means every tick of that window has run, and nothing may have happened.
func TestDaemonServesCommands(t *testing.T) {
	synctest.Test(t, testDaemonServesCommands)
}

func testDaemonServesCommands(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	l, _, err := ws.Create(toyStart(4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := dispatch.NewLocal(1, evaluator)
	defer d.Close()
	drv := &Driver{Ledger: l, Dispatcher: d, Workers: 1, TickEvery: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := drv.Run(ctx, Limits{Daemon: true}); done <- err }()
	call := func(ev campaign.Event) {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		if _, err := drv.Do(cctx, ev); err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
	}
	call(campaign.Command{Time: time.Now(), Op: campaign.OpPause})
	time.Sleep(50 * time.Millisecond) // in-flight trials drain while paused
	synctest.Wait()
	experiments := func() (n int) {
		l.Read(func(c *campaign.Campaign) { n = c.State().ExperimentsRun })
		return n
	}
	runs := experiments()
	time.Sleep(100 * time.Millisecond) // ten ticks of the driver, on the bubble's clock
	synctest.Wait()
	if got := experiments(); got != runs {
		t.Fatalf("paused campaign kept running trials: %d -> %d", runs, got)
	}
	call(campaign.Command{Time: time.Now(), Op: campaign.OpResume})
	// Trials take no time on the bubble's clock: wait for the first one by
	// yielding, not sleeping (a sleep would let hundreds run).
	for experiments() <= runs {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// trialLogIDs reads the trial ids of trials.jsonl, in order.
func trialLogIDs(t testing.TB, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for ln := range strings.SplitSeq(strings.TrimRight(string(data), "\n"), "\n") {
		var o trial.Outcome
		if err := json.Unmarshal([]byte(ln), &o); err != nil {
			t.Fatalf("trials.jsonl line %q: %v", ln, err)
		}
		ids = append(ids, o.TrialID)
	}
	return ids
}

// TestCrashLeftoversAreRepairedOnOpen: temp files of an interrupted atomic
// write are removed, and trials.jsonl ends with one line per recorded trial,
// agreeing with results.tsv, whatever a crash or an older version left
// (a torn line, a trial logged twice, a trial logged but never recorded), and
// a line lost after the ledger's rename is re-appended from the outbox.
func TestCrashLeftoversAreRepairedOnOpen(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	runCampaign(t, ws, 4)
	id := campaign.ID("toy-2L", "h100", "cpu", "")
	dir := ws.CampaignDir(id)
	logPath := filepath.Join(dir, "trials.jsonl")
	rows, _ := flywheel.ReadRows(filepath.Join(dir, "results.tsv"))
	if got := trialLogIDs(t, logPath); len(got) != len(rows) {
		t.Fatalf("trials.jsonl has %d lines for %d rows", len(got), len(rows))
	}
	clean, _ := os.ReadFile(logPath)
	if err := os.WriteFile(logPath+".clean", clean, 0o644); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(clean), "\n")
	orphan := filepath.Join(dir, ".ledger.json.tmp-123456")
	if err := os.WriteFile(orphan, []byte(`{"half": `), 0o644); err != nil {
		t.Fatal(err)
	}
	// Damage: the first line again (a redelivered outcome), a line of a trial
	// never recorded, the last line lost and a torn line in its place.
	damaged := strings.Join(lines[:len(lines)-2], "") + lines[0] + `{"trial_id": 999}` + "\n" + `{"trial_id": 3, "verd`
	if err := os.WriteFile(logPath, []byte(damaged), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l, err := ws.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan temp file still there: %v", err)
	}
	got := trialLogIDs(t, logPath)
	want := trialLogIDs(t, logPath+".clean")
	slices.Sort(got)
	slices.Sort(want)
	// The lost last line comes back from the ledger's outbox (the last event
	// recorded that trial).
	if !slices.Equal(got, want) {
		t.Fatalf("trials.jsonl after repair holds trials %v, want %v (one per row)", got, want)
	}
}

// TestProgressCountsThisRunAfterAResume: after a resume the live line
// counts against the experiment number this run ends at (it said
// "iter 170/10").
func TestProgressCountsThisRunAfterAResume(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	runCampaign(t, ws, 6)
	l, _, err := ws.Create(toyStart(5))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := dispatch.NewLocal(1, evaluator)
	defer d.Close()
	var out strings.Builder
	p := NewProgress(&out, 3)
	if _, err := (&Driver{Ledger: l, Dispatcher: d, Workers: 1, Progress: p}).Run(context.Background(), Limits{Iterations: 3}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"iter 7/9", "iter 9/9"} {
		if !strings.Contains(text, want) {
			t.Errorf("progress lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "/3 ") {
		t.Errorf("progress counts the campaign total against the run's target:\n%s", text)
	}
}

// A start the campaign refuses leaves no campaign directory behind, so a
// refused create is not listed, and a corrected one creates it afresh.
func TestRefusedCreateLeavesNoDirectory(t *testing.T) {
	ws, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := toyStart(1)
	start.Settings.MinGain = 0.7
	if _, _, err := ws.Create(start); err == nil {
		t.Fatal("a start with min_gain 0.7 was accepted")
	}
	id := campaign.ID(start.Model, start.GPU, start.Device, start.Name)
	if _, err := os.Stat(ws.CampaignDir(id)); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(ws.CampaignDir(id))
		t.Fatalf("the refused create left %s (%d entries): %v", ws.CampaignDir(id), len(entries), err)
	}
	l, created, err := ws.Create(toyStart(1))
	if err != nil || !created {
		t.Fatalf("create after the refusal: created %v, %v", created, err)
	}
	l.Close()
}
