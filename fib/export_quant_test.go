package fib

import (
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
)

// A quantised model exports its projections as quantized GEMMs named by
// scheme, shape and groups, tagged with the weights' effective dtype, with
// int8 (packed for int4) weights and float16 scales; the step carries the
// scales after each quantised weight; every Definition passes the rules.
func TestExportQuantized(t *testing.T) {
	for _, c := range []struct {
		spec, gemm, tag, bShape string
	}{
		{"small:w8a16", "quantized_gemm_w8a16_n2048_k2048_kg1", "quantization:int8", "N,K"},
		{"small:w4a16", "quantized_gemm_w4a16_n2048_k2048_kg16", "quantization:int4", "N,K_packed"},
	} {
		cfg, err := model.Load(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Export("small-q", cfg, ExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		var step *Definition
		for _, e := range out {
			names = append(names, e.Definition.Name)
			if ps := Errors(Validate(e.Definition)); len(ps) > 0 {
				t.Errorf("%s: %s: %v", c.spec, e.Definition.Name, ps)
			}
			if e.Definition.OpType == "decode_step" {
				step = e.Definition
			}
			if e.Definition.Name != c.gemm {
				continue
			}
			d := e.Definition
			if !d.HasTag(c.tag) || d.Inputs[1].Value.DType != "int8" || strings.Join(d.Inputs[1].Value.Shape, ",") != c.bShape ||
				d.Inputs[2].Name != "B_scale" || d.Inputs[2].Value.DType != "float16" {
				t.Errorf("%s: %s: %+v", c.spec, d.Name, d)
			}
		}
		if !slices.Contains(names, c.gemm) || slices.Contains(names, "gemm_n2048_k2048") {
			t.Errorf("%s: definitions %v", c.spec, names)
		}
		if slices.Contains(names, "gemm_n32000_k2048") { // the lm_head is quantised too
			t.Errorf("%s: lm_head: %v", c.spec, names)
		}
		if tagged := out[2].Definition.HasTag(c.tag); !tagged {
			t.Errorf("%s: lm_head: %v", c.spec, names)
		}
		if step == nil || !step.HasTag(c.tag) || !strings.Contains(step.Reference, "w_q = deq(w_q, w_q_scale,") {
			t.Fatalf("%s: step %+v", c.spec, step)
		}
		var ins []string
		for _, e := range step.Inputs {
			ins = append(ins, e.Name+":"+e.Value.DType)
		}
		if !strings.Contains(strings.Join(ins, " "), "w_q:int8 w_q_scale:float16 w_k:int8") {
			t.Errorf("%s: step inputs %v", c.spec, ins)
		}
	}
}
