package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/apitest"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/waitfor"
)

const remoteToken = "amkctl-test-token"

// testScheduler serves the real API handlers over a fleet with an
// in-process transport; it returns the URL and the workspace directory.
func testScheduler(t *testing.T) (string, string) {
	t.Helper()
	for _, k := range []string{envServer, envToken, "XDG_CONFIG_HOME"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s := apitest.Start(t, apitest.Options{API: api.Options{Token: remoteToken}})
	return s.URL, s.Dir
}

// waitRemoteDone polls `status --json` until the campaign is done and idle.
func waitRemoteDone(t *testing.T, url, id string) campaign.StatusReport {
	t.Helper()
	var st campaign.StatusReport
	waitfor.Check(t, time.Minute, func() error {
		code, out, errOut := runCmd(t, "--server", url, "status", id, "--json")
		if code != 0 {
			t.Fatalf("status: %d %s", code, errOut)
		}
		st = campaign.StatusReport{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if !controltest.Finished(st) {
			return fmt.Errorf("campaign did not finish: %+v", st)
		}
		return nil
	})
	return st
}

// reopenedStatus reports whether the status text a reopen printed shows
// the campaign reopened from its earlier experiments: optimizing again, or
// already done with more than that. The scheduler's drivers take a
// reopened campaign up at once and the status is read after the command,
// so on a loaded machine the few toy trials of the new budget can all have
// run by then; a reopen that did nothing would still read done at before.
func reopenedStatus(text string, before int) bool {
	if strings.Contains(text, "status       : OPTIMIZING") {
		return true
	}
	var run int
	for ln := range strings.SplitSeq(text, "\n") {
		if _, err := fmt.Sscanf(strings.TrimSpace(ln), "experiments  : %d", &run); err == nil {
			break
		}
	}
	return strings.Contains(text, "status       : DONE") && run > before
}

// reopenedStatus accepts a reopened campaign that is optimizing or has
// already run past its earlier experiments, and refuses one still done at
// them.
func TestReopenedStatusNeedsProgress(t *testing.T) {
	status := func(state string, run int) string {
		return fmt.Sprintf("  status       : %s\n  experiments  : %d (2 kept), 0 consecutive reverts\n", state, run)
	}
	for _, c := range []struct {
		text string
		want bool
	}{{status("OPTIMIZING", 6), true}, {status("DONE", 9), true}, {status("DONE", 6), false}, {status("PAUSED", 9), false}} {
		if got := reopenedStatus(c.text, 6); got != c.want {
			t.Errorf("reopenedStatus(%q, 6) = %v, want %v", c.text, got, c.want)
		}
	}
}

// The campaign verbs with --server: their output and exit codes against a
// scheduler. That they do what they do on a workspace is the control
// plane's suite (control/controltest), which runs the client against the
// scheduler's API.
func TestRemoteVerbs(t *testing.T) {
	url, ws := testScheduler(t)
	code, out, errOut := runCmd(t, "--server", url, "--token", remoteToken, "start", "toy", "--gpu", "h200", "--iters", "6", "--cold", "--overnight", "--workers", "2")
	if code != 0 || out != "toy-h200-cpu\n" || !strings.Contains(errOut, "created campaign toy-h200-cpu") {
		t.Fatalf("start: %d %q %q", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	st := waitRemoteDone(t, url, id)
	if st.ExperimentsRun != 6 {
		t.Fatalf("%d experiments, want 6", st.ExperimentsRun)
	}
	if _, out, _ := runCmd(t, "--server", url, "status", id); !strings.Contains(out, "AMK Autoresearch Orchestration Status") {
		t.Fatalf("remote status:\n%s", out)
	}
	if _, out, _ := runCmd(t, "next", "--server="+url, id); !strings.HasPrefix(out, "DECISION: STOP") {
		t.Fatalf("remote next:\n%s", out)
	}
	if _, out, _ := runCmd(t, "--server", url, "campaigns"); !strings.Contains(out, id) || !strings.Contains(out, "done") {
		t.Fatalf("remote campaigns:\n%s", out)
	}
	// A remote report is the report itself, never a path on the
	// scheduler's machine; --out saves its files here.
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "report", id)
	if code != 0 || !strings.HasPrefix(out, "# AMK overnight run, wake-up report") || !strings.Contains(out, "id `"+id+"`") ||
		strings.Contains(out, ws) || strings.Contains(out, "Report written to") {
		t.Fatalf("report: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "campaigns", id, "aggregate_report.md")); err != nil {
		t.Fatalf("the scheduler wrote no report: %v", err)
	}
	saved := filepath.Join(t.TempDir(), "saved")
	code, _, errOut = runCmd(t, "--server", url, "--token", remoteToken, "report", id, "--out", saved)
	for _, f := range []string{"report.md", "report.json", "report.svg", "aggregate_report.md"} {
		if data, err := os.ReadFile(filepath.Join(saved, f)); code != 0 || err != nil || len(data) == 0 {
			t.Errorf("report --out: exit %d, %s: %v (%s)", code, f, err, errOut)
		}
	}
	_, out, _ = runCmd(t, "--server", url, "report", "--json", id, "--token", remoteToken)
	var wake campaign.WakeUp
	if err := json.Unmarshal([]byte(out), &wake); err != nil || wake.ID != id || wake.TotalExperiments != 6 {
		t.Fatalf("report --json: %v %+v", err, wake)
	}
	_, remoteList, _ := runCmd(t, "--server", url, "campaigns")
	_, localList, _ := runCmd(t, "campaigns", "--workspace", ws)
	if !strings.Contains(remoteList, id) || remoteList != localList {
		t.Fatalf("remote campaigns:\n%s\nlocal:\n%s", remoteList, localList)
	}

	// Lifecycle: a done campaign refuses pause and records; reopen it.
	code, _, errOut = runCmd(t, "--server", url, "--token", remoteToken, "pause", id)
	if code != 1 || !strings.Contains(errOut, "pause: campaign is done") {
		t.Fatalf("pause of a done campaign: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "--token", remoteToken, "record", "kept", id, "--latency-us", "3", "--kind", "predicted")
	if code != 1 || !strings.Contains(errOut, "done") {
		t.Fatalf("record into a done campaign: %d %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "reopen", id, "--iters", "9", "--note", "more")
	if code != 0 || !strings.Contains(out, id+": reopened: more") || !reopenedStatus(out, 6) {
		t.Fatalf("reopen: %d %s %s", code, out, errOut)
	}
	st = waitRemoteDone(t, url, id)
	if st.ExperimentsRun != 9 {
		t.Fatalf("%d experiments after reopen, want 9", st.ExperimentsRun)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "reopen", id, "--iters", "0")
	if code != 0 {
		t.Fatalf("reopen unbounded: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "pause", id, "--json")
	if code != 0 || !strings.Contains(errOut, "paused") {
		t.Fatalf("pause: %d %s %s", code, out, errOut)
	}
	var paused campaign.StatusReport
	if err := json.Unmarshal([]byte(out), &paused); err != nil || paused.Status != campaign.StatusPaused {
		t.Fatalf("pause --json: %v %+v", err, paused)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "record", "kept", id, "--latency-us", "3", "--kind", "predicted", "--description", "agent's own")
	if code != 0 || !strings.Contains(out, "recorded experiment") || !strings.Contains(out, "agent's own") {
		t.Fatalf("record: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "budget", id, "--minutes", "600")
	if code != 0 || !strings.Contains(out, "budget set: 0 experiments, 600 minutes") {
		t.Fatalf("budget: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "resume", id)
	if code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("resume: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "stop", id, "--note", "done for today")
	if code != 0 || !strings.Contains(out, "stopped by operator: done for today") {
		t.Fatalf("stop: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "note", id, "fan replaced")
	if code != 0 || !strings.Contains(out, id+": note: fan replaced") {
		t.Fatalf("note: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = runCmd(t, "--server", url, "--token", remoteToken, "note", id, " "); code != 1 || !strings.Contains(errOut, "needs the note's text") {
		t.Fatalf("an empty note: %d %s", code, errOut)
	}
	if code, _, errOut = runCmd(t, "--server", url, "--token", remoteToken, "note"); code != 2 || !strings.Contains(errOut, "TEXT is required") {
		t.Fatalf("note without text: %d %s", code, errOut)
	}
	// A second start of the same campaign, now done, is refused: it would
	// do nothing. The refusal names the commands that would.
	code, out, errOut = runCmd(t, "--server", url, "--token", remoteToken, "start", "toy", "--gpu", "h200")
	if code != 1 || out != "" || !strings.Contains(errOut, "already exists and is done") || !strings.Contains(errOut, "amkctl reopen "+id+" --iters") {
		t.Fatalf("second start of a done campaign: %d %q %q", code, out, errOut)
	}
}

func TestRemoteErrorsAreClear(t *testing.T) {
	url, _ := testScheduler(t)
	code, _, errOut := runCmd(t, "--server", url, "--token", "wrong", "start", "toy", "--gpu", "h200")
	if code != 1 || !strings.Contains(errOut, "unauthorized") || !strings.Contains(errOut, "--token") {
		t.Fatalf("wrong token: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "start", "toy", "--gpu", "h200")
	if code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("no token: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "status", "no-such-campaign")
	if code != 1 || !strings.Contains(errOut, `no campaign "no-such-campaign"`) {
		t.Fatalf("unknown campaign: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "status")
	if code != 1 || !strings.Contains(errOut, "no campaigns on the scheduler") {
		t.Fatalf("no campaign at all: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "workers")
	if code != 1 || !strings.Contains(errOut, "worker registry") {
		t.Fatalf("workers of an in-process transport: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server", url, "eval", "x")
	if code != 2 || !strings.Contains(errOut, "does not act on a scheduler") {
		t.Fatalf("--server with a local-only verb: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "--server")
	if code != 2 || !strings.Contains(errOut, "needs a value") {
		t.Fatalf("--server without a value: %d %s", code, errOut)
	}
	code, _, errOut = runCmd(t, "workers")
	if code != 2 || !strings.Contains(errOut, "needs a scheduler") {
		t.Fatalf("workers without a server: %d %s", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, errOut = runCmd(t, "--server", "http://"+closed, "campaigns")
	if code != 1 || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("no scheduler: %d %s", code, errOut)
	}
}

func TestRemoteSettingsFromTheEnvironmentAndFiles(t *testing.T) {
	url, ws := testScheduler(t)
	t.Setenv(envServer, url)
	t.Setenv(envToken, remoteToken)
	code, out, errOut := runCmd(t, "start", "toy", "--gpu", "h200", "--overnight", "--cold")
	if code != 0 || out != "toy-h200-cpu\n" {
		t.Fatalf("start via the environment: %d %q %s", code, out, errOut)
	}
	// An explicit --workspace means the local mode despite AMK_SERVER.
	code, out, _ = runCmd(t, "campaigns", "--workspace", filepath.Join(t.TempDir(), "empty"))
	if code != 0 || !strings.Contains(out, "no campaigns in") {
		t.Fatalf("local campaigns with AMK_SERVER set: %d %s", code, out)
	}
	t.Setenv(envToken, "")
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte(remoteToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "stop", "toy-h200-cpu", "--token-file", tokFile); code != 0 {
		t.Fatalf("stop with --token-file: %d %s", code, errOut)
	}
	// The user's config file is the last resort.
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "amk")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "token"), []byte(remoteToken), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCmd(t, "reopen", "toy-h200-cpu", "--iters", "100000"); code != 0 || !strings.Contains(out, "reopened") {
		t.Fatalf("reopen with the config-file token: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "stop", "toy-h200-cpu", "--token-file", filepath.Join(ws, "missing")); code != 2 || !strings.Contains(errOut, "token-file") {
		t.Fatalf("missing token file: %d %s", code, errOut)
	}
}

func TestLocalLifecycleVerbs(t *testing.T) {
	for _, k := range []string{envServer, envToken} {
		t.Setenv(k, "")
	}
	ws := filepath.Join(t.TempDir(), "ws")
	code, out, errOut := runCmd(t, "start", "toy", "--gpu", "h200", "--iters", "3", "--workspace", ws, "--cold")
	if code != 0 || out != "toy-h200-cpu\n" || !strings.Contains(errOut, "created campaign") {
		t.Fatalf("local start: %d %q %q", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pause", id}, 0, id + ": paused"},
		{[]string{"pause", id}, 1, "refused"},
		{[]string{"resume", id}, 0, "status       : OPTIMIZING"},
		{[]string{"budget", id, "--iters", "5", "--minutes", "30"}, 0, "budget set: 5 experiments, 30 minutes"},
		{[]string{"budget", id}, 2, ""},
		{[]string{"stop", id, "--note", "by hand"}, 0, "stopped by operator: by hand"},
		{[]string{"note", id, "a note by hand"}, 0, id + ": note: a note by hand"},
		{[]string{"note", "a note for the only campaign"}, 0, id + ": note: a note for the only campaign"},
		{[]string{"reopen", id, "--iters", "7"}, 0, "reopened"},
		{[]string{"start", "toy", "--gpu", "h200", "--workers", "3"}, 2, ""},
	}
	for _, s := range steps {
		code, out, errOut := runCmd(t, append(s.args, "--workspace", ws)...)
		if code != s.code || !strings.Contains(out+errOut, s.want) {
			t.Fatalf("%v: %d\n%s%s", s.args, code, out, errOut)
		}
	}
	c, err := (&runner.Workspace{Dir: ws}).View(id)
	if err != nil || c.State().Settings.Budget.Iterations != 7 || c.Status() != campaign.StatusOptimizing {
		t.Fatalf("ledger after the commands: %v %+v", err, c.State().Settings.Budget)
	}
	// A campaign driven by another process refuses local commands.
	l, err := (&runner.Workspace{Dir: ws}).Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, errOut = runCmd(t, "pause", id, "--workspace", ws)
	if code != 1 || !strings.Contains(errOut, "another process drives it") {
		t.Fatalf("pause of a locked campaign: %d %s", code, errOut)
	}
}
