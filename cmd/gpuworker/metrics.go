package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/amk-dev/amk/internal/metrics"
)

// newMetrics registers the worker's series (internal/metrics, labelled with
// its target and device) and the Go and process collectors on reg, a
// registry made in main (never the global default).
func newMetrics(reg prometheus.Registerer, target, device string) (*metrics.Worker, error) {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	return metrics.NewWorker(reg, target, device)
}
