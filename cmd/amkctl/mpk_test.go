package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mpkTestdata = "../../ir/mpk/testdata"

// validate recognises an MPK task graph, says so, and keeps its exit codes.
func TestValidateRecognisesMPKGraphs(t *testing.T) {
	good := filepath.Join(mpkTestdata, "good", "hand_mirage.json")
	bad := filepath.Join(mpkTestdata, "bad", "hand_mirage.missing-trigger.json")
	code, out, _ := runCmd(t, "validate", good)
	if code != exitOK || !strings.HasPrefix(out, "MPK task graph: VALID (7 tasks, 5 events") {
		t.Fatalf("good: code %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "validate", bad)
	if code != exitRejected || !strings.HasPrefix(out, "MPK task graph: REJECTED") || !strings.Contains(out, "error[deadlock]: event e3 (EVENT_EMPTY)") {
		t.Fatalf("bad: code %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "validate", bad, "--json")
	var rep struct {
		Format string `json:"format"`
		OK     bool   `json:"ok"`
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitRejected || rep.Format != "mpk-task-graph" || rep.OK || rep.Errors[0].Code != "deadlock" {
		t.Fatalf("json: code %d, %v\n%s", code, err, out)
	}
	malformed := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(malformed, []byte(`{"all_tasks": [{"task_type": "x"}], "all_events": [], "first_tasks": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "validate", malformed)
	if code != exitBadInput || !strings.Contains(errOut, "all_tasks[0].task_type") {
		t.Fatalf("malformed: code %d\n%s", code, errOut)
	}
}

// lower --format mpk writes a graph validate accepts and mpk import turns
// back into the very program lower writes.
func TestLowerFormatMPKRoundTrip(t *testing.T) {
	dir := t.TempDir()
	graph, prog, back := filepath.Join(dir, "g.json"), filepath.Join(dir, "p.json"), filepath.Join(dir, "b.json")
	for _, args := range [][]string{
		{"lower", "toy", "--gpu", "h100", "--format", "mpk", "-o", graph},
		{"lower", "toy", "--gpu", "h100", "-o", prog},
		{"validate", graph},
		{"mpk", "import", graph, "-o", back},
	} {
		if code, out, errOut := runCmd(t, args...); code != exitOK {
			t.Fatalf("%v: code %d\n%s%s", args, code, out, errOut)
		}
	}
	a, _ := os.ReadFile(prog)
	b, _ := os.ReadFile(back)
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("amk -> MPK -> amk changed the program")
	}
	if code, _, errOut := runCmd(t, "lower", "toy", "--format", "onnx"); code != exitBadInput || !strings.Contains(errOut, "--format") {
		t.Fatalf("unknown format: code %d %s", code, errOut)
	}
}

// mpk rank gives valid graphs a predicted latency, fastest first, and none
// to a rejected graph.
func TestMPKRankLabelsPredicted(t *testing.T) {
	files := []string{
		filepath.Join(mpkTestdata, "good", "export_toy.json"),
		filepath.Join(mpkTestdata, "good", "hand_mirage.json"),
		filepath.Join(mpkTestdata, "bad", "hand_mirage.cycle.json"),
	}
	code, out, errOut := runCmd(t, append([]string{"mpk", "rank", "--gpu", "h100", "--json"}, files...)...)
	var ranked []struct {
		Rank        int     `json:"rank"`
		File        string  `json:"file"`
		LatencyUS   float64 `json:"latency_us"`
		LatencyKind string  `json:"latency_kind"`
	}
	if err := json.Unmarshal([]byte(out), &ranked); err != nil || code != exitRejected || len(ranked) != 2 {
		t.Fatalf("code %d, %v\n%s%s", code, err, out, errOut)
	}
	if ranked[0].LatencyUS > ranked[1].LatencyUS || ranked[0].LatencyKind != "predicted" || ranked[1].Rank != 2 {
		t.Fatalf("ranking %+v", ranked)
	}
	if !strings.Contains(errOut, "hand_mirage.cycle.json: no latency without a PASS") {
		t.Fatalf("stderr: %s", errOut)
	}
}

// mpk check answers in its own name and in a task graph's terms, and
// mpk import and export confirm the file they wrote.
func TestMPKCheckAndImportSpeakForThemselves(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "mpk", "check", empty)
	if code != exitBadInput || !strings.HasPrefix(errOut, "amkctl mpk check: ") || !strings.Contains(errOut, "all_tasks") || strings.Contains(errOut, "ir_version") {
		t.Errorf("mpk check {}: code %d, %q", code, errOut)
	}
	back := filepath.Join(dir, "prog.json")
	code, out, errOut := runCmd(t, "mpk", "import", filepath.Join(mpkTestdata, "good", "export_toy.json"), "-o", back)
	if code != exitOK || out != "" || !strings.HasPrefix(errOut, "wrote "+back+": an amk program: ") || !strings.Contains(errOut, " tasks") {
		t.Errorf("mpk import -o: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	graph := filepath.Join(dir, "graph.json")
	code, _, errOut = runCmd(t, "mpk", "export", back, "-o", graph)
	if code != exitOK || !strings.HasPrefix(errOut, "wrote "+graph+": an MPK task graph: ") {
		t.Errorf("mpk export -o: code %d, stderr %q", code, errOut)
	}
}
