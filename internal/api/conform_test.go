package api_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/internal/scheduler"
)

// The client, across the HTTP server, to a fleet whose trials go through a
// real redis-server to a worker, passes the control plane's suite: what
// amkctl --server and the MCP server's remote mode talk to.
func TestClientServerFleetConforms(t *testing.T) {
	srv := redistest.Start(t)
	var namespaces atomic.Int64
	controltest.Run(t, func(t *testing.T) controltest.Target {
		ns := fmt.Sprintf("conform%d", namespaces.Add(1))
		conn := redisq.Conn{Addr: srv.Addr}
		disp, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		view, err := scheduler.NewRedisView(disp, conn, ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = view.Close() })
		worker, err := redisq.NewWorker(redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: "h200", Device: "cpu", Identity: ns + "-worker",
			ShutdownGrace: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond,
			Evaluate: apitest.Evaluate})
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = worker.Shutdown(ctx)
		})
		s := apitest.Start(t, apitest.Options{Fleet: scheduler.Options{Transport: disp, Workers: view.Workers, Queues: view.Queues, Health: view.Health}})
		client := s.Client(t)
		return controltest.Target{Service: client, Driven: true, LocalFiles: true, Workers: true}
	})
}
