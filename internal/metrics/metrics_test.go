package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/trial"
)

func TestSchedulerCollectorExportsEveryCampaign(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	improved := time.Unix(1_700_000_000, 0)
	camps := []Campaign{{
		ID: "toy-h200-cpu", Model: "toy", Target: "h200", Status: campaign.StatusOptimizing, LatencyKind: "predicted",
		BestUS: new(25.5), StreamedFloorUS: new(0.5), AllWeightsFloorUS: new(0.625), BestPctOfRoofline: new(5100.0), Speedup: new(1.25),
		Trials:      map[string]int{flywheel.TagKept: 2, flywheel.TagTried: 5, flywheel.TagCrash: 1},
		Experiments: 8, ConsecutiveReverts: 3, InFlight: 2, LastImprovement: improved,
		Workload: "64-token prompt, 8 generated tokens, batch 1",
		Steps:    []Step{{StepBaseline, 65, 40}, {StepFloor, 65, 2}, {StepBest, 65, 20}, {StepBest, 72, 22.5}},
	}, {
		// nothing known yet: no best, no floor
		ID: "small-h100-cpu", Model: "small", Target: "h100", Status: campaign.StatusPaused,
	}, {
		// a CUDA worker's campaign beside the CPU one: its best is measured
		ID: "toy-h200-cuda", Model: "toy", Target: "h200", Status: campaign.StatusOptimizing, LatencyKind: "measured-gpu",
		BestUS: new(30.0),
	}}
	if err := RegisterScheduler(reg, func() []Campaign { return camps }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP amk_scheduler_best_latency_seconds Best correct latency of the campaign, in seconds; latency_kind says predicted (the cost model) or measured-gpu.
# TYPE amk_scheduler_best_latency_seconds gauge
amk_scheduler_best_latency_seconds{campaign="toy-h200-cpu",latency_kind="predicted",model="toy",target="h200"} 2.55e-05
amk_scheduler_best_latency_seconds{campaign="toy-h200-cuda",latency_kind="measured-gpu",model="toy",target="h200"} 3e-05
# HELP amk_scheduler_campaign_status 1 for the campaign's current status, 0 for the others.
# TYPE amk_scheduler_campaign_status gauge
amk_scheduler_campaign_status{campaign="small-h100-cpu",model="small",status="done",target="h100"} 0
amk_scheduler_campaign_status{campaign="small-h100-cpu",model="small",status="optimizing",target="h100"} 0
amk_scheduler_campaign_status{campaign="small-h100-cpu",model="small",status="paused",target="h100"} 1
amk_scheduler_campaign_status{campaign="toy-h200-cpu",model="toy",status="done",target="h200"} 0
amk_scheduler_campaign_status{campaign="toy-h200-cpu",model="toy",status="optimizing",target="h200"} 1
amk_scheduler_campaign_status{campaign="toy-h200-cpu",model="toy",status="paused",target="h200"} 0
amk_scheduler_campaign_status{campaign="toy-h200-cuda",model="toy",status="done",target="h200"} 0
amk_scheduler_campaign_status{campaign="toy-h200-cuda",model="toy",status="optimizing",target="h200"} 1
amk_scheduler_campaign_status{campaign="toy-h200-cuda",model="toy",status="paused",target="h200"} 0
# HELP amk_scheduler_campaign_workload_info 1, naming the workload the campaign tunes for.
# TYPE amk_scheduler_campaign_workload_info gauge
amk_scheduler_campaign_workload_info{campaign="toy-h200-cpu",model="toy",target="h200",workload="64-token prompt, 8 generated tokens, batch 1"} 1
# HELP amk_scheduler_last_improvement_timestamp_seconds Unix time of the campaign's last improvement (its start before the first).
# TYPE amk_scheduler_last_improvement_timestamp_seconds gauge
amk_scheduler_last_improvement_timestamp_seconds{campaign="toy-h200-cpu",model="toy",target="h200"} 1.7e+09
# HELP amk_scheduler_step_latency_seconds Time per decode step at each KV length the campaign's workload is evaluated at, in seconds: the baseline's, the best's and the streamed-bytes floor.
# TYPE amk_scheduler_step_latency_seconds gauge
amk_scheduler_step_latency_seconds{campaign="toy-h200-cpu",kv_len="65",model="toy",series="baseline",target="h200"} 4e-05
amk_scheduler_step_latency_seconds{campaign="toy-h200-cpu",kv_len="65",model="toy",series="best",target="h200"} 2e-05
amk_scheduler_step_latency_seconds{campaign="toy-h200-cpu",kv_len="65",model="toy",series="floor",target="h200"} 2e-06
amk_scheduler_step_latency_seconds{campaign="toy-h200-cpu",kv_len="72",model="toy",series="best",target="h200"} 2.25e-05
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), SchedulerBestLatency, SchedulerCampaignStatus, SchedulerLastImprovement,
		SchedulerStepLatency, SchedulerWorkload); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, SchedulerTrials)
	if err != nil || n != 3*len(RowTags) {
		t.Fatalf("%d trials_total series (err %v), want %d (every tag of every campaign)", n, err, 3*len(RowTags))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := []string{mf.GetName()}
			for _, l := range m.GetLabel() {
				if l.GetName() == "campaign" || l.GetName() == "outcome" {
					labels = append(labels, l.GetValue())
				}
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[strings.Join(labels, "/")] = v
		}
	}
	for key, want := range map[string]float64{
		SchedulerTrials + "/toy-h200-cpu/crash":    1,
		SchedulerTrials + "/toy-h200-cpu/tried":    5,
		SchedulerTrials + "/toy-h200-cpu/timeout":  0,
		SchedulerExperiments + "/toy-h200-cpu":     8,
		SchedulerInFlight + "/toy-h200-cpu":        2,
		SchedulerStreamedFloor + "/toy-h200-cpu":   0.5e-6,
		SchedulerAllWeightsFloor + "/toy-h200-cpu": 0.625e-6,
		SchedulerSpeedup + "/toy-h200-cpu":         1.25,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if _, ok := got[SchedulerBestLatency+"/small-h100-cpu"]; ok {
		t.Error("a campaign without a best exports a best latency")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCampaignOfReadsTheState(t *testing.T) {
	c := campaign.New()
	s := campaign.DefaultSettings()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := c.Step(campaign.Start{Time: start, Model: "toy", GPU: "h200", Device: "cpu", Cold: true, Settings: s,
		Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}); err != nil {
		t.Fatal(err)
	}
	lat, pct := 30.0, 300.0
	if _, err := c.Step(campaign.Record{Time: start.Add(2 * time.Minute), Status: "kept", LatencyUS: &lat,
		PctOfRoofline: &pct, Kind: trial.KindPredicted, ScheduleID: "sch_a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(campaign.Record{Time: start.Add(3 * time.Minute), Status: "crash", ScheduleID: "sch_b"}); err != nil {
		t.Fatal(err)
	}
	m := CampaignOf(c)
	if m.ID != c.ID() || m.Model != "toy" || m.Target != "h200" || m.Status != campaign.StatusOptimizing {
		t.Fatalf("identity %+v", m)
	}
	if m.BestUS == nil || *m.BestUS != 30 || m.BestPctOfRoofline == nil || *m.BestPctOfRoofline != 300 || m.LatencyKind != string(trial.KindPredicted) {
		t.Fatalf("best %v pct %v kind %q", m.BestUS, m.BestPctOfRoofline, m.LatencyKind)
	}
	if m.Experiments != 2 || m.Trials[flywheel.TagKept] != 1 || m.Trials[flywheel.TagCrash] != 1 || m.ConsecutiveReverts != 1 {
		t.Fatalf("counts %+v", m)
	}
	if want := start.Add(2 * time.Minute); !m.LastImprovement.Equal(want) {
		t.Fatalf("last improvement %s, want %s", m.LastImprovement, want)
	}
}

// stepsOf: the baseline's and the best's time per step at each evaluated
// KV length, and the floor once per KV length; a position without a
// latency (an invalid point) exports none.
func TestStepsOfAWorkloadCampaign(t *testing.T) {
	pos := func(kv int, us, bound *float64) trial.PositionVerdict {
		return trial.PositionVerdict{Pos: kv - 1, KVLen: kv, LatencyUS: us, BoundUS: bound}
	}
	baseline := &campaign.Result{Positions: []trial.PositionVerdict{pos(513, new(50.0), new(5.0)), pos(640, new(60.0), new(6.0))}}
	best := &campaign.Result{Positions: []trial.PositionVerdict{pos(513, new(20.0), new(5.0)), pos(640, nil, new(6.0))}}
	got := stepsOf(baseline, best)
	want := []Step{{StepBaseline, 513, 50}, {StepFloor, 513, 5}, {StepBaseline, 640, 60}, {StepFloor, 640, 6}, {StepBest, 513, 20}}
	if !slices.Equal(got, want) {
		t.Fatalf("steps %+v, want %+v", got, want)
	}
	if got := stepsOf(&campaign.Result{LatencyUS: 3}, nil); len(got) != 0 {
		t.Fatalf("a campaign of one decode step has steps %+v", got)
	}
}

func TestQueueCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	fail := false
	source := func(ctx context.Context) ([]Queue, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("queue source called without a deadline")
		}
		if fail {
			return nil, errors.New("redis down")
		}
		return []Queue{{Name: "trials:h200", Pending: 3, Scheduled: 1, Retry: 2, Active: 1, Latency: 1500 * time.Millisecond, Processed: 40, Failed: 2}}, nil
	}
	if err := RegisterQueues(reg, source, nil); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP amk_queue_depth_tasks Tasks waiting for a consumer (pending, scheduled and retry).
# TYPE amk_queue_depth_tasks gauge
amk_queue_depth_tasks{queue="trials:h200"} 6
# HELP amk_queue_latency_seconds Age of the queue's oldest pending task, in seconds.
# TYPE amk_queue_latency_seconds gauge
amk_queue_latency_seconds{queue="trials:h200"} 1.5
# HELP amk_queue_processed_total Tasks processed, succeeded or failed (asynq's cumulative count).
# TYPE amk_queue_processed_total counter
amk_queue_processed_total{queue="trials:h200"} 40
# HELP amk_queue_failed_total Task attempts that failed (asynq's cumulative count).
# TYPE amk_queue_failed_total counter
amk_queue_failed_total{queue="trials:h200"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), QueueDepth, QueueLatency, QueueProcessed, QueueFailed); err != nil {
		t.Fatal(err)
	}
	fail = true
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("a failing source exported %d series (err %v)", n, err)
	}
}

func TestWorkerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	w, err := NewWorker(reg, "h200", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	w.SetInfo("AMD EPYC", "", "v1")
	w.SetInfo("AMD EPYC", "", "v2") // replaces, never two info series
	w.Busy(true)
	w.Published("ok")
	w.Evaluated(trial.Outcome{Stages: map[string]float64{trial.StageLower: 0.002, trial.StageTiming: 0.5, "novel": 1}}, 600*time.Millisecond)
	w.Evaluated(trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "device busy"}}, time.Millisecond)
	w.WatchdogKill()
	want := `
# HELP amk_worker_busy 1 while an evaluation holds the device, 0 while idle.
# TYPE amk_worker_busy gauge
amk_worker_busy{device="cpu",target="h200"} 1
# HELP amk_worker_info Constant 1, labelled with the device's name, driver and the build version.
# TYPE amk_worker_info gauge
amk_worker_info{device="cpu",device_name="AMD EPYC",driver="",target="h200",version="v2"} 1
# HELP amk_worker_infra_errors_total Infrastructure failures of evaluations (retried or final).
# TYPE amk_worker_infra_errors_total counter
amk_worker_infra_errors_total{device="cpu",target="h200"} 1
# HELP amk_worker_watchdog_kills_total Evaluations the wall-clock watchdog cancelled.
# TYPE amk_worker_watchdog_kills_total counter
amk_worker_watchdog_kills_total{device="cpu",target="h200"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), WorkerBusy, WorkerInfo, WorkerInfraErrors, WorkerWatchdogKills); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, WorkerTrials); n != len(WorkerOutcomes) {
		t.Fatalf("%d outcome series, want all %d from the start", n, len(WorkerOutcomes))
	}
	if n, _ := testutil.GatherAndCount(reg, WorkerStageDuration); n != len(Stages)+1 {
		t.Fatalf("%d stage series, want the %d known stages and other", n, len(Stages))
	}
	if got := testutil.ToFloat64(w.trials.WithLabelValues("ok")); got != 1 {
		t.Fatalf("ok trials %v", got)
	}
	if _, err := NewWorker(reg, "h200", "cpu"); err == nil {
		t.Fatal("registering a second worker on one registry succeeded")
	}
}

func TestCatalogNames(t *testing.T) {
	seen := map[string]bool{}
	for _, names := range [][]string{SchedulerNames(), QueueNames(), WorkerNames()} {
		for _, n := range names {
			if seen[n] {
				t.Errorf("%s listed twice", n)
			}
			seen[n] = true
			if !strings.HasPrefix(n, "amk_scheduler_") && !strings.HasPrefix(n, "amk_queue_") && !strings.HasPrefix(n, "amk_worker_") {
				t.Errorf("%s is not amk_<subsystem>_...", n)
			}
		}
	}
}
