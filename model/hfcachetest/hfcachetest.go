package hfcachetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/amk-dev/amk/model"
)

// Commit is the commit refs/main names in a cache Write lays out.
const Commit = "0123456789abcdef0123456789abcdef01234567"

// Write lays out cfg with weights w under cache as the model ORG/NAME
// (models--ORG--NAME), the weights split into nShards safetensors files
// (model-0000i-of-0000n.safetensors, tensors dealt out in turn by sorted
// HuggingFace key) with their index, and returns the snapshot directory.
func Write(t testing.TB, cache, org, name string, cfg model.Config, w model.Weights, nShards int) string {
	t.Helper()
	if nShards < 1 {
		t.Fatalf("hfcachetest: %d shards", nShards)
	}
	repo := filepath.Join(cache, "models--"+org+"--"+name)
	snap := filepath.Join(repo, "snapshots", Commit)
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
	if err := os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(Commit), 0o644); err != nil {
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
	return snap
}
