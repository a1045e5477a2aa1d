package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHFModelID(t *testing.T) {
	for s, want := range map[string]HFModelID{
		"meta-llama/Llama-3.2-1B":       {"meta-llama", "Llama-3.2-1B", ""},
		"TinyLlama/TinyLlama-1.1B@v1.0": {"TinyLlama", "TinyLlama-1.1B", "v1.0"},
		"org/name@refs/pr/1":            {"org", "name", "refs/pr/1"},
	} {
		if got, ok := ParseHFModelID(s); !ok || got != want {
			t.Errorf("%q: %+v %v, want %+v", s, got, ok, want)
		}
	}
	for _, s := range []string{"toy", "a/b/c", "/abs/path", "org/..", "org/name@../x", "./x", "org/"} {
		if got, ok := ParseHFModelID(s); ok {
			t.Errorf("%q parsed as an id: %+v", s, got)
		}
	}
}

func TestHFHubCacheOrder(t *testing.T) {
	env := map[string]string{"HF_HUB_CACHE": "/a", "HF_HOME": "/b", "XDG_CACHE_HOME": "/c", "HOME": "/d"}
	getenv := func(k string) string { return env[k] }
	for _, want := range []string{"/a", filepath.Join("/b", "hub"), filepath.Join("/c", "huggingface", "hub"), filepath.Join("/d", ".cache", "huggingface", "hub"), ""} {
		if got, _ := HFHubCache(getenv); got != want {
			t.Fatalf("cache %q, want %q (env %v)", got, want, env)
		}
		for _, k := range []string{"HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"} {
			if env[k] != "" {
				delete(env, k)
				break
			}
		}
	}
}

// ResolveHFModel follows refs/main (or a named ref) to its snapshot, takes
// a commit directly, and names the path it looked at when something is
// missing.
func TestResolveHFModel(t *testing.T) {
	cache := t.TempDir()
	getenv := func(k string) string {
		if k == "HF_HUB_CACHE" {
			return cache
		}
		return ""
	}
	repo := filepath.Join(cache, "models--org--m")
	for _, d := range []string{"refs", "snapshots/c1", "snapshots/c2"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(repo, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := HFModelID{Org: "org", Name: "m"}
	_, err := ResolveHFModel(id, getenv)
	if !errors.Is(err, ErrNotInHFCache) || !strings.Contains(err.Error(), filepath.Join(repo, "refs", "main")) {
		t.Fatalf("no refs/main: %v", err)
	}
	write("refs/main", "c1\n")
	write("refs/v2", "c2")
	for rev, want := range map[string]string{"": "c1", "v2": "c2", "c2": "c2"} {
		id.Revision = rev
		got, err := ResolveHFModel(id, getenv)
		if err != nil || got != filepath.Join(repo, "snapshots", want) {
			t.Errorf("revision %q: %q %v, want snapshot %s", rev, got, err, want)
		}
	}
	id.Revision = "c3"
	if _, err := ResolveHFModel(id, getenv); err == nil || !strings.Contains(err.Error(), filepath.Join(repo, "snapshots", "c3")) {
		t.Errorf("missing snapshot: %v", err)
	}
	write("refs/bad", "../../../etc")
	id.Revision = "bad"
	if _, err := ResolveHFModel(id, getenv); err == nil {
		t.Errorf("a ref leaving snapshots/ was followed")
	}
	if _, err := ResolveHFModel(HFModelID{Org: "other", Name: "m"}, getenv); err == nil ||
		!strings.Contains(err.Error(), filepath.Join(cache, "models--other--m")) || !strings.Contains(err.Error(), "HF_HUB_CACHE") {
		t.Errorf("missing model: %v", err)
	}
}

// CheckpointFiles reads the index's shards once each, refuses shards that
// leave the directory or are missing, and falls back to model.safetensors.
func TestCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	if files, err := CheckpointFiles(dir); err != nil || files != nil {
		t.Fatalf("empty directory: %v %v", files, err)
	}
	touch := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("model.safetensors", "")
	if files, err := CheckpointFiles(dir); err != nil || len(files) != 1 {
		t.Fatalf("single file: %v %v", files, err)
	}
	touch("b.safetensors", "")
	touch("a.safetensors", "")
	touch("model.safetensors.index.json", `{"weight_map": {"x": "b.safetensors", "y": "a.safetensors", "z": "b.safetensors"}}`)
	files, err := CheckpointFiles(dir)
	if err != nil || len(files) != 2 || filepath.Base(files[0]) != "a.safetensors" || filepath.Base(files[1]) != "b.safetensors" {
		t.Fatalf("index: %v %v", files, err)
	}
	for _, index := range []string{`{"weight_map": {"x": "../a.safetensors"}}`, `{"weight_map": {"x": "gone.safetensors"}}`, `{}`, `{"weight_map": 3}`} {
		touch("model.safetensors.index.json", index)
		if _, err := CheckpointFiles(dir); err == nil || !strings.Contains(err.Error(), "model.safetensors.index.json") {
			t.Errorf("index %s: %v", index, err)
		}
	}
}

// FuzzParseCheckpointIndex: never panics; every shard it returns is a
// plain file name, listed once, sorted.
func FuzzParseCheckpointIndex(f *testing.F) {
	f.Add([]byte(`{"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map": {"a": "../x"}}`))
	f.Add([]byte(`{"weight_map": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		shards, err := ParseCheckpointIndex(data)
		if err != nil {
			return
		}
		for i, s := range shards {
			if s == "" || strings.ContainsAny(s, `/\`) || s == ".." || filepath.IsAbs(s) || i > 0 && shards[i-1] >= s {
				t.Fatalf("shards %q", shards)
			}
		}
	})
}
