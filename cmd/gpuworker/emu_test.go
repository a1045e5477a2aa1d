package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// TestEmulatedWorkerServesACampaign: a gpuworker with --device emu (its
// launcher child is this test binary re-executed as gpuworker) serves the
// trials of a campaign a scheduler fleet drives over a real redis-server:
// every trial's program runs on the CPU emulator of the worker's target,
// is checked against the reference VM, and comes back with a predicted
// latency and the emulator named as its device.
func TestEmulatedWorkerServesACampaign(t *testing.T) {
	t.Setenv("AMK_GPUWORKER_EXEC", "1") // the launcher child runs main()
	t.Setenv(build.EnvCache, t.TempDir())
	t.Setenv(build.EnvEmuOpt, "-O0") // the shortest kernel builds
	srv := redistest.Start(t)
	n := ns()
	d := startDaemon(t, srv, n, trial.Evaluate, "--device", "emu")
	if _, body := d.get(t, "/metrics"); !strings.Contains(body, "CPU emulator of h200") {
		t.Errorf("the worker's metrics do not name the emulator:\n%.2000s", body)
	}

	ws, err := runner.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	disp, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: redisq.Conn{Addr: srv.Addr}, Namespace: n})
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := scheduler.New(scheduler.Options{Workspace: ws, Transport: disp, TickEvery: 50 * time.Millisecond, RescanEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := fleet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	const trials = 2
	id, created, _, err := fleet.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h200", Device: schedule.DeviceEmu, Cold: true,
		Budget: &campaign.Budget{Iterations: trials}, Workers: 1})
	if err != nil || !created {
		t.Fatalf("create: %v (created %v)", err, created)
	}
	var st campaign.State
	waitfor.Check(t, 4*time.Minute, func() error {
		if err := fleet.Read(id, func(c *campaign.Campaign) { st = c.State() }); err != nil {
			t.Fatal(err)
		}
		if st.Status != campaign.StatusDone || len(st.InFlight) != 0 {
			return fmt.Errorf("campaign %s did not finish: %+v\nworker log:\n%s", id, st, d.logs)
		}
		return nil
	})
	if st.LatencyKind != trial.KindPredicted {
		t.Errorf("campaign latency kind %s, want predicted", st.LatencyKind)
	}
	rows, err := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
	if err != nil || len(rows) != trials {
		t.Fatalf("results.tsv: %d rows (%v)", len(rows), err)
	}
	for _, r := range rows {
		if r.Correctness != "PASS" || !strings.Contains(r.Description, "kind=predicted") {
			t.Errorf("row %+v: want a correct trial with a predicted latency", r)
		}
	}
	journal, err := os.ReadFile(filepath.Join(ws.CampaignDir(id), "trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"emu CPU emulator of h200", "emulator logits match the reference VM",
		"latency predicted by the cost model: the CUDA kernels ran on the CPU emulator"} {
		if c := strings.Count(string(journal), want); c < trials {
			t.Errorf("trials.jsonl names %q %d times, want every one of the %d trials", want, c, trials)
		}
	}
}
