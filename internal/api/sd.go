package api

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

// SDLinger is how long a worker that left the registry stays in the
// service-discovery answer, so that Prometheus sees its target go down (up
// == 0, the AMKWorkerDown alert) instead of silently losing it.
const SDLinger = 15 * time.Minute

// SDGroup is one target group of Prometheus's HTTP service discovery
// (GET /v1/sd/workers): a worker's metrics address and its labels.
type SDGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// sdMemory remembers the workers service discovery has listed.
type sdMemory struct {
	mu   sync.Mutex
	seen map[string]sdEntry // worker id -> its group and when last live
}

type sdEntry struct {
	group SDGroup
	at    time.Time
}

// serviceDiscovery answers Prometheus's http_sd_configs: one target group
// per worker that announced a metrics address, live or gone for less than
// SDLinger, labelled with its GPU target, device and compose-style profile
// (gpu for a CUDA device, cpu otherwise).
func (s *server) serviceDiscovery(w http.ResponseWriter, r *http.Request) error {
	workers, err := s.listWorkers(r.Context())
	if err != nil {
		return fmt.Errorf("service discovery: %w", err)
	}
	now := s.now()
	s.sd.mu.Lock()
	defer s.sd.mu.Unlock()
	if s.sd.seen == nil {
		s.sd.seen = map[string]sdEntry{}
	}
	for _, wk := range workers {
		if wk.MetricsAddr == "" {
			continue
		}
		profile := "gpu"
		if wk.Device == "cpu" {
			profile = "cpu"
		}
		s.sd.seen[wk.ID] = sdEntry{at: now, group: SDGroup{Targets: []string{wk.MetricsAddr}, Labels: map[string]string{
			"profile": profile, "amk_target": wk.Target, "amk_device": wk.Device, "amk_worker": wk.ID}}}
	}
	out := []SDGroup{}
	for id, e := range s.sd.seen {
		if now.Sub(e.at) > SDLinger {
			delete(s.sd.seen, id)
			continue
		}
		out = append(out, e.group)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Labels["amk_worker"] < out[j].Labels["amk_worker"] })
	writeJSON(w, http.StatusOK, out)
	return nil
}
