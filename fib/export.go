package fib

import (
	"crypto/sha1"
	"fmt"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

// Roles name the place of an op in amk's decode step (the lowering's task
// labels without the layer prefix). Each exported Definition lists the
// roles it serves; Loop-1 cases and results rows are matched by them.
const (
	RoleEmbed     = "embed"
	RoleNorm      = "norm" // input_norm, post_norm, final_norm
	RoleQProj     = "q_proj"
	RoleKVProj    = "kv_proj" // k_proj and v_proj
	RoleOProj     = "o_proj"
	RoleGateUp    = "gate_up_proj"
	RoleDown      = "down_proj"
	RoleLMHead    = "lm_head"
	RoleRope      = "rope"
	RoleKVAppend  = "kv_append"
	RoleAttention = "attention"
	RoleCombine   = "attention_combine"
	RoleSwiGLU    = "swiglu"
	RoleResidual  = "residual"
	RoleStep      = "decode_step"
)

// Exported is one Definition of a model's decode step with its workloads
// and what amk runs for it.
type Exported struct {
	Definition *Definition
	Workloads  []Workload
	// Ops are the amk opcodes that implement it (GEMV_TILE and GEMM_TILE
	// for a projection: M = 1 and M > 1).
	Ops   []ir.Op
	Roles []string
}

// ExportOptions chooses the workloads: the decode batches and KV lengths
// the var axes are bound to.
type ExportOptions struct {
	Batches   []int // default 1 and 4
	KVLengths []int // default 128 and the model's max_seq
}

// DTypeName is the seed-003 spelling of an amk storage dtype.
func DTypeName(dt ir.DType) (string, error) {
	switch dt {
	case ir.F32:
		return "float32", nil
	case ir.F16:
		return "float16", nil
	case ir.BF16:
		return "bfloat16", nil
	}
	return "", fmt.Errorf("amk dtype %s has no FlashInfer-Bench Definition", dt)
}

// ModelSlug is the model: tag value of a preset or config name
// ("llama-8b"); it keeps letters, digits, '.', '_' and '-'.
func ModelSlug(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// Export returns the Definitions of every op amk's decode step of cfg runs
// (the lowering's ops: embedding, RMSNorm, each projection shape, RoPE, KV
// append, GQA decode attention, the split-KV combine, SwiGLU, the residual
// add) plus the whole step as one fused Definition, with the model's
// constants as const axes, batch and KV length as var axes, model: and
// stage:decode tags and a plain-PyTorch reference written for amk's
// numerics (float32 compute, outputs rounded to the storage dtype).
func Export(slug string, cfg model.Config, opts ExportOptions) ([]Exported, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dt, err := DTypeName(cfg.DType)
	if err != nil {
		return nil, err
	}
	if slug == "" {
		slug = ModelSlug(cfg.Name)
	}
	if len(opts.Batches) == 0 {
		opts.Batches = []int{1, 4}
	}
	if len(opts.KVLengths) == 0 {
		opts.KVLengths = []int{min(128, cfg.MaxSeq), cfg.MaxSeq}
	}
	for _, n := range append(append([]int{}, opts.Batches...), opts.KVLengths...) {
		if n <= 0 {
			return nil, fmt.Errorf("batches and KV lengths must be > 0, got %d", n)
		}
	}
	for _, n := range opts.KVLengths {
		if n > cfg.MaxSeq {
			return nil, fmt.Errorf("KV length %d exceeds the model's max_seq %d", n, cfg.MaxSeq)
		}
	}
	x := exporter{cfg: cfg, dt: dt, tags: []string{"model:" + slug, "stage:decode", "status:draft"}, opts: opts}
	x.embedding()
	x.rmsnorm()
	H, qd, kd, I, V := cfg.Hidden, cfg.QDim(), cfg.KVDim(), cfg.Intermediate, cfg.Vocab
	x.gemm(qd, H, RoleQProj, cfg.Quant.On())
	x.gemm(kd, H, RoleKVProj, cfg.Quant.On())
	x.gemm(H, qd, RoleOProj, cfg.Quant.On())
	x.gemm(I, H, RoleGateUp, cfg.Quant.On())
	x.gemm(H, I, RoleDown, cfg.Quant.On())
	x.gemm(V, H, RoleLMHead, cfg.Quant.QuantizesRole(model.RoleLMHead))
	x.rope()
	x.kvAppend()
	x.attention()
	x.combine()
	x.swiglu()
	x.residual()
	x.step(slug)
	for _, e := range x.out {
		if ps := Errors(Validate(e.Definition)); len(ps) > 0 {
			return nil, fmt.Errorf("internal: exported %s breaks a rule: %v", e.Definition.Name, ps[0])
		}
		for i := range e.Workloads {
			if ps := ValidateWorkload(e.Definition, &e.Workloads[i]); len(ps) > 0 {
				return nil, fmt.Errorf("internal: a workload of %s breaks a rule: %v", e.Definition.Name, ps[0])
			}
		}
	}
	return x.out, nil
}

type exporter struct {
	cfg  model.Config
	dt   string
	tags []string
	opts ExportOptions
	out  []Exported
}

// axes builds an Ordered axes object from alternating name, value pairs;
// a value < 0 makes a var axis.
func axes(pairs ...any) Ordered[Axis] {
	var out Ordered[Axis]
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i].(string)
		v := int64(pairs[i+1].(int))
		if v < 0 {
			out = append(out, Named[Axis]{name, Axis{Type: AxisVar}})
			continue
		}
		out = append(out, Named[Axis]{name, Axis{Type: AxisConst, Value: &v}})
	}
	return out
}

const varAxis = -1

func spec(dtype string, shape ...string) TensorSpec {
	if shape == nil {
		shape = []string{}
	}
	return TensorSpec{Shape: shape, DType: dtype}
}

func scalar(dtype string) TensorSpec { return TensorSpec{DType: dtype} }

// add records a Definition and its workloads over the var axes: batch
// (batchAxis) and, when kvAxis is set, the KV length.
func (x *exporter) add(d *Definition, ops []ir.Op, roles []string, batchAxis, kvAxis string, scalars map[string]func(kv int) any) {
	for i := range x.out {
		if x.out[i].Definition.Name == d.Name { // q_proj and o_proj of a square model share one gemm
			x.out[i].Roles = append(x.out[i].Roles, roles...)
			return
		}
	}
	d.Tags = append(append([]string{}, x.tags...), d.Tags...)
	e := Exported{Definition: d, Ops: ops, Roles: roles}
	kvs := []int{0}
	if kvAxis != "" {
		kvs = x.opts.KVLengths
	}
	for _, b := range x.opts.Batches {
		for _, kv := range kvs {
			w := Workload{}
			for _, v := range d.VarAxes() {
				switch v {
				case batchAxis:
					w.Axes = append(w.Axes, Named[int64]{v, int64(b)})
				case kvAxis:
					w.Axes = append(w.Axes, Named[int64]{v, int64(kv)})
				}
			}
			for _, in := range d.Inputs {
				if in.Value.Scalar() {
					w.Inputs = append(w.Inputs, Named[InputSpec]{in.Name, InputSpec{Type: InputScalar, Value: scalars[in.Name](kv)}})
				} else {
					w.Inputs = append(w.Inputs, Named[InputSpec]{in.Name, InputSpec{Type: InputRandom}})
				}
			}
			w.UUID = workloadUUID(d.Name, w.Axes)
			e.Workloads = append(e.Workloads, w)
		}
	}
	x.out = append(x.out, e)
}

// workloadUUID is a stable UUID-shaped id of a Definition and its axis
// values, so that exporting twice writes the same workloads.
func workloadUUID(def string, ax Ordered[int64]) string {
	h := sha1.New()
	h.Write([]byte(def))
	for _, a := range ax {
		fmt.Fprintf(h, "|%s=%d", a.Name, a.Value)
	}
	s := h.Sum(nil)
	s[6] = s[6]&0x0f | 0x50 // version 5 layout (name-based, SHA-1)
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func (x *exporter) embedding() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("embedding_v%d_h%d", c.Vocab, c.Hidden), OpType: "embedding",
		Description: "Token embedding lookup: one table row per token (amk EMBED).",
		Axes:        axes("batch_size", varAxis, "vocab_size", c.Vocab, "hidden_size", c.Hidden),
		Inputs: Ordered[TensorSpec]{{"token_ids", spec("int32", "batch_size")},
			{"table", spec(x.dt, "vocab_size", "hidden_size")}},
		Outputs:   Ordered[TensorSpec]{{"hidden_states", spec(x.dt, "batch_size", "hidden_size")}},
		Reference: "import torch\n\n\ndef run(token_ids, table):\n    return table[token_ids.to(torch.long)]\n",
	}
	x.add(d, []ir.Op{ir.OpEMBED}, []string{RoleEmbed}, "batch_size", "", nil)
}

func (x *exporter) rmsnorm() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("rmsnorm_h%d", c.Hidden), OpType: "rmsnorm",
		Description: fmt.Sprintf("Root mean square normalization with a learned weight; epsilon is fixed at %s (amk RMSNORM).", pyFloat(c.RMSEps)),
		Axes:        axes("batch_size", varAxis, "hidden_size", c.Hidden),
		Inputs: Ordered[TensorSpec]{{"hidden_states", spec(x.dt, "batch_size", "hidden_size")},
			{"weight", spec(x.dt, "hidden_size")}},
		Outputs: Ordered[TensorSpec]{{"output", spec(x.dt, "batch_size", "hidden_size")}},
		Reference: "import torch\n\nEPS = " + pyFloat(c.RMSEps) + "\n\n\ndef run(hidden_states, weight):\n" +
			"    x = hidden_states.to(torch.float32)\n" +
			"    variance = (x * x).mean(dim=-1, keepdim=True)\n" +
			"    rstd = torch.rsqrt(variance + EPS)\n" +
			"    output = x * rstd * weight.to(torch.float32)\n" +
			"    return output.to(hidden_states.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpRMSNORM}, []string{RoleNorm}, "batch_size", "", nil)
}

func (x *exporter) gemm(n, k int, role string, quant bool) {
	if quant {
		x.quantGEMM(n, k, role)
		return
	}
	d := &Definition{
		Name: fmt.Sprintf("gemm_n%d_k%d", n, k), OpType: "gemm",
		Description: "General matrix multiply C = A @ B.T with float32 accumulation (amk GEMV_TILE for M = 1, GEMM_TILE for M > 1, column tiles of B).",
		Axes:        axes("M", varAxis, "N", n, "K", k),
		Inputs:      Ordered[TensorSpec]{{"A", spec(x.dt, "M", "K")}, {"B", spec(x.dt, "N", "K")}},
		Outputs:     Ordered[TensorSpec]{{"C", spec(x.dt, "M", "N")}},
		Reference: "import torch\n\n\ndef run(A, B):\n" +
			"    C = torch.matmul(A.to(torch.float32), B.to(torch.float32).T)\n" +
			"    return C.to(A.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpGEMVTile, ir.OpGEMMTile}, []string{role}, "M", "", nil)
}

func (x *exporter) rope() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("rope_h%d_kv%d_d%d", c.NHeads, c.NKVHeads, c.HeadDim), OpType: "rope",
		Description: fmt.Sprintf("Llama rotate-half rotary embedding of q and k at each sequence's position, theta %s (amk ROPE).", pyFloat(c.RopeTheta)),
		Axes: axes("batch_size", varAxis, "num_qo_heads", c.NHeads, "num_kv_heads", c.NKVHeads,
			"head_dim", c.HeadDim),
		Inputs: Ordered[TensorSpec]{{"q", spec(x.dt, "batch_size", "num_qo_heads", "head_dim")},
			{"k", spec(x.dt, "batch_size", "num_kv_heads", "head_dim")},
			{"positions", spec("int32", "batch_size")}},
		Outputs: Ordered[TensorSpec]{{"q_out", spec(x.dt, "batch_size", "num_qo_heads", "head_dim")},
			{"k_out", spec(x.dt, "batch_size", "num_kv_heads", "head_dim")}},
		Reference: "import torch\n\nTHETA = " + pyFloat(c.RopeTheta) + "\n\n\n" +
			"def rotate(x, positions):\n" +
			"    half = x.shape[-1] // 2\n" +
			"    inv_freq = THETA ** (-torch.arange(0, half, dtype=torch.float64, device=x.device) * 2.0 / x.shape[-1])\n" +
			"    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]\n" +
			"    cos = torch.cos(angles).to(torch.float32)[:, None, :]\n" +
			"    sin = torch.sin(angles).to(torch.float32)[:, None, :]\n" +
			"    xf = x.to(torch.float32)\n" +
			"    x1, x2 = xf[..., :half], xf[..., half:]\n" +
			"    out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)\n" +
			"    return out.to(x.dtype)\n\n\n" +
			"def run(q, k, positions):\n    return rotate(q, positions), rotate(k, positions)\n",
	}
	x.add(d, []ir.Op{ir.OpROPE}, []string{RoleRope}, "batch_size", "", nil)
}

func (x *exporter) kvAppend() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("kv_append_kv%d_d%d_s%d", c.NKVHeads, c.HeadDim, c.MaxSeq), OpType: "kv_append",
		Description: "Write each sequence's new key (or value) rows into its contiguous cache at position pos (amk KV_APPEND; amk writes in place, the Definition returns the new cache).",
		Axes: axes("batch_size", varAxis, "num_kv_heads", c.NKVHeads, "head_dim", c.HeadDim,
			"max_seq_len", c.MaxSeq),
		Inputs: Ordered[TensorSpec]{{"new_rows", spec(x.dt, "batch_size", "num_kv_heads", "head_dim")},
			{"cache", spec(x.dt, "batch_size", "max_seq_len", "num_kv_heads", "head_dim")},
			{"pos", scalar("int32")}},
		Outputs: Ordered[TensorSpec]{{"cache_out", spec(x.dt, "batch_size", "max_seq_len", "num_kv_heads", "head_dim")}},
		Reference: "import torch\n\n\ndef run(new_rows, cache, pos):\n" +
			"    cache_out = cache.clone()\n" +
			"    cache_out[:, pos] = new_rows\n" +
			"    return cache_out\n",
	}
	x.add(d, []ir.Op{ir.OpKVAppend}, []string{RoleKVAppend}, "batch_size", "",
		map[string]func(int) any{"pos": func(int) any { return c.MaxSeq - 1 }})
}

func (x *exporter) attention() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("gqa_contiguous_decode_h%d_kv%d_d%d", c.NHeads, c.NKVHeads, c.HeadDim), OpType: "gqa_contiguous",
		Description: fmt.Sprintf("Grouped-query decode attention of one query token per sequence over its first kv_len cache rows (a contiguous cache, no paging), scale 1/sqrt(%d) (amk ATTENTION_TILE).", c.HeadDim),
		Axes: axes("batch_size", varAxis, "kv_len", varAxis, "num_qo_heads", c.NHeads, "num_kv_heads", c.NKVHeads,
			"head_dim", c.HeadDim),
		Constraints: []string{"num_qo_heads % num_kv_heads == 0"},
		Inputs: Ordered[TensorSpec]{{"q", spec(x.dt, "batch_size", "num_qo_heads", "head_dim")},
			{"k_cache", spec(x.dt, "batch_size", "kv_len", "num_kv_heads", "head_dim")},
			{"v_cache", spec(x.dt, "batch_size", "kv_len", "num_kv_heads", "head_dim")}},
		Outputs: Ordered[TensorSpec]{{"output", spec(x.dt, "batch_size", "num_qo_heads", "head_dim")}},
		Reference: "import math\nimport torch\n\n\ndef run(q, k_cache, v_cache):\n" +
			"    batch_size, num_qo_heads, head_dim = q.shape\n" +
			"    num_kv_heads = k_cache.shape[2]\n" +
			"    group = num_qo_heads // num_kv_heads\n" +
			"    qf = q.to(torch.float32)\n" +
			"    k = k_cache.to(torch.float32).repeat_interleave(group, dim=2)  # [batch, kv_len, num_qo_heads, head_dim]\n" +
			"    v = v_cache.to(torch.float32).repeat_interleave(group, dim=2)\n" +
			"    scores = torch.einsum(\"bhd,bthd->bht\", qf, k) / math.sqrt(head_dim)\n" +
			"    scores = scores - scores.amax(dim=-1, keepdim=True)\n" +
			"    p = torch.exp(scores)\n" +
			"    p = p / p.sum(dim=-1, keepdim=True)\n" +
			"    output = torch.einsum(\"bht,bthd->bhd\", p, v)\n" +
			"    return output.to(q.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpAttentionTile}, []string{RoleAttention}, "batch_size", "kv_len", nil)
}

func (x *exporter) combine() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("attention_combine_h%d_d%d", c.NHeads, c.HeadDim), OpType: "attention_combine",
		Description: "Merge split-KV flash-attention partials: each partial holds per head [acc = sum exp(s - m) v | m = max s | l = sum exp(s - m)] (amk ATTENTION_COMBINE, used when one sequence's KV is split over several SMs).",
		Axes:        axes("num_partials", varAxis, "num_qo_heads", c.NHeads, "head_dim", c.HeadDim, "partial_width", c.HeadDim+2),
		Constraints: []string{"partial_width == head_dim + 2"},
		Inputs:      Ordered[TensorSpec]{{"partials", spec(x.dt, "num_partials", "num_qo_heads", "partial_width")}},
		Outputs:     Ordered[TensorSpec]{{"output", spec(x.dt, "num_qo_heads", "head_dim")}},
		Reference: "import torch\n\n\ndef run(partials):\n" +
			"    p = partials.to(torch.float32)\n" +
			"    head_dim = p.shape[-1] - 2\n" +
			"    acc, m, l = p[..., :head_dim], p[..., head_dim], p[..., head_dim + 1]\n" +
			"    m_all = m.amax(dim=0)\n" +
			"    w = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp(m - m_all))\n" +
			"    num = (acc * w[..., None]).sum(dim=0)\n" +
			"    den = (l * w).sum(dim=0)\n" +
			"    return (num / den[..., None]).to(partials.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpAttentionCombine}, []string{RoleCombine}, "num_partials", "", nil)
	// The var axis is the number of partials, not a batch: bind it to 4.
	last := &x.out[len(x.out)-1]
	last.Workloads = last.Workloads[:0]
	w := Workload{Axes: Ordered[int64]{{"num_partials", 4}}, Inputs: Ordered[InputSpec]{{"partials", InputSpec{Type: InputRandom}}}}
	w.UUID = workloadUUID(d.Name, w.Axes)
	last.Workloads = append(last.Workloads, w)
}

func (x *exporter) swiglu() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("silu_mul_i%d", c.Intermediate), OpType: "silu_mul",
		Description: "SwiGLU activation silu(gate) * up (amk SILU_MUL).",
		Axes:        axes("batch_size", varAxis, "intermediate_size", c.Intermediate),
		Inputs: Ordered[TensorSpec]{{"gate", spec(x.dt, "batch_size", "intermediate_size")},
			{"up", spec(x.dt, "batch_size", "intermediate_size")}},
		Outputs: Ordered[TensorSpec]{{"output", spec(x.dt, "batch_size", "intermediate_size")}},
		Reference: "import torch\n\n\ndef run(gate, up):\n" +
			"    g = gate.to(torch.float32)\n" +
			"    output = g / (1.0 + torch.exp(-g)) * up.to(torch.float32)\n" +
			"    return output.to(gate.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpSiLUMul}, []string{RoleSwiGLU}, "batch_size", "", nil)
}

func (x *exporter) residual() {
	c := x.cfg
	d := &Definition{
		Name: fmt.Sprintf("add_h%d", c.Hidden), OpType: "add",
		Description: "Residual add (amk ADD).",
		Axes:        axes("batch_size", varAxis, "hidden_size", c.Hidden),
		Inputs: Ordered[TensorSpec]{{"a", spec(x.dt, "batch_size", "hidden_size")},
			{"b", spec(x.dt, "batch_size", "hidden_size")}},
		Outputs:   Ordered[TensorSpec]{{"output", spec(x.dt, "batch_size", "hidden_size")}},
		Reference: "import torch\n\n\ndef run(a, b):\n    return (a.to(torch.float32) + b.to(torch.float32)).to(a.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpADD}, []string{RoleResidual}, "batch_size", "", nil)
}

// StepName is the name of a model's whole-decode-step Definition.
func StepName(slug string, cfg model.Config) string {
	s := strings.NewReplacer("-", "_", ".", "_").Replace(slug)
	return fmt.Sprintf("decode_step_%s_l%d_h%d", s, cfg.NLayers, cfg.Hidden)
}

func (x *exporter) step(slug string) {
	c := x.cfg
	d := &Definition{
		Name: StepName(slug, c), OpType: "decode_step",
		Description: fmt.Sprintf("One Llama-family decode step of %s for a batch of sequences at position pos: embedding, %d layers of (RMSNorm, "+
			"q/k/v projections, RoPE, KV append, GQA attention over rows [0, pos], o projection, residual, RMSNorm, SwiGLU MLP, residual), "+
			"final RMSNorm and lm_head. amk runs it as one persistent megakernel; the caches are updated in place at row pos. "+
			"eps %s, rope theta %s; with tied embeddings pass the embedding table as lm_head.", c.Name, c.NLayers, pyFloat(c.RMSEps), pyFloat(c.RopeTheta)),
		Tags: []string{"fused"},
		Axes: axes("batch_size", varAxis, "num_layers", c.NLayers, "hidden_size", c.Hidden, "num_qo_heads", c.NHeads,
			"num_kv_heads", c.NKVHeads, "head_dim", c.HeadDim, "q_dim", c.QDim(), "kv_dim", c.KVDim(),
			"intermediate_size", c.Intermediate, "vocab_size", c.Vocab, "max_seq_len", c.MaxSeq),
		Constraints: []string{"q_dim == num_qo_heads * head_dim", "kv_dim == num_kv_heads * head_dim",
			"num_qo_heads % num_kv_heads == 0"},
		Inputs: x.quantStepInputs(Ordered[TensorSpec]{
			{"token_ids", spec("int32", "batch_size")},
			{"pos", scalar("int32")},
			{"embed", spec(x.dt, "vocab_size", "hidden_size")},
			{"input_norm", spec(x.dt, "num_layers", "hidden_size")},
			{"w_q", spec(x.dt, "num_layers", "q_dim", "hidden_size")},
			{"w_k", spec(x.dt, "num_layers", "kv_dim", "hidden_size")},
			{"w_v", spec(x.dt, "num_layers", "kv_dim", "hidden_size")},
			{"w_o", spec(x.dt, "num_layers", "hidden_size", "q_dim")},
			{"post_norm", spec(x.dt, "num_layers", "hidden_size")},
			{"w_gate", spec(x.dt, "num_layers", "intermediate_size", "hidden_size")},
			{"w_up", spec(x.dt, "num_layers", "intermediate_size", "hidden_size")},
			{"w_down", spec(x.dt, "num_layers", "hidden_size", "intermediate_size")},
			{"final_norm", spec(x.dt, "hidden_size")},
			{"lm_head", spec(x.dt, "vocab_size", "hidden_size")},
			{"k_cache", spec(x.dt, "num_layers", "batch_size", "max_seq_len", "num_kv_heads", "head_dim")},
			{"v_cache", spec(x.dt, "num_layers", "batch_size", "max_seq_len", "num_kv_heads", "head_dim")},
		}),
		Outputs:   Ordered[TensorSpec]{{"logits", spec(x.dt, "batch_size", "vocab_size")}},
		Reference: stepReference(c),
	}
	if c.Quant.On() {
		x.quantStep(d)
	}
	pos := c.MaxSeq / 2
	x.add(d, nil, []string{RoleStep}, "batch_size", "",
		map[string]func(int) any{"pos": func(int) any { return pos }})
}

func stepReference(c model.Config) string {
	return "import math\nimport torch\n\n" +
		"EPS = " + pyFloat(c.RMSEps) + "\n" +
		"THETA = " + pyFloat(c.RopeTheta) + "\n" +
		fmt.Sprintf("NUM_QO_HEADS = %d\nNUM_KV_HEADS = %d\nHEAD_DIM = %d\n\n\n", c.NHeads, c.NKVHeads, c.HeadDim) +
		"def rmsnorm(x, w):\n" +
		"    x = x.to(torch.float32)\n" +
		"    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + EPS) * w.to(torch.float32)\n\n\n" +
		"def linear(x, w):\n" +
		"    return torch.matmul(x, w.to(torch.float32).T)\n\n\n" +
		"def rope(x, pos):\n" +
		"    half = HEAD_DIM // 2\n" +
		"    inv_freq = THETA ** (-torch.arange(0, half, dtype=torch.float64, device=x.device) * 2.0 / HEAD_DIM)\n" +
		"    angles = float(pos) * inv_freq\n" +
		"    cos, sin = torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)\n" +
		"    x1, x2 = x[..., :half], x[..., half:]\n" +
		"    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)\n\n\n" +
		"def run(token_ids, pos, embed, input_norm, w_q, w_k, w_v, w_o, post_norm, w_gate, w_up, w_down,\n" +
		"        final_norm, lm_head, k_cache, v_cache):\n" +
		"    dtype = embed.dtype\n" +
		"    batch_size = token_ids.shape[0]\n" +
		"    group = NUM_QO_HEADS // NUM_KV_HEADS\n" +
		"    h = embed[token_ids.to(torch.long)].to(torch.float32)\n" +
		"    for layer in range(w_q.shape[0]):\n" +
		"        x = rmsnorm(h, input_norm[layer]).to(dtype).to(torch.float32)\n" +
		"        q = linear(x, w_q[layer]).to(dtype).to(torch.float32).view(batch_size, NUM_QO_HEADS, HEAD_DIM)\n" +
		"        k = linear(x, w_k[layer]).to(dtype).to(torch.float32).view(batch_size, NUM_KV_HEADS, HEAD_DIM)\n" +
		"        v = linear(x, w_v[layer]).to(dtype).view(batch_size, NUM_KV_HEADS, HEAD_DIM)\n" +
		"        q = rope(q, pos).to(dtype).to(torch.float32)\n" +
		"        k_cache[layer, :, pos] = rope(k, pos).to(dtype)\n" +
		"        v_cache[layer, :, pos] = v\n" +
		"        keys = k_cache[layer, :, : pos + 1].to(torch.float32).repeat_interleave(group, dim=2)\n" +
		"        values = v_cache[layer, :, : pos + 1].to(torch.float32).repeat_interleave(group, dim=2)\n" +
		"        scores = torch.einsum(\"bhd,bthd->bht\", q, keys) / math.sqrt(HEAD_DIM)\n" +
		"        p = torch.exp(scores - scores.amax(dim=-1, keepdim=True))\n" +
		"        p = p / p.sum(dim=-1, keepdim=True)\n" +
		"        attn = torch.einsum(\"bht,bthd->bhd\", p, values).to(dtype).to(torch.float32)\n" +
		"        h = (h + linear(attn.reshape(batch_size, -1), w_o[layer]).to(dtype)).to(dtype).to(torch.float32)\n" +
		"        x = rmsnorm(h, post_norm[layer]).to(dtype).to(torch.float32)\n" +
		"        gate = linear(x, w_gate[layer]).to(dtype).to(torch.float32)\n" +
		"        up = linear(x, w_up[layer]).to(dtype).to(torch.float32)\n" +
		"        act = (gate / (1.0 + torch.exp(-gate)) * up).to(dtype).to(torch.float32)\n" +
		"        h = (h + linear(act, w_down[layer]).to(dtype)).to(dtype).to(torch.float32)\n" +
		"    x = rmsnorm(h, final_norm).to(dtype).to(torch.float32)\n" +
		"    return linear(x, lm_head).to(dtype)\n"
}
