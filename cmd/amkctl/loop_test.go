package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/flywheel"
)

// TestLoopAndReferencePaths: seed 001's loop verb runs --budget trials, and
// the reference's --state/--results/--corpus flags select amk's workspace
// and corpus.
func TestLoopAndReferencePaths(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "flywheel-elsewhere", "corpus.jsonl")
	code, out, errOut := runCmd(t, "loop", "toy", "--gpu", "h200", "--budget", "3",
		"--state", filepath.Join(dir, "amk_orchestration_state.json"), "--results", filepath.Join(dir, "results.tsv"),
		"--corpus", corpus, "--workers", "1")
	if code != 0 || !strings.Contains(out, "experiments  : 3") {
		t.Fatalf("loop: code %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "campaigns/<id>/results.tsv") {
		t.Errorf("no note says where results go:\n%s", errOut)
	}
	rows, err := flywheel.ReadRows(filepath.Join(dir, "campaigns", "toy-h200-cpu", "results.tsv"))
	if err != nil || len(rows) != 3 {
		t.Fatalf("results: %d rows, %v", len(rows), err)
	}
	if _, err := os.Stat(corpus); err != nil {
		t.Errorf("--corpus was not the corpus written: %v", err)
	}
	code, _, errOut = runCmd(t, "loop", "toy", "--gpu", "h200", "--budget", "1",
		"--state", filepath.Join(dir, "a", "s.json"), "--results", filepath.Join(dir, "b", "results.tsv"))
	if code != 2 || !strings.Contains(errOut, "one workspace") {
		t.Errorf("disagreeing paths: code %d %s", code, errOut)
	}
	code, _, _ = runCmd(t, "autoresearch", "toy", "--gpu", "h200", "--iters", "2", "--batch", "2", "--workspace", filepath.Join(dir, "b2"), "--name", "b2")
	if code != 0 {
		t.Errorf("autoresearch --batch 2: code %d", code)
	}
}
