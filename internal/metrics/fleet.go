package metrics

import "github.com/prometheus/client_golang/prometheus"

// RejectReasons are the values of amk_scheduler_outcomes_rejected_total's
// reason label (internal/redisq's Reject* constants); all are exported from
// the start, zeros included.
var RejectReasons = []string{"missing_mac", "bad_mac", "malformed", "not_issued"}

// Fleet is the scheduler's view of its transport's trust and health: the
// outcomes it refused, the workers it found lost and the outcomes it gave up
// holding for campaigns it does not drive.
type Fleet struct {
	rejected *prometheus.CounterVec
	unheld   prometheus.Counter
}

// RegisterFleet registers the fleet counters on reg; lost is read at every
// scrape (the transport's count of trials taken back from lost workers).
func RegisterFleet(reg prometheus.Registerer, lost func() float64) (*Fleet, error) {
	f := &Fleet{rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: SchedulerOutcomesRejected,
		Help: "Outcomes refused because their fleet-secret MAC was missing or wrong, they did not decode, or they answer another spec than the one issued for their trial (not_issued), by reason."},
		[]string{"reason"}),
		unheld: prometheus.NewCounter(prometheus.CounterOpts{Name: SchedulerOutcomesUnheld,
			Help: "Outcomes the scheduler stopped holding for campaigns it does not drive (held too long or too many); the transport delivers them again when the campaign resubmits its trials."})}
	for _, r := range RejectReasons {
		f.rejected.WithLabelValues(r)
	}
	if err := reg.Register(f.rejected); err != nil {
		return nil, err
	}
	if err := reg.Register(f.unheld); err != nil {
		return nil, err
	}
	if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: SchedulerLostWorkers,
		Help: "Trials taken back from workers whose heartbeat stopped, and offered again."}, lost)); err != nil {
		return nil, err
	}
	return f, nil
}

// Rejected counts one refused outcome.
func (f *Fleet) Rejected(reason string) { f.rejected.WithLabelValues(reason).Inc() }

// Unheld counts n outcomes no longer held for campaigns not driven here.
func (f *Fleet) Unheld(n int) { f.unheld.Add(float64(n)) }
