package model

import (
	"strconv"

	"github.com/amk-dev/amk/ir"
)

// Role says what a weight tensor is for; InitWeights draws each role from its
// own distribution.
type Role int

// Weight roles.
const (
	RoleEmbed  Role = iota // token embedding table [vocab, hidden]
	RoleNorm               // RMSNorm weight [hidden]
	RoleLinear             // projection [N_out, K_in]
	RoleLMHead             // output projection [vocab, hidden] (absent when tied and not quantised apart)
	RoleScales             // the F16 scales [N, groups] of the quantised projection listed before it
)

// KeySpec is one state-dict entry of a model.
type KeySpec struct {
	Key   string
	Shape []int
	Role  Role
	// Layer is the decoder layer index, or -1 outside the layers.
	Layer int
	// DType is the stored dtype: the model dtype, a quantised projection's
	// I8/I4 (Shape stays [N, K] in elements), its scales' ScalesDType.
	DType ir.DType
}

// Numel is the element count of the entry.
func (k KeySpec) Numel() int64 {
	n := int64(1)
	for _, d := range k.Shape {
		n *= int64(d)
	}
	return n
}

// LayerNames are the state-dict keys of one decoder layer.
type LayerNames struct {
	InputNorm, PostNorm string
	Q, K, V, O          string
	Gate, Up, Down      string
}

// Names are a model's state-dict keys by role. LMHead equals Embed when the
// embeddings are tied.
type Names struct {
	Embed     string
	Layers    []LayerNames
	FinalNorm string
	LMHead    string
}

// KeyNames returns the state-dict key of every weight of cfg, in cfg's key
// scheme (SchemeToy or SchemeHF, the two layouts the Python reference uses).
// An unknown scheme is treated as "toy";
// Validate rejects it.
func KeyNames(cfg Config) Names {
	n := Names{Layers: make([]LayerNames, max(cfg.NLayers, 0))}
	if cfg.KeyScheme == SchemeHF {
		n.Embed, n.FinalNorm, n.LMHead = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"
		for l := range n.Layers {
			pre := "model.layers." + strconv.Itoa(l) + "."
			n.Layers[l] = LayerNames{
				InputNorm: pre + "input_layernorm.weight",
				PostNorm:  pre + "post_attention_layernorm.weight",
				Q:         pre + "self_attn.q_proj.weight",
				K:         pre + "self_attn.k_proj.weight",
				V:         pre + "self_attn.v_proj.weight",
				O:         pre + "self_attn.o_proj.weight",
				Gate:      pre + "mlp.gate_proj.weight",
				Up:        pre + "mlp.up_proj.weight",
				Down:      pre + "mlp.down_proj.weight",
			}
		}
	} else {
		n.Embed, n.FinalNorm, n.LMHead = "embed.weight", "final_norm", "lm_head.weight"
		for l := range n.Layers {
			pre := "layers." + strconv.Itoa(l) + "."
			n.Layers[l] = LayerNames{
				InputNorm: pre + "input_norm",
				PostNorm:  pre + "post_norm",
				Q:         pre + "attn.q_proj.weight",
				K:         pre + "attn.k_proj.weight",
				V:         pre + "attn.v_proj.weight",
				O:         pre + "attn.o_proj.weight",
				Gate:      pre + "mlp.gate_proj.weight",
				Up:        pre + "mlp.up_proj.weight",
				Down:      pre + "mlp.down_proj.weight",
			}
		}
	}
	if cfg.LMHeadShared() {
		n.LMHead = n.Embed
	}
	return n
}

// Keys lists every weight tensor of cfg with its shape and stored dtype,
// in a fixed order: the embedding; per layer input norm, q, k, v, o, post
// norm, gate, up, down; the final norm; the lm_head (omitted when it is the
// embedding table, LMHeadShared). A quantised projection (cfg.Quant) is
// followed by its scales, KEY + ir.ScalesSuffix.
func Keys(cfg Config) []KeySpec {
	n := KeyNames(cfg)
	h, q, kv, inter := cfg.Hidden, cfg.QDim(), cfg.KVDim(), cfg.Intermediate
	out := make([]KeySpec, 0, 3+16*len(n.Layers))
	add := func(key string, shape []int, role Role, layer int) {
		out = append(out, KeySpec{key, shape, role, layer, cfg.DType})
		if !cfg.Quant.QuantizesRole(role) {
			return
		}
		out[len(out)-1].DType = cfg.Quant.WeightDType()
		groups := int(ir.QuantGroups(int64(shape[1]), int64(cfg.Quant.GroupOf(shape[1]))))
		out = append(out, KeySpec{key + ir.ScalesSuffix, []int{shape[0], groups}, RoleScales, layer, ScalesDType})
	}
	add(n.Embed, []int{cfg.Vocab, h}, RoleEmbed, -1)
	for l, ln := range n.Layers {
		add(ln.InputNorm, []int{h}, RoleNorm, l)
		add(ln.Q, []int{q, h}, RoleLinear, l)
		add(ln.K, []int{kv, h}, RoleLinear, l)
		add(ln.V, []int{kv, h}, RoleLinear, l)
		add(ln.O, []int{h, q}, RoleLinear, l)
		add(ln.PostNorm, []int{h}, RoleNorm, l)
		add(ln.Gate, []int{inter, h}, RoleLinear, l)
		add(ln.Up, []int{inter, h}, RoleLinear, l)
		add(ln.Down, []int{h, inter}, RoleLinear, l)
	}
	add(n.FinalNorm, []int{h}, RoleNorm, -1)
	if !cfg.LMHeadShared() {
		add(n.LMHead, []int{cfg.Vocab, h}, RoleLMHead, -1)
	}
	return out
}

// NumParams is the number of weight values of cfg (a tied lm_head counted
// once; scales not counted): the values Keys lists, counted without listing
// them (a config with very many layers costs no more than one with few).
func (c *Config) NumParams() int64 {
	return c.ParamsOutsideLayers() + int64(max(c.NLayers, 0))*c.ParamsPerLayer()
}

// ParamsPerLayer is the number of weight values of one decoder layer: two
// norms, the q/k/v/o projections and the gate/up/down projections.
func (c *Config) ParamsPerLayer() int64 {
	h, q, kv, inter := int64(c.Hidden), int64(c.QDim()), int64(c.KVDim()), int64(c.Intermediate)
	return 2*h + q*h + 2*kv*h + h*q + 3*inter*h
}

// ParamsOutsideLayers is the number of weight values outside the decoder
// layers: the embedding, the final norm and an lm_head of its own (untied,
// or tied but quantised while the embedding is not).
func (c *Config) ParamsOutsideLayers() int64 {
	h, v := int64(c.Hidden), int64(c.Vocab)
	n := v*h + h
	if !c.LMHeadShared() {
		n += v * h
	}
	return n
}

// WeightBytes is the storage size of all weights at their stored dtypes (a
// tied lm_head counted once, scales included): 279,296 bytes for toy,
// 622,891,008 for small. It is the sum over Keys, computed without listing
// them, so a config with very many layers costs no more than one with few.
func (c *Config) WeightBytes() int64 {
	h, q, kv, inter, v := c.Hidden, c.QDim(), c.KVDim(), c.Intermediate, c.Vocab
	norm := c.DType.NBytes(int64(h))
	layer := 2*norm + c.matrixBytes(RoleLinear, q, h) + 2*c.matrixBytes(RoleLinear, kv, h) +
		c.matrixBytes(RoleLinear, h, q) + 2*c.matrixBytes(RoleLinear, inter, h) + c.matrixBytes(RoleLinear, h, inter)
	n := c.matrixBytes(RoleEmbed, v, h) + norm + int64(max(c.NLayers, 0))*layer
	if !c.LMHeadShared() {
		n += c.matrixBytes(RoleLMHead, v, h)
	}
	return n
}

// matrixBytes is the storage size of one [rows, cols] weight of the given
// role as Keys lists it: at the model dtype, or quantised with its scales.
func (c *Config) matrixBytes(role Role, rows, cols int) int64 {
	values := int64(rows) * int64(cols)
	if !c.Quant.QuantizesRole(role) {
		return c.DType.NBytes(values)
	}
	groups := ir.QuantGroups(int64(cols), int64(c.Quant.GroupOf(cols)))
	return c.Quant.WeightDType().NBytes(values) + ScalesDType.NBytes(int64(rows)*groups)
}
