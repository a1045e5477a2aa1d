package redisq

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// Trials orphaned by a Redis outage.
//
// A worker takes a trial with asynq's dequeue, one script that moves the
// task to the active state and gives it a 30-second lease. When Redis dies
// after running that script but before its reply reaches the worker, the
// task is active in Redis (the append-only file kept it) and no process
// works on it: no asynq server lists it among its active tasks, no lease
// is extended, and no running marker names it (the worker writes that only
// once it holds the task), so the lost-worker check cannot see it. asynq's
// own recovery moves such a task back only once its lease has been expired
// for 30 seconds, at a check that runs once a minute: 60 to 120 seconds
// after the dequeue, with the campaign waiting all that time.
//
// So for orphanWatch after Redis answers again the dispatcher looks every
// orphanCheckEvery at each trial it submitted before the outage ended: one
// whose task is active, held by no live asynq server and named by no
// running marker on two looks in a row (a server lists its tasks at its
// next heartbeat, within 5 s, and the entry of a server that died in the
// outage expires soon after) is offered again like a lost worker's trial
// (reoffer). Should the orphan run after all (asynq's recovery), the
// trial's done marker answers it without a second evaluation.

const (
	// orphanWatch is how long after an outage the dispatcher looks for
	// orphaned trials: past it asynq's own recovery has taken them.
	orphanWatch = 2 * time.Minute
	// orphanCheckEvery is the time between two looks; it exceeds asynq's
	// server heartbeat (5 s), so a live server has listed its task by the
	// second look.
	orphanCheckEvery = 6 * time.Second
)

// orphanWatcher is the lost-worker loop's state for orphaned trials.
type orphanWatcher struct {
	recovered time.Time       // when Redis answered again; zero when no watch runs
	last      time.Time       // the last look
	suspects  map[string]bool // trial keys unheld at the last look
}

// startWatch begins a watch after an outage that ended at t.
func (o *orphanWatcher) startWatch(t time.Time) {
	o.recovered, o.last, o.suspects = t, time.Time{}, nil
}

// due reports whether a look is due now; it ends a watch that has run its
// course.
func (o *orphanWatcher) due(now time.Time) bool {
	if o.recovered.IsZero() {
		return false
	}
	if now.Sub(o.recovered) > orphanWatch {
		o.recovered, o.suspects = time.Time{}, nil
		return false
	}
	return now.Sub(o.last) >= orphanCheckEvery
}

// checkOrphans is one look of a watch: trials submitted before Redis came
// back are first swept (a vanished task enqueued again, a finished one
// delivered), then each active one that nothing holds is a suspect, and a
// suspect of the previous look is offered again.
func (d *Dispatcher) checkOrphans(ctx context.Context, o *orphanWatcher) error {
	o.last = time.Now()
	d.sweepOlderThan(time.Since(o.recovered))
	type candidate struct{ key, queue string }
	var list []candidate
	d.mu.Lock()
	for k, s := range d.pending {
		if _, reoffered := d.reoffered[k]; !reoffered && s.at.Before(o.recovered) {
			list = append(list, candidate{k, s.queue})
		}
	}
	d.mu.Unlock()
	if len(list) == 0 {
		o.suspects = nil
		return nil
	}
	servers, err := d.insp.Servers()
	if err != nil {
		return err
	}
	held := map[[2]string]bool{}
	for _, s := range servers {
		for _, w := range s.ActiveWorkers {
			held[[2]string{w.Queue, w.TaskID}] = true
		}
	}
	marks, err := d.rdb.HGetAll(ctx, runningKey(d.opts.Namespace)).Result()
	if err != nil {
		return err
	}
	next := map[string]bool{}
	for _, c := range list {
		info, err := d.insp.GetTaskInfo(c.queue, c.key)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			continue // the sweep enqueued it again
		}
		if err != nil {
			return err
		}
		if info.State != asynq.TaskStateActive || held[[2]string{c.queue, c.key}] || marks[c.key] != "" {
			continue
		}
		if !o.suspects[c.key] {
			next[c.key] = true
			continue
		}
		d.log.Warn("trial task active in Redis with no worker holding it (its dequeue's reply was lost to a Redis outage); offering it again",
			"task", c.key, "queue", c.queue)
		d.orphans.Add(1)
		m := running{Worker: "none (orphaned in a Redis outage)", Queue: c.queue, Task: c.key, Since: o.recovered,
			Payload: info.Payload, Headers: info.Headers}
		if err := d.reoffer(ctx, c.key, m); err != nil {
			return err
		}
	}
	o.suspects = next
	return nil
}
