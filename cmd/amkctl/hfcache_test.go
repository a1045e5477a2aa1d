package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/model/hfcachetest"
	"github.com/amk-dev/amk/trial"
)

// amkctl generate ORG/NAME --verify decodes a sharded checkpoint found in
// the HuggingFace cache: the config and every shard come from the
// snapshot main points at, and the tokens are the eager oracle's on those
// weights (not the seeded weights a preset would get).
func TestGenerateHFIDFromShardedCache(t *testing.T) {
	cfg, w := hfToy(t)
	e, err := model.NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Greedy([]int32{1, 2, 3}, 6)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "generate", "tiny-org/toy-sharded", "--gpu", "h100", "--prompt-ids", "1,2,3", "--max-tokens", "6", "--verify")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if strings.TrimSpace(out) != strings.TrimSpace(fmt.Sprint(want)[1:len(fmt.Sprint(want))-1]) {
		t.Errorf("tokens %q, want the eager decode of the checkpoint's weights %v", out, want)
	}
	if n := strings.Count(errOut, "-of-00003.safetensors"); n != 3 {
		t.Errorf("stderr names %d of the 3 shards:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, "tokens identical") {
		t.Errorf("no verification summary:\n%s", errOut)
	}
}

// A HuggingFace id that is not in the cache is bad input, and the error
// names the directory amk looked in.
func TestGenerateHFIDNotInCacheNamesThePath(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	code, _, errOut := runCmd(t, "generate", "meta-llama/Llama-3.2-1B", "--prompt-ids", "1")
	if code != exitBadInput {
		t.Fatalf("exit %d, want %d: %s", code, exitBadInput, errOut)
	}
	if want := filepath.Join(cache, "models--meta-llama--Llama-3.2-1B"); !strings.Contains(errOut, want) || !strings.Contains(errOut, "HF_HUB_CACHE") {
		t.Errorf("the error does not name %s and HF_HUB_CACHE:\n%s", want, errOut)
	}
}

// hfToy lays out toy with its own (non-seeded) weights as the sharded
// checkpoint tiny-org/toy-sharded in a fresh HuggingFace cache, and points
// HF_HOME at it.
func hfToy(t *testing.T) (model.Config, model.Weights) {
	t.Helper()
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitWeights(cfg, 424242) // not trial.WeightSeed: the decode must read these
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	hfcachetest.Write(t, filepath.Join(home, "hub"), "tiny-org", "toy-sharded", cfg, w, 3)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", home)
	return cfg, w
}

// eval and autoresearch with a HuggingFace id check every trial on the
// checkpoint's weights, every shard (the verdicts say so), as generate
// decodes them.
func TestEvalAndAutoresearchHFIDReadTheCheckpoint(t *testing.T) {
	hfToy(t)
	code, out, errOut := runCmd(t, "eval", "tiny-org/toy-sharded", "--gpu", "h100", "--pos", "3")
	var v trial.Verdict
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("eval: exit %d\n%s%s", code, out, errOut)
	}
	if !slices.ContainsFunc(v.Notes, func(n string) bool {
		return strings.HasPrefix(n, trial.CheckpointNotePrefix) && strings.Contains(n, "3 file(s)")
	}) {
		t.Errorf("eval's verdict does not name the checkpoint it was checked on: %q", v.Notes)
	}

	ws := t.TempDir()
	code, _, errOut = runCmd(t, "autoresearch", "tiny-org/toy-sharded", "--gpu", "h100", "--iters", "2", "--prompt-len", "16", "--gen-len", "4", "--workspace", ws)
	if code != exitOK {
		t.Fatalf("autoresearch: exit %d\n%s", code, errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(ws, "campaigns", "*", "trials.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("want one campaign's trial log, found %v", logs)
	}
	journal, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(journal)) {
		if strings.Contains(line, trial.CheckpointNotePrefix) {
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d trials name the checkpoint, want every one of the 2:\n%s", n, journal)
	}
}
