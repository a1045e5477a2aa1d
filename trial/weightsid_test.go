package trial

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/model/hfcachetest"
)

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// The identity of a model's weights is what an evaluator on this host
// would load: seeded weights for a preset, a weights file or a checkpoint
// by base name, size and SHA-256 (a HuggingFace blob by its name, which is
// that digest), with the snapshot's commit for a HuggingFace id.
func TestIdentifyWeights(t *testing.T) {
	ctx := context.Background()
	seeded, err := IdentifyWeights(ctx, "toy", "")
	if err != nil || seeded.Kind != WeightsSeeded || seeded.Seed == nil || *seeded.Seed != WeightSeed || seeded.Files != nil || seeded.HFRevision != "" {
		t.Fatalf("a preset: %+v %v, want seeded weights of seed %d", seeded, err, WeightSeed)
	}
	if s := seeded.String(); s != "seeded weights (seed 0)" {
		t.Errorf("String() = %q", s)
	}

	file := filepath.Join(t.TempDir(), "w.safetensors")
	data := []byte("not parsed: only named, sized and hashed")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := IdentifyWeights(ctx, "toy", file)
	want := WeightsFileID{Name: "w.safetensors", Bytes: int64(len(data)), SHA256: sha256Hex(data)}
	if err != nil || id.Kind != WeightsFile || len(id.Files) != 1 || id.Files[0] != want || id.Seed != nil {
		t.Fatalf("a weights file: %+v %v, want %+v", id, err, want)
	}
	if s := id.String(); !strings.HasPrefix(s, "file w.safetensors (40 bytes, sha256 "+want.SHA256[:12]+"…)") {
		t.Errorf("String() = %q", s)
	}
	if _, err := IdentifyWeights(ctx, "toy", file+".missing"); err == nil {
		t.Error("a missing weights file was identified")
	}

	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	cfg, err := model.Load("toy")
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.InitWeights(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	snap := hfcachetest.Write(t, cache, "org", "toy", cfg, w, 2)
	id, err = IdentifyWeights(ctx, "org/toy", "")
	if err != nil || id.Kind != WeightsCheckpoint || id.HFRevision != hfcachetest.Commit || len(id.Files) != 2 {
		t.Fatalf("a HuggingFace checkpoint: %+v %v", id, err)
	}
	for _, f := range id.Files {
		data, err := os.ReadFile(filepath.Join(snap, f.Name))
		if err != nil || f.SHA256 != sha256Hex(data) || f.Bytes != int64(len(data)) {
			t.Fatalf("shard %+v does not identify its content (%v)", f, err)
		}
	}
	if !strings.Contains(id.String(), "at revision "+hfcachetest.Commit) {
		t.Errorf("String() = %q, want the revision", id.String())
	}

	// A blob named by the digest of its content is not read.
	blobs := filepath.Join(filepath.Dir(filepath.Dir(snap)), "blobs")
	named := strings.Repeat("0f", 32)
	if err := os.WriteFile(filepath.Join(blobs, named), []byte("other bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(snap, id.Files[0].Name)
	if err := os.Remove(shard); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..", "..", "blobs", named), shard); err != nil {
		t.Fatal(err)
	}
	again, err := IdentifyWeights(ctx, "org/toy", "")
	if err != nil || again.Files[0].SHA256 != named || again.Equal(id) {
		t.Fatalf("a blob named by its digest: %+v %v, want the name %s as its digest", again, err, named)
	}
}

// An evaluator refuses, before loading anything, a trial whose spec names
// other weights than those it would load (a refusal, like a device it does
// not have), saying both; the spec's own weights are evaluated; a
// campaign's spec that names none is evaluated, and its verdict says the
// weights were not checked.
func TestEvaluateRefusesATrialForOtherWeights(t *testing.T) {
	models := NewModelCache(0)
	spec := Spec{CampaignID: "c", TrialID: 1, Model: "toy", GPU: "h200", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken}
	spec.WeightsID = &WeightsID{Kind: WeightsCheckpoint,
		Files: []WeightsFileID{{Name: "model.safetensors", Bytes: 1_234_567_890, SHA256: strings.Repeat("ab", 32)}}}
	o := Evaluate(context.Background(), spec, Options{Models: models})
	if o.Verdict != nil || !o.Failure.Refusal() || o.Failure.Phase != PhaseWeights {
		t.Fatalf("a trial for a checkpoint this host lacks: %+v %+v, want a weights refusal", o.Verdict, o.Failure)
	}
	for _, want := range []string{"checkpoint model.safetensors (1.2 GB, sha256 abababababab…)", "this evaluator would use seeded weights (seed 0)", "put the checkpoint's files"} {
		if !strings.Contains(o.Failure.Message, want) {
			t.Errorf("refusal %q does not say %q", o.Failure.Message, want)
		}
	}

	own, err := IdentifyWeights(context.Background(), "toy", "")
	if err != nil {
		t.Fatal(err)
	}
	spec.WeightsID = &own
	o = Evaluate(context.Background(), spec, Options{Models: models})
	if v := o.Verdict; o.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || slices.Contains(v.Notes, NoteWeightsUnchecked) {
		t.Fatalf("a trial for this host's weights: %+v %+v", o.Verdict, o.Failure)
	}

	spec.WeightsID = nil
	o = Evaluate(context.Background(), spec, Options{Models: models})
	if v := o.Verdict; o.Failure != nil || v == nil || !slices.Contains(v.Notes, NoteWeightsUnchecked) {
		t.Fatalf("a campaign's spec naming no weights: %+v %+v, want a verdict noting it", o.Verdict, o.Failure)
	}
}

// stopsAfter is a context that ends after its Err has said nil n times.
type stopsAfter struct {
	context.Context
	n int
}

func (c *stopsAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// Hashing a weights file stops when its context ends, saying how far it
// got, and the next identification goes on from there to the file's
// digest.
func TestHashingAWeightsFileResumes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "big.safetensors")
	data := make([]byte, 10<<20)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := IdentifyWeights(&stopsAfter{Context: context.Background(), n: 1}, "toy", file)
	if !errors.Is(err, ErrHashing) || !strings.Contains(err.Error(), "4.2 MB of 10.5 MB of big.safetensors read") {
		t.Fatalf("a hash stopped after one read: %v, want ErrHashing saying how far it got", err)
	}
	_, err = IdentifyWeights(&stopsAfter{Context: context.Background(), n: 1}, "toy", file)
	if !errors.Is(err, ErrHashing) || !strings.Contains(err.Error(), "8.4 MB of 10.5 MB") {
		t.Fatalf("a second hash stopped after one read: %v, want it to have gone on from the first", err)
	}
	id, err := IdentifyWeights(context.Background(), "toy", file)
	if err != nil || id.Files[0].SHA256 != sha256Hex(data) {
		t.Fatalf("the resumed hash: %+v %v, want sha256 %s", id, err, sha256Hex(data))
	}
}
