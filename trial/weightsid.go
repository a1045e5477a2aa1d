package trial

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/amk-dev/amk/model"
)

// Which weights a trial is evaluated on.
//
// A model's weights are resolved on the machine that evaluates it (the
// spec's weights file, else the model's checkpoint beside its config, else
// seeded weights: weightFiles), so two machines can evaluate one spec on
// different weights: a worker whose host lacks the checkpoint the
// campaign's host has would evaluate seeded ones. So a campaign states,
// when it is created, which weights its trials are for (IdentifyWeights on
// the creating host), every spec it issues carries that identity
// (Spec.WeightsID, covered by the spec's digest and, in a fleet with a
// secret, by its MAC), and Evaluate refuses a spec whose identity is not
// that of the weights this evaluator would load (an infrastructure failure
// of phase PhaseWeights, a refusal like that of a trial for a device the
// evaluator lacks).
//
// A file's content hash is its full SHA-256. A hash of the safetensors
// header (tensor names, dtypes, shapes and offsets) and the sizes would be
// cheaper, but a fine-tune has exactly its base model's header and size,
// so it would not tell them apart. The full hash is read once per file and
// process: digests are kept by (path, size, modification time), so a
// campaign's creation hashes its files once and an evaluator hashes each
// file it serves once, never once per trial; a hash stopped by its context
// (a create request's timeout) goes on from where it stopped at the next
// call (ErrHashing). A file of the HuggingFace cache is a link to
// blobs/<the SHA-256 of its content> (huggingface_hub names the blobs of
// large files so): that name is its digest, and the file is not read.

// Kinds of weights (WeightsID.Kind).
const (
	// WeightsSeeded: weights generated from a seed (WeightSeed).
	WeightsSeeded = "seeded"
	// WeightsCheckpoint: the model's own checkpoint, beside its config
	// (model.Checkpoint).
	WeightsCheckpoint = "checkpoint"
	// WeightsFile: the safetensors file the spec names (Spec.Weights).
	WeightsFile = "file"
)

// WeightsID identifies the weights a model is evaluated on.
type WeightsID struct {
	Kind string `json:"kind"`
	// Seed is the seed of seeded weights.
	Seed *uint64 `json:"seed,omitempty"`
	// Files are the safetensors files of a checkpoint or weights file, in
	// the order they are read.
	Files []WeightsFileID `json:"files,omitempty"`
	// HFRevision is the commit of the HuggingFace snapshot the model's
	// config (and checkpoint) were read from, for a model named by a
	// HuggingFace id (model.HFRevision).
	HFRevision string `json:"hf_revision,omitempty"`
}

// WeightsFileID identifies one weights file by its base name, size and
// content.
type WeightsFileID struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Equal reports whether w and o name the same weights.
func (w WeightsID) Equal(o WeightsID) bool {
	sameSeed := (w.Seed == nil) == (o.Seed == nil) && (w.Seed == nil || *w.Seed == *o.Seed)
	return w.Kind == o.Kind && sameSeed && w.HFRevision == o.HFRevision && slices.Equal(w.Files, o.Files)
}

// String names the weights for a reader: "seeded weights (seed 0)", or
// "checkpoint model.safetensors (1.2 GB, sha256 ab12cd34ef56…)" (the
// first three files of a checkpoint), with the HuggingFace revision.
func (w WeightsID) String() string {
	var s string
	if w.Kind == WeightsSeeded {
		s = "seeded weights"
		if w.Seed != nil {
			s += fmt.Sprintf(" (seed %d)", *w.Seed)
		}
	} else {
		var files []string
		for i, f := range w.Files {
			if i == 3 {
				files = append(files, fmt.Sprintf("and %d more", len(w.Files)-i))
				break
			}
			files = append(files, fmt.Sprintf("%s (%s, sha256 %s…)", f.Name, sizeText(f.Bytes), short(f.SHA256)))
		}
		s = w.Kind + " " + strings.Join(files, ", ")
	}
	if w.HFRevision != "" {
		s += " at revision " + w.HFRevision
	}
	return s
}

// sizeText is a byte count in decimal units, for messages.
func sizeText(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

// weightFiles are the safetensors files an evaluator reads a model's
// weights from: the weights file when one is named, else the model's
// checkpoint (fromCheckpoint), else none (seeded weights).
func weightFiles(name, weightsPath string) (files []string, fromCheckpoint bool, err error) {
	if weightsPath != "" {
		return []string{weightsPath}, false, nil
	}
	if files, err = model.Checkpoint(name); err != nil {
		return nil, false, fmt.Errorf("the checkpoint of %s: %w", name, err)
	}
	return files, len(files) > 0, nil
}

// IdentifyWeights is the identity of the weights an evaluator on this host
// loads for a model and weights file (a spec's Model and Weights): the
// files it reads, or seeded weights. Hashing a file stops when ctx ends.
func IdentifyWeights(ctx context.Context, name, weightsPath string) (WeightsID, error) {
	files, fromCheckpoint, err := weightFiles(name, weightsPath)
	if err != nil {
		return WeightsID{}, err
	}
	id := WeightsID{Kind: WeightsFile, HFRevision: model.HFRevision(name)}
	switch {
	case len(files) == 0:
		seed := uint64(WeightSeed)
		id.Kind, id.Seed = WeightsSeeded, &seed
		return id, nil
	case fromCheckpoint:
		id.Kind = WeightsCheckpoint
	}
	for _, path := range files {
		info, err := os.Stat(path)
		if err != nil {
			return WeightsID{}, fmt.Errorf("weights file: %w", err)
		}
		if !info.Mode().IsRegular() {
			return WeightsID{}, fmt.Errorf("weights file %s is not a regular file", path)
		}
		sum, err := fileDigests.sum(ctx, path, info)
		if err != nil {
			return WeightsID{}, fmt.Errorf("weights file %s: %w", path, err)
		}
		id.Files = append(id.Files, WeightsFileID{Name: filepath.Base(path), Bytes: info.Size(), SHA256: sum})
	}
	return id, nil
}

// weightsRefusal refuses, before anything is loaded, a spec that names
// weights (Spec.WeightsID) other than those this evaluator loads for its
// model; nil when they are the same, or when the spec names none (a spec
// issued before weights were identified: evaluated unchecked, and its
// verdict says so).
func weightsRefusal(ctx context.Context, spec Spec) *Failure {
	want := spec.WeightsID
	if want == nil {
		return nil
	}
	have, err := IdentifyWeights(ctx, spec.Model, spec.Weights)
	if f := ctxFailure(ctx.Err(), "load-model"); f != nil {
		return f
	}
	here := "this evaluator would use " + have.String()
	switch {
	case err != nil:
		here = fmt.Sprintf("this evaluator cannot identify its weights for %s (%v)", spec.Model, err)
	case have.Equal(*want):
		return nil
	}
	var hint string
	switch {
	case want.HFRevision != "" && want.HFRevision != have.HFRevision:
		hint = fmt.Sprintf("put snapshot %s of %s in this host's HuggingFace cache", want.HFRevision, spec.Model)
	case want.Kind == WeightsFile:
		hint = fmt.Sprintf("put that file at %s on this host", spec.Weights)
	case want.Kind == WeightsCheckpoint:
		where := spec.Model
		if dir, ok := model.ModelDir(spec.Model); ok {
			where = dir
		}
		hint = fmt.Sprintf("put the checkpoint's files beside the model's config (%s) on this host", where)
	default:
		hint = "this host has weights for the model that the campaign's host had not: serve the campaign from hosts without them, or create it again where they are"
	}
	return &Failure{Class: FailInfra, Phase: PhaseWeights, Message: fmt.Sprintf(
		"the campaign's trials are for %s, %s: %s; refused before evaluating", want, here, hint)}
}

// fileDigests keeps the SHA-256 of the files this process hashed.
var fileDigests = &digestCache{sums: map[digestKey]*digestEntry{}}

// maxDigests bounds the digests kept (a process serves a few models).
const maxDigests = 1024

// digestCache keeps file digests by (path, size, modification time); a
// file hashed by two callers at once is read once.
type digestCache struct {
	mu   sync.Mutex
	sums map[digestKey]*digestEntry
}

type digestKey struct {
	path    string
	size    int64
	modTime int64 // Unix nanoseconds
}

type digestEntry struct {
	mu  sync.Mutex
	sum string // "" until hashed
	// h has read the file's first done bytes, when a hash that ctx
	// stopped is to resume there.
	h    hash.Hash
	done int64
}

// hfBlobName is the name huggingface_hub gives a large file's blob: the
// hex SHA-256 of its content.
var hfBlobName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// sum is the hex SHA-256 of the regular file at path (info is its Stat).
func (c *digestCache) sum(ctx context.Context, path string, info os.FileInfo) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if name := filepath.Base(real); hfBlobName.MatchString(name) && filepath.Base(filepath.Dir(real)) == "blobs" {
		return name, nil
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	key := digestKey{path: real, size: info.Size(), modTime: info.ModTime().UnixNano()}
	c.mu.Lock()
	e, ok := c.sums[key]
	if !ok {
		if len(c.sums) >= maxDigests {
			clear(c.sums)
		}
		e = &digestEntry{}
		c.sums[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sum != "" {
		return e.sum, nil
	}
	if e.h == nil {
		e.h, e.done = sha256.New(), 0
	}
	if err := e.read(ctx, real, key.size); err != nil {
		return "", err
	}
	if after, err := os.Stat(real); err != nil || after.Size() != key.size || after.ModTime().UnixNano() != key.modTime {
		e.h = nil
		return "", fmt.Errorf("%s changed while it was hashed", real)
	}
	e.sum, e.h = hex.EncodeToString(e.h.Sum(nil)), nil
	return e.sum, nil
}

// ErrHashing is wrapped by IdentifyWeights's error when ctx ended before a
// weights file was hashed: the hash resumes where it stopped at the next
// call.
var ErrHashing = errors.New("the weights are still being hashed")

// read feeds the rest of the file at path (size bytes) to e.h, stopping
// when ctx ends; what was read stays read. e.mu is held.
func (e *digestEntry) read(ctx context.Context, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(e.done, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s of %s of %s read (%v); asking again goes on from there",
				ErrHashing, sizeText(e.done), sizeText(size), filepath.Base(path), ctx.Err())
		}
		n, err := f.Read(buf)
		e.h.Write(buf[:n])
		e.done += int64(n)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			e.h = nil // start over
			return err
		}
	}
}
