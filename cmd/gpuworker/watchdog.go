package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/trial"
)

// watchdog runs evaluations one at a time under a wall-clock limit.
type watchdog struct {
	eval         func(context.Context, trial.Spec) trial.Outcome
	limit        time.Duration // for specs without timeout_s
	stopGrace    time.Duration // how long a cancelled evaluation may take to stop
	metrics      *metrics.Worker
	log          *slog.Logger
	device       chan struct{} // held until an evaluation has really returned
	wedged       chan struct{} // closed when an evaluation ignores cancellation
	wedgeOnce    sync.Once
	wedgeMessage string
	// onWedge, when set, is told which trial wedged the device before the
	// worker goes down, so that no other worker is handed it.
	onWedge func(spec trial.Spec, message string)
}

func newWatchdog(eval func(context.Context, trial.Spec) trial.Outcome, limit, stopGrace time.Duration, m *metrics.Worker, log *slog.Logger) *watchdog {
	return &watchdog{eval: eval, limit: limit, stopGrace: stopGrace, metrics: m, log: log,
		device: make(chan struct{}, 1), wedged: make(chan struct{})}
}

// limitFor is the wall-clock limit of spec.
func (w *watchdog) limitFor(spec trial.Spec) time.Duration {
	if spec.TimeoutSeconds > 0 {
		return time.Duration(spec.TimeoutSeconds * float64(time.Second))
	}
	return w.limit
}

// Evaluate is the dispatch.Evaluator of the worker.
func (w *watchdog) Evaluate(ctx context.Context, spec trial.Spec) trial.Outcome {
	select {
	case w.device <- struct{}{}:
	case <-ctx.Done():
		return failure(trial.FailInfra, "device", "handed back while the device was still busy")
	}
	limit := w.limitFor(spec)
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	done := make(chan trial.Outcome, 1)
	start := time.Now()
	w.metrics.Busy(true)
	go func() {
		out := w.safeEval(wctx, spec)
		w.metrics.Evaluated(out, time.Since(start))
		w.metrics.Busy(false)
		<-w.device
		done <- out
	}()
	select {
	case out := <-done:
		if out.Verdict == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return w.expired(spec, limit)
		}
		return out
	case <-wctx.Done():
	}
	if ctx.Err() != nil {
		// Handed back or lost: the result is discarded; wait for the stop.
		return w.awaitStop(spec, done, failure(trial.FailInfra, "worker", "evaluation cancelled: "+ctx.Err().Error()))
	}
	return w.awaitStop(spec, done, w.expired(spec, limit))
}

// safeEval runs the pipeline, turning a panic into a crash outcome.
func (w *watchdog) safeEval(ctx context.Context, spec trial.Spec) (out trial.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = failure(trial.FailCrash, "evaluate", fmt.Sprint("panic: ", r))
		}
	}()
	return w.eval(ctx, spec)
}

// expired records a watchdog kill and returns the timeout outcome.
func (w *watchdog) expired(spec trial.Spec, limit time.Duration) trial.Outcome {
	w.metrics.WatchdogKill()
	w.log.Warn("watchdog: trial exceeded its wall-clock limit; cancelled", "task", fmt.Sprintf("%s/%d", spec.CampaignID, spec.TrialID), "limit", limit)
	return failure(trial.FailTimeout, "watchdog", fmt.Sprintf("trial exceeded its wall-clock limit of %s", limit))
}

// awaitStop waits for a cancelled evaluation to return, then answers out.
// An evaluation that does not stop within the grace wedges the device.
func (w *watchdog) awaitStop(spec trial.Spec, done <-chan trial.Outcome, out trial.Outcome) trial.Outcome {
	t := time.NewTimer(w.stopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.wedgeOnce.Do(func() {
			w.wedgeMessage = fmt.Sprintf("evaluation of %s/%d ignored cancellation for %s; the device is wedged", spec.CampaignID, spec.TrialID, w.stopGrace)
			w.log.Error("device wedged", "reason", w.wedgeMessage)
			if w.onWedge != nil {
				w.onWedge(spec, w.wedgeMessage)
			}
			close(w.wedged)
		})
	}
	return out
}

// health is nil while the device is usable.
func (w *watchdog) health() error {
	select {
	case <-w.wedged:
		return errors.New(w.wedgeMessage)
	default:
		return nil
	}
}

func failure(class, phase, msg string) trial.Outcome {
	return trial.Outcome{Failure: &trial.Failure{Class: class, Phase: phase, Message: msg}}
}
