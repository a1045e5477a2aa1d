package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

const testToken = "s3cret-test-token"

var models = trial.NewModelCache(0)

// site is a real scheduler fleet (an in-process transport, trials slowed
// by delay so that the campaign is live while a test looks) behind the
// pages and the API.
type site struct {
	fleet *scheduler.Fleet
	srv   *httptest.Server
	id    string
}

func startSite(t *testing.T, model string, iters int, delay time.Duration) *site {
	t.Helper()
	ws, err := runner.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	eval := func(ctx context.Context, spec trial.Spec) trial.Outcome {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
		}
		return trial.Evaluate(ctx, spec, trial.Options{Models: models})
	}
	f, err := scheduler.New(scheduler.Options{Workspace: ws, Transport: dispatch.NewLocal(2, eval), TickEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	id, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: model, GPU: "h200", Device: "cpu", Cold: true,
		Overnight: true, Budget: &campaign.Budget{Iterations: iters}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	apiHandler, err := api.NewServer(api.Options{Service: f.Campaigns(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Handler(Options{Campaigns: f.Campaigns(), Fleet: f, Token: testToken, Where: "test scheduler", Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Site(pages, apiHandler, http.NotFoundHandler(), "/queues"))
	t.Cleanup(srv.Close)
	return &site{fleet: f, srv: srv, id: id}
}

func (s *site) status(t *testing.T) campaign.StatusReport {
	t.Helper()
	var r campaign.StatusReport
	if err := s.fleet.Read(s.id, func(c *campaign.Campaign) { r = c.StatusReport(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitFor polls until cond holds; the bound only keeps a broken test from
// hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
