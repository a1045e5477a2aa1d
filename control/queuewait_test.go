package control

import (
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
)

// A fleet campaign whose trials wait in a GPU target's queue whose oldest
// trial has waited more than QueueWaitAfter says so, with what to do; a
// shorter wait, a campaign with nothing in flight, and a target no worker
// serves (the unserved alert says it) do not.
func TestQueueWaitAlert(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := campaign.State{ID: "small-h200-cpu", GPU: "h200", Device: "cpu", Status: campaign.StatusOptimizing,
		LastEventAt: now.Add(-time.Second), InFlight: map[int]*campaign.InFlight{1: {IssuedAt: now.Add(-time.Minute)}, 2: {IssuedAt: now.Add(-time.Minute)}}}
	facts := func(wait time.Duration, served ...string) healthFacts {
		return healthFacts{fleet: true, workersKnown: true, served: served, queueWait: map[string]time.Duration{"h200": wait}}
	}
	here := Driver{Here: true}
	alerts := facts(14*time.Minute, "h200").alerts(st, lastRunLeft{}, here, true, now)
	if len(alerts) != 1 || alerts[0].Kind != campaign.AlertQueueWait ||
		!strings.Contains(alerts[0].Message, "trials:h200) has waited 14 min") || !strings.Contains(alerts[0].Message, "2 trial(s) in flight") ||
		!strings.Contains(alerts[0].Fix, "gpuworker --redis ADDR --target h200 --device cpu") {
		t.Fatalf("a 14-minute queue wait: %+v", alerts)
	}
	if alerts := facts(9*time.Minute, "h200").alerts(st, lastRunLeft{}, here, true, now); len(alerts) != 0 {
		t.Errorf("a 9-minute queue wait: %+v", alerts)
	}
	if alerts := facts(time.Hour, "h100").alerts(st, lastRunLeft{}, here, true, now); len(alerts) != 1 || alerts[0].Kind != campaign.AlertUnserved {
		t.Errorf("a queue nobody serves: %+v, want only unserved", alerts)
	}
	idle := st
	idle.InFlight = nil
	if alerts := facts(time.Hour, "h200").alerts(idle, lastRunLeft{}, here, true, now); len(alerts) != 0 {
		t.Errorf("a campaign with nothing queued: %+v", alerts)
	}
	for queue, want := range map[string]string{"trials:h100": "h100", "ns:trials:mi300x": "mi300x", "results": "", "ns:results": "", "trials:": "", "xtrials:h100": ""} {
		got, ok := trialQueueTarget(queue)
		if got != want || ok != (want != "") {
			t.Errorf("trialQueueTarget(%q) = %q, %v; want %q", queue, got, ok, want)
		}
	}
}
