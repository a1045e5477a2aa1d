package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/amk-dev/amk/trial"
)

// DefaultStopGrace is how long a cancelled evaluation may take to return
// before the device counts as wedged.
const DefaultStopGrace = 30 * time.Second

// DefaultTrialTimeout is the wall-clock limit of a trial whose spec sets
// none: a gpuworker's default trial_timeout and an embedded run's limit.
const DefaultTrialTimeout = 10 * time.Minute

// WatchdogObserver is told what a Watchdog does (a gpuworker passes its
// Prometheus metrics).
type WatchdogObserver interface {
	// Busy reports whether an evaluation holds the device.
	Busy(busy bool)
	// Evaluated reports a finished evaluation and how long it took.
	Evaluated(out trial.Outcome, took time.Duration)
	// WatchdogKill reports an evaluation cancelled for exceeding its limit.
	WatchdogKill()
}

// WatchdogOptions configure a Watchdog.
type WatchdogOptions struct {
	// Limit is the wall-clock limit of a spec that sets no timeout_s
	// (DefaultTrialTimeout is the usual one).
	Limit time.Duration
	// StopGrace is how long a cancelled evaluation may take to return
	// before the device counts as wedged; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Observer, when set, is told about every evaluation.
	Observer WatchdogObserver
	// Log, when set, gets the kills and the wedge.
	Log *slog.Logger
	// OnWedge, when set, is told which trial wedged the device, before
	// Wedged closes (a gpuworker marks it poison so that no other worker is
	// handed it).
	OnWedge func(spec trial.Spec, message string)
}

// Watchdog runs evaluations on one device, one at a time, each under a
// wall-clock limit: an evaluation past its limit is cancelled and reported
// as a timeout failure; a panic becomes a crash failure; an evaluation that
// ignores cancellation for StopGrace wedges the device (Wedged closes, Health
// fails), and the device stays held until it really returns. The gpuworker
// daemon and amkctl's embedded --device cuda runs both evaluate through it.
type Watchdog struct {
	eval         Evaluator
	opts         WatchdogOptions
	device       chan struct{} // held until an evaluation has really returned
	wedged       chan struct{} // closed when an evaluation ignores cancellation
	wedgeOnce    sync.Once
	wedgeMessage string
}

// NewWatchdog guards eval.
func NewWatchdog(eval Evaluator, opts WatchdogOptions) *Watchdog {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	return &Watchdog{eval: eval, opts: opts, device: make(chan struct{}, 1), wedged: make(chan struct{})}
}

// limitFor is the wall-clock limit of spec.
func (w *Watchdog) limitFor(spec trial.Spec) time.Duration {
	if spec.TimeoutSeconds > 0 {
		return time.Duration(spec.TimeoutSeconds * float64(time.Second))
	}
	return w.opts.Limit
}

// Evaluate is the guarded Evaluator.
func (w *Watchdog) Evaluate(ctx context.Context, spec trial.Spec) trial.Outcome {
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
	w.observe(func(o WatchdogObserver) { o.Busy(true) })
	go func() {
		out := w.safeEval(wctx, spec)
		w.observe(func(o WatchdogObserver) {
			o.Evaluated(out, time.Since(start))
			o.Busy(false)
		})
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

func (w *Watchdog) observe(fn func(WatchdogObserver)) {
	if w.opts.Observer != nil {
		fn(w.opts.Observer)
	}
}

// safeEval runs the evaluator, turning a panic into a crash outcome.
func (w *Watchdog) safeEval(ctx context.Context, spec trial.Spec) (out trial.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = failure(trial.FailCrash, "evaluate", fmt.Sprint("panic: ", r))
		}
	}()
	return w.eval(ctx, spec)
}

// expired records a watchdog kill and returns the timeout outcome.
func (w *Watchdog) expired(spec trial.Spec, limit time.Duration) trial.Outcome {
	w.observe(func(o WatchdogObserver) { o.WatchdogKill() })
	w.opts.Log.Warn("watchdog: trial exceeded its wall-clock limit; cancelled", "task", fmt.Sprintf("%s/%d", spec.CampaignID, spec.TrialID), "limit", limit)
	return failure(trial.FailTimeout, "watchdog", fmt.Sprintf("trial exceeded its wall-clock limit of %s", limit))
}

// awaitStop waits for a cancelled evaluation to return, then answers out.
// An evaluation that does not stop within the grace wedges the device.
func (w *Watchdog) awaitStop(spec trial.Spec, done <-chan trial.Outcome, out trial.Outcome) trial.Outcome {
	t := time.NewTimer(w.opts.StopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.wedgeOnce.Do(func() {
			w.wedgeMessage = fmt.Sprintf("evaluation of %s/%d ignored cancellation for %s; the device is wedged", spec.CampaignID, spec.TrialID, w.opts.StopGrace)
			w.opts.Log.Error("device wedged", "reason", w.wedgeMessage)
			if w.opts.OnWedge != nil {
				w.opts.OnWedge(spec, w.wedgeMessage)
			}
			close(w.wedged)
		})
	}
	return out
}

// Wedged is closed once an evaluation ignored its cancellation.
func (w *Watchdog) Wedged() <-chan struct{} { return w.wedged }

// Health is nil while the device is usable.
func (w *Watchdog) Health() error {
	select {
	case <-w.wedged:
		return errors.New(w.wedgeMessage)
	default:
		return nil
	}
}

func failure(class trial.FailClass, phase, msg string) trial.Outcome {
	return trial.Outcome{Failure: &trial.Failure{Class: class, Phase: phase, Message: msg}}
}
