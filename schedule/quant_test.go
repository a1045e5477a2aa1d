package schedule

import (
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

// A quantised model's CUDA space draws the quantised GEMV's knob; a float
// model's and every CPU space do not (the cost model does not read it).
func TestSpaceForQuantizedModels(t *testing.T) {
	tg, _ := ir.Target("h100")
	has := func(space []Knob) bool {
		for _, k := range space {
			if k.Path == "kernel_knobs.qc" && k.Effective && len(k.Choices) == 3 {
				return true
			}
		}
		return false
	}
	if !has(SpaceFor(tg, DeviceCUDA, true)) || has(SpaceFor(tg, DeviceCUDA, false)) || has(SpaceFor(tg, DeviceCPU, true)) {
		t.Error("kernel_knobs.qc is not exactly in the quantised CUDA space")
	}
	if !QuantizedSpec("small:w4a16") || QuantizedSpec("small") || QuantizedSpec("small:w4a16-g48") {
		t.Error("QuantizedSpec")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 200 {
		seen[RandomIn(rng, SpaceFor(tg, DeviceCUDA, true)).knob("qc")] = true
	}
	if !seen[1] || !seen[2] || !seen[4] {
		t.Errorf("qc drawn %v", seen)
	}
	// The default point leaves qc out of its id (its default is the kernels').
	if Default().ID() != "sch_c3af28020e" {
		t.Errorf("default id %s", Default().ID())
	}
}

// Quantised programs stream their stored width: the floor of w4a16 small is
// about a quarter of bf16's, w8a16's about half; the cost model's
// predictions stay above their floors, and dequantisation makes a
// quantised tile no faster per byte than the ALU allows.
func TestQuantizedFloorsAndPredictions(t *testing.T) {
	tg, _ := ir.Target("h200")
	floor := map[string]float64{}
	for _, spec := range []string{"small", "small:w8a16", "small:w4a16"} {
		cfg, err := model.Load(spec)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(cfg, tg, Default(), LowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		floor[spec] = tg.BandwidthBoundUS(p.StreamedBytes())
		if c := Predict(p, tg, Default()); c.PredictedUS < floor[spec] {
			t.Errorf("%s: predicted %.2f below the floor %.2f", spec, c.PredictedUS, floor[spec])
		}
	}
	if r := floor["small:w4a16"] / floor["small"]; r < 0.25 || r > 0.28 {
		t.Errorf("w4a16 floor is %.3f of bf16's", r)
	}
	if r := floor["small:w8a16"] / floor["small"]; r < 0.5 || r > 0.52 {
		t.Errorf("w8a16 floor is %.3f of bf16's", r)
	}
}
