package fib

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

// CaseSpec is one imported workload as a Loop-1 case: the amk opcode, a
// synthetic model whose decode-step lowering holds that op at the
// workload's shape, and which task group of it to cut (by label).
type CaseSpec struct {
	Definition string
	Workload   string // the workload's uuid
	Role       string
	Op         ir.Op
	Model      model.Config
	Batch      int
	Pos        int    // decode position of the lowering (attention reads Pos+1 rows)
	Label      string // task label of the group: "final_norm", "lm_head", "L0.attention", ...
	// Partitions is the split-KV factor of the lowering (1: one attention task per sequence).
	Partitions int
	// Note says what the mapping assumed, if anything.
	Note string
}

// Mapping says whether amk can serve a Definition, with its cases (one per
// workload) or the reasons it cannot.
type Mapping struct {
	Definition string
	OpType     string
	Op         string // the amk micro-kernel(s), "" when unmapped
	Reasons    []string
	Cases      []CaseSpec
}

// Mapped reports whether the Definition maps onto an amk micro-kernel.
func (m *Mapping) Mapped() bool { return m.Op != "" && len(m.Reasons) == 0 }

// mapRule is one row of the mapping table: an op_type and how its tensors
// must look for an amk micro-kernel to implement it.
type mapRule struct {
	opTypes []string
	role    string
	ops     string // the amk opcodes, for the report
	// match checks the Definition's interface and returns the case for
	// one workload, or the reasons it does not fit.
	match func(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string)
}

// unservedOpTypes are op_types with no amk micro-kernel, and why.
var unservedOpTypes = map[string]string{
	"gqa_paged":         "paged KV cache (page_size, kv_indptr/kv_indices page tables): amk's ATTENTION_TILE reads one contiguous cache per sequence",
	"gqa_ragged":        "ragged prefill attention (qo_indptr/kv_indptr, many query tokens per sequence): amk's ATTENTION_TILE is decode, one query token per sequence",
	"mla_paged":         "multi-head latent attention: amk lowers Llama-family GQA only",
	"mla_ragged":        "multi-head latent attention: amk lowers Llama-family GQA only",
	"grouped_gemm":      "grouped GEMM over a G axis: amk's GEMV/GEMM tiles run one projection",
	"moe":               "mixture of experts: amk lowers dense Llama-family MLPs only",
	"sampling":          "sampling: amk's decode step ends at the logits (SAMPLE_ARGMAX is greedy and not in the lowering)",
	"fused_add_rmsnorm": "residual add fused into RMSNorm: amk runs ADD and RMSNORM as two tasks (no fused recipe for it)",
	"attention_combine": "the number of split-KV partials is chosen by the schedule's n_partitions, not by a workload",
	"decode_step":       "a whole decode step is Loop 2 (amkctl eval / autoresearch), not a Loop-1 micro-kernel",
}

// mapTable is the mapping: op_type → amk micro-kernel.
var mapTable = []mapRule{
	{[]string{"rmsnorm"}, RoleNorm, "RMSNORM", matchRMSNorm},
	{[]string{"gemm"}, "projection", "GEMV_TILE (M = 1), GEMM_TILE (M > 1)", matchGEMM},
	{[]string{"gqa_contiguous"}, RoleAttention, "ATTENTION_TILE", matchGQAContiguous},
	{[]string{"gqa"}, RoleAttention, "ATTENTION_TILE", matchGQAContiguous},
	{[]string{"silu_mul"}, RoleSwiGLU, "SILU_MUL", matchElementwise(ir.OpSiLUMul, "L0.swiglu", true)},
	{[]string{"add"}, RoleResidual, "ADD", matchElementwise(ir.OpADD, "L0.attn_residual", false)},
	{[]string{"embedding"}, RoleEmbed, "EMBED", matchEmbedding},
	{[]string{"rope"}, RoleRope, "ROPE", matchRoPE},
	{[]string{"kv_append"}, RoleKVAppend, "KV_APPEND", matchKVAppend},
}

// MaxCaseElements bounds a case's largest weight (elements): the reference
// VM runs every case on the CPU.
const MaxCaseElements = 1 << 27

// Map maps every Definition of a dataset onto amk's micro-kernels, one
// case per workload, sorted by Definition name.
func Map(ds *Dataset) []Mapping {
	names := make([]string, 0, len(ds.Definitions))
	for n := range ds.Definitions {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Mapping, 0, len(names))
	for _, n := range names {
		if why, broken := ds.Broken[n]; broken {
			out = append(out, Mapping{Definition: n, OpType: ds.Definitions[n].OpType,
				Reasons: []string{fmt.Sprintf("the Definition breaks a seed-003 rule (%s)", why)}})
			continue
		}
		out = append(out, MapDefinition(ds.Definitions[n], ds.Workloads[n]))
	}
	return out
}

// MapDefinition maps one Definition and its workloads.
func MapDefinition(d *Definition, workloads []Workload) Mapping {
	m := Mapping{Definition: d.Name, OpType: d.OpType}
	if ps := Errors(Validate(d)); len(ps) > 0 {
		m.Reasons = append(m.Reasons, fmt.Sprintf("the Definition breaks a seed-003 rule (%s)", ps[0]))
		return m
	}
	var rule *mapRule
	for i := range mapTable {
		if slices.Contains(mapTable[i].opTypes, d.OpType) {
			rule = &mapTable[i]
		}
	}
	if rule == nil {
		why := unservedOpTypes[d.OpType]
		if why == "" {
			why = fmt.Sprintf("no amk micro-kernel for op_type %q", d.OpType)
		}
		m.Reasons = append(m.Reasons, why)
		return m
	}
	if _, reasons := rule.match(d, nil, 0); len(reasons) > 0 {
		m.Reasons = reasons
		return m
	}
	dt, reasons := commonDType(d)
	if len(reasons) > 0 {
		m.Reasons = reasons
		return m
	}
	m.Op = rule.ops
	if len(workloads) == 0 {
		m.Reasons = append(m.Reasons, "no workloads: nothing to bind the var axes to")
		m.Op = ""
		return m
	}
	for i := range workloads {
		w := &workloads[i]
		if ps := ValidateWorkload(d, w); len(ps) > 0 {
			m.Reasons = append(m.Reasons, fmt.Sprintf("workload %s: %s", w.UUID, ps[0]))
			continue
		}
		if why := fileInputs(w); why != "" {
			m.Reasons = append(m.Reasons, fmt.Sprintf("workload %s: %s", w.UUID, why))
			continue
		}
		c, reasons := rule.match(d, w, dt)
		if len(reasons) > 0 {
			m.Reasons = append(m.Reasons, fmt.Sprintf("workload %s: %s", w.UUID, strings.Join(reasons, "; ")))
			continue
		}
		c.Definition, c.Workload, c.Role = d.Name, w.UUID, rule.role
		if c.Role == "projection" {
			c.Role = RoleLMHead
		}
		m.Cases = append(m.Cases, c)
	}
	if len(m.Cases) > 0 {
		m.Reasons = nil // some workloads fit; the others are listed in the notes of the caller
	}
	return m
}

// commonDType is the one floating dtype amk runs the op at: every float
// tensor must share it.
func commonDType(d *Definition) (ir.DType, []string) {
	var dtype string
	var reasons []string
	for _, set := range []Ordered[TensorSpec]{d.Inputs, d.Outputs} {
		for _, t := range set {
			switch t.Value.DType {
			case "int32", "int64":
				continue // ids, positions
			case "float32", "float16", "bfloat16":
				if t.Value.Scalar() {
					continue // eps and scale scalars are parameters
				}
				if dtype == "" {
					dtype = t.Value.DType
				} else if t.Value.DType != dtype {
					reasons = append(reasons, fmt.Sprintf("%s is %s while other tensors are %s: amk's micro-kernels run one storage dtype", t.Name, t.Value.DType, dtype))
				}
			default:
				reasons = append(reasons, fmt.Sprintf("%s is %s: amk's micro-kernels take float32, float16 or bfloat16", t.Name, t.Value.DType))
			}
		}
	}
	dt := map[string]ir.DType{"float32": ir.F32, "float16": ir.F16, "bfloat16": ir.BF16}[dtype]
	if dtype == "" && len(reasons) == 0 {
		reasons = append(reasons, "no float tensor")
	}
	return dt, reasons
}

// baseModel is the smallest model the lowering accepts; the matchers
// override the dimensions the Definition fixes.
func baseModel(name string, dt ir.DType) model.Config {
	return model.Config{Name: name, Hidden: 64, NHeads: 1, NKVHeads: 1, HeadDim: 64, Intermediate: 64, Vocab: 64,
		NLayers: 1, RMSEps: 1e-6, RopeTheta: 10000, MaxSeq: casePos + 1, DType: dt, KeyScheme: model.SchemeToy}
}

// casePos is the decode position of every case that is not attention.
const casePos = 7

// tensorsOfRank returns the non-scalar tensors of rank r.
func tensorsOfRank(set Ordered[TensorSpec], r int) []Named[TensorSpec] {
	var out []Named[TensorSpec]
	for _, t := range set {
		if !t.Value.Scalar() && len(t.Value.Shape) == r {
			out = append(out, t)
		}
	}
	return out
}

// axisValue is an axis's value: its const value, else the workload's.
func axisValue(d *Definition, w *Workload, name string) (int64, bool) {
	if v, ok := d.ConstAxes()[name]; ok {
		return v, true
	}
	if w == nil {
		return 0, false
	}
	return w.Axes.Get(name)
}

// needConst adds a reason for each named axis that is not const.
func needConst(d *Definition, reasons *[]string, what string, axes ...string) {
	for _, a := range axes {
		if ax, _ := d.Axes.Get(a); ax.Type != AxisConst {
			*reasons = append(*reasons, fmt.Sprintf("%s (axis %s) is a var axis: amk lowers it as a model constant", what, a))
		}
	}
}

func sizeCheck(reasons *[]string, what string, elems ...int64) {
	n := int64(1)
	for _, e := range elems {
		if e > 0 && n > MaxCaseElements/e {
			// Past the cap already: stop before the product can overflow.
			*reasons = append(*reasons, fmt.Sprintf("%s has more than the %d elements the CPU reference VM checks a case with (%s)", what, MaxCaseElements, joinDims(elems)))
			return
		}
		n *= e
	}
	if n > MaxCaseElements {
		*reasons = append(*reasons, fmt.Sprintf("%s has %d elements, more than the %d the CPU reference VM checks a case with", what, n, MaxCaseElements))
	}
}

func joinDims(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(parts, " x ")
}

// fileInputs refuses a workload whose inputs are safetensors files, naming
// them: amk builds every case from generated data and does not load a
// workload's tensors, so running it would check (and report PASS on) data
// the workload did not give. Random inputs are generated data, and scalar
// inputs are read as parameters.
func fileInputs(w *Workload) string {
	var files []string
	for _, in := range w.Inputs {
		if in.Value.Type == InputSafetensors {
			files = append(files, fmt.Sprintf("input %q is tensor %q of the safetensors file %s", in.Name, in.Value.TensorKey, in.Value.Path))
		}
	}
	if len(files) == 0 {
		return ""
	}
	return strings.Join(files, "; ") + ": amk builds its cases from generated data and does not load workload tensors, so this workload is not run (on other data its PASS would be about inputs it was not given)"
}

func dimOK(reasons *[]string, name string, v int64) int {
	if v < 1 || v > model.MaxDim {
		*reasons = append(*reasons, fmt.Sprintf("%s = %d is outside amk's 1..%d", name, v, model.MaxDim))
		return 1
	}
	return int(v)
}

// referenceConstant reads NAME = <float> from a reference (the constants
// amk's exported references declare), else def.
func referenceConstant(d *Definition, name string, def float64) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*=\s*([0-9.eE+\-]+)\s*$`)
	if m := re.FindStringSubmatch(d.Reference); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > 0 {
			return v
		}
	}
	return def
}

func matchRMSNorm(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	var reasons []string
	x, wt, outs := tensorsOfRank(d.Inputs, 2), tensorsOfRank(d.Inputs, 1), tensorsOfRank(d.Outputs, 2)
	if len(x) != 1 || len(wt) != 1 || len(outs) != 1 || len(d.Outputs) != 1 {
		return CaseSpec{}, []string{"rmsnorm with inputs other than one [batch, hidden] tensor and one [hidden] weight, or more than one output"}
	}
	batchAx, hiddenAx := x[0].Value.Shape[0], x[0].Value.Shape[1]
	if wt[0].Value.Shape[0] != hiddenAx || !slices.Equal(outs[0].Value.Shape, x[0].Value.Shape) {
		reasons = append(reasons, "the weight or the output does not share the input's hidden axis")
	}
	needConst(d, &reasons, "hidden size", hiddenAx)
	// eps: the workload's scalar input, else the EPS constant of amk's
	// references, else the dataset's usual 1e-6 (said in the case's note).
	const defaultEps = 1e-6
	eps := referenceConstant(d, "EPS", 0)
	for _, in := range d.Inputs {
		if in.Value.Scalar() && w != nil {
			spec, _ := w.Inputs.Get(in.Name)
			if f, ok := spec.Value.(float64); ok && f > 0 {
				eps = f
			}
		}
	}
	note := ""
	if eps == 0 {
		eps, note = defaultEps, "eps 1e-6 assumed: no eps input and no EPS constant in the reference"
	}
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	h, _ := axisValue(d, w, hiddenAx)
	b, _ := axisValue(d, w, batchAx)
	cfg := baseModel(d.Name, dt)
	cfg.Hidden, cfg.RMSEps = dimOK(&reasons, hiddenAx, h), eps
	return CaseSpec{Op: ir.OpRMSNORM, Model: cfg, Batch: dimOK(&reasons, batchAx, b), Pos: casePos, Label: "final_norm", Partitions: 1,
		Note: note}, reasons
}

func matchGEMM(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	in, out := tensorsOfRank(d.Inputs, 2), tensorsOfRank(d.Outputs, 2)
	for _, tag := range d.Tags {
		if strings.HasPrefix(tag, "quantization:") {
			return CaseSpec{}, []string{"a quantized gemm (" + tag + "): amk exports its own (quantized_gemm_*) but does not map one back into a Loop-1 case; tune the quantised GEMV with tune-instruction gemv_tile --quantize SCHEME"}
		}
	}
	if len(d.Inputs) != 2 || len(in) != 2 || len(d.Outputs) != 1 || len(out) != 1 {
		return CaseSpec{}, []string{fmt.Sprintf("gemm with inputs %s: amk's GEMV/GEMM tiles take exactly A [M, K] and B [N, K] (no scales, no bias)",
			quoteList(d.Inputs.Names()))}
	}
	a, b, c := in[0].Value.Shape, in[1].Value.Shape, out[0].Value.Shape
	var reasons []string
	switch {
	case a[1] == b[0] && b[1] != a[1]:
		return CaseSpec{}, []string{fmt.Sprintf("B is [%s, %s] (C = A @ B): amk's projections hold W as [N, K] (C = A @ B.T)", b[0], b[1])}
	case a[1] != b[1] || c[0] != a[0] || c[1] != b[0]:
		return CaseSpec{}, []string{"shapes are not A [M, K], B [N, K], C [M, N]"}
	}
	needConst(d, &reasons, "N and K", b[0], b[1])
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	n, _ := axisValue(d, w, b[0])
	k, _ := axisValue(d, w, b[1])
	m, _ := axisValue(d, w, a[0])
	sizeCheck(&reasons, "B", n, k)
	cfg := baseModel(d.Name, dt)
	cfg.Hidden, cfg.Vocab = dimOK(&reasons, b[1], k), dimOK(&reasons, b[0], n)
	op := ir.OpGEMVTile
	if m > 1 {
		op = ir.OpGEMMTile
	}
	return CaseSpec{Op: op, Model: cfg, Batch: dimOK(&reasons, a[0], m), Pos: casePos, Label: "lm_head", Partitions: 1}, reasons
}

func matchGQAContiguous(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	var reasons []string
	q, caches := tensorsOfRank(d.Inputs, 3), tensorsOfRank(d.Inputs, 4)
	if len(d.Inputs) != 3 || len(q) != 1 || len(caches) != 2 {
		return CaseSpec{}, []string{fmt.Sprintf("inputs %s are not q [batch, heads, head_dim] with contiguous k/v caches [batch, kv_len, kv_heads, head_dim] (amk's decode attention: one query token per sequence, no paging)",
			quoteList(d.Inputs.Names()))}
	}
	if len(d.Outputs) != 1 {
		return CaseSpec{}, []string{fmt.Sprintf("outputs %s: amk's ATTENTION_TILE writes the attention output only (no lse)", quoteList(d.Outputs.Names()))}
	}
	qs, ks, vs := q[0].Value.Shape, caches[0].Value.Shape, caches[1].Value.Shape
	if !slices.Equal(ks, vs) || qs[0] != ks[0] || qs[2] != ks[3] {
		return CaseSpec{}, []string{"q, k_cache and v_cache do not share batch and head_dim axes"}
	}
	needConst(d, &reasons, "query heads", qs[1])
	needConst(d, &reasons, "kv heads", ks[2])
	needConst(d, &reasons, "head_dim", qs[2])
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	b, _ := axisValue(d, w, qs[0])
	t, _ := axisValue(d, w, ks[1])
	hq, _ := axisValue(d, w, qs[1])
	hkv, _ := axisValue(d, w, ks[2])
	hd, _ := axisValue(d, w, qs[2])
	sizeCheck(&reasons, "the KV caches", b, t, hkv, hd)
	cfg := baseModel(d.Name, dt)
	cfg.NHeads, cfg.NKVHeads, cfg.HeadDim = dimOK(&reasons, qs[1], hq), dimOK(&reasons, ks[2], hkv), dimOK(&reasons, qs[2], hd)
	cfg.Hidden, cfg.MaxSeq = cfg.NHeads*cfg.HeadDim, dimOK(&reasons, ks[1], t)
	if err := cfg.Validate(); err != nil {
		reasons = append(reasons, err.Error())
	}
	return CaseSpec{Op: ir.OpAttentionTile, Model: cfg, Batch: dimOK(&reasons, qs[0], b), Pos: cfg.MaxSeq - 1,
		Label: "L0.attention", Partitions: 1}, reasons
}

func matchElementwise(op ir.Op, label string, intermediate bool) func(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	return func(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
		in, out := tensorsOfRank(d.Inputs, 2), tensorsOfRank(d.Outputs, 2)
		if len(d.Inputs) != 2 || len(in) != 2 || len(out) != 1 || !slices.Equal(in[0].Value.Shape, in[1].Value.Shape) ||
			!slices.Equal(in[0].Value.Shape, out[0].Value.Shape) {
			return CaseSpec{}, []string{fmt.Sprintf("%s takes two [batch, n] tensors of one shape and writes one", op)}
		}
		var reasons []string
		s := in[0].Value.Shape
		needConst(d, &reasons, "the width", s[1])
		if len(reasons) > 0 || w == nil {
			return CaseSpec{}, reasons
		}
		n, _ := axisValue(d, w, s[1])
		b, _ := axisValue(d, w, s[0])
		cfg := baseModel(d.Name, dt)
		if intermediate {
			cfg.Intermediate = dimOK(&reasons, s[1], n)
		} else {
			cfg.Hidden = dimOK(&reasons, s[1], n)
		}
		return CaseSpec{Op: op, Model: cfg, Batch: dimOK(&reasons, s[0], b), Pos: casePos, Label: label, Partitions: 1}, reasons
	}
}

func matchEmbedding(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	ids, table := tensorsOfRank(d.Inputs, 1), tensorsOfRank(d.Inputs, 2)
	if len(d.Inputs) != 2 || len(ids) != 1 || len(table) != 1 || (ids[0].Value.DType != "int32") {
		return CaseSpec{}, []string{"embedding takes int32 token ids [batch] and a table [vocab, hidden]"}
	}
	var reasons []string
	t := table[0].Value.Shape
	needConst(d, &reasons, "vocab and hidden", t...)
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	v, _ := axisValue(d, w, t[0])
	h, _ := axisValue(d, w, t[1])
	b, _ := axisValue(d, w, ids[0].Value.Shape[0])
	sizeCheck(&reasons, "the table", v, h)
	cfg := baseModel(d.Name, dt)
	cfg.Vocab, cfg.Hidden = dimOK(&reasons, t[0], v), dimOK(&reasons, t[1], h)
	return CaseSpec{Op: ir.OpEMBED, Model: cfg, Batch: dimOK(&reasons, ids[0].Value.Shape[0], b), Pos: casePos, Label: "embed", Partitions: 1}, reasons
}

func matchRoPE(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	heads := tensorsOfRank(d.Inputs, 3)
	if len(heads) != 2 || len(tensorsOfRank(d.Outputs, 3)) != 2 {
		return CaseSpec{}, []string{"rope takes q [batch, heads, head_dim], k [batch, kv_heads, head_dim] and positions"}
	}
	var reasons []string
	qs, ks := heads[0].Value.Shape, heads[1].Value.Shape
	needConst(d, &reasons, "heads and head_dim", qs[1], ks[1], qs[2])
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	hq, _ := axisValue(d, w, qs[1])
	hkv, _ := axisValue(d, w, ks[1])
	hd, _ := axisValue(d, w, qs[2])
	b, _ := axisValue(d, w, qs[0])
	cfg := baseModel(d.Name, dt)
	cfg.NHeads, cfg.NKVHeads, cfg.HeadDim = dimOK(&reasons, qs[1], hq), dimOK(&reasons, ks[1], hkv), dimOK(&reasons, qs[2], hd)
	cfg.RopeTheta = referenceConstant(d, "THETA", 10000)
	if err := cfg.Validate(); err != nil {
		reasons = append(reasons, err.Error())
	}
	return CaseSpec{Op: ir.OpROPE, Model: cfg, Batch: dimOK(&reasons, qs[0], b), Pos: casePos, Label: "L0.rope_q", Partitions: 1}, reasons
}

func matchKVAppend(d *Definition, w *Workload, dt ir.DType) (CaseSpec, []string) {
	rows, caches := tensorsOfRank(d.Inputs, 3), tensorsOfRank(d.Inputs, 4)
	if len(rows) != 1 || len(caches) != 1 {
		return CaseSpec{}, []string{"kv_append takes new rows [batch, kv_heads, head_dim], a cache [batch, max_seq, kv_heads, head_dim] and pos"}
	}
	var reasons []string
	cs := caches[0].Value.Shape
	needConst(d, &reasons, "kv heads, head_dim and max_seq", cs[1], cs[2], cs[3])
	if len(reasons) > 0 || w == nil {
		return CaseSpec{}, reasons
	}
	s, _ := axisValue(d, w, cs[1])
	hkv, _ := axisValue(d, w, cs[2])
	hd, _ := axisValue(d, w, cs[3])
	b, _ := axisValue(d, w, cs[0])
	cfg := baseModel(d.Name, dt)
	cfg.NKVHeads, cfg.NHeads, cfg.HeadDim, cfg.MaxSeq = dimOK(&reasons, cs[2], hkv), dimOK(&reasons, cs[2], hkv),
		dimOK(&reasons, cs[3], hd), dimOK(&reasons, cs[1], s)
	pos := cfg.MaxSeq - 1
	for _, in := range d.Inputs {
		if in.Value.Scalar() {
			spec, _ := w.Inputs.Get(in.Name)
			if f, ok := spec.Value.(float64); ok && f >= 0 && f < float64(cfg.MaxSeq) {
				pos = int(f)
			}
		}
	}
	return CaseSpec{Op: ir.OpKVAppend, Model: cfg, Batch: dimOK(&reasons, cs[0], b), Pos: pos, Label: "L0.k_append", Partitions: 1}, reasons
}
