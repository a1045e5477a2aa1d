package trial

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

func toyDecode(t *testing.T, prompt []int32, n int) Decode {
	t.Helper()
	cfg, err := model.Preset("toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	return decodeOf(t, cfg, prompt, n)
}

func decodeOf(t *testing.T, cfg model.Config, prompt []int32, n int) Decode {
	t.Helper()
	w, err := model.InitWeights(cfg, WeightSeed)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	return Decode{Config: cfg, Weights: w, Target: target, Point: schedule.Default(), Prompt: prompt, Tokens: n, Verify: true}
}

// The reference VM's greedy decode equals the eager oracle's, step by step
// and token by token, in float32 and in bf16 (the toy shape stored as bf16,
// the dtype of the larger presets).
func TestGreedyDecodeMatchesEager(t *testing.T) {
	cfg, err := model.Preset("toy-2L")
	if err != nil {
		t.Fatal(err)
	}
	bf16 := cfg
	bf16.DType, bf16.Name = ir.BF16, "toy(2L, bf16)"
	for _, c := range []model.Config{cfg, bf16} {
		t.Run(c.Name, func(t *testing.T) { checkDecodeMatchesEager(t, decodeOf(t, c, []int32{5, 9, 2}, 6)) })
	}
}

func checkDecodeMatchesEager(t *testing.T, d Decode) {
	t.Helper()
	res, err := GreedyDecode(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Mismatches) != 0 || res.Steps != 3+6-1 || len(res.Tokens) != 6 {
		t.Fatalf("%+v", res)
	}
	e, err := model.NewEager(d.Config, d.Weights)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Greedy(d.Prompt, 6)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want) {
		t.Fatalf("tokens %v, eager greedy %v", res.Tokens, want)
	}
}

func TestGreedyDecodeRefusesBadRequests(t *testing.T) {
	for name, mutate := range map[string]func(*Decode){
		"empty prompt":     func(d *Decode) { d.Prompt = nil },
		"negative tokens":  func(d *Decode) { d.Tokens = -1 },
		"past max_seq":     func(d *Decode) { d.Tokens = d.Config.MaxSeq },
		"token past vocab": func(d *Decode) { d.Prompt = []int32{int32(d.Config.Vocab)} },
		"negative token":   func(d *Decode) { d.Prompt = []int32{-1} },
		"no target":        func(d *Decode) { d.Target = nil },
	} {
		d := toyDecode(t, []int32{1}, 2)
		mutate(&d)
		if _, err := GreedyDecode(context.Background(), d); !errors.Is(err, ErrDecodeInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := GreedyDecode(ctx, toyDecode(t, []int32{1}, 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
