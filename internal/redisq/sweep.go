package redisq

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// sweepLoop periodically checks on trials the dispatcher still waits for.
func (d *Dispatcher) sweepLoop() {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
			d.sweep()
		}
	}
}

// sweep looks at every trial pending for longer than a sweep interval: an
// outcome that got stuck (archived task, outcome stored but its results-queue
// copy lost) is delivered, and a trial that vanished from Redis (a restart
// without persistence) is enqueued again. It also forgets delivered keys
// and re-offers older than the retention period.
func (d *Dispatcher) sweep() { d.sweepOlderThan(d.opts.SweepInterval) }

// sweepOlderThan is sweep over the trials pending for at least age.
func (d *Dispatcher) sweepOlderThan(age time.Duration) {
	now := time.Now()
	type due struct {
		key string
		sub submitted
	}
	var list []due
	d.mu.Lock()
	for k, s := range d.pending {
		if now.Sub(s.at) >= age {
			list = append(list, due{k, s})
		}
	}
	for k, del := range d.delivered {
		if now.Sub(del.at) > d.opts.Retention {
			delete(d.delivered, k)
		}
	}
	for k, r := range d.reoffered {
		if now.Sub(r.at) > d.opts.Retention {
			delete(d.reoffered, k)
		}
	}
	d.mu.Unlock()
	for _, e := range list {
		select {
		case <-d.closing:
			return
		default:
		}
		info, err := d.insp.GetTaskInfo(e.sub.queue, e.key)
		requeue := false
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			d.log.Warn("pending trial vanished from Redis; enqueueing it again", "task", e.key)
			requeue = true
		case err != nil:
			d.outage.Warn("sweep_check", "cannot check on pending trial", "task", e.key, "err", err)
		default:
			requeue = d.settle(e.key, e.sub.queue, info) == settleRequeue
		}
		if requeue {
			d.mu.Lock()
			_, still := d.pending[e.key] // not withdrawn or delivered meanwhile
			d.mu.Unlock()
			if !still {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := d.enqueue(ctx, e.sub.spec, e.sub.queue); err != nil {
				d.outage.Warn("sweep_requeue", "re-enqueue failed; will try again", "task", e.key, "err", err)
			}
			cancel()
		}
	}
}

// QueueStats is the state of one amk queue.
type QueueStats struct {
	Queue     string        `json:"queue"`
	Pending   int           `json:"pending"`
	Active    int           `json:"active"`
	Scheduled int           `json:"scheduled"`
	Retry     int           `json:"retry"`
	Archived  int           `json:"archived"`
	Completed int           `json:"completed"`
	Latency   time.Duration `json:"latency_ns"`
	Paused    bool          `json:"paused"`
}

// Queues reports the trial queues and the results queue of this namespace.
func (d *Dispatcher) Queues() ([]QueueStats, error) {
	names, err := d.insp.Queues()
	if err != nil {
		return nil, err
	}
	trials, results := TrialQueue(d.opts.Namespace, ""), ResultQueue(d.opts.Namespace)
	var out []QueueStats
	for _, q := range names {
		if q != results && !strings.HasPrefix(q, trials) {
			continue
		}
		info, err := d.insp.GetQueueInfo(q)
		if err != nil {
			return nil, err
		}
		out = append(out, QueueStats{Queue: q, Pending: info.Pending, Active: info.Active,
			Scheduled: info.Scheduled, Retry: info.Retry, Archived: info.Archived,
			Completed: info.Completed, Latency: info.Latency, Paused: info.Paused})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}
