package redisq

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

// testTarget is the GPU target the dispatchtest specs use.
const testTarget = "h200"

var namespaces atomic.Int64

// freshNamespace keeps tests that share one redis-server apart.
func freshNamespace(t testing.TB) string {
	return fmt.Sprintf("t%d", namespaces.Add(1))
}

// startDispatcher opens a dispatcher closed at cleanup.
func startDispatcher(t testing.TB, srv *redistest.Server, ns string, opts DispatcherOptions) *Dispatcher {
	t.Helper()
	opts.Conn = Conn{Addr: srv.Addr}
	opts.Namespace = ns
	d, err := NewDispatcher(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// startWorker starts a worker shut down at cleanup.
func startWorker(t testing.TB, srv *redistest.Server, ns, name string, eval dispatch.Evaluator, tweak func(*WorkerOptions)) *Worker {
	t.Helper()
	opts := WorkerOptions{Conn: Conn{Addr: srv.Addr}, Namespace: ns, Target: testTarget, Evaluate: eval,
		Device: "cpu", Identity: name, ShutdownGrace: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond}
	if tweak != nil {
		tweak(&opts)
	}
	w, err := NewWorker(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Shutdown(ctx)
	})
	return w
}

// next waits for one outcome.
func next(t testing.TB, d dispatch.Dispatcher, within time.Duration) trial.Outcome {
	t.Helper()
	select {
	case o := <-d.Outcomes():
		return o
	case <-time.After(within):
		t.Fatalf("no outcome within %s", within)
	}
	return trial.Outcome{}
}

// quiet asserts no further outcome arrives for a while.
func quiet(t testing.TB, d dispatch.Dispatcher, wait time.Duration) {
	t.Helper()
	select {
	case o := <-d.Outcomes():
		t.Fatalf("unexpected extra outcome %+v", o)
	case <-time.After(wait):
	}
}

// okVerdict is a minimal passing verdict.
func okVerdict(spec trial.Spec) trial.Outcome {
	ok, lat := true, 100.0+float64(spec.TrialID)
	return trial.Outcome{Verdict: &trial.Verdict{Valid: true, Correct: &ok, LatencyUS: &lat, GPU: spec.GPU, Model: spec.Model}}
}
