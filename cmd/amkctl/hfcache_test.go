package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
)

// writeHFCache lays out cfg with weights w as huggingface_hub caches a
// model: models--ORG--NAME/refs/main naming a commit,
// snapshots/<commit>/{config.json, model.safetensors.index.json, shards}
// as links into blobs/, the weights split into nShards files.
func writeHFCache(t *testing.T, cache, org, name string, cfg model.Config, w model.Weights, nShards int) {
	t.Helper()
	repo := filepath.Join(cache, "models--"+org+"--"+name)
	const commit = "0123456789abcdef0123456789abcdef01234567"
	snap := filepath.Join(repo, "snapshots", commit)
	for _, d := range []string{filepath.Join(repo, "blobs"), filepath.Join(repo, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	blob := 0
	put := func(file string, data []byte) { // the blob, and the snapshot's link to it
		blob++
		b := fmt.Sprintf("blob%02d", blob)
		if err := os.WriteFile(filepath.Join(repo, "blobs", b), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", b), filepath.Join(snap, file)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	conf, err := model.HFConfigJSON(cfg)
	if err != nil {
		t.Fatal(err)
	}
	put("config.json", conf)
	hf, err := model.ToHFKeys(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(hf))
	for k := range hf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	weightMap := map[string]string{}
	for s := range nShards {
		shard := model.Weights{}
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, nShards)
		for i := s; i < len(keys); i += nShards {
			shard[keys[i]] = hf[keys[i]]
			weightMap[keys[i]] = file
		}
		var buf bytes.Buffer
		if err := model.WriteSafetensors(&buf, shard); err != nil {
			t.Fatal(err)
		}
		put(file, buf.Bytes())
	}
	index, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": w.Bytes()}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	put("model.safetensors.index.json", index)
}

// amkctl generate ORG/NAME --verify decodes a sharded checkpoint found in
// the HuggingFace cache: the config and every shard come from the
// snapshot main points at, and the tokens are the eager oracle's on those
// weights (not the seeded weights a preset would get).
func TestGenerateHFIDFromShardedCache(t *testing.T) {
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitWeights(cfg, 424242) // not trial.WeightSeed: the decode must read these
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	writeHFCache(t, filepath.Join(home, "hub"), "tiny-org", "toy-sharded", cfg, w, 3)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", home)

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
