package redisqtest

import (
	"context"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/redisq"
)

// ShutdownWait bounds the shutdown of a test's worker at the test's end.
const ShutdownWait = 10 * time.Second

// StartWorker starts a worker with opts and shuts it down (within
// ShutdownWait) when the test ends; a worker that cannot start fails the
// test.
func StartWorker(t testing.TB, opts redisq.WorkerOptions) *redisq.Worker {
	t.Helper()
	w, err := redisq.NewWorker(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownWait)
		defer cancel()
		_ = w.Shutdown(ctx)
	})
	return w
}
