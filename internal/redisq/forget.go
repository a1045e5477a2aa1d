package redisq

import (
	"cmp"
	"context"
	"errors"
	"strings"
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
//
// The same holds after faults: a trial re-offered after its worker was lost
// has the lost attempt's task (active until asynq recovers it) and perhaps
// a re-offer still queued; a trial delivered to a dispatcher that did not
// submit it (its outcome waited in Redis across a scheduler restart) has a
// task on a queue this dispatcher must look up. Forget deletes all of them;
// the done marker goes last, so an attempt that asynq recovers in the
// meantime finds it and completes without evaluating the trial again.

// forgetDelay is how long after Forget a trial's Redis state is deleted:
// the worker that published the outcome stores its done marker and
// completes its task just after the outcome reaches the dispatcher, and a
// task is deleted only once asynq has completed it.
const forgetDelay = 2 * time.Second

// forgetAttempts bounds how often a trial whose task is still active is
// tried again, each time twice as late (at most forgetBackoffCap later):
// about five minutes in all, longer than asynq takes to recover the task of
// a worker that died mid-trial (its lease, 30 s, plus a recovery pass every
// minute). After the last attempt what is left expires with the retention
// period.
const forgetAttempts = 10

// forgetBackoffCap is the longest wait between two attempts.
const forgetBackoffCap = time.Minute

// forgetParallel is how many task deletions run at once.
const forgetParallel = 8

// maxForgetting bounds the trials waiting to be forgotten (a Redis outage);
// beyond it the oldest are left to the retention period.
const maxForgetting = 1 << 16

// forgetting is one recorded trial whose Redis state is to be deleted.
type forgetting struct {
	key string
	// queue is the trial's queue; "" when this dispatcher did not submit
	// the trial (it was delivered after a restart): every trial queue of
	// the namespace is looked at.
	queue string
	// tasks are the trial's task ids: the trial key and the ids of the
	// re-offers this dispatcher made (lost.go).
	tasks    []string
	due      time.Time
	attempts int
}

// Forget tells the dispatcher that out's trial has been recorded durably.
// Shortly after, its tasks (the trial's, with the stored outcome, and any
// re-offer still queued) and its done marker are deleted from Redis. While
// a task of the trial is still active (a lost worker's attempt that asynq
// has not yet recovered) the done marker stays, so that attempt completes
// without evaluating the trial again, and a copy of the outcome is still
// dropped as delivered; once the tasks are gone the dispatcher stops
// remembering the delivery, and a copy arriving later than that is
// delivered again, for the caller to refuse by trial id (and forget). It
// never blocks.
func (d *Dispatcher) Forget(out trial.Outcome) {
	key := outcomeKey(out)
	d.mu.Lock()
	defer d.mu.Unlock()
	del, ok := d.delivered[key]
	if !ok || d.closed || del.forgetting {
		return
	}
	del.forgetting = true
	d.delivered[key] = del
	if len(d.forgetting) >= maxForgetting {
		d.forgetting = d.forgetting[1:]
	}
	f := forgetting{key: key, queue: del.queue, tasks: []string{key}, due: time.Now().Add(forgetDelay)}
	if r, ok := d.reoffered[key]; ok {
		f.tasks = append(f.tasks, r.tasks...)
		if f.queue == "" {
			f.queue = r.queue
		}
	}
	d.forgetting = append(d.forgetting, f)
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

// forgetDue deletes the Redis state of every trial due by now: its tasks
// first, then, once none is left, its done marker. A trial with a task
// still active is tried again later.
func (d *Dispatcher) forgetDue(now time.Time) {
	d.mu.Lock()
	var due []forgetting
	waiting := d.forgetting[:0]
	for _, f := range d.forgetting {
		if f.due.After(now) {
			waiting = append(waiting, f)
		} else {
			due = append(due, f)
		}
	}
	clear(d.forgetting[len(waiting):])
	d.forgetting = waiting
	d.mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		allQueues []string
		queuesErr error
	)
	for _, f := range due {
		if f.queue == "" {
			allQueues, queuesErr = d.trialQueues()
			break
		}
	}
	// asynq deletes one task per call (two round trips): a few at a time
	// keep up with the record rate.
	var (
		mu    sync.Mutex
		gone  []forgetting
		again []forgetting
		wg    sync.WaitGroup
		slots = make(chan struct{}, forgetParallel)
	)
	for _, f := range due {
		queues := []string{f.queue}
		if f.queue == "" {
			queues = allQueues
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			err := queuesErr
			if f.queue != "" || err == nil {
				err = d.deleteTasks(queues, f.tasks)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				gone = append(gone, f)
			case f.attempts+1 < forgetAttempts && ctx.Err() == nil:
				// Most likely still active: the worker completes it, or
				// asynq recovers it from a lost worker, in a while.
				f.attempts++
				f.due = now.Add(min(forgetDelay<<f.attempts, forgetBackoffCap))
				again = append(again, f)
			default:
				d.outage.Warn("forget", "could not delete a recorded trial's task; it expires with the retention period", "task", f.key, "err", err)
				gone = append(gone, f)
			}
		}()
	}
	wg.Wait()
	if len(gone) > 0 {
		markers := make([]string, len(gone))
		for i, f := range gone {
			markers[i] = doneKey(d.opts.Namespace, f.key)
		}
		if err := d.rdb.Unlink(ctx, markers...).Err(); err != nil {
			d.outage.Warn("forget", "could not delete recorded trials' done markers; they expire with the retention period", "err", err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range gone {
		// Until now a copy of the outcome still on its way (the results
		// queue's, a lost worker's late answer) was dropped here as a
		// duplicate.
		delete(d.delivered, f.key)
		delete(d.reoffered, f.key)
	}
	d.forgetting = append(d.forgetting, again...)
}

// deleteTasks deletes the tasks ids from whichever of queues holds them; a
// task found in none is already gone. It reports the first error other
// than "not found" (an active task cannot be deleted).
func (d *Dispatcher) deleteTasks(queues, ids []string) error {
	var first error
	for _, id := range ids {
		for _, q := range queues {
			err := d.insp.DeleteTask(q, id)
			if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
				continue // not in this queue
			}
			first = cmp.Or(first, err)
			break // deleted, or it is here and cannot be deleted yet
		}
	}
	return first
}

// trialQueues lists the namespace's trial queues, for trials whose queue
// this dispatcher does not know.
func (d *Dispatcher) trialQueues() ([]string, error) {
	names, err := d.insp.Queues()
	if err != nil {
		return nil, err
	}
	prefix := TrialQueue(d.opts.Namespace, "")
	var out []string
	for _, q := range names {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out, nil
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
