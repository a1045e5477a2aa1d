package redisq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
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
	waitUntil(t, "the forgotten trial's task and done marker to go", func() bool { return gone("forget/1") })
	// The other trial's state stays: its task completed, its marker set.
	waitUntil(t, "the kept trial to complete", func() bool {
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
	waitUntil(t, "the trial's task to complete", func() bool {
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
