package model

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func TestInitWeightsDeterministicAndCoreIndependent(t *testing.T) {
	cfg := tinyConfig(ir.BF16)
	cfg.Hidden, cfg.Intermediate, cfg.Vocab, cfg.NLayers = 64, 600, 3000, 2 // several chunks per tensor
	prev := runtime.GOMAXPROCS(1)
	one, err := InitWeights(cfg, 7)
	runtime.GOMAXPROCS(4)
	four, err2 := InitWeights(cfg, 7)
	runtime.GOMAXPROCS(prev)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	other, _ := InitWeights(cfg, 8)
	for _, spec := range Keys(cfg) {
		a, b := one[spec.Key].Floats(), four[spec.Key].Floats()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s[%d] differs between 1 and 4 cores: %v vs %v", spec.Key, i, a[i], b[i])
			}
		}
		if spec.Numel() > 16 && slices.Equal(a, other[spec.Key].Floats()) {
			t.Errorf("%s is the same for seeds 7 and 8", spec.Key)
		}
	}
	if err := one.Check(cfg); err != nil {
		t.Errorf("generated weights do not check: %v", err)
	}
}

func TestInitWeightsDistributions(t *testing.T) {
	cfg, _ := Preset("toy")
	w, err := InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range Keys(cfg) {
		lo, hi := -1.0, 1.0
		switch spec.Role {
		case RoleNorm:
			lo, hi = 0.9, 1.1
		case RoleLinear, RoleLMHead:
			hi = 1 / math.Sqrt(float64(spec.Shape[1]))
			lo = -hi
		}
		var sum, minV, maxV float64 = 0, math.Inf(1), math.Inf(-1)
		for _, v := range w[spec.Key].Floats() {
			sum += float64(v)
			minV, maxV = math.Min(minV, float64(v)), math.Max(maxV, float64(v))
		}
		mean := sum / float64(spec.Numel())
		span := hi - lo
		if minV < lo || maxV > hi || minV > lo+0.1*span || maxV < hi-0.1*span || math.Abs(mean-(lo+hi)/2) > 0.1*span {
			t.Errorf("%s: values in [%v, %v], mean %v; want spread over [%v, %v]", spec.Key, minV, maxV, mean, lo, hi)
		}
	}
	// Element i is the (i+1)-th splitmix64 output of the key's stream.
	first := w["embed.weight"].Floats()[0]
	if want := float32(uniformAt(streamSeed(0, "embed.weight"), 0)); first != want {
		t.Errorf("embed[0] = %v, want %v", first, want)
	}
}

func TestInitWeightsRoundsToDType(t *testing.T) {
	for _, dt := range []ir.DType{ir.BF16, ir.F16} {
		cfg := tinyConfig(dt)
		w, err := InitWeights(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		for k, tt := range w {
			if tt.Half == nil {
				t.Fatalf("%s %s is not held at its stored width", dt, k)
			}
			for _, v := range tt.Floats() {
				if tensor.Round(dt, v) != v {
					t.Fatalf("%s %s holds %v, not a %s value", dt, k, v, dt)
				}
			}
		}
	}
	bad := tinyConfig(ir.I8)
	if _, err := InitWeights(bad, 0); err == nil {
		t.Error("InitWeights accepted an int8 model")
	}
}

func TestWeightsCheckListsProblems(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	cfg.NLayers = 2
	w, _ := InitWeights(cfg, 1)
	names := KeyNames(cfg)
	delete(w, names.Layers[0].Q)
	delete(w, names.LMHead)
	w[names.Layers[1].K] = tensor.New(ir.F32, 3, 8)
	w[names.FinalNorm] = tensor.New(ir.BF16, 8)
	err := w.Check(cfg)
	var we *WeightsError
	if !errors.As(err, &we) {
		t.Fatalf("Check = %v", err)
	}
	for _, want := range []string{"2 expected tensor(s) missing", "layers.0.attn.q_proj.weight", "lm_head.weight",
		"layers.1.attn.k_proj.weight has shape [3 8], want [4 8]", "final_norm has dtype BF16, want F32"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	many := Weights{}
	err = many.Check(cfg)
	if !strings.Contains(err.Error(), "21 expected tensor(s) missing") || !strings.Contains(err.Error(), "… and 13 more") {
		t.Errorf("empty weights: %v", err)
	}
}

// A tied embedding table is also the LM head, so InitWeights draws it at
// the LM head's scale 1/sqrt(hidden): the eager logits of a seeded tied
// model are then O(1), like an untied one's. Drawn at O(1), the llama-1b
// layer shape gave logits up to about 1,100 (the fed token's own row) and
// about 26 typically, where bf16 rounding noise alone exceeds the
// tolerance on the small logits.
func TestTiedEmbeddingDrawnAtTheLMHeadScale(t *testing.T) {
	cfg, err := Preset("llama-1b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NLayers, cfg.Vocab = 1, 512
	if !cfg.TiedEmbeddings {
		t.Fatal("the llama-1b preset no longer ties its embedding")
	}
	w, err := InitWeights(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	bound := TiedEmbeddingScale(cfg)
	table := w[KeyNames(cfg).Embed].Floats()
	var maxAbs float64
	for _, v := range table {
		maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
	}
	if maxAbs > bound || maxAbs < 0.9*bound {
		t.Errorf("tied embedding values reach %v, want spread over [-%v, %v]", maxAbs, bound, bound)
	}
	e, err := NewEager(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	for pos, tok := range []int32{3, 8, 13} {
		logits, err := e.Step(tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		var m float64
		for _, v := range logits {
			m = math.Max(m, math.Abs(float64(v)))
		}
		if m > 16 {
			t.Errorf("pos %d: max |logit| %v, want O(1) (under 16)", pos, m)
		}
	}
}
