package trial

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/model/hfcachetest"
)

// sameWeights names the first tensor of check (a model, or its truncation)
// whose values differ between got, keyed as the checkpoint's config names
// them (gotCfg), and want, keyed as wantCfg names them; "" when none does.
// Keys lists the tensors in the same order for both namings.
func sameWeights(got model.Weights, gotCfg model.Config, want model.Weights, wantCfg model.Config, layers int) string {
	gotCfg.NLayers, wantCfg.NLayers = layers, layers
	gk, wk := model.Keys(gotCfg), model.Keys(wantCfg)
	if len(gk) != len(wk) {
		return "(the two configs list different tensors)"
	}
	for i := range gk {
		g, w := got[gk[i].Key], want[wk[i].Key]
		if g == nil || w == nil || !slices.Equal(g.Floats(), w.Floats()) {
			return gk[i].Key
		}
	}
	return ""
}

// A HuggingFace id from the local hub cache is evaluated on its own
// checkpoint's weights (every shard of the index), not on seeded ones: the
// model cache holds the checkpoint's tensors, the verdict is correct and
// says which files it was checked on. A model over the check budget is
// checked on the first layers of its checkpoint; a checkpoint whose index
// names a missing shard rejects the model, naming the index.
func TestHFIDEvaluatedOnItsCheckpoint(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	checkpoint := func(preset, name string) (model.Config, model.Weights, string) {
		cfg, err := model.Load(preset)
		if err != nil {
			t.Fatal(err)
		}
		w, err := model.InitWeights(cfg, 424242) // not WeightSeed: the evaluation must read these
		if err != nil {
			t.Fatal(err)
		}
		return cfg, w, hfcachetest.Write(t, cache, "tiny-org", name, cfg, w, 3)
	}
	cfg, w, _ := checkpoint("toy", "toy-sharded")
	seeded, err := model.InitWeights(cfg, WeightSeed)
	if err != nil {
		t.Fatal(err)
	}
	if sameWeights(seeded, cfg, w, cfg, cfg.NLayers) == "" {
		t.Fatal("the checkpoint's weights equal the seeded ones: the test could not tell them apart")
	}

	models := NewModelCache(0)
	lm, err := models.Get("tiny-org/toy-sharded", "")
	if err != nil {
		t.Fatal(err)
	}
	if k := sameWeights(lm.Weights, lm.Config, w, cfg, cfg.NLayers); k != "" || !lm.FromCheckpoint || len(lm.Files) != 3 || lm.Truncated() {
		t.Fatalf("loaded: tensor %q differs from the checkpoint's; files %v, from checkpoint %v, truncated %v", k, lm.Files, lm.FromCheckpoint, lm.Truncated())
	}
	spec := Spec{Model: "tiny-org/toy-sharded", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken, Pos: 2}
	out := Evaluate(context.Background(), spec, Options{Models: models})
	if out.Failure != nil || out.Verdict == nil || !out.Verdict.Valid || out.Verdict.Correct == nil || !*out.Verdict.Correct {
		t.Fatalf("evaluate: %+v %+v", out.Verdict, out.Failure)
	}
	if !slices.ContainsFunc(out.Verdict.Notes, func(n string) bool {
		return strings.HasPrefix(n, CheckpointNotePrefix) && strings.Contains(n, "3 file(s)") && strings.Contains(n, "model-00003-of-00003.safetensors")
	}) {
		t.Errorf("the verdict does not name the checkpoint: %q", out.Verdict.Notes)
	}

	// Over the check budget: the first layer of the checkpoint.
	cfg2, w2, _ := checkpoint("toy-2L", "toy-2L-sharded")
	small := NewModelCache(hostWeightBytes(cfg2) - 1)
	lm2, err := small.Get("tiny-org/toy-2L-sharded", "")
	if err != nil {
		t.Fatal(err)
	}
	if k := sameWeights(lm2.Weights, lm2.Check, w2, cfg2, lm2.Check.NLayers); !lm2.Truncated() || k != "" {
		t.Fatalf("over the budget: truncated %v, tensor %q differs from the checkpoint's", lm2.Truncated(), k)
	}
	spec.Model = "tiny-org/toy-2L-sharded"
	out = Evaluate(context.Background(), spec, Options{Models: small})
	if out.Verdict == nil || out.Verdict.Correct == nil || !*out.Verdict.Correct || !strings.Contains(strings.Join(out.Verdict.Notes, "\n"), "first 1 of 2 layers") {
		t.Fatalf("evaluate over the budget: %+v %+v", out.Verdict, out.Failure)
	}

	// A shard missing from the snapshot.
	_, _, snap := checkpoint("toy", "toy-broken")
	if err := os.Remove(filepath.Join(snap, "model-00002-of-00003.safetensors")); err != nil {
		t.Fatal(err)
	}
	spec.Model = "tiny-org/toy-broken"
	out = Evaluate(context.Background(), spec, Options{Models: NewModelCache(0)})
	if out.Verdict == nil || out.Verdict.Valid || out.Verdict.RejectedReason == nil || !strings.Contains(*out.Verdict.RejectedReason, "model.safetensors.index.json") {
		t.Fatalf("a missing shard: %+v %+v", out.Verdict, out.Failure)
	}
}
