package model

import "github.com/amk-dev/amk/ir"

// Config is a Llama-family decode model's shape.
type Config struct {
	Name         string  `json:"name"`
	Hidden       int     `json:"hidden"`
	NHeads       int     `json:"n_heads"`
	NKVHeads     int     `json:"n_kv_heads"`
	HeadDim      int     `json:"head_dim"`
	Intermediate int     `json:"intermediate"`
	Vocab        int     `json:"vocab"`
	NLayers      int     `json:"n_layers"`
	RMSEps       float64 `json:"rms_eps"`
	RopeTheta    float64 `json:"rope_theta"`
	MaxSeq       int     `json:"max_seq"`
	// DType is the native storage type of weights and activations.
	DType ir.DType `json:"-"`
	// TiedEmbeddings: lm_head reuses the embedding table.
	TiedEmbeddings bool `json:"tie_word_embeddings"`
	// KeyScheme selects state-dict key names: "toy" or "hf".
	KeyScheme string `json:"key_scheme"`
	// Quant is how the projection weights are stored (zero: at DType).
	Quant Quantization `json:"quantization,omitzero"`
}

// QDim is n_heads * head_dim.
func (c *Config) QDim() int { return c.NHeads * c.HeadDim }

// KVDim is n_kv_heads * head_dim.
func (c *Config) KVDim() int { return c.NKVHeads * c.HeadDim }
