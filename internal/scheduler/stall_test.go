package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/runner"
)

// A ledger write that fails (a full or read-only disk) stalls the
// campaign, and the scheduler says so (/healthz, a command's answer), but
// only until the disk recovers: the driver loads the ledger again by
// itself, with back-off, and the campaign runs to its budget with every
// experiment recorded once. It used to stay wedged until the scheduler
// restarted.
func TestAFailedLedgerWriteStallsTheCampaignOnlyUntilTheDiskRecovers(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Transport: dispatch.NewLocal(2, evaluate(50*time.Millisecond)), RestartDelay: 20 * time.Millisecond})
	ctx := context.Background()
	const budget = 30
	id, _, _, err := f.Create(ctx, toyRequest(budget))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two experiments", func() bool { return status(t, f, id).ExperimentsRun >= 2 })

	// The disk fails: results.tsv cannot be appended to. A directory stands
	// in its place (tests may run as root, whom permissions do not stop).
	results := filepath.Join(ws.CampaignDir(id), "results.tsv")
	if err := os.Rename(results, results+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the health check to report the stall", func() bool {
		err := f.Health(ctx)
		return err != nil && strings.Contains(err.Error(), "stalled")
	})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = f.Do(cctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpPause})
	if err == nil || !strings.Contains(err.Error(), "stalled") || cctx.Err() != nil {
		t.Fatalf("pause on a stalled campaign: %v, want a prompt answer saying it is stalled", err)
	}
	if !strings.Contains(err.Error(), "results.tsv") {
		t.Errorf("the stall does not say what failed: %v", err)
	}
	// The status says so in a field and an alert, and the alert gauge the
	// scheduler exports is 1 for the campaign's kind "stalled".
	rep, err := f.Campaigns().Status(ctx, id)
	if err != nil || !strings.Contains(rep.Stalled, "results.tsv") ||
		!slices.ContainsFunc(rep.Alerts, func(a campaign.Alert) bool { return a.Kind == campaign.AlertStalled }) {
		t.Errorf("status of a stalled campaign: stalled %q, alerts %+v (%v); want the failed write and a stalled alert", rep.Stalled, rep.Alerts, err)
	}
	if v := stalledGauge(t, f, id); v != 1 {
		t.Errorf("%s{kind=stalled} = %v on a stalled campaign, want 1", metrics.SchedulerCampaignAlert, v)
	}

	// The disk recovers; the campaign goes on without a restart.
	if err := os.Remove(results); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(results+".aside", results); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the campaign to finish after the disk recovered", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitFor(t, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	if err := f.Health(ctx); err != nil {
		t.Fatalf("healthy again? %v", err)
	}
	if rep, _ := f.Campaigns().Status(ctx, id); rep.Stalled != "" || stalledGauge(t, f, id) != 0 {
		t.Errorf("after the recovery: stalled %q, gauge %v; want neither", rep.Stalled, stalledGauge(t, f, id))
	}
	if _, err := f.Do(ctx, id, campaign.Command{Time: time.Now(), Op: campaign.OpReopen, Budget: &campaign.Budget{Iterations: budget + 2}}); err != nil {
		t.Fatalf("reopen after the recovery: %v", err)
	}
	waitFor(t, "the reopened campaign to finish", func() bool {
		st := status(t, f, id)
		return st.Status == campaign.StatusDone && len(st.InFlight) == 0
	})
	checkLedger(t, ws, id, budget+2)
}

// stalledGauge is the value the scheduler's collector exports for
// amk_scheduler_campaign_alert{campaign=id, kind="stalled"} (-1: absent).
func stalledGauge(t *testing.T, f *Fleet, id string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterScheduler(reg, f.Samples); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != metrics.SchedulerCampaignAlert {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["campaign"] == id && labels["kind"] == campaign.AlertStalled {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
