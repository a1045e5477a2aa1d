package main

import (
	"strings"
	"testing"
)

// status --watch follows a campaign until it is done: on a done one it
// prints its status once, after a line with the time, and exits 0.
func TestStatusWatch(t *testing.T) {
	ws := t.TempDir()
	if code, _, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "2", "--workspace", ws, "--seed", "3"); code != exitOK {
		t.Fatalf("autoresearch: exit %d %s", code, errOut)
	}
	// A local campaign whose run ended stays open for the next run: stop it.
	if code, _, errOut := runCmd(t, "stop", "--workspace", ws); code != exitOK {
		t.Fatalf("stop: exit %d %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "status", "--watch", "--interval", "10ms", "--workspace", ws)
	if code != exitOK || !strings.HasPrefix(out, "--- ") || strings.Count(out, "AMK Autoresearch Orchestration Status") != 1 {
		t.Errorf("status --watch: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCmd(t, "status", "-w", "--json", "--workspace", ws)
	if code != exitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"status":"done"`) {
		t.Errorf("status -w --json: exit %d\n%s", code, out)
	}
	if code, _, _ := runCmd(t, "status", "--watch", "--interval", "0s", "--workspace", ws); code != exitBadInput {
		t.Errorf("--interval 0s: exit %d", code)
	}
}
