package model

import (
	"fmt"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// toyBase is the shape of the Python reference's default toy model
// (ToyConfig): hidden 64, 4 heads over 2 KV heads, vocabulary 256.
func toyBase(layers int) Config {
	return Config{
		Name: fmt.Sprintf("toy(%dL)", layers), Hidden: 64, NHeads: 4, NKVHeads: 2, HeadDim: 16,
		Intermediate: 128, Vocab: 256, NLayers: layers, RMSEps: 1e-6, RopeTheta: 10000,
		MaxSeq: 256, DType: ir.F32, KeyScheme: SchemeToy,
	}
}

func smallPreset() Config {
	return Config{
		Name: "small(4L/2048h)", Hidden: 2048, NHeads: 16, NKVHeads: 4, HeadDim: 128,
		Intermediate: 5632, Vocab: 32000, NLayers: 4, RMSEps: 1e-6, RopeTheta: 10000,
		MaxSeq: 256, DType: ir.BF16, KeyScheme: SchemeToy,
	}
}

// realistic builds a preset with a real model's shape (and HF key names, so a
// real checkpoint of the same shape binds), generated weights and the
// reference's max_seq of 256.
func realistic(label string, hidden, layers, heads, kv, headDim, inter, vocab int, theta float64, tied bool) Config {
	return Config{
		Name: fmt.Sprintf("%s(%dL/%dh)", label, layers, hidden), Hidden: hidden, NHeads: heads,
		NKVHeads: kv, HeadDim: headDim, Intermediate: inter, Vocab: vocab, NLayers: layers,
		RMSEps: 1e-5, RopeTheta: theta, MaxSeq: 256, DType: ir.BF16, TiedEmbeddings: tied,
		KeyScheme: SchemeHF,
	}
}

var presets = []struct {
	name string
	make func() Config
}{
	{"toy", func() Config { return toyBase(1) }},
	{"toy-1L", func() Config { return toyBase(1) }},
	{"toy-2L", func() Config { return toyBase(2) }},
	{"small", smallPreset},
	{"small-bf16", smallPreset},
	{"llama-1b", func() Config {
		return realistic("llama-1b", 2048, 16, 32, 8, 64, 8192, 128256, 500000, true)
	}},
	{"tinyllama", func() Config {
		return realistic("tinyllama", 2048, 22, 32, 4, 64, 5632, 32000, 10000, false)
	}},
	{"llama-8b", func() Config {
		return realistic("llama-8b", 4096, 32, 32, 8, 128, 14336, 128256, 500000, false)
	}},
}

// PresetNames lists the preset names in a fixed order.
func PresetNames() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.name
	}
	return out
}

// Preset returns the named preset's Config.
func Preset(name string) (Config, error) {
	for _, p := range presets {
		if p.name == name {
			return p.make(), nil
		}
	}
	return Config{}, fmt.Errorf("%w preset %q%s (known: %s)", ErrUnknownModel, name, hint(name), strings.Join(PresetNames(), ", "))
}
