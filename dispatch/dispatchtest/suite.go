// Package dispatchtest is the test suite every dispatch.Dispatcher
// implementation must pass, so the embedded and distributed modes behave the
// same.
package dispatchtest

import (
	"context"
	"encoding/json"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/trial"
)

// Factory builds a fresh dispatcher whose evaluators call eval.
type Factory func(t *testing.T, eval dispatch.Evaluator) dispatch.Dispatcher

// EchoEvaluator returns a verdict whose latency encodes the trial id, and
// counts its calls.
func EchoEvaluator(calls *atomic.Int64) dispatch.Evaluator {
	return func(ctx context.Context, spec trial.Spec) trial.Outcome {
		calls.Add(1)
		lat := float64(100 + spec.TrialID)
		ok := true
		return trial.Outcome{Verdict: &trial.Verdict{Valid: true, Correct: &ok, LatencyUS: &lat, Model: spec.Model, GPU: spec.GPU}}
	}
}

// Spec builds a small valid spec for trial id.
func Spec(campaign string, id int) trial.Spec {
	return trial.Spec{CampaignID: campaign, TrialID: id, Model: "toy", GPU: "h200", Device: "cpu",
		Point: json.RawMessage(`{}`), Source: "test"}
}

// Run runs the suite against factory.
func Run(t *testing.T, factory Factory) {
	t.Run("every trial yields one outcome", func(t *testing.T) {
		var calls atomic.Int64
		d := factory(t, EchoEvaluator(&calls))
		defer d.Close()
		const n = 20
		for i := range n {
			if err := d.Submit(context.Background(), Spec("c1", i)); err != nil {
				t.Fatal(err)
			}
		}
		got := collect(t, d, n, 30*time.Second)
		ids := make([]int, 0, n)
		for _, o := range got {
			if o.CampaignID != "c1" || o.Verdict == nil || o.Verdict.LatencyUS == nil {
				t.Fatalf("bad outcome %+v", o)
			}
			if *o.Verdict.LatencyUS != float64(100+o.TrialID) {
				t.Fatalf("outcome of trial %d carries latency %v", o.TrialID, *o.Verdict.LatencyUS)
			}
			ids = append(ids, o.TrialID)
		}
		sort.Ints(ids)
		for i, id := range ids {
			if id != i {
				t.Fatalf("outcome ids %v, want 0..%d once each", ids, n-1)
			}
		}
	})
	t.Run("resubmitting a pending trial runs it once", func(t *testing.T) {
		var calls atomic.Int64
		release := make(chan struct{})
		slow := func(ctx context.Context, spec trial.Spec) trial.Outcome {
			<-release
			return EchoEvaluator(&calls)(ctx, spec)
		}
		d := factory(t, slow)
		defer d.Close()
		for range 3 {
			if err := d.Submit(context.Background(), Spec("c2", 7)); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		collect(t, d, 1, 30*time.Second)
		select {
		case o := <-d.Outcomes():
			t.Fatalf("duplicate outcome %+v", o)
		case <-time.After(300 * time.Millisecond):
		}
		if c := calls.Load(); c != 1 {
			t.Fatalf("evaluator ran %d times, want 1", c)
		}
	})
	t.Run("failures come back as failures", func(t *testing.T) {
		d := factory(t, func(ctx context.Context, spec trial.Spec) trial.Outcome {
			return trial.Outcome{Failure: &trial.Failure{Class: trial.FailTimeout, Message: "watchdog"}}
		})
		defer d.Close()
		if err := d.Submit(context.Background(), Spec("c3", 1)); err != nil {
			t.Fatal(err)
		}
		o := collect(t, d, 1, 30*time.Second)[0]
		if o.Failure == nil || o.Failure.Class != trial.FailTimeout || o.TrialID != 1 {
			t.Fatalf("got %+v, want a timeout failure for trial 1", o)
		}
	})
	t.Run("submit after close fails", func(t *testing.T) {
		var calls atomic.Int64
		d := factory(t, EchoEvaluator(&calls))
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Submit(context.Background(), Spec("c4", 1)); err == nil {
			t.Fatal("Submit after Close succeeded")
		}
	})
}

func collect(t *testing.T, d dispatch.Dispatcher, n int, timeout time.Duration) []trial.Outcome {
	t.Helper()
	var out []trial.Outcome
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case o := <-d.Outcomes():
			out = append(out, o)
		case <-deadline:
			t.Fatalf("got %d of %d outcomes before the deadline", len(out), n)
		}
	}
	return out
}
