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
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/trial"
)

const testToken = "s3cret-test-token"

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
	eval := func(ctx context.Context, spec trial.Spec) trial.Outcome {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
		}
		return apitest.Evaluate(ctx, spec)
	}
	s := apitest.Start(t, apitest.Options{Fleet: scheduler.Options{Transport: dispatch.NewLocal(2, eval)}, API: api.Options{Token: testToken},
		Site: func(f *scheduler.Fleet, apiHandler http.Handler) (http.Handler, error) {
			pages, err := Handler(Options{Campaigns: f.Campaigns(), Fleet: f.Campaigns(), Token: testToken, Where: "test scheduler", Metrics: true})
			if err != nil {
				return nil, err
			}
			return Site(pages, apiHandler, http.NotFoundHandler(), "/queues"), nil
		}})
	id, _, _, err := s.Fleet.Create(context.Background(), control.CreateRequest{Model: model, GPU: "h200", Device: "cpu", Cold: true,
		Overnight: true, Budget: &campaign.Budget{Iterations: iters}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &site{fleet: s.Fleet, srv: s.Server, id: id}
}

func (s *site) status(t *testing.T) campaign.StatusReport {
	t.Helper()
	var r campaign.StatusReport
	if err := s.fleet.Read(s.id, func(c *campaign.Campaign) { r = c.StatusReport(time.Now()) }); err != nil {
		t.Fatal(err)
	}
	return r
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
