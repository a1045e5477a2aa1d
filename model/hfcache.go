package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/amk-dev/amk/inputfile"
)

// A HuggingFace model id ("ORG/NAME", optionally "ORG/NAME@REVISION") names
// a model in the local HuggingFace hub cache, laid out as huggingface_hub
// writes it:
//
//	<cache>/models--ORG--NAME/refs/main          the commit main points at
//	<cache>/models--ORG--NAME/snapshots/<commit>/config.json, *.safetensors
//	                                              (links into ../../blobs)
//
// The cache is $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. A
// revision is a ref name (a file under refs/) or a commit (a directory
// under snapshots/); no revision means main. amk never downloads: a model
// that is not in the cache is an error naming the path looked at.

// hfIDPattern is a HuggingFace repository id with an optional revision:
// the hub allows letters, digits, '-', '_' and '.' in both parts.
var hfIDPattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]{0,95})/([A-Za-z0-9][A-Za-z0-9._-]{0,95})(?:@([A-Za-z0-9][A-Za-z0-9._/-]{0,127}))?$`)

// HFModelID is a parsed HuggingFace model id.
type HFModelID struct {
	Org, Name, Revision string // Revision "" means main
}

// ParseHFModelID reads "ORG/NAME" or "ORG/NAME@REVISION"; ok is false for
// anything else (a preset name, a path with more parts).
func ParseHFModelID(s string) (HFModelID, bool) {
	m := hfIDPattern.FindStringSubmatch(s)
	if m == nil || strings.Contains(m[0], "..") {
		return HFModelID{}, false
	}
	return HFModelID{Org: m[1], Name: m[2], Revision: m[3]}, true
}

// HFHubCache returns the hub cache directory and the setting it came from
// (for error messages), reading the environment through getenv.
func HFHubCache(getenv func(string) string) (dir, from string) {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d, "HF_HUB_CACHE"
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub"), "HF_HOME"
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub"), "XDG_CACHE_HOME"
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".cache", "huggingface", "hub"), "the default, ~/.cache/huggingface/hub"
	}
	return "", "none: HF_HUB_CACHE, HF_HOME and HOME are unset"
}

// ErrNotInHFCache is wrapped by ResolveHFModel's error for a model (or a
// revision of it) that is not in the cache.
var ErrNotInHFCache = errors.New("not in the HuggingFace cache")

// maxRefBytes bounds a refs/<name> file (a 40-hex commit and a newline).
const maxRefBytes = 1024

// ResolveHFModel returns the snapshot directory of id in the hub cache
// getenv names (os.Getenv for the process's environment).
func ResolveHFModel(id HFModelID, getenv func(string) string) (string, error) {
	cache, from := HFHubCache(getenv)
	if cache == "" {
		return "", fmt.Errorf("%w: model %s/%s: no cache directory (%s)", ErrNotInHFCache, id.Org, id.Name, from)
	}
	repo := filepath.Join(cache, "models--"+id.Org+"--"+id.Name)
	missing := func(path, what string) error {
		return fmt.Errorf("%w: model %s/%s: %s: no %s (cache from %s; amk reads the cache, it never downloads)",
			ErrNotInHFCache, id.Org, id.Name, path, what, from)
	}
	if info, err := os.Stat(repo); err != nil || !info.IsDir() {
		return "", missing(repo, "such directory")
	}
	rev := id.Revision
	if rev == "" {
		rev = "main"
	}
	commit := rev
	refPath := filepath.Join(repo, "refs", filepath.FromSlash(rev))
	if data, err := inputfile.ReadFile(refPath, maxRefBytes); err == nil {
		commit = strings.TrimSpace(string(data))
		if commit == "" || strings.ContainsAny(commit, `/\`) || commit == "." || commit == ".." {
			return "", fmt.Errorf("%w: model %s/%s: %s does not hold a commit", ErrNotInHFCache, id.Org, id.Name, refPath)
		}
	} else if id.Revision == "" {
		return "", missing(refPath, "ref main (a revision may be named as ORG/NAME@COMMIT)")
	}
	snap := filepath.Join(repo, "snapshots", commit)
	if info, err := os.Stat(snap); err != nil || !info.IsDir() {
		return "", missing(snap, "snapshot of revision "+rev)
	}
	return snap, nil
}

// ParseCheckpointIndex reads a model.safetensors.index.json: the shard
// files its weight_map names, each once, sorted. A shard must be a plain
// file name (beside the index).
func ParseCheckpointIndex(data []byte) ([]string, error) {
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, err
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("weight_map is missing or empty")
	}
	seen := map[string]bool{}
	var shards []string
	for key, shard := range index.WeightMap {
		if shard == "" || filepath.IsAbs(shard) || strings.ContainsAny(shard, `/\`) || shard == "." || shard == ".." {
			return nil, fmt.Errorf("tensor %q names shard %q, not a file beside the index", key, shard)
		}
		if seen[shard] {
			continue
		}
		if seen[shard] = true; len(seen) > maxShards {
			return nil, fmt.Errorf("more than %d shards", maxShards)
		}
		shards = append(shards, shard)
	}
	slices.Sort(shards)
	return shards, nil
}

// maxIndexBytes bounds a model.safetensors.index.json.
const maxIndexBytes = 64 << 20

// maxShards bounds the shards an index may name.
const maxShards = 4096

// CheckpointFiles lists the safetensors files of a checkpoint directory: the
// shards model.safetensors.index.json names (each once, sorted), or
// model.safetensors alone; nil when the directory holds neither. A shard the
// index names that is missing, or a name that leaves the directory, is an
// error naming the index.
func CheckpointFiles(dir string) ([]string, error) {
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	data, err := inputfile.ReadFile(indexPath, maxIndexBytes)
	if errors.Is(err, os.ErrNotExist) {
		single := filepath.Join(dir, "model.safetensors")
		if _, err := os.Stat(single); err == nil {
			return []string{single}, nil
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	shards, err := ParseCheckpointIndex(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", indexPath, err)
	}
	files := make([]string, 0, len(shards))
	for _, shard := range shards {
		path := filepath.Join(dir, shard)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: shard %s: %w", indexPath, shard, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// ModelDir returns the directory a model argument's config.json lies in
// (a directory, a config.json path, or a HuggingFace id resolved in the
// cache of the process's environment); ok is false for a preset, and for
// a name that resolves to nothing (Load reports why).
func ModelDir(spec string) (dir string, ok bool) {
	dir, _, ok = modelDir(spec)
	return dir, ok
}

// HFRevision is the commit of the snapshot a model argument that is a
// HuggingFace id resolves to in the cache of the process's environment (a
// bare ORG/NAME follows refs/main): the revision its config and checkpoint
// were read from. It is "" for a preset, a path, and an id not in the
// cache.
func HFRevision(spec string) string {
	_, commit, _ := modelDir(spec)
	return commit
}

// modelDir is ModelDir, with the snapshot's commit when the directory is
// a HuggingFace id's snapshot.
func modelDir(spec string) (dir, commit string, ok bool) {
	name, _, err := SplitModelSpec(spec)
	if err != nil {
		return "", "", false
	}
	if _, err := Preset(name); err == nil {
		return "", "", false
	}
	if info, err := os.Stat(name); err == nil {
		if info.IsDir() {
			return name, "", true
		}
		return filepath.Dir(name), "", true
	}
	if id, isID := ParseHFModelID(name); isID {
		if snap, err := ResolveHFModel(id, os.Getenv); err == nil {
			return snap, filepath.Base(snap), true
		}
	}
	return "", "", false
}

// Checkpoint lists the safetensors files of the checkpoint beside a model
// argument's config.json (ModelDir: a directory, a config.json path, or a
// HuggingFace id resolved in the local cache): CheckpointFiles of that
// directory. It is nil for a preset, and for a directory that holds no
// checkpoint (the model then gets seeded weights).
func Checkpoint(spec string) ([]string, error) {
	dir, ok := ModelDir(spec)
	if !ok {
		return nil, nil
	}
	return CheckpointFiles(dir)
}
