package loop1

import (
	"fmt"
	"math"
	"slices"

	"github.com/amk-dev/amk/fib"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/vm"
)

// Build makes the Loop-1 case of one mapped workload.
func Build(s fib.CaseSpec, target *ir.GpuTarget) (*tune.Case, error) {
	c, err := tune.NewShapedCase(s.Op, target, tune.Shape{Model: s.Model, Batch: s.Batch, Pos: s.Pos, Label: s.Label,
		Partitions: s.Partitions})
	if err != nil {
		return nil, fmt.Errorf("%s (workload %s): %w", s.Definition, s.Workload, err)
	}
	c.Describe = fmt.Sprintf("%s workload %s: %s", s.Definition, s.Workload, c.Describe)
	return c, nil
}

// Expect computes the case's outputs from its inputs by the Definition's
// semantics (package fib), in the case's output order.
func Expect(c *tune.Case) (map[int][]float64, error) {
	p := c.Program
	if len(p.Tasks) == 0 {
		return nil, fmt.Errorf("empty case")
	}
	t0 := &p.Tasks[0]
	in := func(i int) []float64 { return values(c.Inputs[t0.Inputs[i]]) }
	shape := func(i int) []int { return p.Buffers[t0.Inputs[i]].Shape }
	out := t0.Outputs[0]
	switch c.Op {
	case ir.OpRMSNORM:
		h := int(t0.Params.IntOr("hidden", 0))
		eps, _ := t0.Params.Float("eps")
		return map[int][]float64{out: fib.RMSNorm(in(0), h, in(1), eps)}, nil
	case ir.OpGEMVTile, ir.OpGEMMTile:
		w := shape(1)
		n, k := w[0], w[1]
		x := in(0)
		return map[int][]float64{out: fib.GEMM(x, len(x)/k, k, in(1), n)}, nil
	case ir.OpAttentionTile:
		if len(p.Tasks) != 1 || t0.Params.IntOr("kv_start", 0) != 0 {
			return nil, fmt.Errorf("split-KV attention cases are not checked against the Definition")
		}
		kc := shape(1)
		batch, seq := 1, kc[0]
		if len(kc) == 4 {
			batch, seq = kc[0], kc[1]
		}
		hkv, hd := kc[len(kc)-2], kc[len(kc)-1]
		hq := int(t0.Params.IntOr("n_heads", 0))
		scale, _ := t0.Params.Float("scale")
		kvLen := int(t0.Params.IntOr("kv_len", 0))
		return map[int][]float64{out: fib.GQADecode(in(0), batch, hq, hd, in(1), in(2), seq, kvLen, hkv, scale)}, nil
	case ir.OpSiLUMul:
		return map[int][]float64{out: fib.SiLUMul(in(0), in(1))}, nil
	case ir.OpADD:
		return map[int][]float64{out: fib.Add(in(0), in(1))}, nil
	case ir.OpEMBED:
		ids := c.Inputs[t0.Inputs[0]]
		table := shape(1)
		got := make([]int64, ids.IntCount())
		for i := range got {
			got[i] = int64(ids.Int(i))
		}
		return map[int][]float64{out: fib.Embedding(got, in(1), table[1])}, nil
	case ir.OpROPE:
		pos := c.Inputs[t0.Inputs[1]]
		if pos == nil || pos.IntCount() == 0 || slices.Min(pos.Ints()) != slices.Max(pos.Ints()) {
			return nil, fmt.Errorf("the RoPE case has no single position")
		}
		hd := int(t0.Params.IntOr("head_dim", 0))
		theta, _ := t0.Params.Float("theta")
		return map[int][]float64{out: fib.RoPE(in(0), hd, int64(pos.Int(0)), theta)}, nil
	case ir.OpKVAppend:
		cache := shape(1)
		batch, seq := 1, cache[0]
		if len(cache) == 4 {
			batch, seq = cache[0], cache[1]
		}
		width := cache[len(cache)-2] * cache[len(cache)-1]
		pos := int(t0.Params.IntOr("pos", 0))
		return map[int][]float64{out: fib.KVAppend(in(1), batch, seq, width, in(0), pos)}, nil
	}
	return nil, fmt.Errorf("no Definition semantics for %s", c.Op)
}

func values(t *tensor.Tensor) []float64 {
	if t == nil {
		return nil
	}
	f := t.Floats()
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// Check runs the case in the reference VM and compares its outputs with
// the Definition's semantics at the case dtype's tolerance.
func Check(c *tune.Case) (vm.Comparison, error) {
	got, err := c.Reference()
	if err != nil {
		return vm.Comparison{}, fmt.Errorf("reference VM: %w", err)
	}
	want, err := Expect(c)
	if err != nil {
		return vm.Comparison{}, err
	}
	var test, ref []float32
	for _, id := range slices.Sorted(slices.Values(c.Outputs)) {
		w, ok := want[id]
		if !ok || got[id] == nil {
			return vm.Comparison{}, fmt.Errorf("output %s missing", c.Program.Buffers[id].Name)
		}
		test = append(test, got[id].Floats()...)
		for _, v := range w {
			ref = append(ref, tensor.Round(c.DType, float32(v)))
		}
	}
	return vm.Compare(test, ref, 1, c.DType), nil
}

// Result is one imported workload's Loop-1 outcome on the CPU.
type Result struct {
	Definition    string   `json:"definition"`
	Workload      string   `json:"workload"`
	Op            string   `json:"op"`
	DType         string   `json:"dtype"`
	GPU           string   `json:"gpu"`
	Case          string   `json:"case"`
	Correct       bool     `json:"correct"`
	Correctness   string   `json:"correctness"`
	MaxRelErr     *float64 `json:"max_rel_err"`
	LatencyUS     *float64 `json:"latency_us"`
	LatencyKind   string   `json:"latency_kind"`
	BoundUS       *float64 `json:"bound_us"`
	PctOfRoofline *float64 `json:"pct_of_roofline"`
	OpBytes       int64    `json:"op_bytes"`
	Notes         []string `json:"notes"`
}

// Predict is Loop 1 on the CPU for one case: the reference VM against the
// Definition's semantics decides correctness; the cost model (schedule.
// Predict on the case's tasks, placed by the default schedule) gives a
// predicted latency, reported only with a PASS. There is no kernel and no
// -D variant on the CPU: what is checked is amk's op semantics at the
// workload's shape.
func Predict(s fib.CaseSpec, target *ir.GpuTarget) Result {
	r := newResult(s, target)
	c, err := Build(s, target)
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
		return r
	}
	return predictCase(r, c, target)
}

func newResult(s fib.CaseSpec, target *ir.GpuTarget) Result {
	return Result{Definition: s.Definition, Workload: s.Workload, Op: tune.OpName(s.Op), DType: tune.DTypeName(s.Model.DType),
		GPU: target.Name, LatencyKind: fib.KindPredicted, Correctness: "CRASH", Notes: []string{
			"CPU: no kernel runs; the reference VM is checked against the Definition's semantics and the latency is the cost model's prediction",
		}}
}

func predictCase(r Result, c *tune.Case, target *ir.GpuTarget) Result {
	r.Case, r.OpBytes = c.Describe, c.OpBytes
	cmp, err := Check(c)
	if err != nil {
		r.Notes = append(r.Notes, err.Error())
		return r
	}
	if !math.IsNaN(cmp.MaxRelErr) && !math.IsInf(cmp.MaxRelErr, 0) {
		e := ir.RoundTo(cmp.MaxRelErr, 8)
		r.MaxRelErr = &e
	}
	if !cmp.Pass {
		r.Correctness = "FAIL"
		r.Notes = append(r.Notes, "the reference VM disagrees with the Definition: "+cmp.Reason)
		return r
	}
	r.Correct, r.Correctness = true, "PASS"
	prog := *c.Program
	prog.Tasks = slices.Clone(c.Program.Tasks)
	for i := range prog.Tasks {
		prog.Tasks[i].SM = nil // let the default sm_assignment place the tiles
	}
	cost := schedule.Predict(&prog, target, schedule.Default())
	bound := target.BandwidthBoundUS(c.OpBytes)
	if cost.PredictedUS > 0 && !math.IsInf(cost.PredictedUS, 0) {
		us := ir.RoundTo(cost.PredictedUS, 4)
		r.LatencyUS = &us
		if bound > 0 {
			b := ir.RoundTo(bound, 6)
			pct, _ := ir.PctOfRoofline(cost.PredictedUS, bound)
			r.BoundUS, r.PctOfRoofline = &b, &pct
		}
	}
	return r
}
