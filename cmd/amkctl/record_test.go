package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordReadsItsScheduleLikeEval: record --schedule reads the config
// as eval does: a key amk does not know is bad input (exit 2, naming the
// key meant and --ignore-unknown-keys) and nothing is recorded; with the
// flag the key is named on stderr and the experiment is recorded; propose's
// whole answer stands for its schedule_config.
func TestRecordReadsItsScheduleLikeEval(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if code, _, errOut := runCmd(t, "start", "toy", "--gpu", "h100", "--workspace", ws); code != 0 {
		t.Fatalf("start: %d %s", code, errOut)
	}
	misspelt := filepath.Join(dir, "cfg.json")
	if err := os.WriteFile(misspelt, []byte(`{"pipelining_depth": 3, "tilling": {"gemv": {"N_tile": 512}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	record := func(extra ...string) (int, string, string) {
		return runCmd(t, append([]string{"record", "tried", "toy", "--gpu", "h100", "--workspace", ws, "--correctness", "FAIL"}, extra...)...)
	}
	code, out, errOut := record("--schedule", misspelt)
	if code != exitBadInput || out != "" || !strings.Contains(errOut, `'tilling' (did you mean "tiling"?)`) || !strings.Contains(errOut, "--ignore-unknown-keys") {
		t.Errorf("a misspelt key: code %d, stdout %q, stderr %q; want exit 2 naming the key meant and the flag", code, out, errOut)
	}
	code, out, errOut = record("--schedule", misspelt, "--ignore-unknown-keys")
	if code != 0 || !strings.Contains(out, "recorded experiment 1") || !strings.Contains(errOut, "ignoring unknown config key 'tilling'") {
		t.Errorf("with --ignore-unknown-keys: code %d, stdout %q, stderr %q; want the experiment recorded and the key named", code, out, errOut)
	}
	surface := filepath.Join(dir, "surface.json")
	if err := os.WriteFile(surface, []byte(`{"id": "x", "schedule_config": {"pipelining_depth": 2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = record("--schedule", surface)
	if code != 0 || !strings.Contains(out, "recorded experiment 2") || !strings.Contains(errOut, "propose's answer") {
		t.Errorf("propose's answer: code %d, stdout %q, stderr %q; want its schedule_config recorded", code, out, errOut)
	}
}
