package mcpserver

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/apitest"
)

// remoteHarness is a server whose campaigns are on a real scheduler (its
// API handlers over a fleet with the in-process transport).
func remoteHarness(t *testing.T) *harness {
	t.Helper()
	client := apitest.Start(t, apitest.Options{}).Client(t)
	srv, err := New(Options{Campaigns: client, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.client, err = mcp.NewClient(&mcp.Implementation{Name: "amk-test", Version: "test"}, nil).Connect(context.Background(), ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.client.Close()
		_ = ss.Wait()
		_ = srv.Close()
	})
	return h
}

// TestOnAScheduler: the same tools against a scheduler: loop creates the
// campaign there and waits for it, autoresearch hands it over, cancel
// pauses it, record/next/status/report go through its API.
func TestOnAScheduler(t *testing.T) {
	h := remoteHarness(t)
	var loop RunAnswer
	h.ok("loop", map[string]any{"model": "toy", "gpu": "h200", "budget": 2, "cold": true}, &loop)
	if loop.Campaign != "toy-h200-cpu" || loop.Status.Status != campaign.StatusDone || loop.Status.ExperimentsRun != 2 ||
		loop.Report == nil || loop.Report.BestKind == nil || *loop.Report.BestKind != "predicted" || !strings.Contains(loop.Where, "scheduler") {
		t.Fatalf("loop on a scheduler: %+v", loop)
	}
	if msg := h.toolError("loop", map[string]any{"model": "toy", "gpu": "h200", "budget": 2}); !strings.Contains(msg, "already exists") {
		t.Errorf("a second loop on the same campaign: %q", msg)
	}

	var started RunAnswer
	h.ok("autoresearch", map[string]any{"model": "toy", "gpu": "h200", "name": "bg", "iters": 100000, "overnight": true, "cold": true}, &started)
	if started.Campaign != "toy-h200-cpu-bg" || !started.Background || !started.Created {
		t.Fatalf("autoresearch on a scheduler: %+v", started)
	}
	var rec control.RecordResponse
	h.ok("record", map[string]any{"campaign": started.Campaign, "status": "failed", "description": "agent: remote record"}, &rec)
	if len(rec.Rows) != 1 || !strings.Contains(rec.Rows[0].Description, "agent: remote record") {
		t.Fatalf("record on a scheduler: %+v", rec)
	}
	var paused RunAnswer
	h.ok("cancel", map[string]any{"campaign": started.Campaign}, &paused)
	if paused.Status.Status != campaign.StatusPaused {
		t.Fatalf("cancel on a scheduler: %+v", paused)
	}
	var resumed, stopped control.CommandResponse
	h.ok("resume", map[string]any{"campaign": started.Campaign}, &resumed)
	if resumed.Campaign.Status != campaign.StatusOptimizing {
		t.Fatalf("resume on a scheduler: %+v", resumed)
	}
	h.ok("stop", map[string]any{"campaign": started.Campaign, "note": "agent: enough"}, &stopped)
	if stopped.Campaign.Status != campaign.StatusDone || !strings.Contains(strings.Join(stopped.Log, "\n"), "agent: enough") {
		t.Fatalf("stop on a scheduler: %+v", stopped)
	}

	var next NextAnswer
	h.ok("next", map[string]any{"campaign": loop.Campaign}, &next)
	if next.Decision != "stop" || next.LatencyKind != "predicted" {
		t.Fatalf("next on a scheduler: %+v", next)
	}
	var list CampaignsAnswer
	h.ok("campaigns", nil, &list)
	if len(list.Campaigns) != 2 {
		t.Fatalf("campaigns on a scheduler: %+v", list)
	}
	ctx := context.Background()
	md, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "amk://campaigns/" + loop.Campaign + "/report.md"})
	if err != nil || !strings.Contains(md.Contents[0].Text, loop.Campaign) {
		t.Fatalf("report.md on a scheduler: %v %+v", err, md)
	}
	if _, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "amk://campaigns/" + loop.Campaign + "/results.tsv"}); err == nil || !strings.Contains(err.Error(), "scheduler") {
		t.Errorf("results.tsv on a scheduler: %v", err)
	}
}
