package model

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// tinyConfig is a model small enough to build by hand in tests.
func tinyConfig(dt ir.DType) Config {
	return Config{
		Name: "tiny", Hidden: 8, NHeads: 4, NKVHeads: 2, HeadDim: 2, Intermediate: 4, Vocab: 8,
		NLayers: 1, RMSEps: 1e-6, RopeTheta: 10000, MaxSeq: 16, DType: dt, KeyScheme: SchemeToy,
	}
}

func TestPresetsValidateAndWeightBytes(t *testing.T) {
	want := map[string]struct {
		name   string
		bytes  int64
		params int64
	}{
		"toy":        {"toy(1L)", 279_296, 69_824},
		"toy-1L":     {"toy(1L)", 279_296, 69_824},
		"toy-2L":     {"toy(2L)", 279_296 + 36_992*4, 69_824 + 36_992},
		"small":      {"small(4L/2048h)", 622_891_008, 311_445_504},
		"small-bf16": {"small(4L/2048h)", 622_891_008, 311_445_504},
		"llama-1b":   {"llama-1b(16L/2048h)", 2_471_628_800, 1_235_814_400},
		"tinyllama":  {"tinyllama(22L/2048h)", 2_200_096_768, 1_100_048_384},
		"llama-8b":   {"llama-8b(32L/4096h)", 16_060_522_496, 8_030_261_248},
	}
	names := PresetNames()
	if len(names) != len(want) {
		t.Fatalf("PresetNames() = %v, want %d names", names, len(want))
	}
	for _, n := range names {
		cfg, err := Preset(n)
		if err != nil {
			t.Fatalf("Preset(%q): %v", n, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("preset %s does not validate: %v", n, err)
		}
		w, ok := want[n]
		if !ok {
			t.Errorf("unexpected preset %q", n)
			continue
		}
		if cfg.Name != w.name || cfg.WeightBytes() != w.bytes || cfg.NumParams() != w.params {
			t.Errorf("preset %s: name %q, %d bytes, %d params; want %q, %d, %d",
				n, cfg.Name, cfg.WeightBytes(), cfg.NumParams(), w.name, w.bytes, w.params)
		}
	}
	if _, err := Preset("gpt-5"); err == nil || !strings.Contains(err.Error(), "toy-2L") {
		t.Errorf("unknown preset error should list the presets, got %v", err)
	}
}

func TestPresetShapes(t *testing.T) {
	l1, _ := Preset("llama-1b")
	if !l1.TiedEmbeddings || l1.RopeTheta != 500000 || l1.NHeads != 32 || l1.NKVHeads != 8 || l1.HeadDim != 64 ||
		l1.KeyScheme != SchemeHF || l1.DType != ir.BF16 {
		t.Errorf("llama-1b preset has the wrong shape: %+v", l1)
	}
	toy, _ := Preset("toy")
	if toy.DType != ir.F32 || toy.KeyScheme != SchemeToy || toy.MaxSeq != 256 || toy.RMSEps != 1e-6 {
		t.Errorf("toy preset has the wrong settings: %+v", toy)
	}
	for _, k := range Keys(l1) {
		if k.Role == RoleLMHead || k.Key == "lm_head.weight" {
			t.Errorf("tied llama-1b lists a separate lm_head: %v", k)
		}
	}
	if n := KeyNames(l1); n.LMHead != "model.embed_tokens.weight" {
		t.Errorf("tied lm_head name = %q", n.LMHead)
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	cfg := Config{
		Name: "broken", Hidden: 0, NHeads: 6, NKVHeads: 4, HeadDim: 7, Intermediate: -1, Vocab: MaxDim + 1,
		NLayers: 0, RMSEps: math.NaN(), RopeTheta: math.Inf(1), MaxSeq: 0, DType: ir.I8, KeyScheme: "gguf",
	}
	err := cfg.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Validate() = %v, want a *ConfigError", err)
	}
	for _, want := range []string{
		"hidden must be at least 1, got 0", "intermediate must be at least 1", "vocab must be at most",
		"n_layers must be at least 1", "max_seq must be at least 1", "head_dim must be even",
		"n_heads (6) must be a multiple of n_kv_heads (4)", "rms_eps must be finite and positive",
		"rope_theta must be finite and positive", "dtype must be F32, F16 or BF16, got I8",
		`key_scheme must be "toy" or "hf", got "gguf"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if len(ce.Problems) != 11 {
		t.Errorf("got %d problems, want 11: %v", len(ce.Problems), ce.Problems)
	}
	good := tinyConfig(ir.BF16)
	if err := good.Validate(); err != nil {
		t.Errorf("tiny config rejected: %v", err)
	}
	good.RMSEps = -1e-6
	if good.Validate() == nil {
		t.Error("negative eps accepted")
	}
}

func TestKeysSchemesAndOrder(t *testing.T) {
	cfg := tinyConfig(ir.F32)
	cfg.NLayers = 2
	keys := Keys(cfg)
	if len(keys) != 1+9*2+2 {
		t.Fatalf("got %d keys", len(keys))
	}
	wantToy := []string{"embed.weight", "layers.0.input_norm", "layers.0.attn.q_proj.weight", "layers.0.attn.k_proj.weight",
		"layers.0.attn.v_proj.weight", "layers.0.attn.o_proj.weight", "layers.0.post_norm", "layers.0.mlp.gate_proj.weight",
		"layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight"}
	for i, w := range wantToy {
		if keys[i].Key != w {
			t.Errorf("key %d = %q, want %q", i, keys[i].Key, w)
		}
	}
	if last := keys[len(keys)-1]; last.Key != "lm_head.weight" || last.Shape[0] != 8 || last.Shape[1] != 8 {
		t.Errorf("last key = %+v", last)
	}
	if k := keys[5]; k.Key != "layers.0.attn.o_proj.weight" || k.Shape[0] != cfg.Hidden || k.Shape[1] != cfg.QDim() {
		t.Errorf("o_proj spec = %+v, want [hidden, q_dim]", k)
	}
	cfg.KeyScheme = SchemeHF
	n := KeyNames(cfg)
	if n.Embed != "model.embed_tokens.weight" || n.FinalNorm != "model.norm.weight" ||
		n.Layers[1].PostNorm != "model.layers.1.post_attention_layernorm.weight" ||
		n.Layers[1].Q != "model.layers.1.self_attn.q_proj.weight" || n.Layers[0].Down != "model.layers.0.mlp.down_proj.weight" {
		t.Errorf("hf names wrong: %+v", n)
	}
}
