// Package apitest starts a scheduler for a test: a fleet of a fresh
// workspace (by default on the in-process transport, the real trial
// pipeline on this machine's CPU) behind the real API handlers on a
// loopback server, all stopped at the test's cleanup. The tests of the
// fronts (the HTTP API, amkctl --server, the MCP server's remote mode, the
// web view) and the control plane's suite across HTTP start theirs here.
package apitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// Token is the API token of a scheduler whose options name none.
const Token = "apitest-token"

// models is shared by the schedulers of a test binary, so a model's
// weights and oracle are made once.
var models = trial.NewModelCache(0)

// Evaluate is the real trial pipeline on the CPU, with a model cache shared
// by the test binary.
func Evaluate(ctx context.Context, spec trial.Spec) trial.Outcome {
	return trial.Evaluate(ctx, spec, trial.Options{Models: models})
}

// Options configure a test scheduler; the zero value is a fleet on the
// in-process transport with two evaluators running Evaluate.
type Options struct {
	// Fleet are the fleet's options; Workspace is a fresh one, Transport
	// (nil) two in-process evaluators running Evaluate, TickEvery (0)
	// 50 ms.
	Fleet scheduler.Options
	// API are the server's options; Service is the fleet's campaigns and
	// Token (empty) Token.
	API api.Options
	// Site, when set, serves the API handler with more beside it (the web
	// view's pages).
	Site func(f *scheduler.Fleet, apiHandler http.Handler) (http.Handler, error)
}

// Scheduler is a running test scheduler.
type Scheduler struct {
	Fleet  *scheduler.Fleet
	Server *httptest.Server
	// URL is the server's base URL; Dir the workspace's directory; Token
	// the API token.
	URL, Dir, Token string
}

// Start starts a scheduler for t.
func Start(t testing.TB, o Options) *Scheduler {
	t.Helper()
	if o.Fleet.Workspace == nil {
		ws, err := runner.OpenWorkspace(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		o.Fleet.Workspace = ws
	}
	if o.Fleet.Transport == nil {
		o.Fleet.Transport = dispatch.NewLocal(2, Evaluate)
	}
	if o.Fleet.TickEvery == 0 {
		o.Fleet.TickEvery = 50 * time.Millisecond
	}
	f, err := scheduler.New(o.Fleet)
	if err != nil {
		_ = o.Fleet.Transport.Close()
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	o.API.Service = f.Campaigns()
	if o.API.Token == "" {
		o.API.Token = Token
	}
	h, err := api.NewServer(o.API)
	if err != nil {
		t.Fatal(err)
	}
	if o.Site != nil {
		if h, err = o.Site(f, h); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Scheduler{Fleet: f, Server: srv, URL: srv.URL, Dir: o.Fleet.Workspace.Dir, Token: o.API.Token}
}

// Client is a client of the scheduler with its token.
func (s *Scheduler) Client(t testing.TB) *api.Client {
	t.Helper()
	c, err := api.NewClient(s.URL, s.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RedisFleet is a fleet's options for a transport through the real
// redis-server at addr (redistest.Start) under namespace ns, with one live
// worker per target of workerTargets evaluating Evaluate on this
// machine's CPU; the dispatcher, the registry view and the workers are
// stopped at the test's cleanup.
func RedisFleet(t testing.TB, addr, ns string, workerTargets ...string) scheduler.Options {
	t.Helper()
	conn := redisq.Conn{Addr: addr}
	disp, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	view, err := scheduler.NewRedisView(disp, conn, ns)
	if err != nil {
		_ = disp.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })
	for _, target := range workerTargets {
		redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: conn, Namespace: ns, Target: target, Device: "cpu",
			Identity: ns + "-" + target, ShutdownGrace: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond, Evaluate: Evaluate})
	}
	waitfor.Cond(t, 30*time.Second, "the workers to register", func() bool {
		ws, err := view.Workers(context.Background())
		return err == nil && len(ws) == len(workerTargets)
	})
	return scheduler.Options{Transport: disp, Workers: view.Workers, Queues: view.Queues, Health: view.Health}
}
