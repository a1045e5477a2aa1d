package model

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNumParamsIsTheSumOfTheKeys: the arithmetic counts (values and bytes)
// equal the sums over every state-dict entry, quantised or not, for every
// preset and a spread of shapes (tied or not, GQA or not).
func TestNumParamsIsTheSumOfTheKeys(t *testing.T) {
	var cfgs []Config
	for _, name := range PresetNames() {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, cfg)
	}
	for i := range 40 {
		cfg, _ := Preset("toy")
		cfg.NLayers = 1 + i%7
		cfg.Hidden = 8 * (1 + i%5)
		cfg.NHeads = 1 + i%4
		cfg.NKVHeads = 1 + i%2
		cfg.HeadDim = 2 * (1 + i%3)
		cfg.Intermediate = 3 + i
		cfg.Vocab = 17 + 3*i
		cfg.TiedEmbeddings = i%2 == 0
		cfgs = append(cfgs, cfg)
	}
	for _, scheme := range []string{"", "w8a16", "w4a16-g128", "w8a16-fphead", "w4a16-g32"} {
		q, err := ParseQuantization(scheme)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range cfgs {
			cfg.Quant = q
			var values, bytes int64
			for _, k := range Keys(cfg) {
				if k.Role != RoleScales {
					values += k.Numel()
				}
				bytes += k.DType.NBytes(k.Numel())
			}
			if got := cfg.NumParams(); got != values {
				t.Errorf("%s %s: NumParams %d, the keys hold %d", cfg.Name, scheme, got, values)
			}
			if got := cfg.WeightBytes(); got != bytes {
				t.Errorf("%s %s: WeightBytes %d, the keys take %d", cfg.Name, scheme, got, bytes)
			}
		}
	}
}

// TestWeightBytesOfAHugeConfigIsImmediate: the count is arithmetic, so a
// config with very many layers costs no more than one with few (it used to
// build every layer's key names, and trial's check-size search called it
// once per layer: 16,000 layers took minutes and gigabytes).
func TestWeightBytesOfAHugeConfigIsImmediate(t *testing.T) {
	cfg, _ := Preset("llama-8b")
	cfg.NLayers = 1 << 20
	start := time.Now()
	for range 1000 {
		_ = cfg.WeightBytes()
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("1000 WeightBytes of a %d-layer config took %v", cfg.NLayers, el)
	}
	one := cfg
	one.NLayers = 1
	two := cfg
	two.NLayers = 2
	if per := two.NumParams() - one.NumParams(); cfg.NumParams() != one.NumParams()+int64(cfg.NLayers-1)*per {
		t.Fatal("the count is not linear in the layers")
	}
}

// TestImportCapsLayersAndParameters: a config.json beyond MaxLayers layers
// or MaxParams parameters is refused with a reason that names the cap.
func TestImportCapsLayersAndParameters(t *testing.T) {
	hf := func(layers, hidden, inter, vocab int) []byte {
		return fmt.Appendf(nil, `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": %d,
			"intermediate_size": %d, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": %d,
			"vocab_size": %d, "torch_dtype": "bfloat16"}`, hidden, inter, layers, vocab)
	}
	if _, err := FromHFConfig(hf(32, 4096, 14336, 128256), 0); err != nil {
		t.Fatalf("Llama-3-8B's shape: %v", err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		says string
	}{
		{"16,000 layers", hf(16000, 4096, 14336, 128256), fmt.Sprintf("num_hidden_layers must be an integer in [1, %d]", MaxLayers)},
		{"100,000 layers", hf(100000, 4096, 14336, 128256), fmt.Sprintf("num_hidden_layers must be an integer in [1, %d]", MaxLayers)},
		{"too many parameters", hf(1000, 131072, 524288, 128256), "parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := FromHFConfig(tc.data, 0)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want it to say %q", err, tc.says)
			}
			if el := time.Since(start); el > time.Second {
				t.Fatalf("refusing took %v", el)
			}
		})
	}
	cfg, _ := Preset("toy")
	cfg.NLayers = MaxLayers + 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "n_layers must be at most") {
		t.Fatalf("a Config beyond MaxLayers: %v", err)
	}
}

// TestHFConfigRefusesRepeatedKeys: a config.json that gives a field twice
// (at any depth) is refused: Python's json keeps the last value, another
// reader could keep the first, and the two would import different models.
func TestHFConfigRefusesRepeatedKeys(t *testing.T) {
	for _, doc := range []string{
		`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
		  "num_attention_heads": 4, "num_hidden_layers": 2, "num_hidden_layers": 2000, "vocab_size": 256}`,
		`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
		  "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
		  "rope_scaling": {"rope_type": "default", "rope_type": "yarn"}}`,
	} {
		_, err := FromHFConfig([]byte(doc), 0)
		if err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Fatalf("err = %v, want a duplicate key error", err)
		}
	}
}
