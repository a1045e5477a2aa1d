package loop1

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/amk-dev/amk/fib"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/vm"
)

// specs exports the toy model's Definitions at batches 1 and 3 and maps
// them back: every Definition amk serves yields one case per workload.
func specs(t *testing.T, dt ir.DType) []fib.CaseSpec {
	t.Helper()
	cfg, err := model.Preset("toy")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DType = dt
	out, err := fib.Export("toy", cfg, fib.ExportOptions{Batches: []int{1, 3}, KVLengths: []int{5, 32}})
	if err != nil {
		t.Fatal(err)
	}
	var all []fib.CaseSpec
	for _, e := range out {
		m := fib.MapDefinition(e.Definition, e.Workloads)
		switch e.Definition.OpType {
		case "decode_step", "attention_combine":
			if m.Mapped() {
				t.Errorf("%s mapped onto %s", e.Definition.Name, m.Op)
			}
			continue
		}
		if !m.Mapped() || len(m.Cases) != len(e.Workloads) {
			t.Fatalf("%s: not mapped (%v), %d cases for %d workloads", e.Definition.Name, m.Reasons, len(m.Cases), len(e.Workloads))
		}
		all = append(all, m.Cases...)
	}
	return all
}

// The reference VM's op implementations agree with the exported
// Definitions' semantics (plain Go written from the PyTorch references) on
// seeded random inputs, for every op amk serves, at each storage dtype.
func TestVMMatchesDefinitionSemantics(t *testing.T) {
	target, _ := ir.Target("h100")
	for _, dt := range []ir.DType{ir.F32, ir.BF16} {
		ops := map[ir.Op]bool{}
		for _, s := range specs(t, dt) {
			c, err := Build(s, target)
			if err != nil {
				t.Fatalf("%s %s: %v", s.Definition, s.Workload, err)
			}
			cmp, err := Check(c)
			if err != nil {
				t.Fatalf("%s: %v", c.Describe, err)
			}
			if !cmp.Pass {
				t.Errorf("%s %s: VM vs Definition: %s (max rel err %g)", dt, c.Describe, cmp.Reason, cmp.MaxRelErr)
			}
			ops[s.Op] = true
		}
		for _, op := range []ir.Op{ir.OpRMSNORM, ir.OpGEMVTile, ir.OpGEMMTile, ir.OpAttentionTile, ir.OpSiLUMul,
			ir.OpADD, ir.OpEMBED, ir.OpROPE, ir.OpKVAppend} {
			if !ops[op] {
				t.Errorf("%s: no case exercised %s", dt, op)
			}
		}
	}
}

// The comparison can fail: semantics that forget RMSNorm's weight, or that
// read the attention window one row short, disagree with the VM.
func TestCheckDetectsWrongSemantics(t *testing.T) {
	target, _ := ir.Target("h100")
	for _, s := range specs(t, ir.F32) {
		if s.Op != ir.OpRMSNORM && s.Op != ir.OpAttentionTile {
			continue
		}
		c, err := Build(s, target)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Reference()
		if err != nil {
			t.Fatal(err)
		}
		t0 := c.Program.Tasks[0]
		x := values(c.Inputs[t0.Inputs[0]])
		var wrong []float64
		if s.Op == ir.OpRMSNORM {
			h := int(t0.Params.IntOr("hidden", 0))
			ones := slices.Repeat([]float64{1}, h)
			wrong = fib.RMSNorm(x, h, ones, t0.Params.FloatOr("eps", 0))
		} else {
			kc := c.Program.Buffers[t0.Inputs[1]].Shape
			batch, seq := 1, kc[0]
			if len(kc) == 4 {
				batch, seq = kc[0], kc[1]
			}
			kvLen := int(t0.Params.IntOr("kv_len", 0))
			if kvLen < 2 {
				continue
			}
			wrong = fib.GQADecode(x, batch, int(t0.Params.IntOr("n_heads", 0)), kc[len(kc)-1], values(c.Inputs[t0.Inputs[1]]),
				values(c.Inputs[t0.Inputs[2]]), seq, kvLen-1, kc[len(kc)-2], t0.Params.FloatOr("scale", 0))
		}
		ref := make([]float32, len(wrong))
		for i, v := range wrong {
			ref[i] = tensor.Round(c.DType, float32(v))
		}
		if cmp := vm.Compare(got[t0.Outputs[0]].Floats(), ref, 1, c.DType); cmp.Pass {
			t.Errorf("%s: wrong semantics passed", c.Describe)
		}
	}
}

// On the CPU an imported workload gets a correctness verdict and a
// latency labelled predicted, never measured.
func TestPredictLabelsLatencies(t *testing.T) {
	target, _ := ir.Target("h200")
	for _, s := range specs(t, ir.BF16)[:3] {
		r := Predict(s, target)
		if !r.Correct || r.LatencyKind != fib.KindPredicted || r.LatencyUS == nil || r.BoundUS == nil || *r.LatencyUS < *r.BoundUS {
			t.Errorf("%+v", r)
		}
	}
}

// Loop 1 on the imported GEMM, RMSNorm and GQA Definitions, on the CPU:
// the GEMM and RMSNorm workloads are checked and predicted, the GQAs are
// listed as unmapped.
func TestRunImportDir(t *testing.T) {
	target, _ := ir.Target("h200")
	r, err := Run(context.Background(), "../testdata/import", Options{Target: target, Definition: "rmsnorm_d4096"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || len(r.Predicted) != 2 || r.LatencyKind != fib.KindPredicted || len(r.Tuned) != 0 {
		t.Fatalf("%+v", r)
	}
	for _, p := range r.Predicted {
		if !p.Correct || p.LatencyUS == nil || p.LatencyKind != fib.KindPredicted {
			t.Errorf("%+v", p)
		}
	}
	r, err = Run(context.Background(), "../testdata/import", Options{Target: target, Definition: "gqa_hr4_dqk128_dvo128"})
	if !errors.Is(err, ErrNothingToRun) || len(r.Unmapped) != 1 {
		t.Errorf("gqa: %v %+v", err, r)
	}
}

// fakeGPU stands in for a GPU (none runs in CI): it returns the reference
// VM's outputs and a fixed timing, so the measured path is exercised.
type fakeGPU struct{}

func (fakeGPU) Name() string                 { return "fake:0" }
func (fakeGPU) Notes(*ir.GpuTarget) []string { return nil }
func (fakeGPU) Prepare(_ context.Context, c *tune.Case, _ kernels.Variant) (tune.Prepared, error) {
	return &fakePrepared{c: c}, nil
}

type fakePrepared struct{ c *tune.Case }

func (p *fakePrepared) Run(context.Context) (map[int]*tensor.Tensor, error) { return p.c.Reference() }
func (p *fakePrepared) Time(context.Context, int, int) (launch.Stats, error) {
	return launch.Summarize([]float64{50, 50, 50}), nil
}
func (p *fakePrepared) Close() error { return nil }

func TestRunOnADevice(t *testing.T) {
	target, _ := ir.Target("h200")
	results := filepath.Join(t.TempDir(), "results.tsv")
	r, err := Run(context.Background(), "../testdata/import", Options{Target: target, Device: fakeGPU{}, Budget: 2,
		Results: results, Definition: "gemm_n_4096_k_4096"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || len(r.Tuned) != 2 || r.LatencyKind != fib.KindMeasuredGPU || len(r.Predicted) != 0 {
		t.Fatalf("%+v", r)
	}
	if r.Tuned[0].Op != "gemv_tile" || r.Tuned[1].Op != "gemm_tile" || r.Tuned[0].BestUS == nil {
		t.Errorf("tuned %s and %s", r.Tuned[0].Op, r.Tuned[1].Op)
	}
	rows, err := flywheel.ReadRows(results)
	if err != nil || len(rows) != 4 {
		t.Errorf("%d rows (%v), want 2 variants x 2 cases", len(rows), err)
	}
}

// A dump holds the Definition's inputs and amk's outputs, in files whose
// sizes match the shapes case.json gives.
func TestDump(t *testing.T) {
	target, _ := ir.Target("h200")
	dir := t.TempDir()
	r, err := Run(context.Background(), "../testdata/import", Options{Target: target, Device: fakeGPU{}, Budget: 1,
		Definition: "rmsnorm_d4096", Dump: dir})
	if err != nil || !r.OK {
		t.Fatalf("%v %+v", err, r)
	}
	cases, _ := filepath.Glob(filepath.Join(dir, "rmsnorm_d4096", "*", "case.json"))
	if len(cases) != 2 {
		t.Fatalf("%d dumped cases, want 2", len(cases))
	}
	data, err := os.ReadFile(cases[0])
	if err != nil {
		t.Fatal(err)
	}
	var dc DumpCase
	if err := json.Unmarshal(data, &dc); err != nil {
		t.Fatal(err)
	}
	if len(dc.Inputs) != 2 || dc.Scalars["eps"] <= 0 || len(dc.Outputs) != 1 || len(dc.DeviceOutputs) != 1 || dc.Device != "fake:0" {
		t.Fatalf("%+v", dc)
	}
	for _, dt := range []DumpTensor{dc.Inputs["input"], dc.Inputs["weight"], dc.Outputs["output"]} {
		st, err := os.Stat(filepath.Join(filepath.Dir(cases[0]), dt.File))
		if err != nil || st.Size() != int64(4*tensor.Numel(dt.Shape)) {
			t.Errorf("%s: %v, %d bytes for shape %v", dt.File, err, st.Size(), dt.Shape)
		}
	}
}
