package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// HFConfigError lists every reason a HuggingFace config.json cannot be
// imported: malformed fields and architecture features the Llama decode
// template does not model.
type HFConfigError struct {
	Problems []string
}

func (e *HFConfigError) Error() string {
	return "HuggingFace config cannot be imported: " + strings.Join(e.Problems, "; ")
}

// lookalikes are model types whose config passes the flag checks but whose
// forward pass differs from Llama's in ways the config does not advertise.
var lookalikes = map[string]string{
	"gemma":       "RMSNorm scales by (1+w) and embeddings are multiplied by sqrt(hidden)",
	"gemma2":      "RMSNorm scales by (1+w), embeddings are scaled and logits soft-capped",
	"gemma3":      "RMSNorm scales by (1+w), embeddings are scaled and q/k are normalised",
	"gemma3_text": "RMSNorm scales by (1+w), embeddings are scaled and q/k are normalised",
	"qwen3":       "per-head q/k RMSNorm",
	"olmo2":       "q/k RMSNorm and post-sublayer norms",
	"phi3":        "fused qkv_proj and gate_up_proj tensors",
	"cohere":      "LayerNorm and parallel attention/MLP blocks",
}

// FromHFConfig imports a HuggingFace config.json, reading each field as the
// Python reference does (a missing or null field takes its default)
// into a Config with the "hf" key scheme. nLayers > 0 overrides
// num_hidden_layers (a truncated model for testing); 0 keeps it. Every
// malformed field and every unsupported feature (mixture-of-experts, MLA,
// biased projections, non-SiLU activation, scaled RoPE, indivisible heads
// without head_dim, an unsupported torch_dtype, pre-quantized checkpoints,
// partial rotary, known Llama look-alikes) is reported in one *HFConfigError.
//
// Defaults follow transformers' LlamaConfig: num_key_value_heads = heads,
// head_dim = hidden/heads, rms_norm_eps 1e-6, rope_theta 10000,
// max_position_embeddings 4096 (→ max_seq, lowered to an active sliding
// window, within which the window has no effect), tie_word_embeddings false,
// torch_dtype float32.
func FromHFConfig(data []byte, nLayers int) (Config, error) {
	root, err := pyjson.Parse(data)
	if err != nil {
		return Config{}, &HFConfigError{Problems: []string{"config.json is not valid JSON: " + err.Error()}}
	}
	if d := pyjson.FindDuplicateKey(root); d != nil {
		// Python keeps the last value, another reader the first: refused,
		// as a repeated key is in every document amk reads.
		return Config{}, &HFConfigError{Problems: []string{"config.json has a " + d.Error()}}
	}
	if root.Kind != pyjson.Object {
		return Config{}, &HFConfigError{Problems: []string{"config.json must be a JSON object, got " + root.Kind.String()}}
	}
	r := &hfReader{v: root}
	cfg := r.shape(nLayers)
	r.features()
	cfg.DType = r.dtype()
	cfg.Name = r.label(cfg)
	if len(r.invalid) == 0 {
		for _, p := range cfg.problems() {
			// An indivisible hidden size was already reported; the
			// head_dim derived from it is not a second problem.
			if !(r.badHeadDim && strings.HasPrefix(p, "head_dim ")) {
				r.unsupported = append(r.unsupported, p)
			}
		}
	}
	if all := append(r.invalid, r.unsupported...); len(all) > 0 {
		return Config{}, &HFConfigError{Problems: all}
	}
	return cfg, nil
}

// hfReader reads fields of a parsed config, collecting problems.
type hfReader struct {
	v           pyjson.Value
	invalid     []string // malformed or missing fields
	unsupported []string // well-formed features the template does not model
	badHeadDim  bool     // head_dim was derived from an indivisible hidden size
}

// get returns a field, treating JSON null as absent (getattr with a None
// value falls back to the default in every rule of FromHFConfig).
func (r *hfReader) get(key string) (pyjson.Value, bool) {
	v, ok := r.v.Get(key)
	if !ok || v.Kind == pyjson.Null {
		return pyjson.Value{}, false
	}
	return v, true
}

// integer reads an integral number (Python's int() of an int or an
// integral float).
func integer(v pyjson.Value) (int64, bool) {
	if i, ok := v.Int64(); ok {
		return i, true
	}
	f, ok := v.Float64()
	if !ok || v.Kind != pyjson.Float || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// posInt reads a positive integer field of at most MaxDim; def is used
// when absent (required fields pass def <= 0 and are reported missing).
func (r *hfReader) posInt(key string, def int) int { return r.posIntUpTo(key, def, MaxDim) }

// posIntUpTo is posInt with its own upper bound.
func (r *hfReader) posIntUpTo(key string, def, limit int) int {
	v, ok := r.get(key)
	if !ok {
		if def <= 0 {
			r.invalid = append(r.invalid, fmt.Sprintf("%s is missing", key))
		}
		return def
	}
	i, ok := integer(v)
	if !ok || i <= 0 || i > int64(limit) {
		r.invalid = append(r.invalid, fmt.Sprintf("%s must be an integer in [1, %d], got %s", key, limit, v.Repr()))
		return 0
	}
	return int(i)
}

// number reads a finite positive number; def when absent. zeroIsDefault
// mirrors Python's `x or default`.
func (r *hfReader) number(key string, def float64, zeroIsDefault bool) float64 {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	f, ok := v.Float64()
	if ok && f == 0 && zeroIsDefault {
		return def
	}
	if !ok || !(f > 0) || math.IsInf(f, 0) {
		r.invalid = append(r.invalid, fmt.Sprintf("%s must be a finite positive number, got %s", key, v.Repr()))
		return def
	}
	return f
}

// flag reads a boolean field (absent → false).
func (r *hfReader) flag(key string) bool {
	v, ok := r.get(key)
	if !ok {
		return false
	}
	if v.Kind != pyjson.Bool {
		r.invalid = append(r.invalid, fmt.Sprintf("%s must be true or false, got %s", key, v.Repr()))
		return false
	}
	return v.B
}

func (r *hfReader) shape(nLayers int) Config {
	cfg := Config{KeyScheme: SchemeHF}
	cfg.Hidden = r.posInt("hidden_size", 0)
	cfg.NHeads = r.posInt("num_attention_heads", 0)
	cfg.NKVHeads = r.posInt("num_key_value_heads", max(cfg.NHeads, 1))
	cfg.Intermediate = r.posInt("intermediate_size", 0)
	cfg.Vocab = r.posInt("vocab_size", 0)
	switch {
	case nLayers > 0:
		cfg.NLayers = nLayers
	case nLayers < 0:
		r.invalid = append(r.invalid, fmt.Sprintf("the layer override must be positive (0 keeps num_hidden_layers), got %d", nLayers))
	default:
		cfg.NLayers = r.posIntUpTo("num_hidden_layers", 0, MaxLayers)
	}
	if _, explicit := r.get("head_dim"); explicit {
		cfg.HeadDim = r.posInt("head_dim", 0)
	} else if cfg.Hidden > 0 && cfg.NHeads > 0 {
		if cfg.Hidden%cfg.NHeads != 0 {
			r.unsupported = append(r.unsupported, fmt.Sprintf(
				"hidden_size=%d is not divisible by num_attention_heads=%d and no explicit head_dim is given",
				cfg.Hidden, cfg.NHeads))
			r.badHeadDim = true
		}
		cfg.HeadDim = cfg.Hidden / cfg.NHeads
	}
	cfg.RMSEps = r.number("rms_norm_eps", 1e-6, false)
	cfg.RopeTheta = r.ropeTheta()
	cfg.MaxSeq = r.posInt("max_position_embeddings", 4096)
	if w := r.slidingWindow(); w > 0 && w < cfg.MaxSeq {
		cfg.MaxSeq = w
	}
	cfg.TiedEmbeddings = r.flag("tie_word_embeddings")
	return cfg
}

// ropeTheta resolves theta across transformers versions: the top-level
// rope_theta (`or 10000`), overridden by rope_scaling["rope_theta"] or
// rope_parameters["rope_theta"]; a rope type other than default/llama is
// unsupported.
func (r *hfReader) ropeTheta() float64 {
	theta := r.number("rope_theta", 10000, true)
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		rs, ok := r.get(key)
		if !ok {
			continue
		}
		if rs.Kind != pyjson.Object {
			r.invalid = append(r.invalid, fmt.Sprintf("%s must be an object or null, got %s", key, rs.Repr()))
			continue
		}
		sub := &hfReader{v: rs}
		typ, ok := sub.get("rope_type")
		if !ok {
			typ, ok = sub.get("type")
		}
		if ok && (typ.Kind != pyjson.String || (typ.S != "default" && typ.S != "llama")) {
			r.unsupported = append(r.unsupported, fmt.Sprintf(
				"%s rope_type=%s (only default, unscaled RoPE is modelled)", key, typ.Repr()))
		}
		if _, has := sub.get("rope_theta"); has {
			theta = sub.number("rope_theta", theta, false)
			for _, p := range sub.invalid {
				r.invalid = append(r.invalid, key+"."+p)
			}
		}
	}
	return theta
}

// slidingWindow is the active sliding-window length, or 0.
func (r *hfReader) slidingWindow() int {
	v, ok := r.get("sliding_window")
	if !ok {
		return 0
	}
	if use, ok := r.get("use_sliding_window"); ok && use.Kind == pyjson.Bool && !use.B {
		return 0
	}
	w, ok := integer(v)
	if !ok || w <= 0 {
		r.invalid = append(r.invalid, fmt.Sprintf("sliding_window must be a positive integer or null, got %s", v.Repr()))
		return 0
	}
	return int(min(w, MaxDim))
}

// features collects the architecture features the template does not model.
func (r *hfReader) features() {
	if r.flag("attention_bias") {
		r.unsupported = append(r.unsupported, "attention_bias=True (biased q/k/v/o projections)")
	}
	if r.flag("mlp_bias") {
		r.unsupported = append(r.unsupported, "mlp_bias=True (biased MLP projections)")
	}
	for _, key := range []string{"hidden_act", "hidden_activation"} {
		if act, ok := r.get(key); ok && (act.Kind != pyjson.String || (act.S != "silu" && act.S != "swish")) {
			r.unsupported = append(r.unsupported, fmt.Sprintf("%s=%s (only SiLU/SwiGLU is modelled)", key, act.Repr()))
		}
	}
	for _, key := range []string{"num_local_experts", "num_experts", "n_routed_experts"} {
		if v, ok := r.get(key); ok {
			if n, isInt := integer(v); !isInt || n > 0 {
				r.unsupported = append(r.unsupported, fmt.Sprintf("mixture-of-experts (%s=%s)", key, v.Repr()))
			}
		}
	}
	if v, ok := r.get("kv_lora_rank"); ok {
		r.unsupported = append(r.unsupported, fmt.Sprintf("MLA / latent attention (kv_lora_rank=%s)", v.Repr()))
	}
	if v, ok := r.get("partial_rotary_factor"); ok {
		if f, isNum := v.Float64(); !isNum || f != 1 {
			r.unsupported = append(r.unsupported, fmt.Sprintf("partial rotary embedding (partial_rotary_factor=%s)", v.Repr()))
		}
	}
	if _, ok := r.get("quantization_config"); ok {
		r.unsupported = append(r.unsupported, "a pre-quantized checkpoint (quantization_config is set)")
	}
	r.architecture()
}

// llamaModelTypes and llamaArchitectures name the HuggingFace model types
// and classes whose forward pass is the Llama decode step amk lowers
// (Mistral's differs only by the sliding window, which is read).
var (
	llamaModelTypes    = []string{"llama", "mistral"}
	llamaArchitectures = []string{"LlamaForCausalLM", "MistralForCausalLM"}
)

// architecture refuses a config whose model_type or architectures name
// anything but a Llama-family model, and one that names neither: other
// architectures (GPT-2, BERT, ...) would otherwise be read with Llama's
// defaults and imported as a Llama they are not.
func (r *hfReader) architecture() {
	mt, hasType := r.get("model_type")
	arch, hasArch := r.get("architectures")
	if !hasType && !hasArch {
		r.unsupported = append(r.unsupported, "neither model_type nor architectures is set: cannot tell that this is a Llama-family model")
		return
	}
	if hasType {
		switch {
		case mt.Kind != pyjson.String:
			r.invalid = append(r.invalid, fmt.Sprintf("model_type=%s is not a string", mt.Repr()))
		case lookalikes[mt.S] != "":
			r.unsupported = append(r.unsupported, fmt.Sprintf("model_type=%s (%s)", mt.Repr(), lookalikes[mt.S]))
		case !slices.Contains(llamaModelTypes, mt.S):
			r.unsupported = append(r.unsupported, fmt.Sprintf("model_type=%s is not a Llama-family architecture (supported: %s)",
				mt.Repr(), strings.Join(llamaModelTypes, ", ")))
		}
	}
	if hasArch {
		if arch.Kind != pyjson.Array {
			r.invalid = append(r.invalid, fmt.Sprintf("architectures=%s is not a list", arch.Repr()))
			return
		}
		for _, a := range arch.Arr {
			if a.Kind != pyjson.String || !slices.Contains(llamaArchitectures, a.S) {
				r.unsupported = append(r.unsupported, fmt.Sprintf("architectures entry %s is not a Llama-family class (supported: %s)",
					a.Repr(), strings.Join(llamaArchitectures, ", ")))
			}
		}
	}
}

// dtype reads torch_dtype (transformers v5: dtype); float32 when absent.
func (r *hfReader) dtype() ir.DType {
	for _, key := range []string{"torch_dtype", "dtype"} {
		v, ok := r.get(key)
		if !ok {
			continue
		}
		if v.Kind == pyjson.String {
			switch strings.TrimPrefix(v.S, "torch.") {
			case "float32":
				return ir.F32
			case "float16":
				return ir.F16
			case "bfloat16":
				return ir.BF16
			}
		}
		r.unsupported = append(r.unsupported, fmt.Sprintf("%s=%s (only float32, float16 and bfloat16 are supported)", key, v.Repr()))
		return ir.F32
	}
	return ir.F32
}

// label names the imported model after its architecture and shape.
func (r *hfReader) label(cfg Config) string {
	base := "hf"
	if a, ok := r.get("architectures"); ok && a.Kind == pyjson.Array && len(a.Arr) > 0 && a.Arr[0].Kind == pyjson.String {
		base = a.Arr[0].S
	} else if mt, ok := r.get("model_type"); ok && mt.Kind == pyjson.String {
		base = mt.S
	}
	return fmt.Sprintf("%s(%dL/%dh)", base, cfg.NLayers, cfg.Hidden)
}
