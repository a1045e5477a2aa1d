package scheduler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/baseline"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// A campaign created where its model's checkpoint lies is for those
// weights, and every trial it issues says so: a worker whose host lacks
// the checkpoint refuses the trials (it would evaluate seeded weights, and
// its rows used to be recorded as the campaign's model's) and the
// campaign pauses saying which weights are missing where. With the
// checkpoint on the worker's host the trials are evaluated and recorded,
// and the campaign's status and report name the weights its figures are
// for.
func TestAWorkerWithoutTheCheckpointRefusesTheCampaignsTrials(t *testing.T) {
	dir := t.TempDir()
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxSeq = 1024                        // the default workload's context
	w, err := model.InitWeights(cfg, 424242) // not trial.WeightSeed's
	if err != nil {
		t.Fatal(err)
	}
	if err := baseline.ExportHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	checkpoint := filepath.Join(dir, baseline.WeightsFile)
	data, err := os.ReadFile(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)

	srv := redistest.Start(t)
	conn := redisq.Conn{Addr: srv.Addr}
	const ns = "weights"
	disp, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns,
		InfraRetries: -1}) // a refusal is published at once, not tried again on this one worker
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Transport: disp})
	req := control.CreateRequest{Model: filepath.Join(dir, baseline.ConfigFile), GPU: "h200", Device: "cpu", Cold: true,
		Budget: &campaign.Budget{Iterations: 6}, Workers: 1}
	id, _, _, err := f.Create(context.Background(), req) // on the scheduler's host, which has the checkpoint
	if err != nil {
		t.Fatal(err)
	}
	st := campaignState(t, f, id)
	if got := st.WeightsID; got == nil || got.Kind != trial.WeightsCheckpoint || len(got.Files) != 1 ||
		got.Files[0] != (trial.WeightsFileID{Name: baseline.WeightsFile, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}) {
		t.Fatalf("the campaign's weights: %+v, want its checkpoint's", got)
	}

	// The worker's host lacks the checkpoint.
	if err := os.Rename(checkpoint, checkpoint+".elsewhere"); err != nil {
		t.Fatal(err)
	}
	redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu",
		Identity: "no-checkpoint", RetryDelay: 10 * time.Millisecond, Evaluate: evaluate(0)})
	waitfor.Cond(t, time.Minute, "the campaign to pause or end", func() bool { return status(t, f, id).Status != campaign.StatusOptimizing })
	r := status(t, f, id)
	if r.Status != campaign.StatusPaused {
		t.Fatalf("the campaign is %s with %d correct trial(s) evaluated where the checkpoint is not; want it paused by refusals", r.Status, r.Counts.Correct)
	}
	for _, want := range []string{"the campaign's trials are for checkpoint model.safetensors", "this evaluator would use seeded weights (seed 0)"} {
		if !strings.Contains(r.PauseReason, want) {
			t.Errorf("pause reason %q does not say %q", r.PauseReason, want)
		}
	}
	if r.BestUS != nil || r.Counts.Correct != 0 {
		t.Fatalf("a worker without the checkpoint recorded results: best %v, %d correct", r.BestUS, r.Counts.Correct)
	}

	// With the checkpoint on the worker's host, its trials are recorded.
	if err := os.Rename(checkpoint+".elsewhere", checkpoint); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(context.Background(), id, campaign.Command{Time: time.Now(), Op: campaign.OpResume}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	rows, err := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	pass := 0
	for _, row := range rows {
		if row.Correctness == flywheel.CorrectPass {
			pass++
		}
	}
	if pass == 0 {
		t.Fatalf("no correct trial recorded once the worker had the checkpoint: %+v", rows)
	}
	var text, report string
	if err := f.Read(id, func(c *campaign.Campaign) { text, report = c.StatusText(time.Now()), c.ReportMarkdown(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	want := "checkpoint model.safetensors (" + hex.EncodeToString(sum[:])[:12]
	if !strings.Contains(text, "weights      : checkpoint model.safetensors") || !strings.Contains(report, "- Weights: checkpoint model.safetensors") ||
		!strings.Contains(report, hex.EncodeToString(sum[:])[:12]) {
		t.Errorf("status and report do not name the weights (%s…):\n%s\n%s", want, text, report)
	}
}

// campaignState is the campaign's state as the fleet holds it.
func campaignState(t *testing.T, f *Fleet, id string) campaign.State {
	t.Helper()
	var st campaign.State
	if err := f.Read(id, func(c *campaign.Campaign) { st = c.State() }); err != nil {
		t.Fatal(err)
	}
	return st
}
