package api_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/proctest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/waitfor"
)

// A campaign for a GPU target no live worker serves says so across the
// API, with what to do; stopping it withdraws its queued trials from Redis,
// so nothing of it is left waiting for a worker that never comes.
func TestUnservedCampaignAndStopWithdrawsItsTrials(t *testing.T) {
	const ns = "unserved"
	ctx := context.Background()
	// One live worker, for h200; the campaign is for h100.
	fleet := apitest.RedisFleet(t, redistest.Start(t).Addr, ns, "h200")
	var logged syncBuffer
	fleet.Logger, fleet.RescanEvery = slog.New(slog.NewTextHandler(&logged, nil)), 50*time.Millisecond
	s := apitest.Start(t, apitest.Options{Fleet: fleet})
	client := s.Client(t)
	resp, err := client.Create(ctx, control.CreateRequest{Model: "toy", GPU: "h100", Device: "cpu", Cold: true, Workers: 2,
		Budget: &campaign.Budget{Iterations: 10}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.ID
	queued := func() int {
		qs, err := client.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Queue == redisq.TrialQueue(ns, "h100") {
				return q.Pending
			}
		}
		return 0
	}
	waitfor.Cond(t, 30*time.Second, "two trials queued for h100", func() bool { return queued() == 2 })
	rep, err := client.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Alerts) != 1 || rep.Alerts[0].Kind != campaign.AlertUnserved ||
		!strings.Contains(rep.Alerts[0].Message, "no live worker serves GPU target h100") ||
		!strings.Contains(rep.Alerts[0].Message, "targets served now: h200") ||
		!strings.Contains(rep.Alerts[0].Fix, "gpuworker --redis ADDR --target h100 --device cpu") || rep.LastEventAt == "" {
		t.Fatalf("status of a campaign no worker serves: %+v (last event %q)", rep.Alerts, rep.LastEventAt)
	}
	// The log says it once, with what to do; the metric says it.
	waitfor.Cond(t, 30*time.Second, "the alert in the scheduler's log", func() bool {
		return strings.Contains(logged.String(), "campaign alert: no live worker serves GPU target h100")
	})
	if log := logged.String(); strings.Count(log, "campaign alert: no live worker") != 1 || !strings.Contains(log, "what_to_do=") {
		t.Errorf("the scheduler's log:\n%s", log)
	}
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterScheduler(reg, s.Fleet.Samples); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP amk_scheduler_campaign_alert 1 for each alert the campaign has (no_driver, unserved, stalled, stuck_trials, queue_wait; amkctl status says what to do), 0 for the others.
# TYPE amk_scheduler_campaign_alert gauge
amk_scheduler_campaign_alert{campaign="toy-h100-cpu",kind="no_driver",model="toy",target="h100"} 0
amk_scheduler_campaign_alert{campaign="toy-h100-cpu",kind="queue_wait",model="toy",target="h100"} 0
amk_scheduler_campaign_alert{campaign="toy-h100-cpu",kind="stalled",model="toy",target="h100"} 0
amk_scheduler_campaign_alert{campaign="toy-h100-cpu",kind="stuck_trials",model="toy",target="h100"} 0
amk_scheduler_campaign_alert{campaign="toy-h100-cpu",kind="unserved",model="toy",target="h100"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.SchedulerCampaignAlert); err != nil {
		t.Error(err)
	}
	text, err := client.StatusText(ctx, id)
	if err != nil || !strings.Contains(text, "ALERT") || !strings.Contains(text, "last event") {
		t.Fatalf("status text: %v\n%s", err, text)
	}
	stop, err := client.Command(ctx, id, campaign.OpStop, control.CommandRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if log := strings.Join(stop.Log, "\n"); !strings.Contains(log, "withdrew 2 queued trial(s)") {
		t.Errorf("stop's log: %q, want the withdrawal", log)
	}
	if n := queued(); n != 0 {
		t.Errorf("%d trial(s) of a stopped campaign still queued in Redis", n)
	}
	if st := stop.Campaign; st.Status != campaign.StatusDone || len(st.InFlight) != 0 || len(st.Alerts) != 0 {
		t.Errorf("after stop: %s, in flight %v, alerts %+v", st.Status, st.InFlight, st.Alerts)
	}
	// A reopen proposes the withdrawn points again; once a worker serves
	// the target they run.
	if _, err := client.Command(ctx, id, campaign.OpReopen, control.CommandRequest{}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 30*time.Second, "the reopened campaign's trials to be queued again", func() bool { return queued() == 2 })
}

// syncBuffer collects a daemon's log.
type syncBuffer = proctest.LogBuffer
