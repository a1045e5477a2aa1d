package trial

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/amk-dev/amk/model"
)

func TestEstimateMemoryFollowsTheCheckBudget(t *testing.T) {
	cfg, err := model.Load("llama-8b")
	if err != nil {
		t.Fatal(err)
	}
	full := EstimateMemory(cfg, true, 64<<30)
	if full.CheckLayers != cfg.NLayers || full.Host < cfg.WeightBytes() {
		t.Fatalf("unbounded budget: %+v, want all %d layers and at least the bf16 weights (%d bytes)", full, cfg.NLayers, cfg.WeightBytes())
	}
	if full.Device < cfg.WeightBytes() {
		t.Fatalf("device need %d below the weights (%d bytes)", full.Device, cfg.WeightBytes())
	}
	cut := EstimateMemory(cfg, false, DefaultCheckBytes)
	if cut.CheckLayers >= cfg.NLayers || cut.Host >= full.Host || cut.Device != 0 {
		t.Fatalf("default budget: %+v, want a truncation below %d bytes and no device figure", cut, full.Host)
	}
	// The budget bounds the checked weights at their stored width (bf16: 2
	// bytes a value): the most layers whose weights fit, and not one fewer.
	// For llama-8b that is 9 of 32 layers (5.6 GiB of weights; counted at 4
	// bytes a value it was 6).
	check := cfg
	check.NLayers = cut.CheckLayers
	if check.WeightBytes() > DefaultCheckBytes {
		t.Fatalf("%d checked layers hold %d bytes of weights, over the %d-byte budget", cut.CheckLayers, check.WeightBytes(), DefaultCheckBytes)
	}
	check.NLayers++
	if check.WeightBytes() <= DefaultCheckBytes {
		t.Fatalf("%d checked layers, but %d fit the budget (%d bytes)", cut.CheckLayers, check.NLayers, check.WeightBytes())
	}
	if cut.CheckLayers != 9 {
		t.Fatalf("llama-8b checks %d layers within the default budget, want 9", cut.CheckLayers)
	}
}

func TestCheckBudgetCountsFloat32WeightsAtFourBytes(t *testing.T) {
	cfg, err := model.Load("toy-2L") // float32 weights
	if err != nil {
		t.Fatal(err)
	}
	fits := EstimateMemory(cfg, false, cfg.NumParams()*4)
	short := EstimateMemory(cfg, false, cfg.NumParams()*4-1)
	if fits.CheckLayers != 2 || short.CheckLayers != 1 {
		t.Fatalf("toy-2L within exactly its float32 bytes: %d layers (want 2); one byte less: %d (want 1)", fits.CheckLayers, short.CheckLayers)
	}
}

func TestModelCacheRefusesAModelTooBigForTheEvaluator(t *testing.T) {
	probed := 0
	models := NewModelCache(0).WithMemoryProbe(func() (int64, string, error) {
		probed++
		return 1 << 20, "test probe", nil
	})
	spec := Spec{Model: "toy-2L", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken}
	out := Evaluate(context.Background(), spec, Options{Models: models})
	if out.Verdict != nil || out.Failure == nil || out.Failure.Class != FailInfra || out.Failure.Phase != "memory" {
		t.Fatalf("want an infra failure in phase memory, got verdict %+v failure %+v", out.Verdict, out.Failure)
	}
	// Not cached: the next trial probes again (memory may have been freed).
	if _, err := models.Get("toy-2L", ""); !errors.As(err, new(*MemoryError)) || probed != 2 {
		t.Fatalf("second load: err %v after %d probes, want a MemoryError from a second probe", err, probed)
	}
	roomy := NewModelCache(0).WithMemoryProbe(func() (int64, string, error) { return 1 << 40, "test probe", nil })
	if out := Evaluate(context.Background(), spec, Options{Models: roomy}); out.Verdict == nil || !out.Verdict.Valid {
		t.Fatalf("enough memory: want a valid verdict, got %+v %+v", out.Verdict, out.Failure)
	}
}

func TestCancelledLoadIsNotCachedAndNotAVerdict(t *testing.T) {
	models := NewModelCache(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec := Spec{Model: "toy-2L", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken}
	out := Evaluate(ctx, spec, Options{Models: models})
	if out.Verdict != nil || out.Failure == nil || out.Failure.Phase != "load-model" {
		t.Fatalf("cancelled evaluation: want a load-model failure, got %+v %+v", out.Verdict, out.Failure)
	}
	if lm, err := models.Get("toy-2L", ""); err != nil || lm.Weights == nil {
		t.Fatalf("a cancelled load must not be cached: %v", err)
	}
}

// TestCheckConfigIsTheLargestThatFits: the check model is the most layers
// whose weights fit the budget, for every budget around each layer count
// (the search must agree with removing one layer at a time).
func TestCheckConfigIsTheLargestThatFits(t *testing.T) {
	cfg, err := model.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NLayers = 40
	for n := 1; n <= cfg.NLayers; n++ {
		at := cfg
		at.NLayers = n
		for _, budget := range []int64{at.WeightBytes() - 1, at.WeightBytes(), at.WeightBytes() + 1} {
			want := cfg
			for want.NLayers > 1 && want.WeightBytes() > budget {
				want.NLayers--
			}
			if got := checkConfig(cfg, budget); got.NLayers != want.NLayers {
				t.Fatalf("budget %d: %d layers, want %d", budget, got.NLayers, want.NLayers)
			}
		}
	}
}
