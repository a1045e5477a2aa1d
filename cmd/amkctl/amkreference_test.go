package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amk-dev/amk/campaign"
)

// amkReference copies AMK's own torch-free modules (testdata/amk-reference,
// see its README) into a fresh directory and returns a function running
// python3 there (a script or -c code) with the directory on the module
// path. The test is skipped, saying why, where python3 is missing.
func amkReference(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: AMK's own tools (testdata/amk-reference) cannot run here")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "amk-reference"))); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		cmd := exec.Command(python, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// export-amk writes a campaign under AMK's names, and AMK's own
// orchestrator reads them: status, next and report show the campaign's
// model, GPU, experiments and best, and AMK's results reader finds every
// row of the campaign's results.tsv.
func TestExportAMKFilesReadByAMKTools(t *testing.T) {
	python := amkReference(t)
	ws := t.TempDir()
	if code, out, errOut := runCmd(t, "autoresearch", "toy", "--gpu", "h100", "--iters", "6", "--workspace", ws, "--seed", "5"); code != 0 {
		t.Fatalf("autoresearch exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCmd(t, "export-amk", "--workspace", ws)
	if code != 0 {
		t.Fatalf("export-amk exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{campaign.AMKStateFile, campaign.AMKResultsFile, campaign.AMKOvernightJSON, campaign.AMKOvernightMD} {
		if !strings.Contains(out, filepath.Join(ws, f)) {
			t.Errorf("export-amk did not list %s:\n%s", f, out)
		}
	}
	var st campaign.StatusReport
	if code, out, errOut := runCmd(t, "status", "--workspace", ws, "--json"); code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	if st.ExperimentsRun == 0 || st.BestUS == nil {
		t.Fatalf("the campaign has no experiments or no best: %+v", st)
	}
	statePath := filepath.Join(ws, campaign.AMKStateFile)
	for verb, wants := range map[string][]string{
		"status": {"toy / h100", "experiments  : " + itoa(st.ExperimentsRun) + " (" + itoa(st.ExperimentsKept) + " kept)", "best " + fmt3(*st.BestUS) + "us"},
		"next":   {"DECISION:", "toy/h100"},
		"report": {"Report written to", "toy / h100"},
	} {
		got, err := python("amk_orchestrate.py", "--state", statePath, verb)
		if err != nil {
			t.Fatalf("AMK's amk_orchestrate.py %s: %v\n%s", verb, err, got)
		}
		if strings.Contains(got, "WARNING") {
			t.Errorf("AMK's orchestrator did not take the state:\n%s", got)
		}
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("amk_orchestrate.py %s does not show %q:\n%s", verb, want, got)
			}
		}
		if verb != "report" {
			continue
		}
		_, after, _ := strings.Cut(got, "Report written to ")
		path, _, _ := strings.Cut(after, "\n")
		report, err := os.ReadFile(strings.TrimSpace(path))
		if err != nil {
			t.Fatalf("AMK's report file: %v", err)
		}
		for _, want := range []string{"# AMK, Autoresearch Campaign Report", "Best schedule: **" + fmt3(*st.BestUS) + " us**", `"pipelining_depth"`} {
			if !strings.Contains(string(report), want) {
				t.Errorf("AMK's report does not show %q:\n%s", want, report)
			}
		}
	}
	rows, err := python("-c", "import sys; from flywheel.log import read_results; rows = read_results(sys.argv[1]); "+
		"print(len(rows), sorted(set(r['correctness'] for r in rows)))", filepath.Join(ws, campaign.AMKResultsFile))
	if err != nil {
		t.Fatalf("AMK's read_results: %v\n%s", err, rows)
	}
	if want := itoa(st.ExperimentsRun) + " ['PASS']"; strings.TrimSpace(rows) != want {
		t.Errorf("AMK's read_results found %q, want %q", strings.TrimSpace(rows), want)
	}
	// The overnight report carries the reference's keys.
	data, err := os.ReadFile(filepath.Join(ws, campaign.AMKOvernightJSON))
	if err != nil {
		t.Fatal(err)
	}
	var overnight map[string]any
	if err := json.Unmarshal(data, &overnight); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"campaign", "device", "elapsed_minutes", "iterations_this_run", "total_experiments", "kept",
		"correct", "rejected_or_failed", "crash_or_timeout", "basin_hop_restarts", "baseline_us", "best_us", "best_kind",
		"best_pct_of_roofline", "speedup_vs_baseline", "best_config", "improvement_milestones", "honesty"} {
		if _, ok := overnight[k]; !ok {
			t.Errorf("amk_overnight_report.json lacks AMK's key %q", k)
		}
	}
	if overnight["campaign"] != "toy / h100" || overnight["best_us"] != *st.BestUS {
		t.Errorf("overnight report campaign %v best %v, want toy / h100 and %v", overnight["campaign"], overnight["best_us"], *st.BestUS)
	}
	md, err := os.ReadFile(filepath.Join(ws, campaign.AMKOvernightMD))
	if err != nil || !strings.HasPrefix(string(md), "# AMK overnight run, wake-up report") {
		t.Errorf("amk_overnight_report.md: %v\n%.200s", err, md)
	}
	// A second campaign must be named: the files hold one.
	if code, _, _ := runCmd(t, "autoresearch", "toy-2L", "--gpu", "h100", "--iters", "1", "--workspace", ws); code != 0 {
		t.Fatal("second campaign")
	}
	if code, _, errOut := runCmd(t, "export-amk", "--workspace", ws); code == 0 || !strings.Contains(errOut, "toy") {
		t.Errorf("export-amk with two campaigns and none named: exit %d %s", code, errOut)
	}
	out2 := t.TempDir()
	if code, _, errOut := runCmd(t, "export-amk", "toy-2L", "--gpu", "h100", "--workspace", ws, "--out", out2); code != 0 {
		t.Fatalf("export-amk toy-2L: %s", errOut)
	}
	got, err := python("amk_orchestrate.py", "--state", filepath.Join(out2, campaign.AMKStateFile), "status")
	if err != nil || !strings.Contains(got, "toy-2L / h100") {
		t.Errorf("toy-2L export: %v\n%s", err, got)
	}
	entries, _ := os.ReadDir(out2)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{campaign.AMKStateFile, campaign.AMKOvernightJSON, campaign.AMKOvernightMD, campaign.AMKResultsFile}; !slices.Equal(names, want) {
		t.Errorf("--out holds %v, want %v", names, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// fmt3 is a latency as AMK's orchestrator prints it (Python's :.3f).
func fmt3(f float64) string { return fmt.Sprintf("%.3f", f) }
