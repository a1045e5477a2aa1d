package trial

import (
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
)

// widened returns a float32 copy of the weights (every tensor held at its
// stored width widened into F): the reference VM then reads float32 values,
// as it did before it read weights at their stored width.
func widened(w model.Weights) model.Weights {
	out := model.Weights{}
	for k, t := range w {
		out[k] = &tensor.Tensor{DType: t.DType, Shape: t.Shape, F: t.Floats()}
	}
	return out
}

// The model cache holds bf16 weights at their stored width only, and the
// reference VM's logits reading them equal, bit for bit, its logits reading
// the same weights widened to float32 (small is bf16; toy is f32 and keeps
// the float32 path), default and a thin-tile schedule, positions 0 and 3.
func TestPackedBF16WeightsSameLogits(t *testing.T) {
	target, _ := ir.Target("h200")
	thin := schedule.Default()
	thin.SetKnob(schedule.PathNTile, schedule.Space(target, "cpu")[0].Choices[0])
	models := []string{"toy", "small"}
	if testing.Short() {
		models = models[:1]
	}
	for _, name := range models {
		lm, err := NewModelCache(0).Get(name, "")
		if err != nil {
			t.Fatal(err)
		}
		for k, w := range lm.Weights {
			if stored := w.Half != nil && w.F == nil; stored != (lm.Config.DType == ir.BF16) {
				t.Fatalf("%s: %s holds %d bf16 values and %d float32 values", name, k, len(w.Half), len(w.F))
			}
		}
		plain := widened(lm.Weights)
		for _, pt := range []schedule.Point{schedule.Default(), thin} {
			for _, pos := range []int{0, 3} {
				prog, err := schedule.Lower(lm.Config, target, pt, schedule.LowerOptions{Pos: pos})
				if err != nil {
					t.Fatal(err)
				}
				a, err := RunStep(prog, lm.Weights, DefaultToken, pos, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := RunStep(prog, plain, DefaultToken, pos, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(a.Logits) != len(b.Logits) || len(a.Logits) == 0 {
					t.Fatalf("%s: %d and %d logits", name, len(a.Logits), len(b.Logits))
				}
				for i := range a.Logits {
					if math.Float32bits(a.Logits[i]) != math.Float32bits(b.Logits[i]) {
						t.Fatalf("%s %s pos %d: logit %d is %v at stored width, %v from float32", name, pt.ID(), pos, i, a.Logits[i], b.Logits[i])
					}
				}
			}
		}
	}
}
