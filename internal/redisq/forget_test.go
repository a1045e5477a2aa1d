package redisq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// A trial the caller recorded and forgot leaves nothing in Redis: its
// finished task and its done marker are deleted (not kept for the
// retention period), while a trial not forgotten keeps both.
func TestForgottenTrialLeavesNothingInRedis(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	var calls dispatchtestCalls
	startWorker(t, srv, ns, "w", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	for id := 1; id <= 2; id++ {
		if err := d.Submit(ctx, dispatchtest.Spec("forget", id)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if o := next(t, d, 20*time.Second); o.TrialID == 1 {
			d.Forget(o)
		}
	}
	queue := TrialQueue(ns, testTarget)
	gone := func(key string) bool {
		_, err := d.insp.GetTaskInfo(queue, key)
		n, _ := admin.Exists(ctx, doneKey(ns, key)).Result()
		return errors.Is(err, asynq.ErrTaskNotFound) && n == 0
	}
	waitfor.Cond(t, 20*time.Second, "the forgotten trial's task and done marker to go", func() bool { return gone("forget/1") })
	// The other trial's state stays: its task completed, its marker set.
	waitfor.Cond(t, 20*time.Second, "the kept trial to complete", func() bool {
		info, err := d.insp.GetTaskInfo(queue, "forget/2")
		return err == nil && info.State == asynq.TaskStateCompleted
	})
	if n, _ := admin.Exists(ctx, doneKey(ns, "forget/2")).Result(); n != 1 {
		t.Fatal("the done marker of a trial not forgotten is gone")
	}
	d.mu.Lock()
	_, remembered := d.delivered["forget/1"]
	d.mu.Unlock()
	if remembered {
		t.Fatal("the dispatcher still remembers the forgotten trial's delivery")
	}
}

// An outcome the caller could not hand to its campaign (Undeliver) is
// delivered again, from Redis, when the trial is submitted again, without
// evaluating it again; without Undeliver that submission would be dropped
// as already delivered.
func TestUndeliveredOutcomeComesBackOnResubmit(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	var calls dispatchtestCalls
	startWorker(t, srv, ns, "w", calls.eval(), nil)
	d := startDispatcher(t, srv, ns, DispatcherOptions{})
	spec := dispatchtest.Spec("undeliver", 7)
	if err := d.Submit(ctx, spec); err != nil {
		t.Fatal(err)
	}
	first := next(t, d, 20*time.Second)
	queue := TrialQueue(ns, testTarget)
	waitfor.Cond(t, 20*time.Second, "the trial's task to complete", func() bool {
		info, err := d.insp.GetTaskInfo(queue, "undeliver/7")
		return err == nil && info.State == asynq.TaskStateCompleted
	})
	d.Undeliver(first)
	if err := d.Submit(ctx, spec); err != nil {
		t.Fatal(err)
	}
	again := next(t, d, 20*time.Second)
	if again.TrialID != 7 || again.CampaignID != "undeliver" || again.Verdict == nil {
		t.Fatalf("redelivered outcome %+v, want trial undeliver/7 with its verdict", again)
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("the trial was evaluated %d times, want once", n)
	}
}

// trialKeys lists the keys Redis holds for trial key of namespace ns: its
// tasks (the trial's and its re-offers', on any queue), its done marker,
// and fields of the running and losses hashes.
func trialKeys(t *testing.T, admin *redis.Client, ns, key string) []string {
	t.Helper()
	ctx := context.Background()
	var found []string
	iter := admin.Scan(ctx, 0, "*"+key+"*", 1000).Iterator()
	for iter.Next(ctx) {
		found = append(found, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{runningKey(ns), lossesKey(ns)} {
		if ok, _ := admin.HExists(ctx, h, key).Result(); ok {
			found = append(found, h+" "+key)
		}
	}
	return found
}

// A trial re-offered after its worker went silent leaves nothing in Redis
// once recorded and forgotten: the re-offer's task, the silent worker's
// own task (still active when forgetting starts, so its done marker stays
// until the task is gone, and the late answer is dropped as a copy) and the
// marker are all deleted, not kept for the retention period.
func TestReofferedTrialLeavesNothingInRedis(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	d := startDispatcher(t, srv, ns, DispatcherOptions{LostAfter: 500 * time.Millisecond, LostCheckInterval: 100 * time.Millisecond})
	started, release := make(chan struct{}), make(chan struct{})
	var aCalls, bCalls atomic.Int64
	a := startWorker(t, srv, ns, "A", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		aCalls.Add(1)
		close(started)
		<-release
		return okVerdict(spec)
	}, nil)
	if err := d.Submit(ctx, dispatchtest.Spec("reoffered", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("worker A never started the trial")
	}
	startWorker(t, srv, ns, "B", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		bCalls.Add(1)
		return okVerdict(spec)
	}, nil)
	a.reg.stop() // A goes silent while its task stays active
	o := next(t, d, 20*time.Second)
	if o.Worker != "B" {
		t.Fatalf("got %+v, want B's verdict", o)
	}
	d.Forget(o)
	// The first attempt finds A's task active and leaves the marker.
	waitfor.Cond(t, 20*time.Second, "a first attempt at forgetting", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.forgetting) == 1 && d.forgetting[0].attempts >= 1
	})
	if n, _ := admin.Exists(ctx, doneKey(ns, "reoffered/1")).Result(); n != 1 {
		t.Fatal("the done marker was deleted while the lost attempt's task was still active")
	}
	close(release) // A answers late
	waitfor.Cond(t, 20*time.Second, "everything of the trial to leave Redis", func() bool {
		return len(trialKeys(t, admin, ns, "reoffered/1")) == 0
	})
	quiet(t, d, 500*time.Millisecond) // A's copy was dropped, not delivered
	if a, b := aCalls.Load(), bCalls.Load(); a != 1 || b != 1 {
		t.Fatalf("evaluations: A %d, B %d; want one each", a, b)
	}
}

// A trial whose outcome reached a dispatcher that did not submit it (it
// waited in Redis while the scheduler restarted) leaves nothing in Redis
// once forgotten: its task is found on its queue, which that dispatcher
// never saw.
func TestTrialDeliveredAfterRestartLeavesNothingInRedis(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	release := make(chan struct{})
	startWorker(t, srv, ns, "w", func(ctx context.Context, spec trial.Spec) trial.Outcome {
		<-release
		return okVerdict(spec)
	}, nil)
	first := startDispatcher(t, srv, ns, DispatcherOptions{})
	if err := first.Submit(ctx, dispatchtest.Spec("restarted", 3)); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	close(release) // the outcome waits on the results queue
	second := startDispatcher(t, srv, ns, DispatcherOptions{})
	o := next(t, second, 20*time.Second)
	if o.CampaignID != "restarted" || o.TrialID != 3 {
		t.Fatalf("got %+v, want restarted/3", o)
	}
	waitfor.Cond(t, 20*time.Second, "the trial's task to complete", func() bool {
		info, err := second.insp.GetTaskInfo(TrialQueue(ns, testTarget), "restarted/3")
		return err == nil && info.State == asynq.TaskStateCompleted
	})
	second.Forget(o)
	waitfor.Cond(t, 20*time.Second, "everything of the trial to leave Redis", func() bool {
		return len(trialKeys(t, admin, ns, "restarted/3")) == 0
	})
}
