package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Queue is one queue's state as the queue collector exports it.
type Queue struct {
	Name                              string
	Pending, Active, Scheduled, Retry int
	// Latency is the age of the oldest pending task.
	Latency time.Duration
	// Processed and Failed are asynq's cumulative counts.
	Processed, Failed int64
}

// ScrapeTimeout bounds one call of a queue source.
const ScrapeTimeout = 3 * time.Second

type queueCollector struct {
	source                                    func(context.Context) ([]Queue, error)
	log                                       *slog.Logger
	depth, active, latency, processed, failed *prometheus.Desc
}

// RegisterQueues registers the queue collector on reg; source is called at
// every scrape (with a ScrapeTimeout deadline). A failing source exports no
// queue series for that scrape and logs a warning (log may be nil).
func RegisterQueues(reg prometheus.Registerer, source func(context.Context) ([]Queue, error), log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	labels := []string{"queue"}
	c := &queueCollector{
		source:    source,
		log:       log,
		depth:     prometheus.NewDesc(QueueDepth, "Tasks waiting for a consumer (pending, scheduled and retry).", labels, nil),
		active:    prometheus.NewDesc(QueueActive, "Tasks being processed.", labels, nil),
		latency:   prometheus.NewDesc(QueueLatency, "Age of the queue's oldest pending task, in seconds.", labels, nil),
		processed: prometheus.NewDesc(QueueProcessed, "Tasks processed, succeeded or failed (asynq's cumulative count).", labels, nil),
		failed:    prometheus.NewDesc(QueueFailed, "Task attempts that failed (asynq's cumulative count).", labels, nil),
	}
	return reg.Register(c)
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.active, c.latency, c.processed, c.failed} {
		ch <- d
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	queues, err := c.source(ctx)
	if err != nil {
		c.log.Warn("queue metrics unavailable", "err", err)
		return
	}
	for _, q := range queues {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Pending+q.Scheduled+q.Retry), q.Name)
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(q.Active), q.Name)
		ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, q.Latency.Seconds(), q.Name)
		ch <- prometheus.MustNewConstMetric(c.processed, prometheus.CounterValue, float64(q.Processed), q.Name)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(q.Failed), q.Name)
	}
}
