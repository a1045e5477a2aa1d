package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/proctest"
	"github.com/amk-dev/amk/waitfor"
)

func TestAutoresearchEndsWithReportAndExitCode(t *testing.T) {
	ws := t.TempDir()
	code, out, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "12", "--workspace", ws, "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:%s\nstderr:%s", code, out, errOut)
	}
	dir := filepath.Join(ws, "campaigns", campaign.ID("toy", "h200", "cpu", ""))
	for _, f := range []string{"report.json", "report.md", "report.svg", "results.tsv", "ledger.json", "trials.jsonl", "best.json", "knobs.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	checkReportReproducesTheBest(t, dir)
	if !strings.Contains(out, "AMK Autoresearch Orchestration Status") {
		t.Errorf("no status block on stdout:\n%s", out)
	}
	// status/next/report work on the workspace afterwards.
	for _, verb := range []string{"status", "next", "report", "campaigns"} {
		if code, _, e := runCmd(t, verb, "--workspace", ws); code != 0 {
			t.Errorf("%s exited %d: %s", verb, code, e)
		}
	}
	if code, _, _ := runCmd(t, "status", "--workspace", filepath.Join(ws, "nope")); code == 0 {
		t.Error("status on a missing workspace succeeded")
	}
}

// checkReportReproducesTheBest: the report names the seed, the host that
// evaluated the best and the share of the space searched, and the command
// it prints, run as printed beside best.json, evaluates the best again.
func checkReportReproducesTheBest(t *testing.T, dir string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proposer random seed 3", "Best evaluated by: host=", "points of the search space (", "## Reproduce and apply", "`best.json` beside this report", "## Which knobs mattered"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var w campaign.WakeUp
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err == nil {
		err = json.Unmarshal(data, &w)
	}
	if err != nil || len(w.Reproduce) == 0 || w.SearchedShare == nil || *w.SearchedShare <= 0 {
		t.Fatalf("report.json: %v: reproduce %q, searched share %v", err, w.Reproduce, w.SearchedShare)
	}
	args := strings.Fields(w.Reproduce[0])
	for i, a := range args {
		if a == w.BestFile {
			args[i] = filepath.Join(dir, a)
		}
	}
	code, out, errOut := runCmd(t, args[1:]...)
	var v struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v.ScheduleID != w.BestScheduleID {
		t.Errorf("%q: exit %d, schedule %q (want the best, %s): %v %s", w.Reproduce[0], code, v.ScheduleID, w.BestScheduleID, err, errOut)
	}
}

// autoresearch --json prints snake_case keys, the run's included.
func TestAutoresearchJSONIsSnakeCase(t *testing.T) {
	ws := t.TempDir()
	code, out, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "2", "--workspace", ws, "--cold", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:%s\nstderr:%s", code, out, errOut)
	}
	var summary map[string]any
	if err := json.Unmarshal([]byte(out), &summary); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	run, _ := summary["run"].(map[string]any)
	for _, key := range []string{"proposed", "recorded", "resubmitted", "status", "stop_reason"} {
		if _, ok := run[key]; !ok {
			t.Errorf("the run lacks %q: %v", key, run)
		}
	}
	for key := range run {
		if key != strings.ToLower(key) {
			t.Errorf("run key %q is not snake_case", key)
		}
	}
}

// autoresearch --json carries the reference's summary: where the best was
// found, the flywheel's warm seeds and ranker, the counts; --device auto
// says which device it picked.
func TestAutoresearchJSONSummary(t *testing.T) {
	ws := t.TempDir()
	run := func(args ...string) (map[string]any, string) {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"autoresearch", "toy", "--gpu", "h200", "--workspace", ws, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\nstdout:%s\nstderr:%s", args, code, out, errOut)
		}
		var summary map[string]any
		if err := json.Unmarshal([]byte(out), &summary); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		return summary, errOut
	}
	cold, _ := run("--iters", "4", "--cold", "--name", "cold")
	best, ok := cold["iters_to_best"].(float64)
	if !ok || best < 1 || best > 4 {
		t.Errorf("cold: iters_to_best %v, want the experiment (1..4) of the best", cold["iters_to_best"])
	}
	for key, want := range map[string]any{"cold": true, "warm_seeds": 0.0, "ranker_trained": false, "model": "toy", "gpu": "h200",
		"device": "cpu", "iters_run": 4.0, "best_kind": "predicted"} {
		if cold[key] != want {
			t.Errorf("cold: %s = %v, want %v", key, cold[key], want)
		}
	}
	if cold["best_pct_roofline"] != cold["best_pct_of_roofline"] || cold["n_correct"].(float64) < 1 || cold["state_path"] == nil {
		t.Errorf("cold: the reference's names: %v", cold)
	}

	// A warm campaign on the same workspace starts from the corpus the
	// cold one grew.
	warm, stderr := run("--iters", "2", "--name", "warm", "--device", "auto")
	if !strings.Contains(stderr, "device auto: cpu") {
		t.Errorf("--device auto does not say which device it picked:\n%s", stderr)
	}
	if warm["cold"] != false || warm["device"] != "cpu" || warm["warm_seeds"].(float64) < 1 || warm["ranker"] == "" {
		t.Errorf("warm: %v", warm)
	}
	if _, ok := warm["ranker_trained"].(bool); !ok {
		t.Errorf("warm: ranker_trained %v", warm["ranker_trained"])
	}
}

// The crash test: SIGKILL an overnight campaign mid-run, restart the same
// command, and check that nothing was lost or counted twice.
func TestAutoresearchSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	args := []string{"autoresearch", "toy-2L", "--gpu", "h100", "--overnight", "--restart-after", "3",
		"--iters", "60", "--workers", "2", "--workspace", ws, "--seed", "11"}
	dir := filepath.Join(ws, "campaigns", campaign.ID("toy-2L", "h100", "cpu", ""))
	results := filepath.Join(dir, "results.tsv")

	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "AMKCTL_AS_MAIN=1")
	if err := proctest.Start(t, cmd); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, time.Minute, func() error {
		if rows, _ := flywheel.ReadRows(results); len(rows) < 15 {
			return fmt.Errorf("campaign did not reach 15 rows in time (%d)", len(rows))
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before, err := flywheel.ReadRows(results)
	if err != nil {
		t.Fatalf("results.tsv unreadable after SIGKILL: %v", err)
	}
	// The morning after: status says that nothing drives the campaign and
	// how to resume it, and its elapsed time no longer grows.
	id := campaign.ID("toy-2L", "h100", "cpu", "")
	deadStatus := func() campaign.StatusReport {
		code, out, errOut := runCmd(t, "status", id, "--workspace", ws, "--json")
		var rep campaign.StatusReport
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("status after SIGKILL: %d %s %s", code, out, errOut)
		}
		return rep
	}
	first := deadStatus()
	if len(first.Alerts) != 1 || first.Alerts[0].Kind != campaign.AlertNoDriver || first.Status != campaign.StatusOptimizing ||
		!strings.Contains(first.Alerts[0].Fix, "amkctl autoresearch toy-2L --gpu h100 --device cpu --workspace "+ws) || first.LastEventAt == "" {
		t.Errorf("status of a killed run: %s, alerts %+v, last event %q", first.Status, first.Alerts, first.LastEventAt)
	}
	// No event can say that something did not happen: wait a real quarter
	// second (the ledger's times are real, written by the killed process),
	// four times the resolution of elapsed_minutes (0.001 min).
	time.Sleep(250 * time.Millisecond)
	if later := deadStatus(); later.ElapsedMinutes != first.ElapsedMinutes {
		t.Errorf("elapsed grows while nothing runs: %v min, then %v", first.ElapsedMinutes, later.ElapsedMinutes)
	}
	if code, out, _ := runCmd(t, "status", id, "--workspace", ws); code != 0 || !strings.Contains(out, "ALERT") || !strings.Contains(out, "last event") {
		t.Errorf("status text of a killed run:\n%s", out)
	}

	again := exec.Command(exe, args...)
	again.Env = append(os.Environ(), "AMKCTL_AS_MAIN=1")
	if out, err := again.CombinedOutput(); err != nil {
		t.Fatalf("restart failed: %v\n%s", err, out)
	}
	rows, err := flywheel.ReadRows(results)
	if err != nil {
		t.Fatalf("results.tsv does not parse: %v", err)
	}
	if len(rows) <= len(before) {
		t.Fatalf("the restarted run recorded nothing (%d rows before, %d after)", len(before), len(rows))
	}
	seen := map[string]bool{}
	for i, r := range rows {
		if r.Experiment != i+1 {
			t.Fatalf("experiment numbers not contiguous: row %d is experiment %d", i, r.Experiment)
		}
		if seen[r.ScheduleID] {
			t.Fatalf("schedule %s recorded twice", r.ScheduleID)
		}
		seen[r.ScheduleID] = true
	}
	var wake campaign.WakeUp
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &wake); err != nil {
		t.Fatal(err)
	}
	if wake.TotalExperiments != len(rows) {
		t.Fatalf("report counts %d experiments, results.tsv has %d", wake.TotalExperiments, len(rows))
	}
	trials := map[int]bool{}
	var best *float64
	for _, p := range wake.Trajectory {
		if trials[p.Trial] {
			t.Fatalf("trial %d recorded twice", p.Trial)
		}
		trials[p.Trial] = true
		if p.BestUS != nil {
			// Within the 1% keep margin a simpler config may take over
			// (docs/spec/loop.md's tie-break); beyond it the best never worsens.
			if best != nil && *p.BestUS > *best*1.01 {
				t.Fatalf("best got worse: %v after %v", *p.BestUS, *best)
			}
			best = p.BestUS
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "report.svg")); err != nil {
		t.Fatalf("no plot: %v", err)
	}
}

// TestAutoresearchRerunOfADoneCampaign: run again on a done campaign,
// autoresearch runs nothing and prints commands that run as printed (this
// program's name, not a bare amkctl that may not be on PATH; a reopen
// without a budget, which a total budget of --iters would refuse); with
// --reopen it adds its experiments to the campaign.
func TestAutoresearchRerunOfADoneCampaign(t *testing.T) {
	ws := t.TempDir()
	args := []string{"autoresearch", "toy", "--gpu", "h200", "--iters", "3", "--workspace", ws, "--seed", "3"}
	if code, _, errOut := runCmd(t, args...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	id := campaign.ID("toy", "h200", "cpu", "")
	if code, _, errOut := runCmd(t, "stop", id, "--workspace", ws); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, errOut)
	}
	experiments := func() int {
		t.Helper()
		code, out, errOut := runCmd(t, "status", id, "--workspace", ws, "--json")
		var st campaign.StatusReport
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: %d %s %s", code, out, errOut)
		}
		return st.ExperimentsRun
	}
	before := experiments()

	code, _, errOut := runCmd(t, args...)
	if code != 0 || !strings.Contains(errOut, "nothing to run") || experiments() != before {
		t.Fatalf("rerun on a done campaign: exit %d, %d experiments (was %d)\n%s", code, experiments(), before, errOut)
	}
	hint := selfCommand() + " reopen " + id + " --workspace " + ws
	if !strings.Contains(errOut, hint) || !strings.Contains(errOut, "run this again with --reopen") {
		t.Fatalf("the hint does not say %q or --reopen:\n%s", hint, errOut)
	}
	if strings.Contains(errOut, "[--iters") {
		t.Errorf("the hint offers a total budget as an addition:\n%s", errOut)
	}

	code, _, errOut = runCmd(t, append(args, "--reopen")...)
	if code != 0 || !strings.Contains(errOut, "reopened (--reopen), to add up to 3 experiments more") {
		t.Fatalf("--reopen: exit %d\n%s", code, errOut)
	}
	if after := experiments(); after <= before || after > before+3 {
		t.Fatalf("--reopen ran %d experiments, want 1 to 3", after-before)
	}
}

func TestSelfCommand(t *testing.T) {
	saved := os.Args[0]
	t.Cleanup(func() { os.Args[0] = saved })
	for arg0, want := range map[string]string{
		"bin/amkctl": "bin/amkctl",
		"amkctl":     "amkctl",
		filepath.Join(os.TempDir(), "go-build123", "b001", "exe", "amkctl"): "go run ./cmd/amkctl",
		"/opt/my tools/amkctl": "'/opt/my tools/amkctl'",
	} {
		os.Args[0] = arg0
		if got := selfCommand(); got != want {
			t.Errorf("os.Args[0] %q: %q, want %q", arg0, got, want)
		}
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote: %s", got)
	}
}

// --minutes NaN or Inf is bad input: NaN passed the ">= 0" check and, being
// neither a bound nor zero, let the run go on with no bound at all.
func TestAutoresearchRefusesMinutesThatAreNotFinite(t *testing.T) {
	for _, m := range []string{"NaN", "Inf", "-1"} {
		code, _, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--minutes", m, "--workspace", t.TempDir())
		if code != exitBadInput || !strings.Contains(errOut, "--minutes") {
			t.Errorf("--minutes %s: exit %d, stderr %q; want bad input naming --minutes", m, code, errOut)
		}
	}
}
