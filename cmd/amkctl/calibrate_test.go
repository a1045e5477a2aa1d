package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/schedule"
)

// syntheticVerdicts writes verdicts of toy from amkctl eval (CPU, predicted)
// at several points and positions into dir, relabelled measured-gpu with
// their prediction x 1.25 (+ a little per file): SYNTHETIC test data, not
// measurements. It returns the untouched predicted verdict of the last.
func syntheticVerdicts(t *testing.T, dir string) []byte {
	t.Helper()
	pts := map[string]schedule.Point{"ref": schedule.Default(), "dev": schedule.DeviceDefault(), "ff": schedule.FullyFused()}
	var last []byte
	for name, p := range pts {
		raw, _ := json.Marshal(p)
		cfg := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(cfg, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		for i, pos := range []string{"0", "40", "200"} {
			code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--schedule", cfg, "--pos", pos)
			if code != exitOK {
				t.Fatalf("eval %s pos %s: %d %s", name, pos, code, errOut)
			}
			last = []byte(out)
			var v map[string]any
			if err := json.Unmarshal(last, &v); err != nil {
				t.Fatal(err)
			}
			v["latency_kind"], v["device"] = "measured-gpu", "synthetic"
			v["latency_us"] = v["latency_us"].(float64)*1.25 + 0.1*float64(i)
			b, _ := json.Marshal(v)
			if err := os.WriteFile(filepath.Join(dir, name+"-"+pos+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return last
}

func TestCalibrateVerb(t *testing.T) {
	dir := t.TempDir()
	predicted := syntheticVerdicts(t, dir)
	costs := filepath.Join(t.TempDir(), "costs.json")
	if err := os.WriteFile(costs, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, "calibrate", dir, "--target", "h100", "--date", "2026-11-24", "--costs-file", costs, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, err := schedule.ParseCostRecords([]byte(out))
	if err != nil {
		t.Fatalf("--json output is not a data file: %v\n%s", err, out)
	}
	rec, ok := recs["h100"]
	if !ok || rec.Provenance.Points != 9 || rec.Provenance.Date != "2026-11-24" || rec.Provenance.Device != "synthetic" ||
		!(rec.Provenance.RMSLogErrorAfter < rec.Provenance.RMSLogErrorBefore) || !strings.HasPrefix(rec.Provenance.Command, "amkctl calibrate --gpu h100 ") {
		t.Fatalf("record %+v", rec)
	}
	if strings.Contains(rec.Provenance.Command, string(filepath.Separator)) {
		t.Errorf("the provenance command names a host path: %q", rec.Provenance.Command)
	}
	if data, _ := os.ReadFile(costs); string(data) != "{}\n" {
		t.Fatalf("the data file changed without --write: %s", data)
	}

	code, out, errOut = runCmd(t, "calibrate", dir, "--gpu", "h100", "--date", "2026-11-24", "--costs-file", costs, "--write")
	if code != exitOK {
		t.Fatalf("--write: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"| point | measured µs | predicted before µs | predicted after µs | error before | error after |", "toy pos 40 ", "```json"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(costs)
	if err != nil {
		t.Fatal(err)
	}
	if written, err := schedule.ParseCostRecords(data); err != nil || written["h100"].Provenance.Points != 9 {
		t.Fatalf("written file: %v\n%s", err, data)
	}

	// A predicted verdict among them refuses the lot, naming the file.
	if err := os.WriteFile(filepath.Join(dir, "predicted.json"), predicted, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "calibrate", dir, "--date", "2026-11-24", "--costs-file", costs)
	if code != exitBadInput || !strings.Contains(errOut, "predicted.json: latency_kind predicted, not measured-gpu") {
		t.Fatalf("a predicted verdict: exit %d, %s", code, errOut)
	}
	if err := os.Remove(filepath.Join(dir, "predicted.json")); err != nil {
		t.Fatal(err)
	}
	// A campaign's trials log: its measured verdicts count, the rest is skipped.
	var log strings.Builder
	entries, _ := os.ReadDir(dir)
	for i, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&log, "{\"trial_id\": %d, \"verdict\": %s}\n", i, data)
	}
	log.WriteString(`{"trial_id": 99, "failure": {"class": "crash", "message": "trap"}}` + "\n")
	trials := filepath.Join(t.TempDir(), "trials.jsonl")
	if err := os.WriteFile(trials, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "calibrate", trials, "--date", "2026-11-24", "--costs-file", costs, "--json")
	if code != exitOK || !strings.Contains(errOut, "1 campaign trials skipped") {
		t.Fatalf("trials log: exit %d, %s", code, errOut)
	}
	if recs, err := schedule.ParseCostRecords([]byte(out)); err != nil || recs["h100"].Provenance.Points != 9 {
		t.Fatalf("trials log: %v\n%s", err, out)
	}

	for name, args := range map[string][]string{
		"no verdicts":     {"calibrate"},
		"foreign target":  {"calibrate", dir, "--gpu", "h200"},
		"unknown target":  {"calibrate", dir, "--gpu", "h900"},
		"unknown fit":     {"calibrate", dir, "--fit", "bw"},
		"missing file":    {"calibrate", filepath.Join(dir, "nope.json")},
		"empty directory": {"calibrate", t.TempDir()},
		"bad date":        {"calibrate", dir, "--date", "yesterday"},
		"too few points":  {"calibrate", filepath.Join(dir, "ref-0.json"), filepath.Join(dir, "dev-0.json")},
	} {
		if code, _, errOut := runCmd(t, args...); code != exitBadInput {
			t.Errorf("%s: exit %d, want %d (%s)", name, code, exitBadInput, errOut)
		}
	}
}
