package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/trial"
)

// TestEvalNamesIgnoredKeysAndMatchesTheReferenceID: a misspelt key is an
// error (exit 2, with the key meant) unless --ignore-unknown-keys, and then
// the verdict's notes and stderr name it; docs/spec/loop.md's cfg.json gets
// the reference's id; --batch reaches the pipeline.
func TestEvalNamesIgnoredKeysAndMatchesTheReferenceID(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	body := `{ "tiling": {"gemv": {"N_tile": 128}, "attention": {"kv_block": 128}},
		"fusion_grouping": [], "sm_assignment": "load_balance",
		"pipelining_depth": 3, "page_allocation": "graph_color",
		"threads_per_block": 256, "smem_bytes_per_block": 0, "tilling": {"gemv": {"N_tile": 512}} }`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--schedule", cfg)
	if code != exitBadInput || out != "" || !strings.Contains(errOut, `'tilling' (did you mean "tiling"?)`) || !strings.Contains(errOut, "--ignore-unknown-keys") {
		t.Errorf("a misspelt key: code %d, stdout %q, stderr %q; want exit 2 naming the key meant and the flag", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "eval", "toy", "--gpu", "h100", "--schedule", cfg, "--ignore-unknown-keys")
	var v trial.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("eval: code %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if v.ScheduleID != "sch_35332a9ac1" {
		t.Errorf("schedule id %s, want the reference's sch_35332a9ac1", v.ScheduleID)
	}
	if !strings.Contains(strings.Join(v.Notes, "|"), "'tilling'") || !strings.Contains(errOut, "'tilling'") {
		t.Errorf("the ignored key is not named: notes %q, stderr %q", v.Notes, errOut)
	}
	code, out, _ = runCmd(t, "eval", "toy", "--gpu", "h100", "--batch", "2")
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || !strings.Contains(strings.Join(v.Notes, "|"), "batch B=2") {
		t.Errorf("--batch 2: code %d, %v, notes %q", code, err, v.Notes)
	}
	if code, _, _ := runCmd(t, "eval", "toy", "--gpu", "h100", "--batch", "2", "--device", "cpu"); code != 0 {
		t.Errorf("--batch 2 on cpu: code %d", code)
	}
}

// TestEvalAnswersBadInputInOneLineWithExit2: an unknown model or GPU, or a
// config file that is not JSON, is bad input (exit 2): one short line on
// stderr with what was probably meant, no verdict.
func TestEvalAnswersBadInputInOneLineWithExit2(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("garbage{"), 0o644); err != nil {
		t.Fatal(err)
	}
	noSetting := filepath.Join(dir, "empty-object.json")
	if err := os.WriteFile(noSetting, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "smal", "--gpu", "h100"}, `did you mean "small"`},
		{[]string{"eval", "toy", "--gpu", "h2000"}, `did you mean "h200"?`},
		{[]string{"eval", "toy", "--gpu", "h100", "--schedule", garbage}, "not valid JSON"},
		{[]string{"eval", "toy", "--gpu", "h100", "--schedule", noSetting}, "sets no schedule setting"},
		{[]string{"eval", "toy", "--gpu", "h100", "--token-id", "-1"}, "--token-id -1 is outside"},
		{[]string{"eval", "toy", "--gpu", "h100", "--token-id", "256"}, "--token-id 256 is outside"},
		{[]string{"lower", "toy", "--gpu", "h2000"}, `did you mean "h200"?`},
		{[]string{"propose", "smal"}, `did you mean "small"`},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != exitBadInput || out != "" || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out, errOut, c.want)
		}
	}
	// A --schedule given empty is a flag error (with the pointer to -h),
	// not the default config evaluated in its place.
	for _, verb := range []string{"eval", "lower"} {
		code, out, errOut := runCmd(t, verb, "toy", "--gpu", "h100", "--schedule", "")
		if code != exitBadInput || out != "" || !strings.Contains(errOut, "--schedule is empty") {
			t.Errorf("%s --schedule '': code %d, stdout %.80q, stderr %q; want exit 2 naming the empty flag", verb, code, out, errOut)
		}
	}
}

// TestEvalTakesProposesAnswerAndNotesOffGridValues: propose's JSON, passed
// to eval as it is, evaluates its schedule_config (not the default with
// every key ignored); a value off the search grid gets a note.
func TestEvalTakesProposesAnswerAndNotesOffGridValues(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "inc.json")
	if err := os.WriteFile(inc, []byte(`{"tiling": {"gemv": {"N_tile": 128}}, "pipelining_depth": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, surface, errOut := runCmd(t, "propose", "toy", "--gpu", "h100", "--incumbent", inc)
	if code != 0 {
		t.Fatalf("propose: code %d: %s", code, errOut)
	}
	var doc struct {
		ScheduleID string `json:"schedule_id"`
	}
	if err := json.Unmarshal([]byte(surface), &doc); err != nil {
		t.Fatal(err)
	}
	answer := filepath.Join(dir, "propose.json")
	if err := os.WriteFile(answer, []byte(surface), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--schedule", answer)
	var v trial.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("eval of propose's answer: code %d, %v\n%s", code, err, errOut)
	}
	if v.ScheduleID != doc.ScheduleID || len(v.Notes) != 0 {
		t.Errorf("eval of propose's answer evaluated %s (notes %q), want the incumbent %s", v.ScheduleID, v.Notes, doc.ScheduleID)
	}
	off := filepath.Join(dir, "off.json")
	if err := os.WriteFile(off, []byte(`{"tiling": {"gemv": {"N_tile": 17}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, errOut = runCmd(t, "eval", "toy", "--gpu", "h100", "--schedule", off)
	if err := json.Unmarshal([]byte(out), &v); err != nil || !strings.Contains(strings.Join(v.Notes, "|"), "N_tile 17 is off the search grid") ||
		!strings.Contains(errOut, "off the search grid") {
		t.Errorf("N_tile 17: notes %q, stderr %q; want an off-grid note in both", v.Notes, errOut)
	}
}

// TestQueuesExplainsProcessedCounts: the text output says why a trials
// queue shows more processed tasks than results (11 vs 8 after a campaign
// with three retried attempts).
func TestQueuesExplainsProcessedCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"queue": "trials:h200", "processed_total": 11, "failed_total": 3},
			{"queue": "results", "processed_total": 8, "failed_total": 0}]`))
	}))
	defer srv.Close()
	code, out, errOut := runCmd(t, "--server", srv.URL, "queues")
	if code != 0 || !strings.Contains(out, "trials:h200") || !strings.Contains(out, control.QueueCountsNote) {
		t.Fatalf("queues: code %d\n%s\n%s", code, out, errOut)
	}
}

// --device auto picks the CPU on a machine (or a build) without a CUDA
// device and says so; propose --schema prints the config's JSON Schema.
func TestDeviceAutoAndProposeSchema(t *testing.T) {
	code, out, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--device", "auto")
	var v map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v["device"] != "cpu" || v["latency_kind"] != "predicted" {
		t.Fatalf("eval --device auto: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "--device auto: cpu") {
		t.Errorf("eval --device auto does not say which device it picked: %s", errOut)
	}
	if code, _, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--device", "tpu"); code != exitBadInput || !strings.Contains(errOut, "cpu, emu, cuda or auto") {
		t.Errorf("eval --device tpu: exit %d, %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "propose", "toy", "--gpu", "h100", "--device", "auto", "--schema")
	var schema map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &schema) != nil || schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("propose --schema: exit %d\n%s\n%s", code, out, errOut)
	}
	if props, _ := schema["properties"].(map[string]any); props["pipelining_depth"] == nil || props["kernel_knobs"] == nil {
		t.Errorf("propose --schema: properties %v", schema["properties"])
	}
}
