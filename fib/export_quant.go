package fib

import (
	"fmt"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

// Quantised models (model.Quantization, docs/spec/quantization.md) export
// their quantised projections as quantized GEMM Definitions, named
//
//	quantized_gemm_<scheme>_n<N>_k<K>_kg<groups>   e.g. quantized_gemm_w4a16_n2048_k2048_kg16
//
// (the form of the format's own quantized-GEMM example, the weight scheme
// added so that an int8 and an int4 GEMM of one shape differ), tagged
// quantization:int8 or quantization:int4, with axes M (var), N, K, K_group
// (scales per row) and, for int4, K_packed = K/2: inputs A [M, K] at the
// activation dtype, B [N, K] int8 (int4: [N, K_packed] int8 bytes, each two
// weights as q + 8, column 2b in the low nibble) and B_scale [N, K_group]
// float16; output C [M, N]. The reference dequantises exactly as amk does.

// quantTag is the quantization:* tag of the model's weights.
func quantTag(q model.Quantization) string {
	if q.Bits == 4 {
		return "quantization:int4"
	}
	return "quantization:int8"
}

// QuantGEMMName is the Definition name of a quantised projection [n, k].
func QuantGEMMName(q model.Quantization, n, k int) string {
	return fmt.Sprintf("quantized_gemm_w%da16_n%d_k%d_kg%d", q.Bits, n, k, ir.QuantGroups(int64(k), int64(q.GroupOf(k))))
}

// dequantReference is the Python that turns stored weights into floats:
// deq(w, s) for a weight of any leading dims, group = K / K_group.
const dequantReference = "def deq(w, s, int4):\n" +
	"    if int4:\n" +
	"        b = w.view(torch.uint8).to(torch.int32)\n" +
	"        q = torch.stack([(b & 15) - 8, (b >> 4) - 8], dim=-1).flatten(-2)\n" +
	"    else:\n" +
	"        q = w.to(torch.int32)\n" +
	"    group = q.shape[-1] // s.shape[-1]\n" +
	"    return q.to(torch.float32) * s.to(torch.float32).repeat_interleave(group, dim=-1)\n\n\n"

func (x *exporter) quantGEMM(n, k int, role string) {
	q := x.cfg.Quant
	groups := int(ir.QuantGroups(int64(k), int64(q.GroupOf(k))))
	bAxis, pairs := "K", []any{"M", varAxis, "N", n, "K", k, "K_group", groups}
	if q.Bits == 4 {
		bAxis = "K_packed"
		pairs = append(pairs, "K_packed", k/2)
	}
	int4 := "False"
	if q.Bits == 4 {
		int4 = "True"
	}
	d := &Definition{
		Name: QuantGEMMName(q, n, k), OpType: "gemm",
		Description: fmt.Sprintf("Weight-only quantised GEMM C = A @ dequant(B).T (%s: int%d weights, symmetric, one float16 scale per %d input columns of a row; "+
			"float32 accumulation). amk GEMV_TILE with qdtype %d dequantises in registers.", q, q.Bits, q.GroupOf(k), q.WeightDType()),
		Tags:        []string{quantTag(q)},
		Axes:        axes(pairs...),
		Constraints: []string{"K % K_group == 0"},
		Inputs: Ordered[TensorSpec]{{"A", spec(x.dt, "M", "K")}, {"B", spec("int8", "N", bAxis)},
			{"B_scale", spec("float16", "N", "K_group")}},
		Outputs: Ordered[TensorSpec]{{"C", spec(x.dt, "M", "N")}},
		Reference: "import torch\n\n\n" + dequantReference +
			"def run(A, B, B_scale):\n" +
			"    C = torch.matmul(A.to(torch.float32), deq(B, B_scale, " + int4 + ").T)\n" +
			"    return C.to(A.dtype)\n",
	}
	x.add(d, []ir.Op{ir.OpGEMVTile}, []string{role}, "M", "", nil)
}

// stepWeights are the step Definition's projection inputs: name, the axis
// of their input columns (K), whether they are the lm_head.
var stepWeights = []struct {
	name, kAxis string
	lmHead      bool
}{
	{"w_q", "hidden_size", false}, {"w_k", "hidden_size", false}, {"w_v", "hidden_size", false},
	{"w_o", "q_dim", false}, {"w_gate", "hidden_size", false}, {"w_up", "hidden_size", false},
	{"w_down", "intermediate_size", false}, {"lm_head", "hidden_size", true},
}

// quantizedStepWeight reports whether the step input name is stored
// quantised, and its K axis.
func (x *exporter) quantizedStepWeight(name string) (string, bool) {
	for _, w := range stepWeights {
		if w.name == name {
			if w.lmHead && !x.cfg.Quant.QuantizesRole(model.RoleLMHead) {
				return "", false
			}
			return w.kAxis, x.cfg.Quant.On()
		}
	}
	return "", false
}

// quantStepInputs turns the step's projection inputs of a quantised model
// into int8 weights (int4: packed along K, axis <K>_packed) each followed by
// its float16 scales NAME_scale [.., N, <K>_groups]; a float model's
// inputs are returned as they are.
func (x *exporter) quantStepInputs(in Ordered[TensorSpec]) Ordered[TensorSpec] {
	if !x.cfg.Quant.On() {
		return in
	}
	var out Ordered[TensorSpec]
	for _, e := range in {
		kAxis, ok := x.quantizedStepWeight(e.Name)
		if !ok {
			out = append(out, e)
			continue
		}
		shape := append([]string{}, e.Value.Shape...)
		scales := append(append([]string{}, shape[:len(shape)-1]...), kAxis+"_groups")
		if x.cfg.Quant.Bits == 4 {
			shape[len(shape)-1] = kAxis + "_packed"
		}
		out = append(out, Named[TensorSpec]{e.Name, TensorSpec{Shape: shape, DType: "int8"}},
			Named[TensorSpec]{e.Name + "_scale", TensorSpec{Shape: scales, DType: "float16"}})
	}
	return out
}

// quantStep adds to a quantised model's step Definition its quantization
// tag, the group (and packed) axes and a reference that dequantises every
// quantised weight before the float step (stepReference).
func (x *exporter) quantStep(d *Definition) {
	c, q := x.cfg, x.cfg.Quant
	d.Tags = append(d.Tags, quantTag(q))
	for _, k := range []struct {
		name string
		v    int
	}{{"hidden_size", c.Hidden}, {"q_dim", c.QDim()}, {"intermediate_size", c.Intermediate}} {
		d.Axes = append(d.Axes, axes(k.name+"_groups", int(ir.QuantGroups(int64(k.v), int64(q.GroupOf(k.v)))))...)
		if q.Bits == 4 {
			d.Axes = append(d.Axes, axes(k.name+"_packed", k.v/2)...)
		}
	}
	d.Description += fmt.Sprintf(" Weights quantised %s: int%d projections (int8 tensors; int4 packed two per byte as q + 8, low nibble first) "+
		"with float16 scales NAME_scale, one per %s input columns of a row.", q, q.Bits, groupWords(q))
	var params, deq []string
	for _, e := range d.Inputs {
		params = append(params, e.Name)
	}
	int4 := "False"
	if q.Bits == 4 {
		int4 = "True"
	}
	for _, w := range stepWeights {
		if _, ok := x.quantizedStepWeight(w.name); ok {
			deq = append(deq, fmt.Sprintf("    %s = deq(%s, %s_scale, %s)\n", w.name, w.name, w.name, int4))
		}
	}
	sig := "def run(" + strings.Join(params, ", ") + "):\n"
	body := strings.Join(deq, "") + "    return run_float(" + strings.Join(floatParams(params), ", ") + ")\n"
	d.Reference = stepReference(c) + "\n\n" + dequantReference + sig + body
	d.Reference = strings.Replace(d.Reference, "def run(", "def run_float(", 1)
}

func groupWords(q model.Quantization) string {
	if q.Group > 0 {
		return fmt.Sprint(q.Group)
	}
	return "all (one scale per output channel)"
}

// floatParams drops the _scale inputs.
func floatParams(params []string) []string {
	var out []string
	for _, p := range params {
		if !strings.HasSuffix(p, "_scale") {
			out = append(out, p)
		}
	}
	return out
}
