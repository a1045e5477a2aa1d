package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/amk-dev/amk/trial"
)

// WorkerOutcomes are the values of amk_worker_trials_total's outcome label
// (redisq.Label of a published outcome), exported as zeros from the start.
var WorkerOutcomes = []string{"ok", "no_latency", "rejected", "incorrect", string(trial.FailCrash), string(trial.FailTimeout), string(trial.FailInfra)}

// StageBuild is the GPU path's compile stage.
const StageBuild = "build"

// Stages are the values of amk_worker_stage_duration_seconds's stage label;
// a stage name outside this list is exported as "other".
var Stages = []string{trial.StageParse, trial.StageLower, trial.StageValidate, trial.StageReferenceVM,
	StageBuild, trial.StageTiming}

// Worker holds a gpuworker's series. Its methods are safe for concurrent use.
type Worker struct {
	trials   *prometheus.CounterVec
	stages   *prometheus.HistogramVec
	duration prometheus.Histogram
	busy     prometheus.Gauge
	info     *prometheus.GaugeVec
	kills    prometheus.Counter
	infra    prometheus.Counter
	refused  *prometheus.CounterVec
}

// NewWorker registers a worker's series on reg, labelled with its target and
// device.
func NewWorker(reg prometheus.Registerer, target, device string) (*Worker, error) {
	cl := prometheus.Labels{"target": target, "device": device}
	w := &Worker{
		trials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: WorkerTrials, ConstLabels: cl,
			Help: "Trials this worker published, by outcome (ok, no_latency, rejected, incorrect, crash, timeout, infra)."},
			[]string{"outcome"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: WorkerStageDuration, ConstLabels: cl,
			Help:    "Wall time of one pipeline stage of an evaluation, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 14)}, // 1 ms .. ~27 min
			[]string{"stage"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: WorkerTrialDuration, ConstLabels: cl,
			Help:    "Wall time of one whole evaluation, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 14)}), // 10 ms .. ~4 h
		busy: prometheus.NewGauge(prometheus.GaugeOpts{Name: WorkerBusy, ConstLabels: cl,
			Help: "1 while an evaluation holds the device, 0 while idle."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: WorkerInfo, ConstLabels: cl,
			Help: "Constant 1, labelled with the device's name, driver and the build version."},
			[]string{"device_name", "driver", "version"}),
		kills: prometheus.NewCounter(prometheus.CounterOpts{Name: WorkerWatchdogKills, ConstLabels: cl,
			Help: "Evaluations the wall-clock watchdog cancelled."}),
		infra: prometheus.NewCounter(prometheus.CounterOpts{Name: WorkerInfraErrors, ConstLabels: cl,
			Help: "Infrastructure failures of evaluations (retried or final)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: WorkerSpecsRefused, ConstLabels: cl,
			Help: "Trial payloads refused without evaluating them, by reason (unsigned: no valid fleet-secret MAC; misplaced: a signed spec of another trial)."},
			[]string{"reason"}),
	}
	for _, c := range []prometheus.Collector{w.trials, w.stages, w.duration, w.busy, w.info, w.kills, w.infra, w.refused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range WorkerOutcomes {
		w.trials.WithLabelValues(o)
	}
	for _, s := range Stages {
		w.stages.WithLabelValues(s)
	}
	for _, r := range SpecRefusalReasons {
		w.refused.WithLabelValues(r)
	}
	return w, nil
}

// SetInfo sets amk_worker_info (one series).
func (w *Worker) SetInfo(deviceName, driver, version string) {
	w.info.Reset()
	w.info.WithLabelValues(deviceName, driver, version).Set(1)
}

// Published counts a published outcome under its label (redisq.Label).
func (w *Worker) Published(outcome string) { w.trials.WithLabelValues(outcome).Inc() }

// Evaluated records an evaluation: its duration, its stages and, when it
// ended in an infrastructure failure, an infra error.
func (w *Worker) Evaluated(o trial.Outcome, took time.Duration) {
	w.duration.Observe(took.Seconds())
	for name, s := range o.Stages {
		if !slices.Contains(Stages, name) {
			name = "other"
		}
		w.stages.WithLabelValues(name).Observe(s)
	}
	if o.Failure != nil && o.Failure.Class == trial.FailInfra {
		w.infra.Inc()
	}
}

// Busy sets amk_worker_busy.
func (w *Worker) Busy(busy bool) {
	if busy {
		w.busy.Set(1)
	} else {
		w.busy.Set(0)
	}
}

// WatchdogKill counts one watchdog cancellation.
func (w *Worker) WatchdogKill() { w.kills.Inc() }

// InfraError counts an infrastructure failure that Evaluated does not see
// (e.g. a trial handed back before it could start).
func (w *Worker) InfraError() { w.infra.Inc() }

// SpecRefusalReasons are the reasons a worker refuses a trial payload
// unevaluated (internal/redisq's Refuse* values): each has a series from
// the start, at 0, so a healthy fleet's panels and rates have data.
var SpecRefusalReasons = []string{"unsigned", "misplaced"}

// SpecRefused counts one trial payload refused unevaluated.
func (w *Worker) SpecRefused(reason string) { w.refused.WithLabelValues(reason).Inc() }
