package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

// The failure: a trial whose evaluation ignores cancellation wedges
// the worker that is handing it back on its way out; the same trial must
// not then wedge the next worker. It is reported as a crash once and the
// second worker never evaluates it.
func TestPoisonTrialDoesNotReachASecondWorker(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	stuck, started := make(chan struct{}), make(chan struct{}, 1)
	defer close(stuck)
	a := startDaemon(t, srv, n, func(ctx context.Context, spec trial.Spec, o trial.Options) trial.Outcome {
		started <- struct{}{}
		<-stuck // ignores cancellation
		return verdict(ctx, spec, o)
	})
	d := dispatcher(t, srv, n)
	if err := d.Submit(context.Background(), dispatchtest.Spec("poison", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("worker A never started the trial")
	}
	var bCalls atomic.Int64
	startDaemon(t, srv, n, func(ctx context.Context, spec trial.Spec, o trial.Options) trial.Outcome {
		bCalls.Add(1)
		return verdict(ctx, spec, o)
	})
	if code := a.exit(t); code != 1 {
		t.Fatalf("worker A exited %d, want 1 (device wedged)\n%s", code, a.logs)
	}
	o := await(t, d)
	if o.Failure == nil || o.Failure.Class != trial.FailCrash || !strings.Contains(o.Failure.Message, "killed its evaluator") {
		t.Fatalf("got %+v, want a crash naming the poison", o)
	}
	if n := bCalls.Load(); n != 0 {
		t.Fatalf("worker B evaluated the poison trial %d times", n)
	}
}

// A worker refuses, before allocating, a trial whose model does not fit in
// the memory it may use (--max-memory-mb), as an infrastructure failure
// naming the memory, and stays up.
func TestTrialTooBigForTheWorkerIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	w := startDaemon(t, srv, n, trial.Evaluate, "--max-memory-mb", "1")
	d := dispatcher(t, srv, n)
	if err := d.Submit(context.Background(), dispatchtest.Spec("big", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-d.Outcomes():
		if o.Failure == nil || o.Failure.Class != trial.FailInfra || o.Failure.Phase != "memory" || !strings.Contains(o.Failure.Message, "MiB") {
			t.Fatalf("got %+v, want an infra failure in phase memory", o.Failure)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no outcome\n%s", w.logs)
	}
	if code, _ := w.get(t, "/healthz"); code != 200 {
		t.Fatalf("worker unhealthy after refusing a trial: %d", code)
	}
}
