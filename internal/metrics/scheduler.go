package metrics

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
)

// CampaignStatuses are the values of amk_scheduler_campaign_status's status
// label; every campaign exports all of them (1 for its status, 0 else).
var CampaignStatuses = []campaign.Status{campaign.StatusOptimizing, campaign.StatusPaused, campaign.StatusDone}

// RowTags are the values of amk_scheduler_trials_total's outcome label; every
// campaign exports all of them, zeros included, so rates work at once.
var RowTags = []string{flywheel.TagKept, flywheel.TagTried, flywheel.TagRevert, flywheel.TagRejected,
	flywheel.TagFailed, flywheel.TagCrash, flywheel.TagTimeout}

// Campaign is what the scheduler exports about one campaign. Nil pointers
// (no best yet, no floor known) export no series.
type Campaign struct {
	ID, Model, Target string
	Status            campaign.Status

	BestUS *float64
	// LatencyKind is the kind of BestUS and of the figures made from it
	// (BestPctOfRoofline, Speedup): predicted (the cost model) or
	// measured-gpu. Those series carry it as their latency_kind label, so
	// that a predicted figure is never plotted as a measured one.
	LatencyKind string
	// StreamedFloorUS is the streamed-bytes floor (bound_us), the
	// denominator of BestPctOfRoofline; AllWeightsFloorUS the
	// all-weights floor (all_weights_bound_us).
	StreamedFloorUS   *float64
	AllWeightsFloorUS *float64
	BestPctOfRoofline *float64
	Speedup           *float64

	// Trials counts experiments by row tag.
	Trials             map[string]int
	Experiments        int
	ConsecutiveReverts int
	InFlight           int
	LastImprovement    time.Time

	// Workload names what the campaign tunes for ("" for a campaign that
	// checks one decode step); Steps are its baseline's, its best's and
	// the floor's time per decode step at the workload's evaluated KV
	// lengths.
	Workload string
	Steps    []Step

	// Alerts are the kinds of the campaign's alerts (campaign.Alert).
	Alerts []string
}

// Step is one time per decode step at a KV length: Series is
// StepBaseline, StepBest or StepFloor.
type Step struct {
	Series string
	KVLen  int
	US     float64
}

// The series of a Step.
const (
	StepBaseline = "baseline"
	StepBest     = "best"
	StepFloor    = "floor"
)

// stepsOf are the steps of the baseline and the best at their evaluated
// positions, and the floor at each KV length once.
func stepsOf(baseline, best *campaign.Result) []Step {
	var out []Step
	floors := map[int]bool{}
	for _, r := range []struct {
		series string
		res    *campaign.Result
	}{{StepBaseline, baseline}, {StepBest, best}} {
		if r.res == nil {
			continue
		}
		for _, p := range r.res.Positions {
			if p.LatencyUS != nil {
				out = append(out, Step{Series: r.series, KVLen: p.KVLen, US: *p.LatencyUS})
			}
			if p.BoundUS != nil && !floors[p.KVLen] {
				floors[p.KVLen] = true
				out = append(out, Step{Series: StepFloor, KVLen: p.KVLen, US: *p.BoundUS})
			}
		}
	}
	return out
}

// CampaignOf reads a campaign's exported values. The caller must hold the
// campaign against concurrent events (runner.Ledger.Read).
func CampaignOf(c *campaign.Campaign) Campaign {
	st := c.State()
	n := st.Counts
	m := Campaign{
		ID: st.ID, Model: st.Model, Target: st.GPU, Status: st.Status,
		StreamedFloorUS: st.BoundUS, AllWeightsFloorUS: st.AllWeightsBoundUS, Speedup: c.Speedup(),
		Trials: map[string]int{
			flywheel.TagKept: n.Kept, flywheel.TagTried: n.Tried, flywheel.TagRevert: n.Revert,
			flywheel.TagRejected: n.Rejected, flywheel.TagFailed: n.Failed, flywheel.TagCrash: n.Crash,
			flywheel.TagTimeout: n.Timeout,
		},
		Experiments: st.ExperimentsRun, ConsecutiveReverts: st.ConsecutiveReverts,
		InFlight: len(st.InFlight), LastImprovement: st.StartedAt, LatencyKind: string(st.LatencyKind),
		Steps: stepsOf(st.Baseline, st.Best),
	}
	if w := st.Settings.Workload; w != nil {
		m.Workload = w.String()
	}
	if b := st.Best; b != nil {
		lat := b.LatencyUS
		m.BestUS, m.BestPctOfRoofline = &lat, b.PctOfRoofline
		if b.Kind != "" {
			m.LatencyKind = string(b.Kind)
		}
		if b.BoundUS != nil {
			m.StreamedFloorUS = b.BoundUS
		}
	}
	for i := len(st.Trajectory) - 1; i >= 0; i-- {
		if t := st.Trajectory[i]; t.Kept {
			m.LastImprovement = st.StartedAt.Add(time.Duration(t.Minutes * float64(time.Minute)))
			break
		}
	}
	return m
}

// schedulerCollector exports the campaigns its source lists at scrape time.
type schedulerCollector struct {
	source                                                                    func() []Campaign
	best, floor, allWeights, pct, speedup, trials, experiments, reverts, live *prometheus.Desc
	status, improved, steps, workload, alert                                  *prometheus.Desc
}

// RegisterScheduler registers the per-campaign collector on reg; source is
// called at every scrape and must be safe for concurrent use.
func RegisterScheduler(reg prometheus.Registerer, source func() []Campaign) error {
	labels := []string{"campaign", "model", "target"}
	desc := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(append([]string{}, labels...), extra...), nil)
	}
	c := &schedulerCollector{
		source:      source,
		best:        desc(SchedulerBestLatency, "Best correct latency of the campaign, in seconds; latency_kind says predicted (the cost model) or measured-gpu.", LabelLatencyKind),
		floor:       desc(SchedulerStreamedFloor, "Streamed-bytes floor (bound_us): the bytes a decode step streams (weights once, gathered embedding rows, KV window) at the target's HBM bandwidth, in seconds."),
		allWeights:  desc(SchedulerAllWeightsFloor, "All-weights floor (all_weights_bound_us): every weight byte at the target's HBM bandwidth, in seconds; a second, looser floor, not the roofline."),
		pct:         desc(SchedulerBestRoofline, "Best latency as a percentage of the streamed-bytes floor (100 = at the floor; lower is better); latency_kind is the best latency's kind.", LabelLatencyKind),
		speedup:     desc(SchedulerSpeedup, "Baseline (default schedule) latency divided by the best latency; latency_kind is the best latency's kind.", LabelLatencyKind),
		trials:      desc(SchedulerTrials, "Experiments recorded, by results.tsv row tag.", "outcome"),
		experiments: desc(SchedulerExperiments, "Experiments recorded (results.tsv rows)."),
		reverts:     desc(SchedulerConsecutiveReverts, "Consecutive non-improvements (the plateau counter)."),
		live:        desc(SchedulerInFlight, "Trials issued and not yet recorded."),
		status:      desc(SchedulerCampaignStatus, "1 for the campaign's current status, 0 for the others.", "status"),
		improved:    desc(SchedulerLastImprovement, "Unix time of the campaign's last improvement (its start before the first)."),
		steps:       desc(SchedulerStepLatency, "Time per decode step at each KV length the campaign's workload is evaluated at, in seconds: the baseline's, the best's and the streamed-bytes floor.", "series", "kv_len"),
		workload:    desc(SchedulerWorkload, "1, naming the workload the campaign tunes for.", "workload"),
		alert:       desc(SchedulerCampaignAlert, "1 for each alert the campaign has (no_driver, unserved, stalled, stuck_trials, queue_wait; amkctl status says what to do), 0 for the others.", "kind"),
	}
	return reg.Register(c)
}

func (c *schedulerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.best, c.floor, c.allWeights, c.pct, c.speedup, c.trials, c.experiments,
		c.reverts, c.live, c.status, c.improved, c.steps, c.workload, c.alert} {
		ch <- d
	}
}

func (c *schedulerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.source() {
		lv := []string{m.ID, m.Model, m.Target}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv, extra...)...)
		}
		kind := m.LatencyKind
		if kind == "" {
			kind = "unknown"
		}
		withKind := func(d *prometheus.Desc, v *float64, divisor float64) {
			if v != nil {
				gauge(d, *v/divisor, kind)
			}
		}
		seconds := func(d *prometheus.Desc, us *float64) {
			if us != nil {
				gauge(d, *us/1e6) // Prometheus's base unit
			}
		}
		withKind(c.best, m.BestUS, 1e6) // microseconds to Prometheus's base unit
		seconds(c.floor, m.StreamedFloorUS)
		seconds(c.allWeights, m.AllWeightsFloorUS)
		withKind(c.pct, m.BestPctOfRoofline, 1)
		withKind(c.speedup, m.Speedup, 1)
		for _, tag := range RowTags {
			ch <- prometheus.MustNewConstMetric(c.trials, prometheus.CounterValue, float64(m.Trials[tag]), append(lv, tag)...)
		}
		ch <- prometheus.MustNewConstMetric(c.experiments, prometheus.CounterValue, float64(m.Experiments), lv...)
		gauge(c.reverts, float64(m.ConsecutiveReverts))
		gauge(c.live, float64(m.InFlight))
		for _, s := range CampaignStatuses {
			v := 0.0
			if s == m.Status {
				v = 1
			}
			gauge(c.status, v, string(s))
		}
		if !m.LastImprovement.IsZero() {
			gauge(c.improved, float64(m.LastImprovement.UnixNano())/1e9)
		}
		for _, s := range m.Steps {
			gauge(c.steps, s.US/1e6, s.Series, strconv.Itoa(s.KVLen))
		}
		if m.Workload != "" {
			gauge(c.workload, 1, m.Workload)
		}
		for _, kind := range campaign.AlertKinds {
			v := 0.0
			if slices.Contains(m.Alerts, kind) {
				v = 1
			}
			gauge(c.alert, v, kind)
		}
	}
}
