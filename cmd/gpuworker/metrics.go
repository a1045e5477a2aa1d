package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the worker's Prometheus series, registered on a registry made
// in main (never the global default).
type metrics struct {
	trials   *prometheus.CounterVec
	busy     prometheus.Gauge
	duration prometheus.Histogram
	kills    prometheus.Counter
	info     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		trials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "amk_worker_trials_total",
			Help: "Trials this worker finished, by outcome (ok, rejected, incorrect, no_latency, crash, timeout, infra).",
		}, []string{"outcome"}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "amk_worker_busy",
			Help: "1 while an evaluation holds the device.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "amk_worker_trial_duration_seconds",
			Help:    "Wall-clock time of one evaluation.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 14), // 10 ms .. ~4 h
		}),
		kills: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "amk_worker_watchdog_kills_total",
			Help: "Evaluations the wall-clock watchdog cancelled.",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "amk_worker_info",
			Help: "Constant 1, labelled with the worker's target and device.",
		}, []string{"target", "device", "device_name", "driver", "version"}),
	}
	reg.MustRegister(m.trials, m.busy, m.duration, m.kills, m.info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, o := range []string{"ok", "rejected", "incorrect", "crash", "timeout", "infra"} {
		m.trials.WithLabelValues(o) // export zeros so rates work from the start
	}
	return m
}
