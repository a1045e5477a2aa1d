package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
)

// TestOperatorCommands: pause, resume, budget, criteria, stop and reopen
// through their tools change the campaign as amkctl's verbs do, and what a
// command does not take, or a campaign in that state refuses, is a tool
// error that says so.
func TestOperatorCommands(t *testing.T) {
	h := newHarness(t)
	var loop RunAnswer
	h.ok("loop", map[string]any{"model": "toy", "gpu": "h100", "budget": 1, "cold": true}, &loop)
	id := loop.Campaign
	if id == "" || loop.Status.Status != campaign.StatusOptimizing {
		t.Fatalf("loop answered %+v", loop)
	}

	command := func(tool string, args map[string]any, wantLog string, want campaign.Status) control.CommandResponse {
		t.Helper()
		args["campaign"] = id
		var resp control.CommandResponse
		h.ok(tool, args, &resp)
		if resp.ID != id || !strings.Contains(strings.Join(resp.Log, "\n"), wantLog) || resp.Campaign.Status != want {
			t.Fatalf("%s %v answered %+v, want a log with %q and status %s", tool, args, resp, wantLog, want)
		}
		return resp
	}
	refused := func(tool string, args map[string]any, want string) {
		t.Helper()
		args["campaign"] = id
		if msg := h.toolError(tool, args); !strings.Contains(msg, want) {
			t.Errorf("%s %v: %q, want it to say %q", tool, args, msg, want)
		}
	}

	command("pause", map[string]any{"note": "an agent holds it"}, "paused: an agent holds it", campaign.StatusPaused)
	refused("pause", map[string]any{}, "refused")
	refused("pause", map[string]any{"budget": map[string]any{"iterations": 3, "minutes": 0}}, "budget")

	resp := command("budget", map[string]any{"budget": map[string]any{"iterations": 40, "minutes": 90}}, "budget", campaign.StatusPaused)
	if b := resp.Campaign.Settings.Budget; b.Iterations != 40 || b.Minutes != 90 {
		t.Errorf("budget: the campaign's budget is %+v", b)
	}
	refused("budget", map[string]any{"budget": map[string]any{"iterations": -3, "minutes": 0}}, "iterations")

	resp = command("criteria", map[string]any{"move_on": map[string]any{"consecutive_reverts": 0, "max_minutes": 45}}, "criteria", campaign.StatusPaused)
	if mo := resp.Campaign.Settings.MoveOn; mo.ConsecutiveReverts != 0 || mo.MaxMinutes != 45 || mo.SpeedupTarget != campaign.DefaultMoveOn().SpeedupTarget {
		t.Errorf("criteria: the campaign's criteria are %+v", mo)
	}
	refused("criteria", map[string]any{"move_on": map[string]any{"max_minutes": -1}}, "move_on")

	command("resume", map[string]any{}, "resumed", campaign.StatusOptimizing)
	refused("resume", map[string]any{}, "refused")
	command("stop", map[string]any{"note": "by hand"}, "stopped by operator: by hand", campaign.StatusDone)
	refused("pause", map[string]any{}, "refused")

	resp = command("reopen", map[string]any{"note": "more", "budget": map[string]any{"iterations": 60, "minutes": 0}}, "reopened", campaign.StatusOptimizing)
	if resp.Campaign.Settings.Budget.Iterations != 60 {
		t.Errorf("reopen: the campaign's budget is %+v", resp.Campaign.Settings.Budget)
	}
}

// TestStopABackgroundRun: stop reaches the driver of a campaign this
// server runs in the background (autoresearch), which ends the run.
func TestStopABackgroundRun(t *testing.T) {
	h := newHarness(t)
	var started RunAnswer
	h.ok("autoresearch", map[string]any{"model": "toy", "gpu": "h100", "iters": 100000, "overnight": true, "cold": true}, &started)
	if !started.Background {
		t.Fatalf("autoresearch answered %+v", started)
	}
	var resp control.CommandResponse
	h.ok("stop", map[string]any{"campaign": started.Campaign}, &resp)
	if resp.Campaign.Status != campaign.StatusDone {
		t.Fatalf("stop answered %+v", resp)
	}
	if run := h.srv.running(started.Campaign); run != nil {
		select {
		case <-run.done:
		case <-time.After(time.Minute):
			t.Fatal("the background run did not end within a minute of stop")
		}
	}
	var status StatusAnswer
	h.ok("status", map[string]any{"campaign": started.Campaign}, &status)
	if status.Running || status.Status != campaign.StatusDone {
		t.Fatalf("status after stop: %+v", status)
	}
}
