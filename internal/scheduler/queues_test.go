package scheduler

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/waitfor"
)

// The queue report counts the outcomes the scheduler received, whichever
// way they came: most come on the fast path and never pass through the
// results queue, so its PROCESSED alone would make them look lost.
func TestQueuesCountTheOutcomesReceived(t *testing.T) {
	srv := redistest.Start(t)
	conn := redisq.Conn{Addr: srv.Addr}
	const ns, trials = "received", 6
	var calls atomic.Int64
	redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu",
		Identity: "w1", Evaluate: dispatchtest.EchoEvaluator(&calls)})
	d, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	view, err := NewRedisView(d, conn, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })
	for i := range trials {
		if err := d.Submit(context.Background(), dispatchtest.Spec("q", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range trials {
		select {
		case <-d.Outcomes():
		case <-time.After(20 * time.Second):
			t.Fatal("an outcome did not come")
		}
	}
	waitfor.Check(t, 10*time.Second, func() error {
		qs, err := view.Queues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var received, published int64 = -1, -1
		for _, q := range qs {
			switch {
			case strings.HasSuffix(q.Queue, ":results") && q.OutcomesReceived != nil:
				received = *q.OutcomesReceived
			case strings.Contains(q.Queue, ":trials:"):
				if q.OutcomesReceived != nil {
					t.Errorf("%s carries an outcome count", q.Queue)
				}
				published = q.ProcessedTotal - q.FailedTotal
			}
		}
		if received != trials || published != trials {
			return fmt.Errorf("received %d, trials PROCESSED-FAILED %d; want %d each: %+v", received, published, trials, qs)
		}
		return nil
	})
}
