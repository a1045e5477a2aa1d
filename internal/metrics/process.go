package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterProcess registers the Go runtime's and the process's standard
// collectors (go_*, process_*) on reg, as both daemons serve them.
func RegisterProcess(reg prometheus.Registerer) error {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	return reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
