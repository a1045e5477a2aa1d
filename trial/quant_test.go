package trial

import (
	"context"
	"fmt"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// Quantised models through every lowering: the reference lowering's
// GEMV tiles and the device lowering's fused patterns read int8 or packed
// int4 weights with their scales; the validator proves each program, the
// reference VM computes the eager oracle's dequantisation (its logits pass
// the oracle's tolerance, and the fused programs equal the reference
// lowering bit for bit), step after step, at B = 1 and 2.
func TestQuantizedProgramsMatchTheEagerOracle(t *testing.T) {
	tg, _ := ir.Target("h100")
	cases := []struct{ name, scheme string }{
		{"toy", "w8a16"}, {"toy", "w4a16-g32"}, {"toy-2L", "w4a16-g64-fphead"}, {"small", "w4a16"},
	}
	if testing.Short() {
		cases = cases[:3]
	}
	points := map[string]schedule.Point{"reference": schedule.Default(), "device default": schedule.DeviceDefault(),
		"fully fused": schedule.FullyFused()}
	for _, c := range cases {
		q, err := model.ParseQuantization(c.scheme)
		if err != nil {
			t.Fatal(err)
		}
		cfg := fusedCheckModel(t, c.name).Quantized(q)
		w, err := model.InitWeights(cfg, WeightSeed)
		if err != nil {
			t.Fatal(err)
		}
		steps := 3
		if cfg.Hidden > 256 {
			steps = 2
		}
		for label, pt := range points {
			for _, b := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s:%s/%s/B=%d", c.name, c.scheme, label, b), func(t *testing.T) {
					checkFusedSteps(t, cfg, w, tg, pt, b, steps)
				})
			}
		}
	}
}

// The pipeline on a quantised model spec: valid, correct with the oracle's
// own logits (max_abs_err 0), the floor on the stored bytes, and the
// model-quality figure against the float twin.
func TestEvaluateQuantizedSpec(t *testing.T) {
	models := NewModelCache(0)
	var floors []float64
	for _, m := range []string{"toy", "toy:w8a16", "toy:w4a16-g32"} {
		out := Evaluate(context.Background(), Spec{Model: m, GPU: "h200", Device: "cpu", Token: DefaultToken, Pos: 2}, Options{Models: models})
		v := out.Verdict
		if v == nil || !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyUS == nil || v.BoundUS == nil {
			t.Fatalf("%s: %+v %+v", m, v, out.Failure)
		}
		if m != "toy" && *v.MaxAbsErr != 0 {
			t.Errorf("%s: max_abs_err %v: the VM does not compute the oracle's dequantisation", m, *v.MaxAbsErr)
		}
		floors = append(floors, *v.BoundUS)
	}
	if !(floors[1] < floors[0] && floors[2] < floors[1]) {
		t.Errorf("floors bf16/int8/int4: %v", floors)
	}
	q, err := ModelQuality(context.Background(), models, "toy:w4a16-g32", "", []int32{5}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if q.Tokens != 6 || q.MaxAbsLogitErr <= 0 || q.Top1Agreement < 0 || q.Top1Agreement > 1 {
		t.Errorf("quality %+v", q)
	}
	if _, err := ModelQuality(context.Background(), models, "toy", "", []int32{5}, 6); err == nil {
		t.Error("a float model has a model-quality figure")
	}
}

// The fused patterns' scales are checked as GEMV_TILE's are: a quantised
// fused tile without its scales input breaks the pattern's arity; one
// reading another projection's scales is refused.
func TestQuantizedFusedMutations(t *testing.T) {
	tg, _ := ir.Target("h100")
	cfg, err := model.Load("toy:w4a16-g32")
	if err != nil {
		t.Fatal(err)
	}
	lower := func() *ir.Program {
		p, err := schedule.Lower(cfg, tg, schedule.FullyFused(), schedule.LowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := validate.Validate(p); !r.OK {
			t.Fatalf("fully fused int4 toy: %s", r.Reason(4))
		}
		return p
	}
	var fused []int
	p := lower()
	for i := range p.Tasks {
		if _, _, ok := ir.TileQuant(&p.Tasks[i]); ok && p.Tasks[i].Op == ir.OpFUSED {
			fused = append(fused, i)
		}
	}
	if len(fused) < 2 {
		t.Fatalf("%d quantised fused tiles", len(fused))
	}
	p.Tasks[fused[0]].Inputs = p.Tasks[fused[0]].Inputs[:len(p.Tasks[fused[0]].Inputs)-1]
	if r := validate.Validate(p); r.OK || !hasCode(r, validate.CodeFusedPattern) {
		t.Errorf("a fused int4 tile without scales: %s", r.Reason(4))
	}
	p = lower()
	a, b := &p.Tasks[fused[0]], &p.Tasks[fused[len(fused)-1]]
	if a.Inputs[len(a.Inputs)-1] == b.Inputs[len(b.Inputs)-1] {
		t.Fatal("the first and last fused tiles share scales")
	}
	a.Inputs[len(a.Inputs)-1] = b.Inputs[len(b.Inputs)-1]
	if r := validate.Validate(p); r.OK || !hasCode(r, validate.CodeQuantScales) {
		t.Errorf("a fused tile reading another projection's scales: %s", r.Reason(4))
	}
}

func hasCode(r validate.Report, code string) bool {
	for _, d := range r.Errors {
		if d.Code == code {
			return true
		}
	}
	return false
}
