package scheduler

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/waitfor"
)

// A campaign goes on within seconds after each Redis outage, however its
// driver's failure lines up with the outage. A submission can fail only
// once Redis is back (the client reports its remembered dial error until
// its own re-dial succeeds); the driver's restart then used to wait out its
// whole backoff, as no restart wait had seen the outage. The backoff here
// is long (30 s) so that such a wait cannot pass for a recovery.
func TestCampaignGoesOnSoonAfterEachRedisOutage(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	conn := redisq.Conn{Addr: srv.Addr}
	const ns = "outage"
	redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu",
		Identity: "w1", Evaluate: evaluate(200 * time.Millisecond)})
	d, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	view, err := NewRedisView(d, conn, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })
	ws, _ := runner.OpenWorkspace(t.TempDir())
	f := startFleet(t, ws, Options{Transport: d, Health: view.Health, RestartDelay: 30 * time.Second})
	id, _, _, err := f.Create(context.Background(), toyRequest(1000))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "two experiments", func() bool { return status(t, f, id).ExperimentsRun >= 2 })
	const bound = 8 * time.Second // far below the backoff, far above a reconnect
	outages := 4
	if os.Getenv("AMK_FAULT_TIMINGS") != "" { // docs/results/fleet-faults.md
		outages = 10
	}
	var worst time.Duration
	for i := range outages {
		srv.Stop()
		time.Sleep(time.Duration(500+700*(i%4)) * time.Millisecond)
		srv.Restart(t)
		back := time.Now()
		n := status(t, f, id).ExperimentsRun
		for status(t, f, id).ExperimentsRun <= n {
			if time.Since(back) > bound {
				t.Fatalf("outage %d: no experiment %v after Redis answered again", i+1, bound)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(back)
		worst = max(worst, took)
		t.Logf("outage %d: next experiment %.2fs after Redis answered again", i+1, took.Seconds())
		time.Sleep(time.Duration(150*i) * time.Millisecond) // vary where the next outage falls
	}
	t.Logf("FIGURE redis-outages: %d outages of 0.5-2.6 s, worst resume %.2fs after Redis answered again (restart backoff 30 s)", outages, worst.Seconds())
}
