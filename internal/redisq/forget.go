package redisq

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/trial"
)

// Forgetting recorded trials.
//
// Every finished trial leaves two copies of its outcome in Redis: the trial
// task's stored result (asynq keeps a completed task for the retention
// period) and the done marker. Both exist for the time between an outcome
// leaving Redis and the scheduler writing it to its ledger, and for attempts
// of the trial still on their way. Once the scheduler has recorded the
// outcome durably neither is needed: the ledger no longer has the trial in
// flight, so it is never resubmitted, and a late copy of its outcome is
// refused by the campaign as a duplicate. Without Forget, Redis holds every
// finished trial for the whole retention period (1.5–2.6 KB per trial,
// docs/results/fleet-scale.md): at a few hundred trials a second that is
// tens of GB a day.

// forgetDelay is how long after Forget a trial's Redis state is deleted:
// the worker that published the outcome stores its done marker and
// completes its task just after the outcome reaches the dispatcher, and a
// task is deleted only once asynq has completed it.
const forgetDelay = 2 * time.Second

// forgetAttempts bounds how often a trial whose task is still active is
// tried again; what is left then expires with the retention period.
const forgetAttempts = 5

// forgetParallel is how many task deletions run at once.
const forgetParallel = 8

// maxForgetting bounds the trials waiting to be forgotten (a Redis outage);
// beyond it the oldest are left to the retention period.
const maxForgetting = 1 << 16

// forgetting is one recorded trial whose Redis state is to be deleted.
type forgetting struct {
	key, queue string
	due        time.Time
	attempts   int
}

// Forget tells the dispatcher that out's trial has been recorded durably.
// Shortly after, its finished task (with the stored outcome) and its done
// marker are deleted from Redis, and the dispatcher stops remembering its
// delivery: a copy of the outcome arriving later than that is delivered
// again, for the caller to refuse by trial id. It never blocks.
func (d *Dispatcher) Forget(out trial.Outcome) {
	key := outcomeKey(out)
	d.mu.Lock()
	defer d.mu.Unlock()
	del, ok := d.delivered[key]
	if !ok || d.closed {
		return
	}
	if len(d.forgetting) >= maxForgetting {
		d.forgetting = d.forgetting[1:]
	}
	d.forgetting = append(d.forgetting, forgetting{key: key, queue: del.queue, due: time.Now().Add(forgetDelay)})
}

// forgetLoop deletes what Redis keeps of forgotten trials until the
// dispatcher closes.
func (d *Dispatcher) forgetLoop() {
	defer d.wg.Done()
	t := time.NewTicker(forgetDelay / 4)
	defer t.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-t.C:
			d.forgetDue(time.Now())
		}
	}
}

// forgetDue deletes the Redis state of every trial due by now; a task that
// is still active is tried again later.
func (d *Dispatcher) forgetDue(now time.Time) {
	d.mu.Lock()
	n := 0
	for n < len(d.forgetting) && !d.forgetting[n].due.After(now) {
		n++
	}
	due := append([]forgetting(nil), d.forgetting[:n]...)
	d.forgetting = d.forgetting[n:]
	for _, f := range due {
		// Until now a copy of the outcome still on its way (the results
		// queue's, being consumed) was dropped here as a duplicate.
		delete(d.delivered, f.key)
	}
	d.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	markers := make([]string, len(due))
	for i, f := range due {
		markers[i] = doneKey(d.opts.Namespace, f.key)
	}
	if err := d.rdb.Unlink(ctx, markers...).Err(); err != nil {
		d.outage.Warn("forget", "could not delete recorded trials' done markers; they expire with the retention period", "err", err)
	}
	// asynq deletes one task per call (two round trips): a few at a time
	// keep up with the record rate.
	var (
		mu    sync.Mutex
		again []forgetting
		wg    sync.WaitGroup
		slots = make(chan struct{}, forgetParallel)
	)
	for _, f := range due {
		if f.queue == "" {
			continue // not submitted by this dispatcher: left to the retention period
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			err := d.insp.DeleteTask(f.queue, f.key)
			switch {
			case err == nil, errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			case f.attempts+1 < forgetAttempts && ctx.Err() == nil:
				// Most likely still active: the worker completes it in a moment.
				f.attempts++
				f.due = now.Add(forgetDelay)
				mu.Lock()
				again = append(again, f)
				mu.Unlock()
			default:
				d.outage.Warn("forget", "could not delete a recorded trial's task; it expires with the retention period", "task", f.key, "err", err)
			}
		}()
	}
	wg.Wait()
	if len(again) > 0 {
		d.mu.Lock()
		d.forgetting = append(d.forgetting, again...)
		d.mu.Unlock()
	}
}

// Undeliver tells the dispatcher that out never reached its campaign (the
// scheduler's dispatch.Mux gave up holding it for a campaign that did not
// open). The dispatcher stops remembering the delivery, and keeps
// everything Redis holds of the trial: when the campaign opens later its
// driver resubmits the trials its ledger has in flight, and Submit finds
// the finished task and delivers its stored outcome again (within the
// retention period) instead of dropping the submission as already
// delivered. It never blocks.
func (d *Dispatcher) Undeliver(out trial.Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.delivered, outcomeKey(out))
}
