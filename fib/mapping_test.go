package fib

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// The import directory holds a GEMM, an RMSNorm and two GQA Definitions:
// the GEMM and the RMSNorm map (one case per workload, at the workload's
// shape and dtype), the GQAs do not, each with its reason.
func TestMapImportDir(t *testing.T) {
	ds, err := ReadDataset("testdata/import")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ds.Reports {
		if r.Err != nil || len(Errors(r.Problems)) > 0 {
			t.Fatalf("%s: %v %v", r.Where(), r.Err, Errors(r.Problems))
		}
	}
	got := map[string]Mapping{}
	for _, m := range Map(ds) {
		got[m.Definition] = m
	}
	gemm := got["gemm_n_4096_k_4096"]
	if !gemm.Mapped() || len(gemm.Cases) != 2 || gemm.Cases[0].Op != ir.OpGEMVTile || gemm.Cases[1].Op != ir.OpGEMMTile ||
		gemm.Cases[1].Batch != 8 || gemm.Cases[0].Model.Hidden != 4096 || gemm.Cases[0].Model.Vocab != 4096 ||
		gemm.Cases[0].Model.DType != ir.F16 {
		t.Errorf("gemm: %+v", gemm)
	}
	norm := got["rmsnorm_d4096"]
	if !norm.Mapped() || len(norm.Cases) != 2 || norm.Cases[0].Model.Hidden != 4096 || norm.Cases[1].Batch != 16 ||
		norm.Cases[1].Model.RMSEps != 1e-5 {
		t.Errorf("rmsnorm: %+v", norm)
	}
	for name, want := range map[string]string{
		"gqa_hr4_dqk128_dvo128":             "one query token per sequence",
		"gqa_paged_decode_h32_kv8_d128_ps1": "paged KV cache",
	} {
		m := got[name]
		if m.Mapped() || len(m.Reasons) == 0 || !strings.Contains(strings.Join(m.Reasons, "; "), want) {
			t.Errorf("%s: want unmapped because %q, got %+v", name, want, m)
		}
	}
}

// The table refuses what amk cannot run, saying why.
func TestMapReasons(t *testing.T) {
	ds, err := ReadDataset("testdata/public")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Map(ds) {
		switch m.Definition {
		case "gemm_n4096_k4096": // flashinfer-bench's example: fp16 A @ B.T
			if !m.Mapped() || len(m.Cases) != 4 {
				t.Errorf("%s: %+v", m.Definition, m)
			}
		default: // the early-format and trace-template files break a rule
			if m.Mapped() || !strings.Contains(m.Reasons[0], "breaks a rule of the FlashInfer-Bench format") {
				t.Errorf("%s: %+v", m.Definition, m)
			}
		}
	}
	d := &Definition{Name: "gemm_n8_k8", OpType: "gemm", Axes: axes("M", varAxis, "N", 8, "K", 8),
		Inputs:    Ordered[TensorSpec]{{"A", spec("float8_e4m3fn", "M", "K")}, {"B", spec("float8_e4m3fn", "N", "K")}},
		Outputs:   Ordered[TensorSpec]{{"C", spec("bfloat16", "M", "N")}},
		Reference: "def run(A, B):\n    return A\n"}
	if m := MapDefinition(d, nil); m.Mapped() || !strings.Contains(m.Reasons[0], "float8_e4m3fn") {
		t.Errorf("fp8 gemm: %+v", m)
	}
	d.Inputs = Ordered[TensorSpec]{{"A", spec("bfloat16", "M", "K")}, {"B", spec("bfloat16", "K", "N")}}
	if m := MapDefinition(d, nil); m.Mapped() || !strings.Contains(m.Reasons[0], "C = A @ B)") {
		t.Errorf("[K, N] gemm: %+v", m)
	}
}
