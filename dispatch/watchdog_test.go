package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/trial"
)

type countingObserver struct {
	mu                 sync.Mutex
	busy, kills, evals int
}

func (o *countingObserver) Busy(b bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b {
		o.busy++
	}
}

func (o *countingObserver) Evaluated(trial.Outcome, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evals++
}

func (o *countingObserver) WatchdogKill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kills++
}

func TestWatchdogPassesAnOutcomeThrough(t *testing.T) {
	obs := &countingObserver{}
	dog := NewWatchdog(func(context.Context, trial.Spec) trial.Outcome {
		return trial.Outcome{Verdict: &trial.Verdict{Valid: true}}
	}, WatchdogOptions{Limit: time.Minute, Observer: obs})
	out := dog.Evaluate(context.Background(), trial.Spec{})
	if out.Verdict == nil || !out.Verdict.Valid || out.Failure != nil {
		t.Fatalf("%+v", out)
	}
	if obs.busy != 1 || obs.evals != 1 || obs.kills != 0 || dog.Health() != nil {
		t.Fatalf("observer %+v, health %v", obs, dog.Health())
	}
}

// An evaluation past its limit (here the spec's own timeout_s) is cancelled
// and reported as a timeout; a panic is a crash; neither wedges the device.
func TestWatchdogTimeoutAndPanic(t *testing.T) {
	obs := &countingObserver{}
	dog := NewWatchdog(func(ctx context.Context, spec trial.Spec) trial.Outcome {
		if spec.TrialID == 2 {
			panic("kaput")
		}
		<-ctx.Done()
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailCrash, Message: ctx.Err().Error()}}
	}, WatchdogOptions{Limit: time.Hour, Observer: obs})
	out := dog.Evaluate(context.Background(), trial.Spec{TrialID: 1, TimeoutSeconds: 0.01})
	if out.Failure == nil || out.Failure.Class != trial.FailTimeout || out.Failure.Phase != "watchdog" || obs.kills != 1 {
		t.Fatalf("timeout: %+v, observer %+v", out.Failure, obs)
	}
	out = dog.Evaluate(context.Background(), trial.Spec{TrialID: 2})
	if out.Failure == nil || out.Failure.Class != trial.FailCrash || out.Failure.Message != "panic: kaput" {
		t.Fatalf("panic: %+v", out.Failure)
	}
	if dog.Health() != nil {
		t.Fatalf("health: %v", dog.Health())
	}
}

// An evaluation that ignores its cancellation wedges the device: Wedged
// closes, Health fails, and the device stays held until it returns.
func TestWatchdogDetectsAWedgedDevice(t *testing.T) {
	release := make(chan struct{})
	dog := NewWatchdog(func(context.Context, trial.Spec) trial.Outcome {
		<-release
		return trial.Outcome{}
	}, WatchdogOptions{Limit: time.Millisecond, StopGrace: time.Millisecond})
	out := dog.Evaluate(context.Background(), trial.Spec{TrialID: 7})
	if out.Failure == nil || out.Failure.Class != trial.FailTimeout {
		t.Fatalf("%+v", out)
	}
	<-dog.Wedged()
	if dog.Health() == nil {
		t.Fatal("a wedged device reports healthy")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out := dog.Evaluate(ctx, trial.Spec{TrialID: 8}); out.Failure == nil || out.Failure.Class != trial.FailInfra {
		t.Fatalf("evaluation on a held device: %+v", out)
	}
	close(release)
}
