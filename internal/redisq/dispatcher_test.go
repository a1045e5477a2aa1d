package redisq

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

func TestSuiteOneWorker(t *testing.T) {
	srv := redistest.Start(t)
	dispatchtest.Run(t, func(t *testing.T, eval dispatch.Evaluator) dispatch.Dispatcher {
		ns := freshNamespace(t)
		startWorker(t, srv, ns, "w1", eval, nil)
		return startDispatcher(t, srv, ns, DispatcherOptions{})
	})
}

func TestSuiteThreeWorkers(t *testing.T) {
	srv := redistest.Start(t)
	dispatchtest.Run(t, func(t *testing.T, eval dispatch.Evaluator) dispatch.Dispatcher {
		ns := freshNamespace(t)
		for _, name := range []string{"w1", "w2", "w3"} {
			startWorker(t, srv, ns, name, eval, nil)
		}
		return startDispatcher(t, srv, ns, DispatcherOptions{})
	})
}

// A worker shut down mid-trial hands the trial back; another worker runs it
// and exactly one outcome arrives.
func TestWorkerStoppedMidTrialIsRerunElsewhere(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	started := make(chan struct{})
	var cancelled atomic.Bool
	a := startWorker(t, srv, ns, "A", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		close(started)
		<-ctx.Done() // a long trial: runs until handed back
		cancelled.Store(true)
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
	}, func(o *WorkerOptions) { o.ShutdownGrace = 50 * time.Millisecond })
	bCalls := secondWorkerJoins(t, srv, d, ns, "kill", started)
	shutdown(t, a)
	if !cancelled.Load() {
		t.Fatal("A's evaluation was not cancelled before Shutdown returned")
	}
	o := next(t, d, 10*time.Second)
	if o.TrialID != 1 || o.Verdict == nil || o.Worker != "B" {
		t.Fatalf("got %+v, want B's verdict for trial 1", o)
	}
	quiet(t, d, 500*time.Millisecond)
	if n := bCalls.Load(); n != 1 {
		t.Fatalf("B evaluated %d times, want 1", n)
	}
}

// secondWorkerJoins submits trial 1 of kind, waits until worker A has
// started it (A's evaluator closes started), then starts worker B, which
// answers every trial with a verdict, and returns B's count of
// evaluations.
func secondWorkerJoins(t *testing.T, srv *redistest.Server, d *Dispatcher, ns, kind string, started <-chan struct{}) *atomic.Int64 {
	t.Helper()
	if err := d.Submit(context.Background(), dispatchtest.Spec(kind, 1)); err != nil {
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
	return &bCalls
}

// shutdown shuts a worker down, within 5 seconds.
func shutdown(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// Infrastructure failures are retried within their budget, then reported.
func TestInfraFailuresRetriedWithinBudget(t *testing.T) {
	srv := redistest.Start(t)
	infra := func(calls *atomic.Int64, failFirst int64) dispatch.Evaluator {
		return func(ctx context.Context, spec trial.Spec) trial.Outcome {
			if calls.Add(1) <= failFirst {
				return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "device busy"}}
			}
			return okVerdict(spec)
		}
	}
	t.Run("recovers", func(t *testing.T) {
		ns := freshNamespace(t)
		var calls atomic.Int64
		startWorker(t, srv, ns, "w", infra(&calls, 2), nil)
		d := startDispatcher(t, srv, ns, DispatcherOptions{InfraRetries: 3})
		if err := d.Submit(context.Background(), dispatchtest.Spec("infra", 1)); err != nil {
			t.Fatal(err)
		}
		if o := next(t, d, 15*time.Second); o.Verdict == nil {
			t.Fatalf("got %+v, want the verdict of the third attempt", o)
		}
		if n := calls.Load(); n != 3 {
			t.Fatalf("evaluated %d times, want 3", n)
		}
	})
	t.Run("budget spent", func(t *testing.T) {
		ns := freshNamespace(t)
		var calls atomic.Int64
		startWorker(t, srv, ns, "w", infra(&calls, 1000), nil)
		d := startDispatcher(t, srv, ns, DispatcherOptions{InfraRetries: 1})
		if err := d.Submit(context.Background(), dispatchtest.Spec("infra", 2)); err != nil {
			t.Fatal(err)
		}
		o := next(t, d, 15*time.Second)
		if o.Failure == nil || o.Failure.Class != trial.FailInfra || !strings.Contains(o.Failure.Message, "gave up after 1") {
			t.Fatalf("got %+v, want a final infra failure", o)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("evaluated %d times, want 2", n)
		}
	})
}

// Deterministic failures are final: evaluated once, never retried.
func TestCrashIsNotRetried(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var calls atomic.Int64
	startWorker(t, srv, ns, "w", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		calls.Add(1)
		panic("device trap")
	}, nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	if err := d.Submit(context.Background(), dispatchtest.Spec("crash", 1)); err != nil {
		t.Fatal(err)
	}
	o := next(t, d, 10*time.Second)
	if o.Failure == nil || o.Failure.Class != trial.FailCrash || !strings.Contains(o.Failure.Message, "device trap") {
		t.Fatalf("got %+v, want a crash", o)
	}
	quiet(t, d, 300*time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("evaluated %d times, want 1", n)
	}
}

// A trial whose attempts keep ending without an answer (here: hanging past
// asynq's deadline) is reported as a crash once the loss budget is spent.
func TestTrialThatKeepsLosingWorkersBecomesCrash(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var calls atomic.Int64
	startWorker(t, srv, ns, "w", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		calls.Add(1)
		<-ctx.Done()
		return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "lost"}}
	}, nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{WorkerLosses: 2, HardTimeout: time.Second})
	if err := d.Submit(context.Background(), dispatchtest.Spec("hang", 1)); err != nil {
		t.Fatal(err)
	}
	o := next(t, d, 20*time.Second)
	if o.Failure == nil || o.Failure.Class != trial.FailCrash || !strings.Contains(o.Failure.Message, "lost its worker 2 times") {
		t.Fatalf("got %+v, want a crash after 2 lost attempts", o)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("evaluated %d times, want 2", n)
	}
}

// Outcomes produced while no dispatcher runs wait in Redis; a resubmission
// after a restart delivers the stored outcome without evaluating again.
func TestOutcomesSurviveDispatcherRestart(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var calls atomic.Int64
	release := make(chan struct{})
	startWorker(t, srv, ns, "w", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		<-release
		calls.Add(1)
		return okVerdict(spec)
	}, nil)
	d1, err := NewDispatcher(context.Background(), DispatcherOptions{Conn: Conn{Addr: srv.Addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if err := d1.Submit(context.Background(), dispatchtest.Spec("restart", i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = d1.Close() // the scheduler goes away with both trials in flight
	close(release)

	d2 := startDispatcher(t, srv, ns, DispatcherOptions{})
	got := map[int]bool{}
	for len(got) < 2 {
		o := next(t, d2, 10*time.Second)
		if o.Verdict == nil || got[o.TrialID] {
			t.Fatalf("bad or repeated outcome %+v", o)
		}
		got[o.TrialID] = true
	}
	// The restarted scheduler resubmits what its ledger had in flight.
	for i := 1; i <= 2; i++ {
		if err := d2.Submit(context.Background(), dispatchtest.Spec("restart", i)); err != nil {
			t.Fatal(err)
		}
	}
	quiet(t, d2, 300*time.Millisecond)

	// A third dispatcher whose predecessor took the outcomes but never
	// recorded them gets them back from the stored results.
	_ = d2.Close()
	d3 := startDispatcher(t, srv, ns, DispatcherOptions{})
	for i := 1; i <= 2; i++ {
		if err := d3.Submit(context.Background(), dispatchtest.Spec("restart", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if o := next(t, d3, 10*time.Second); o.Verdict == nil {
			t.Fatalf("stored outcome %+v has no verdict", o)
		}
	}
	quiet(t, d3, 300*time.Millisecond)
	if n := calls.Load(); n != 2 {
		t.Fatalf("evaluated %d times, want 2", n)
	}
}

// Malformed payloads put on the queue by hand become clear errors; the
// evaluator never sees them and the worker keeps serving.
func TestMalformedPayloads(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var calls atomic.Int64
	startWorker(t, srv, ns, "w", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		calls.Add(1)
		return okVerdict(spec)
	}, nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr})
	defer client.Close()
	queue := TrialQueue(ns, testTarget)
	put := func(queueName, typ, id, payload string) {
		t.Helper()
		if _, err := client.Enqueue(asynq.NewTask(typ, []byte(payload)), asynq.Queue(queueName), asynq.TaskID(id), asynq.MaxRetry(3)); err != nil {
			t.Fatal(err)
		}
	}
	put(queue, TypeTrial, "bad/1", `{"campaign_id": "bad", "trial_id": 1, `)
	put(queue, TypeTrial, "bad/2", `{"campaign_id": "bad", "trial_id": 2, "model": "toy", "point": {}}`)
	put(queue, TypeTrial, "bad/3", `{"campaign_id": "bad", "trial_id": 4, "model": "toy", "gpu": "h200", "point": {}}`)
	put(queue, TypeTrial, "bad/5", `{"campaign_id": "bad", "trial_id": 5, "model": "toy", "gpu": "h100", "point": {}}`)
	put(queue, TypeTrial, "no-trial-id", `not json at all`)
	put(queue, "something:else", "bad/6", `{}`)
	put(ResultQueue(ns), TypeOutcome, "junk-outcome", `{"trial_id": "seven"`)

	want := map[int]string{1: "bad JSON", 2: "missing gpu", 3: "task id", 5: "serves"}
	for len(want) > 0 {
		o := next(t, d, 10*time.Second)
		sub, ok := want[o.TrialID]
		if !ok || o.CampaignID != "bad" || o.Failure == nil || o.Failure.Class != trial.FailCrash ||
			o.Failure.Phase != "decode" || !strings.Contains(o.Failure.Message, sub) {
			t.Fatalf("got %+v (failure %+v), want a decode crash mentioning %q", o, o.Failure, sub)
		}
		delete(want, o.TrialID)
	}
	// The worker still serves real trials.
	if err := d.Submit(context.Background(), dispatchtest.Spec("good", 1)); err != nil {
		t.Fatal(err)
	}
	if o := next(t, d, 10*time.Second); o.Verdict == nil || o.CampaignID != "good" {
		t.Fatalf("got %+v, want the good trial's verdict", o)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("evaluator saw %d trials, want only the good one", n)
	}
	// Unkeyed garbage is archived for an operator, not retried.
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr})
	defer insp.Close()
	waitfor.Check(t, 5*time.Second, func() error {
		qi, err := insp.GetQueueInfo(queue)
		ri, err2 := insp.GetQueueInfo(ResultQueue(ns))
		if err != nil || err2 != nil || qi.Archived != 2 || ri.Archived != 1 {
			return fmt.Errorf("archived: trials %+v (%v), results %+v (%v); want 2 and 1", qi, err, ri, err2)
		}
		return nil
	})
}

// Redis restarting (with its append-only file) does not lose the fleet.
func TestRedisRestartKeepsServing(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	ns := freshNamespace(t)
	var calls dispatchtestCalls
	startWorker(t, srv, ns, "w", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	submit := func(from, to int) {
		for i := from; i < to; i++ {
			if err := d.Submit(context.Background(), dispatchtest.Spec("rr", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	submit(0, 5)
	for range 5 {
		next(t, d, 10*time.Second)
	}
	srv.Restart(t)
	// Submissions right after the restart may race the reconnect; retry.
	for i := 5; i < 10; i++ {
		waitfor.Check(t, 5*time.Second, func() error { return d.Submit(context.Background(), dispatchtest.Spec("rr", i)) })
	}
	seen := map[int]bool{}
	for len(seen) < 5 {
		o := next(t, d, 20*time.Second)
		if o.TrialID < 5 || seen[o.TrialID] {
			t.Fatalf("unexpected outcome %+v", o)
		}
		seen[o.TrialID] = true
	}
}

// A pending trial that vanished from Redis (restart without persistence)
// is enqueued again by the sweep.
func TestSweepReenqueuesVanishedTrial(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{SweepInterval: 200 * time.Millisecond})
	if err := d.Submit(context.Background(), dispatchtest.Spec("gone", 1)); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart(t) // no AOF: the queue is empty now
	var calls dispatchtestCalls
	startWorker(t, srv, ns, "w", calls.eval(), nil)
	if o := next(t, d, 15*time.Second); o.Verdict == nil || o.TrialID != 1 {
		t.Fatalf("got %+v, want trial 1's verdict", o)
	}
}

func TestWorkersAndQueuesAreListed(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var calls dispatchtestCalls
	w := startWorker(t, srv, ns, "fingerprint-1", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	if err := d.Submit(context.Background(), dispatchtest.Spec("list", 1)); err != nil {
		t.Fatal(err)
	}
	next(t, d, 10*time.Second)
	ws, err := d.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Target != testTarget || ws[0].Identity != "fingerprint-1" || ws[0].Queue != w.Queue() {
		t.Fatalf("workers = %+v", ws)
	}
	qs, err := d.Queues()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, q := range qs {
		names = append(names, q.Queue)
	}
	if strings.Join(names, ",") != ns+":results,"+ns+":trials:h200" {
		t.Fatalf("queues = %v", names)
	}
	shutdown(t, w)
	if ws, _ := d.Workers(context.Background()); len(ws) != 0 {
		t.Fatalf("worker still listed after shutdown: %+v", ws)
	}
}

func TestSubmitRejectsBadTarget(t *testing.T) {
	srv := redistest.Start(t)
	d := startDispatcher(t, srv, freshNamespace(t), DispatcherOptions{})
	spec := dispatchtest.Spec("x", 1)
	spec.GPU = "h100 extra"
	if err := d.Submit(context.Background(), spec); err == nil {
		t.Fatal("a target with a space was accepted")
	}
}

// dispatchtestCalls counts calls of an echo evaluator.
type dispatchtestCalls struct{ n atomic.Int64 }

func (c *dispatchtestCalls) eval() dispatch.Evaluator { return dispatchtest.EchoEvaluator(&c.n) }
