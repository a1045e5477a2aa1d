package model

import (
	"encoding/json"
	"fmt"

	"github.com/amk-dev/amk/ir"
)

// HFConfigJSON renders cfg as a HuggingFace LlamaForCausalLM config.json:
// the same shape, norm epsilon, RoPE theta, max_seq (as
// max_position_embeddings), tying and dtype, with no biases and SiLU.
// FromHFConfig reads it back to cfg's shape.
func HFConfigJSON(cfg Config) ([]byte, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dtype := map[ir.DType]string{ir.F32: "float32", ir.F16: "float16", ir.BF16: "bfloat16"}[cfg.DType]
	if dtype == "" {
		return nil, fmt.Errorf("model %s: dtype %s has no HuggingFace name", cfg.Name, cfg.DType)
	}
	c := map[string]any{
		"architectures":           []string{"LlamaForCausalLM"},
		"model_type":              "llama",
		"hidden_size":             cfg.Hidden,
		"num_attention_heads":     cfg.NHeads,
		"num_key_value_heads":     cfg.NKVHeads,
		"head_dim":                cfg.HeadDim,
		"intermediate_size":       cfg.Intermediate,
		"vocab_size":              cfg.Vocab,
		"num_hidden_layers":       cfg.NLayers,
		"rms_norm_eps":            cfg.RMSEps,
		"rope_theta":              cfg.RopeTheta, // transformers < 5
		"rope_parameters":         map[string]any{"rope_type": "default", "rope_theta": cfg.RopeTheta},
		"max_position_embeddings": cfg.MaxSeq,
		"tie_word_embeddings":     cfg.TiedEmbeddings,
		"hidden_act":              "silu",
		"attention_bias":          false,
		"mlp_bias":                false,
		"torch_dtype":             dtype, // transformers < 5
		"dtype":                   dtype,
		"bos_token_id":            1,
		"eos_token_id":            2,
	}
	return json.MarshalIndent(c, "", "  ")
}

// ToHFKeys returns w (weights of cfg, in cfg's key scheme) keyed by the
// HuggingFace Llama state-dict names, the same tensors (not copies). A tied
// lm_head stays absent, as HF expects with tie_word_embeddings.
func ToHFKeys(cfg Config, w Weights) (Weights, error) {
	if err := w.Check(cfg); err != nil {
		return nil, err
	}
	hf := cfg
	hf.KeyScheme = SchemeHF
	from, to := Keys(cfg), Keys(hf)
	out := make(Weights, len(to))
	for i := range from {
		out[to[i].Key] = w[from[i].Key]
	}
	return out, nil
}
