package redisq

import (
	"context"
	"fmt"
)

// The doorbell is a fast path for outcomes. asynq polls its queues, so the
// results queue alone adds one polling wait to every round trip; a worker
// therefore also publishes each outcome on a Redis pub/sub channel after it
// is safely stored, and the dispatcher delivers it from there at once and
// deletes the results-queue copy (a copy already being consumed is dropped as
// a duplicate). The stored result still backs a resubmission.
// Pub/sub is best effort (a message sent while the dispatcher is away is
// lost); the queue remains the durable path.

// doorbellChannel is the pub/sub channel of a namespace's outcomes.
func doorbellChannel(namespace string) string { return prefix(namespace) + "amk:outcomes" }

// listenDoorbell subscribes before returning, so no outcome published after
// NewDispatcher returns is missed by the fast path.
func (d *Dispatcher) listenDoorbell(ctx context.Context) error {
	ps := d.rdb.Subscribe(ctx, doorbellChannel(d.opts.Namespace))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return fmt.Errorf("subscribe to outcomes: %w", err)
	}
	ring := ps.Channel()
	stop, cancel := context.WithCancel(context.Background())
	d.wg.Add(2)
	go func() {
		defer d.wg.Done()
		<-d.closing
		cancel()
		_ = ps.Close()
	}()
	go func() {
		defer d.wg.Done()
		for msg := range ring {
			out, ok := d.open([]byte(msg.Payload), "doorbell", "")
			if !ok {
				continue // the queue copy gets the same treatment
			}
			if err := d.issued(out); err != nil {
				d.reject(RejectNotIssued, "doorbell", outcomeKey(out), err)
				continue
			}
			if d.deliver(stop, out) {
				// The queue copy is no longer needed; one that is already
				// being consumed (active) stays and is dropped as a duplicate.
				_ = d.insp.DeleteTask(ResultQueue(d.opts.Namespace), outcomeKey(out))
			}
		}
	}()
	return nil
}
