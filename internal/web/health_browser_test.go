package web

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/internal/scheduler"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/waitfor"
)

var healthShots = flag.String("web.health-screenshots", "", "also write the health test's screenshots (a campaign no worker serves, a dead run) into this directory (docs/)")

// Campaigns in trouble, as a browser shows them: one for a GPU target no
// live worker serves (the fleet runs on a real redis-server with a worker
// for another target), and a run that died with trials in flight (its
// ledger closed under it, as a kill leaves it). Each page says what is
// wrong and what to do.
func TestBrowserShowsCampaignsInTrouble(t *testing.T) {
	ctx := browser(t)
	ws, err := runner.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The dead run: created and driven beside the scheduler, then gone.
	start := campaign.Start{Time: time.Now().UTC().Add(-20 * time.Minute), Model: "toy", GPU: "h200", Device: "cpu", Name: "night", Cold: true,
		Settings: campaign.DefaultSettings(), Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
	ledger, _, err := ws.Create(start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Apply(campaign.Propose{Time: time.Now().UTC().Add(-10 * time.Minute), N: 2}); err != nil {
		t.Fatal(err)
	}
	dead := ledger.ID()
	if err := ledger.Close(); err != nil {
		t.Fatal(err)
	}
	fleet := apitest.RedisFleet(t, redistest.Start(t).Addr, "trouble", "h200")
	fleet.Workspace = ws
	s := apitest.Start(t, apitest.Options{Fleet: fleet, API: api.Options{Token: testToken},
		Site: func(f *scheduler.Fleet, apiHandler http.Handler) (http.Handler, error) {
			pages, err := Handler(Options{Campaigns: f.Campaigns(), Fleet: f.Campaigns(), Token: testToken, Where: "test scheduler", Metrics: true})
			if err != nil {
				return nil, err
			}
			return Site(pages, apiHandler, http.NotFoundHandler(), "/queues"), nil
		}})
	unserved, _, _, err := s.Fleet.Create(context.Background(), control.CreateRequest{Model: "small", GPU: "h100", Device: "cpu", Cold: true,
		Budget: &campaign.Budget{Iterations: 40}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 30*time.Second, "two trials queued for h100", func() bool {
		var n int
		_ = s.Fleet.Read(unserved, func(c *campaign.Campaign) { n = len(c.State().InFlight) })
		return n == 2
	})

	if err := chromedp.Run(ctx, chromedp.Navigate(s.Server.URL+"/"), chromedp.WaitVisible("#campaigns", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{unserved: "no worker serves it", dead: "nothing drives it"} {
		if got := text(t, ctx, fmt.Sprintf(`#campaigns tr[data-id=%q] .alert-tag`, id)); got != want {
			t.Errorf("campaigns page, %s: %q, want %q", id, got, want)
		}
	}
	for _, c := range []struct{ id, shot, want, fix string }{
		{unserved, "web-view-unserved.png", "no live worker serves GPU target h100", "gpuworker --redis ADDR --target h100 --device cpu"},
		{dead, "web-view-dead-run.png", "no process has had this campaign open", "amkctl start toy --gpu h200 --device cpu --name night --server URL"},
	} {
		if err := chromedp.Run(ctx, chromedp.Navigate(s.Server.URL+"/ui/c/"+c.id), chromedp.WaitVisible("#alerts", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		if got := text(t, ctx, "#alerts"); !strings.Contains(got, c.want) || !strings.Contains(got, c.fix) {
			t.Errorf("%s's page says %q, want %q and %q", c.id, got, c.want, c.fix)
		}
		if got := text(t, ctx, "#last-event"); got == "" {
			t.Errorf("%s's page has no last event", c.id)
		}
		eventually(t, ctx, "the chart drawn", `document.querySelector('#chart').complete && document.querySelector('#chart').naturalWidth > 100`)
		var shot []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&shot, 100)); err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
			t.Fatalf("the screenshot is not a PNG: %v", err)
		}
		if *healthShots != "" {
			if err := os.WriteFile(filepath.Join(*healthShots, c.shot), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
