package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// tinyLlamaJSON is TinyLlama-1.1B's published config.json.
const tinyLlamaJSON = `{
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 2048,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.35.0", "use_cache": true, "vocab_size": 32000
}`

// llamaJSON is a small Llama config with the given extra members; an extra
// member replaces the base's member of that name (a repeated key would be
// refused).
func llamaJSON(extra string) string {
	base, err := pyjson.Parse([]byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
  "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 320,
  "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "hidden_act": "silu"}`))
	if err != nil {
		panic(err)
	}
	more, err := pyjson.Parse([]byte("{" + extra + "}"))
	if err != nil {
		panic(fmt.Sprintf("extra members %s: %v", extra, err))
	}
	for _, m := range more.Obj {
		base.Set(m.Key, m.Val)
	}
	return pyjson.Compact(base, false)
}

func TestFromHFConfigTinyLlama(t *testing.T) {
	cfg, err := FromHFConfig([]byte(tinyLlamaJSON), 0)
	if err != nil {
		t.Fatal(err)
	}
	preset, _ := Preset("tinyllama")
	if cfg.Hidden != preset.Hidden || cfg.NHeads != preset.NHeads || cfg.NKVHeads != preset.NKVHeads ||
		cfg.HeadDim != preset.HeadDim || cfg.Intermediate != preset.Intermediate || cfg.Vocab != preset.Vocab ||
		cfg.NLayers != preset.NLayers || cfg.DType != ir.BF16 || cfg.RMSEps != 1e-5 || cfg.RopeTheta != 10000 {
		t.Errorf("imported %+v, want the tinyllama shape %+v", cfg, preset)
	}
	if cfg.WeightBytes() != preset.WeightBytes() {
		t.Errorf("weight bytes %d, preset %d", cfg.WeightBytes(), preset.WeightBytes())
	}
	if cfg.MaxSeq != 2048 || cfg.KeyScheme != SchemeHF || cfg.TiedEmbeddings || cfg.Name != "LlamaForCausalLM(22L/2048h)" {
		t.Errorf("imported %+v", cfg)
	}
	short, err := FromHFConfig([]byte(tinyLlamaJSON), 2)
	if err != nil || short.NLayers != 2 {
		t.Errorf("layer override: %+v, %v", short, err)
	}
	if _, err := FromHFConfig([]byte(tinyLlamaJSON), -1); err == nil {
		t.Error("negative layer override accepted")
	}
}

func TestFromHFConfigAcceptsLlamaVariants(t *testing.T) {
	cases := []struct {
		name  string
		extra string
		check func(c Config) bool
	}{
		{"MHA defaults", "", func(c Config) bool {
			return c.NKVHeads == 8 && c.HeadDim == 16 && c.RopeTheta == 10000 && c.DType == ir.F32 && !c.TiedEmbeddings
		}},
		{"GQA", `"num_key_value_heads": 2`, func(c Config) bool { return c.NKVHeads == 2 && c.Rep() == 4 }},
		{"tied", `"tie_word_embeddings": true`, func(c Config) bool {
			return c.TiedEmbeddings && KeyNames(c).LMHead == "model.embed_tokens.weight"
		}},
		{"explicit head_dim", `"num_attention_heads": 4, "head_dim": 64, "num_key_value_heads": 1`, func(c Config) bool {
			return c.HeadDim == 64 && c.QDim() == 256 && c.KVDim() == 64
		}},
		{"rope_theta", `"rope_theta": 500000.0`, func(c Config) bool { return c.RopeTheta == 500000 }},
		{"rope_theta 0 means default", `"rope_theta": 0`, func(c Config) bool { return c.RopeTheta == 10000 }},
		{"rope_type llama", `"rope_scaling": {"rope_type": "llama", "factor": 1.0}`, func(c Config) bool { return true }},
		{"rope type default", `"rope_scaling": {"type": "default"}`, func(c Config) bool { return true }},
		{"v5 rope theta in rope_scaling", `"rope_theta": 10000, "rope_scaling": {"rope_type": "default", "rope_theta": 250000}`,
			func(c Config) bool { return c.RopeTheta == 250000 }},
		{"v5 rope_parameters", `"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}`,
			func(c Config) bool { return c.RopeTheta == 1e6 }},
		{"float16", `"torch_dtype": "float16"`, func(c Config) bool { return c.DType == ir.F16 }},
		{"v5 dtype key", `"dtype": "bfloat16"`, func(c Config) bool { return c.DType == ir.BF16 }},
		{"swish", `"hidden_act": "swish"`, func(c Config) bool { return true }},
		{"biases off", `"attention_bias": false, "mlp_bias": false, "num_local_experts": 0`, func(c Config) bool { return true }},
		{"nulls are defaults", `"num_key_value_heads": null, "head_dim": null, "kv_lora_rank": null`, func(c Config) bool {
			return c.NKVHeads == 8 && c.HeadDim == 16
		}},
		{"active sliding window bounds max_seq", `"sliding_window": 128`, func(c Config) bool { return c.MaxSeq == 128 }},
		{"disabled sliding window", `"sliding_window": 128, "use_sliding_window": false`, func(c Config) bool { return c.MaxSeq == 512 }},
		{"integral float dims", `"hidden_size": 128.0`, func(c Config) bool { return c.Hidden == 128 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := FromHFConfig([]byte(llamaJSON(tc.extra)), 0)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hidden != 128 || cfg.Vocab != 320 || cfg.NLayers != 2 || cfg.Intermediate != 256 || !tc.check(cfg) {
				t.Errorf("imported %+v", cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("imported config does not validate: %v", err)
			}
		})
	}
}

func TestFromHFConfigRejectsEachUnsupportedFeature(t *testing.T) {
	cases := []struct{ extra, want string }{
		{`"num_local_experts": 8`, "mixture-of-experts (num_local_experts=8)"},
		{`"num_experts": 60`, "mixture-of-experts (num_experts=60)"},
		{`"n_routed_experts": 64`, "mixture-of-experts (n_routed_experts=64)"},
		{`"kv_lora_rank": 512`, "MLA / latent attention (kv_lora_rank=512)"},
		{`"attention_bias": true`, "attention_bias=True"},
		{`"mlp_bias": true`, "mlp_bias=True"},
		{`"hidden_act": "gelu_pytorch_tanh"`, "hidden_act='gelu_pytorch_tanh'"},
		{`"rope_scaling": {"rope_type": "llama3", "factor": 32.0}`, "rope_scaling rope_type='llama3'"},
		{`"rope_scaling": {"type": "linear", "factor": 2.0}`, "rope_scaling rope_type='linear'"},
		{`"rope_parameters": {"rope_type": "yarn"}`, "rope_parameters rope_type='yarn'"},
		{`"num_attention_heads": 3, "num_key_value_heads": 3`, "hidden_size=128 is not divisible by num_attention_heads=3"},
		{`"torch_dtype": "float64"`, "torch_dtype='float64'"},
		{`"torch_dtype": "int8"`, "torch_dtype='int8'"},
		{`"quantization_config": {"quant_method": "gptq"}`, "pre-quantized checkpoint"},
		{`"partial_rotary_factor": 0.5`, "partial rotary embedding"},
		{`"model_type": "gemma"`, "model_type='gemma'"},
		{`"model_type": "qwen3"`, "per-head q/k RMSNorm"},
		{`"num_key_value_heads": 3`, "n_heads (8) must be a multiple of n_kv_heads (3)"},
		{`"head_dim": 15`, "head_dim must be even"},
	}
	for _, tc := range cases {
		_, err := FromHFConfig([]byte(llamaJSON(tc.extra)), 0)
		var he *HFConfigError
		if !errors.As(err, &he) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an HFConfigError mentioning %q", tc.extra, err, tc.want)
		}
	}
}

func TestFromHFConfigListsEveryReasonAtOnce(t *testing.T) {
	extra := `"num_local_experts": 8, "kv_lora_rank": 512, "attention_bias": true, "mlp_bias": true,
  "hidden_act": "gelu", "rope_scaling": {"rope_type": "dynamic"}, "hidden_size": 100, "num_attention_heads": 3,
  "num_key_value_heads": 3, "torch_dtype": "float64"`
	_, err := FromHFConfig([]byte(llamaJSON(extra)), 0)
	var he *HFConfigError
	if !errors.As(err, &he) {
		t.Fatalf("got %v, want an HFConfigError", err)
	}
	for _, want := range []string{"mixture-of-experts", "MLA / latent attention", "attention_bias=True", "mlp_bias=True",
		"hidden_act='gelu'", "rope_type='dynamic'", "hidden_size=100 is not divisible by num_attention_heads=3",
		"torch_dtype='float64'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not list %q:\n%v", want, err)
		}
	}
	if len(he.Problems) != 8 {
		t.Errorf("got %d problems, want 8: %q", len(he.Problems), he.Problems)
	}
}

func TestFromHFConfigMalformed(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`not json`, "not valid JSON"},
		{`[1, 2]`, "must be a JSON object"},
		{`{}`, "hidden_size is missing"},
		{`{"hidden_size": "128", "num_attention_heads": 8, "intermediate_size": 1, "vocab_size": 2, "num_hidden_layers": 1}`,
			"hidden_size must be an integer"},
		{llamaJSON(`"num_hidden_layers": -2`), "num_hidden_layers must be an integer in [1,"},
		{llamaJSON(`"rms_norm_eps": "tiny"`), "rms_norm_eps must be a finite positive number"},
		{llamaJSON(`"tie_word_embeddings": "yes"`), "tie_word_embeddings must be true or false"},
		{llamaJSON(`"rope_scaling": 4`), "rope_scaling must be an object or null"},
		{llamaJSON(`"hidden_size": 99999999999`), "hidden_size must be an integer in [1,"},
	}
	for _, tc := range cases {
		_, err := FromHFConfig([]byte(tc.doc), 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.doc, err, tc.want)
		}
	}
	_, err := FromHFConfig([]byte(`{}`), 0)
	for _, want := range []string{"hidden_size", "num_attention_heads", "intermediate_size", "vocab_size", "num_hidden_layers"} {
		if !strings.Contains(err.Error(), want+" is missing") {
			t.Errorf("empty config error does not list %s: %v", want, err)
		}
	}
}

func TestLoad(t *testing.T) {
	cfg, err := Load("toy-2L")
	if err != nil || cfg.NLayers != 2 {
		t.Fatalf("Load(toy-2L) = %+v, %v", cfg, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(tinyLlamaJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{path, dir} {
		cfg, err := Load(arg)
		if err != nil || cfg.NLayers != 22 || cfg.KeyScheme != SchemeHF {
			t.Errorf("Load(%s) = %+v, %v", arg, cfg, err)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(llamaJSON(`"num_local_experts": 4`)), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "mixture-of-experts") || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("Load(bad) = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "not a preset") {
		t.Errorf("Load(missing) = %v", err)
	}
}

func FuzzFromHFConfig(f *testing.F) {
	f.Add([]byte(tinyLlamaJSON), 0)
	f.Add([]byte(llamaJSON(`"num_key_value_heads": 2, "tie_word_embeddings": true`)), 1)
	f.Add([]byte(llamaJSON(`"rope_scaling": {"rope_type": "llama3"}, "num_local_experts": 2`)), 0)
	f.Add([]byte(llamaJSON(`"head_dim": 3, "sliding_window": 0`)), 0)
	f.Add([]byte(`{"hidden_size": 1e400, "rope_scaling": {"rope_theta": NaN}}`), 0)
	f.Add([]byte(`[`), -3)
	f.Fuzz(func(t *testing.T, data []byte, layers int) {
		cfg, err := FromHFConfig(data, layers%100)
		if err != nil {
			if _, ok := err.(*HFConfigError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("accepted a config that does not validate: %v", verr)
		}
	})
}

func TestLoadCapsTheImportedWindow(t *testing.T) {
	dir := t.TempDir()
	cfgJSON := `{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"intermediate_size": 128, "vocab_size": 256, "num_hidden_layers": 1, "max_position_embeddings": 131072,
		"hidden_act": "silu", "torch_dtype": "float32"}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxSeq != ImportMaxSeq {
		t.Fatalf("max_seq %d, want the cap %d", cfg.MaxSeq, ImportMaxSeq)
	}
}

// TestOtherArchitecturesAreRefusedByName: a config.json of another family is
// refused by its model_type/architectures, never read as a Llama with
// defaults filled in.
func TestOtherArchitecturesAreRefusedByName(t *testing.T) {
	gpt2 := `{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
		"n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257,
		"hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12, "intermediate_size": 3072}`
	_, err := FromHFConfig([]byte(gpt2), 0)
	if err == nil || !strings.Contains(err.Error(), "model_type='gpt2' is not a Llama-family architecture") ||
		!strings.Contains(err.Error(), "'GPT2LMHeadModel' is not a Llama-family class") {
		t.Fatalf("GPT-2 config: %v", err)
	}
	anonymous := `{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 256}`
	if _, err := FromHFConfig([]byte(anonymous), 0); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Fatalf("config without an architecture: %v", err)
	}
	mistral := strings.Replace(anonymous, `{`, `{"model_type": "mistral", "architectures": ["MistralForCausalLM"], `, 1)
	if _, err := FromHFConfig([]byte(mistral), 0); err != nil {
		t.Fatalf("a Mistral config was refused: %v", err)
	}
}
