package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// Outcomes that arrive for a campaign another process holds are held only
// for a while; the fleet then stops holding them and the Redis transport
// forgets it delivered them, so that when the campaign is adopted its
// driver's resubmission finds each stored outcome and records it, without
// evaluating the trial again.
func TestFleetRecoversOutcomesItStoppedHolding(t *testing.T) {
	srv := redistest.Start(t)
	conn := redisq.Conn{Addr: srv.Addr}
	const ns = "unheld"
	// The first trial is evaluated at once; the next wait for the gate, so
	// that one is running when the first scheduler stops.
	var started, evaluated atomic.Int64
	gate := make(chan struct{})
	eval := evaluate(0)
	redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu",
		Identity: "w1", Evaluate: func(ctx context.Context, spec trial.Spec) trial.Outcome {
			if started.Add(1) > 1 {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
			o := eval(ctx, spec)
			evaluated.Add(1)
			return o
		}})
	dispatcher := func() *redisq.Dispatcher {
		d, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// A first scheduler runs the campaign and stops with trials in flight.
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f1 := startFleet(t, ws, Options{Transport: dispatcher()})
	const budget = 5
	id, _, _, err := f1.Create(context.Background(), toyRequest(budget))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "an experiment and a trial running", func() bool {
		return status(t, f1, id).ExperimentsRun >= 1 && started.Load() >= 2
	})
	if err := f1.Close(); err != nil {
		t.Fatal(err)
	}
	// Another process holds the campaign while those trials finish.
	held, err := ws.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	var left int
	held.Read(func(c *campaign.Campaign) { left = len(c.State().InFlight) })
	if left == 0 {
		t.Fatal("no trial in flight at the stop; the test proves nothing")
	}
	var unheld atomic.Int64
	f2 := startFleet(t, ws, Options{Transport: dispatcher(), RescanEvery: 50 * time.Millisecond,
		HoldOutcomes: dispatch.MuxOptions{HoldFor: 100 * time.Millisecond},
		Unheld:       func(n int) { unheld.Add(int64(n)) }})
	close(gate)
	waitfor.Cond(t, time.Minute, "the fleet to stop holding the running trial's outcome", func() bool { return unheld.Load() > 0 })
	held.Close()
	waitfor.Cond(t, time.Minute, "the adopted campaign to finish", func() bool {
		r := status(t, f2, id)
		return r.Status == campaign.StatusDone && len(r.InFlight) == 0
	})
	checkLedger(t, ws, id, budget)
	if n := evaluated.Load(); n != budget {
		t.Fatalf("%d evaluations for %d experiments: a trial ran twice", n, budget)
	}
	t.Logf("%d trial(s) in flight at the stop, %d outcome(s) no longer held and recovered", left, unheld.Load())
}

// Outcomes of a campaign the workspace does not have (a previous scheduler
// submitted its trials and is gone) are not kept in Redis for the
// retention period once the fleet stops holding them: the transport
// forgets their trials, and nothing of them is left.
func TestForeignOutcomesLeaveNothingInRedis(t *testing.T) {
	srv := redistest.Start(t)
	conn := redisq.Conn{Addr: srv.Addr}
	const ns = "foreign"
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu",
		Identity: "w1", Evaluate: func(ctx context.Context, spec trial.Spec) trial.Outcome {
			return trial.Outcome{Failure: &trial.Failure{Class: trial.FailCrash, Message: "no such model"}}
		}})
	dispatcher := func() *redisq.Dispatcher {
		d, err := redisq.NewDispatcher(ctx, redisq.DispatcherOptions{Conn: conn, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ghostKeys := func() int {
		n := 0
		iter := admin.Scan(ctx, 0, "*ghost/*", 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A scheduler gone since submitted trials of a campaign that is not in
	// this workspace; some finish while no scheduler runs.
	const trials = 20
	gone := dispatcher()
	for id := range trials / 2 {
		if err := gone.Submit(ctx, dispatchtest.Spec("ghost", id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	var unheld atomic.Int64
	d := dispatcher()
	ws, _ := runner.OpenWorkspace(t.TempDir())
	startFleet(t, ws, Options{Transport: d,
		HoldOutcomes: dispatch.MuxOptions{HoldFor: 100 * time.Millisecond},
		Unheld:       func(n int) { unheld.Add(int64(n)) }})
	// More arrive while this one runs (submitted through its transport).
	for id := trials / 2; id < trials; id++ {
		if err := d.Submit(ctx, dispatchtest.Spec("ghost", id)); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Cond(t, time.Minute, "the fleet to stop holding every outcome", func() bool { return unheld.Load() == trials })
	waitfor.Cond(t, time.Minute, "every key of the foreign trials to leave Redis", func() bool { return ghostKeys() == 0 })
}
