package redisq

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

// A worker whose heartbeat stops mid-trial (as after SIGKILL) loses its
// trial to another worker at once, not after asynq's lease; the trial is
// recorded once even when the silent worker answers after all.
func TestSilentWorkersTrialIsReofferedAndRecordedOnce(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{LostAfter: 500 * time.Millisecond, LostCheckInterval: 100 * time.Millisecond})
	started, release := make(chan struct{}), make(chan struct{})
	a := startWorker(t, srv, ns, "A", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		close(started)
		<-release
		return okVerdict(spec)
	}, nil)
	if err := d.Submit(context.Background(), dispatchtest.Spec("lost", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A never started the trial")
	}
	var bCalls atomic.Int64
	startWorker(t, srv, ns, "B", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		bCalls.Add(1)
		return okVerdict(spec)
	}, nil)
	a.reg.stop() // A goes silent: no more heartbeats, its registry entry is gone
	o := next(t, d, 20*time.Second)
	if o.TrialID != 1 || o.Verdict == nil || o.Worker != "B" {
		t.Fatalf("got %+v, want B's verdict for trial 1", o)
	}
	if d.LostWorkers() != 1 {
		t.Fatalf("lost workers counted %d, want 1", d.LostWorkers())
	}
	close(release) // A answers late: its copy collapses into B's
	quiet(t, d, time.Second)
	if n := bCalls.Load(); n != 1 {
		t.Fatalf("B evaluated %d times, want 1", n)
	}
}

// A trial whose evaluation wedged its worker (MarkPoison, then the worker
// hands the task back on its way out) is never evaluated by a second worker:
// it is reported as a crash once and archived.
func TestPoisonTrialIsNotHandedToASecondWorker(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	started := make(chan struct{})
	var a *Worker
	a = startWorker(t, srv, ns, "A", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		close(started)
		<-ctx.Done()
		a.MarkPoison(spec, "evaluation ignored cancellation; the device is wedged")
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
	}, func(o *WorkerOptions) { o.ShutdownGrace = 50 * time.Millisecond })
	if err := d.Submit(context.Background(), dispatchtest.Spec("poison", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A never started the trial")
	}
	var bCalls atomic.Int64
	startWorker(t, srv, ns, "B", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		bCalls.Add(1)
		return okVerdict(spec)
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	o := next(t, d, 20*time.Second)
	if o.Failure == nil || o.Failure.Class != trial.FailCrash || !strings.Contains(o.Failure.Message, "killed its evaluator") {
		t.Fatalf("got %+v, want a crash naming the poison", o)
	}
	quiet(t, d, 500*time.Millisecond)
	if n := bCalls.Load(); n != 0 {
		t.Fatalf("B evaluated the poison trial %d times", n)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr})
	defer insp.Close()
	info, err := insp.GetTaskInfo(TrialQueue(ns, testTarget), "poison/1")
	if err != nil || info.State != asynq.TaskStateArchived {
		t.Fatalf("poison task: %+v %v, want archived", info, err)
	} // The marker does not outlive every attempt of the trial by much.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ttl, err := rdb.TTL(context.Background(), poisonKey(ns, "poison/1")).Result()
	if err != nil || ttl <= 0 || ttl > poisonTTL {
		t.Fatalf("poison marker TTL %v (%v), want at most %v", ttl, err, poisonTTL)
	}
}

func TestOutageLogsAreRateLimitedPerKind(t *testing.T) {
	now := time.Unix(0, 0)
	g := &gate{every: 10 * time.Second, now: func() time.Time { return now }, kinds: map[string]*gateKind{}}
	if ok, _ := g.allow("asynq:x"); !ok {
		t.Fatal("first line suppressed")
	}
	for range 19 {
		now = now.Add(100 * time.Millisecond)
		if ok, _ := g.allow("asynq:x"); ok {
			t.Fatal("a second line within the interval was written")
		}
	}
	if ok, _ := g.allow("go-redis:y"); !ok {
		t.Fatal("another kind was suppressed")
	}
	now = now.Add(10 * time.Second)
	if ok, n := g.allow("asynq:x"); !ok || n != 19 {
		t.Fatalf("after the interval: written=%v suppressed=%d, want true 19", ok, n)
	}
	if lineKind("asynq", "Failed to dial 127.0.0.1:6379: refused") != lineKind("asynq", "Failed to dial 127.0.0.1:6380: refused") {
		t.Fatal("addresses split one kind")
	}
}

// A running marker of a trial the scheduler is not waiting for — left by a
// restore of Redis from a backup taken while the trial ran, after which
// the scheduler recorded it — names a worker that is gone; it is removed,
// and the recorded trial is not offered to a worker again.
func TestAStaleRunningMarkerIsRemovedNotReoffered(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{LostAfter: 300 * time.Millisecond, LostCheckInterval: 100 * time.Millisecond})
	var calls atomic.Int64
	startWorker(t, srv, ns, "A", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		calls.Add(1)
		return okVerdict(spec)
	}, nil)
	spec := dispatchtest.Spec("restored", 1)
	spec.GPU = testTarget
	payload, err := sealSpec(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(running{Worker: "gone-host:1:00000000", Queue: TrialQueue(ns, testTarget), Task: TaskID(spec),
		Since: time.Now().Add(-time.Hour).UTC(), Payload: payload})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.HSet(context.Background(), runningKey(ns), TaskID(spec), b).Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the stale marker to be removed", func() bool {
		n, _ := rdb.HExists(context.Background(), runningKey(ns), TaskID(spec)).Result()
		return !n
	})
	quiet(t, d, time.Second)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the recorded trial was evaluated again %d times", n)
	}
}
