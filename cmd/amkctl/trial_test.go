package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/amk-dev/amk/control"
)

// trial shows one finished trial of a local campaign: its verdict, worker
// and stage times; a trial that does not exist is not found (exit 1).
func TestTrialVerb(t *testing.T) {
	ws := t.TempDir()
	if code, _, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "3", "--workspace", ws, "--seed", "3"); code != exitOK {
		t.Fatalf("autoresearch: exit %d %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "trial", "1", "--workspace", ws)
	for _, want := range []string{"Trial 1 of campaign toy-h200-cpu: finished", "experiment ", "schedule: ", "verdict: ", "worker: ", "predicted"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("trial 1: exit %d, no %q in\n%s%s", code, want, out, errOut)
		}
	}
	code, out, _ = runCmd(t, "trial", "toy-h200-cpu", "1", "--workspace", ws, "--json")
	var rep control.TrialReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK || rep.Trial != 1 || rep.Outcome == nil || rep.Outcome.Verdict == nil {
		t.Errorf("trial --json: exit %d %v\n%s", code, err, out)
	}
	if code, _, errOut := runCmd(t, "trial", "99", "--workspace", ws); code == exitOK || !strings.Contains(errOut, "has no trial 99") {
		t.Errorf("trial 99: exit %d %s", code, errOut)
	}
	if code, _, _ := runCmd(t, "trial", "--workspace", ws); code != exitBadInput {
		t.Errorf("trial without N: exit %d", code)
	}
	if code, _, _ := runCmd(t, "trial", "x", "--workspace", ws); code != exitBadInput {
		t.Errorf("trial x: exit %d", code)
	}
}
