package scheduler

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/redisq"
)

// RedisView reports on a Redis transport what the dispatcher does not:
// the live workers, the queues and whether Redis answers.
type RedisView struct {
	disp *redisq.Dispatcher
	rdb  *redis.Client
	insp *asynq.Inspector
	ns   string
}

// NewRedisView opens its own connection (conn, namespace ns) next to the
// dispatcher d.
func NewRedisView(d *redisq.Dispatcher, conn redisq.Conn, ns string) (*RedisView, error) {
	rdb, err := conn.Client()
	if err != nil {
		return nil, err
	}
	return &RedisView{disp: d, rdb: rdb, insp: asynq.NewInspectorFromRedisClient(rdb), ns: ns}, nil
}

// Close releases the view's connection.
func (v *RedisView) Close() error { return v.rdb.Close() }

// Health pings Redis.
func (v *RedisView) Health(ctx context.Context) error {
	if err := v.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Workers lists the live workers of the namespace.
func (v *RedisView) Workers(ctx context.Context) ([]control.Worker, error) {
	workers, err := v.disp.Workers(ctx)
	if err != nil {
		return nil, control.Errorf(control.ErrUnavailable, "redis: %v", err)
	}
	return workers, nil
}

// Queues reports the trial queues and the results queue of the namespace.
func (v *RedisView) Queues(ctx context.Context) ([]control.Queue, error) {
	names, err := v.insp.Queues()
	if err != nil {
		return nil, control.Errorf(control.ErrUnavailable, "redis: %v", err)
	}
	trials, results := redisq.TrialQueue(v.ns, ""), redisq.ResultQueue(v.ns)
	var out []control.Queue
	for _, q := range names {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if q != results && !strings.HasPrefix(q, trials) {
			continue
		}
		info, err := v.insp.GetQueueInfo(q)
		if err != nil {
			return nil, control.Errorf(control.ErrUnavailable, "redis: queue %s: %v", q, err)
		}
		out = append(out, control.Queue{Queue: q, Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
			Retry: info.Retry, Archived: info.Archived, Completed: info.Completed, LatencySeconds: info.Latency.Seconds(),
			Paused: info.Paused, ProcessedTotal: int64(info.ProcessedTotal), FailedTotal: int64(info.FailedTotal)})
		if q == results {
			n, err := redisq.OutcomesReceived(ctx, v.rdb, v.ns)
			if err != nil {
				return nil, control.Errorf(control.ErrUnavailable, "redis: outcomes received: %v", err)
			}
			out[len(out)-1].OutcomesReceived = &n
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// QueueMetrics is Queues in the metrics collector's terms.
func (v *RedisView) QueueMetrics(ctx context.Context) ([]metrics.Queue, error) {
	qs, err := v.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return QueueMetrics(qs), nil
}

// QueueMetrics converts API queue reports for the metrics collector.
func QueueMetrics(qs []control.Queue) []metrics.Queue {
	out := make([]metrics.Queue, len(qs))
	for i, q := range qs {
		out[i] = metrics.Queue{Name: q.Queue, Pending: q.Pending, Active: q.Active, Scheduled: q.Scheduled,
			Retry: q.Retry, Latency: secondsDuration(q.LatencySeconds), Processed: q.ProcessedTotal, Failed: q.FailedTotal}
	}
	return out
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Monitor is the asynq web UI (hibiken/asynqmon) over its own connection to
// Redis, mounted at root (e.g. "/queues") and read-only: queues are changed
// by the scheduler, not by hand. close releases the connection.
func Monitor(conn redisq.Conn, root string) (h http.Handler, close func() error, err error) {
	rdb, err := conn.Client()
	if err != nil {
		return nil, nil, err
	}
	m := asynqmon.New(asynqmon.Options{RootPath: root, RedisConnOpt: clientOpt{rdb}, ReadOnly: true})
	return m, m.Close, nil
}

// clientOpt hands asynqmon an existing client.
type clientOpt struct{ rdb *redis.Client }

func (o clientOpt) MakeRedisClient() any { return o.rdb }
