package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
)

// A trial whose task a Redis outage left active with nothing working on it
// (the state a worker's dequeue leaves when Redis dies before the reply
// reaches the worker) is offered again soon after Redis is back, not after
// asynq's own lease recovery (at least 60 s after the dequeue). The
// orphan is made with a real asynq server that takes the task and is shut
// down while Redis is away, so it cannot hand the task back.
func TestATrialOrphanedByARedisOutageIsOfferedAgain(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	ns := freshNamespace(t)
	// No periodic sweep during the test: only the post-outage checks may act.
	d := startDispatcher(t, srv, ns, DispatcherOptions{SweepInterval: time.Hour, LostCheckInterval: 200 * time.Millisecond})
	spec := dispatchtest.Spec("orphan", 1)
	if err := d.Submit(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	taken, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	taker := asynq.NewServer(asynq.RedisClientOpt{Addr: srv.Addr}, asynq.Config{
		Concurrency: 1, Queues: map[string]int{TrialQueue(ns, testTarget): 1},
		TaskCheckInterval: 20 * time.Millisecond, ShutdownTimeout: 500 * time.Millisecond,
		Logger: asynqLogger{orDiscard(nil)}, LogLevel: asynq.FatalLevel,
	})
	if err := taker.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		close(taken)
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-taken:
	case <-time.After(15 * time.Second):
		t.Fatal("the asynq server did not take the trial")
	}
	srv.Kill()
	taker.Shutdown() // cannot hand the task back: Redis is away
	srv.Restart(t)
	info, err := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr}).GetTaskInfo(TrialQueue(ns, testTarget), TaskID(spec))
	if err != nil || info.State != asynq.TaskStateActive {
		t.Fatalf("after the outage the trial's task is %v (%v), want active with nothing working on it", info, err)
	}
	var calls dispatchtestCalls
	startWorker(t, srv, ns, "w", calls.eval(), nil)
	// asynq alone would run it again only 60-120 s after the dequeue.
	if o := next(t, d, 50*time.Second); o.Verdict == nil || o.TrialID != 1 {
		t.Fatalf("got %+v, want trial 1's verdict", o)
	}
	if n := d.OrphanedTrials(); n != 1 {
		t.Fatalf("%d trials offered again as orphans, want 1", n)
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("the trial was evaluated %d times, want once", n)
	}
}
