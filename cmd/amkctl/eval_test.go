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

// TestEvalNamesIgnoredKeysAndMatchesTheReferenceID: a misspelt key is not
// an error, but the verdict's notes and stderr name it; docs/spec/loop.md's cfg.json
// gets the reference's id; --batch reaches the pipeline.
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
	if code, _, errOut := runCmd(t, "eval", "toy", "--gpu", "h100", "--device", "tpu"); code != exitBadInput || !strings.Contains(errOut, "cpu, cuda or auto") {
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
