package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/amk-dev/amk/trial"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("dispatcher closed")

// Dispatcher sends trial specs to evaluators and returns their outcomes.
type Dispatcher interface {
	// Submit queues a trial. Re-submitting a queued or running trial is a
	// no-op.
	Submit(ctx context.Context, spec trial.Spec) error
	// Outcomes delivers one outcome per submitted trial, in completion order.
	Outcomes() <-chan trial.Outcome
	// Close stops accepting work and releases resources; trials still
	// running may be abandoned (their outcome is then never delivered).
	Close() error
}

// Withdrawer is a Dispatcher that can take back a trial no evaluator has
// started (a stopped campaign's queued trials). Withdraw reports whether it
// did: a withdrawn trial yields no outcome, and its task is gone from the
// transport; a trial that runs, finished or is unknown is left as it is
// (false).
type Withdrawer interface {
	Withdraw(ctx context.Context, spec trial.Spec) (bool, error)
}

// Withdraw takes back a trial no evaluator has started, where d can
// (Withdrawer); a dispatcher that cannot withdraws nothing.
func Withdraw(ctx context.Context, d Dispatcher, spec trial.Spec) (bool, error) {
	if w, ok := d.(Withdrawer); ok {
		return w.Withdraw(ctx, spec)
	}
	return false, nil
}

// Evaluator evaluates one trial. It must respect ctx and never panic; a
// failure is reported in the Outcome.
type Evaluator func(ctx context.Context, spec trial.Spec) trial.Outcome

// Key identifies a trial across the fleet.
func Key(spec trial.Spec) string { return fmt.Sprintf("%s/%d", spec.CampaignID, spec.TrialID) }

// Local runs trials on in-process evaluator goroutines.
type Local struct {
	eval     Evaluator
	queue    chan trial.Spec
	outcomes chan trial.Outcome
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	pending map[string]bool
	closed  bool
}

// NewLocal starts workers goroutines evaluating submitted trials with eval.
func NewLocal(workers int, eval Evaluator) *Local {
	if workers < 1 {
		workers = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Local{
		eval:     eval,
		queue:    make(chan trial.Spec, 1024),
		outcomes: make(chan trial.Outcome, 1024),
		ctx:      ctx,
		cancel:   cancel,
		pending:  map[string]bool{},
	}
	for i := 0; i < workers; i++ {
		l.wg.Add(1)
		go l.work()
	}
	return l
}

func (l *Local) work() {
	defer l.wg.Done()
	for {
		select {
		case <-l.ctx.Done():
			return
		case spec := <-l.queue:
			out := l.run(spec)
			l.mu.Lock()
			delete(l.pending, Key(spec))
			l.mu.Unlock()
			select {
			case l.outcomes <- out:
			case <-l.ctx.Done():
				return
			}
		}
	}
}

// run evaluates one spec, turning a panic into a crash outcome so that one
// bad trial never takes the process down.
func (l *Local) run(spec trial.Spec) (out trial.Outcome) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			out = trial.Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID,
				Failure: &trial.Failure{Class: trial.FailCrash, Phase: "evaluate", Message: fmt.Sprint("panic: ", r)}}
		}
		out.ElapsedS = time.Since(start).Seconds()
	}()
	ctx := l.ctx
	if spec.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(spec.TimeoutSeconds*float64(time.Second)))
		defer cancel()
	}
	out = l.eval(ctx, spec)
	out.CampaignID, out.TrialID = spec.CampaignID, spec.TrialID
	if out.Verdict == nil && out.Failure == nil {
		out.Failure = &trial.Failure{Class: trial.FailCrash, Phase: "evaluate", Message: "evaluator returned neither a verdict nor a failure"}
	}
	return out
}

// Submit queues spec unless it is already pending.
func (l *Local) Submit(ctx context.Context, spec trial.Spec) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	k := Key(spec)
	if l.pending[k] {
		l.mu.Unlock()
		return nil
	}
	l.pending[k] = true
	l.mu.Unlock()
	select {
	case l.queue <- spec:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		delete(l.pending, k)
		l.mu.Unlock()
		return ctx.Err()
	}
}

// Outcomes returns the outcome channel.
func (l *Local) Outcomes() <-chan trial.Outcome { return l.outcomes }

// Close stops the workers.
func (l *Local) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	return nil
}
