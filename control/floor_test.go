package control

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// FloorOf states the floors trial.Evaluate states for the same model,
// target, position and batch, and refuses what it cannot lower.
func TestFloorOfMatchesTheTrialPipeline(t *testing.T) {
	models := trial.NewModelCache(0)
	for _, tc := range []struct {
		model, gpu string
		pos, batch int
	}{{"toy", "h200", 0, 0}, {"toy-2L", "h100", 37, 2}} {
		fl, err := FloorOf(tc.model, tc.gpu, tc.pos, tc.batch, nil)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		v := trial.Evaluate(context.Background(), trial.Spec{Model: tc.model, GPU: tc.gpu, Device: schedule.DeviceCPU,
			Point: json.RawMessage(`{}`), Token: 7, Pos: tc.pos, Batch: tc.batch}, trial.Options{Models: models}).Verdict
		if v == nil || v.BoundUS == nil || v.AllWeightsBoundUS == nil {
			t.Fatalf("%+v: the trial pipeline stated no floors: %+v", tc, v)
		}
		if got := fl.BoundUS(); got != *v.BoundUS {
			t.Errorf("%+v: streamed-bytes floor %v, the trial's bound_us %v", tc, got, *v.BoundUS)
		}
		if got := ir.RoundTo(fl.AllWeightsUS, 4); got != *v.AllWeightsBoundUS {
			t.Errorf("%+v: all-weights floor %v, the trial's all_weights_bound_us %v", tc, got, *v.AllWeightsBoundUS)
		}
	}
	if _, err := FloorOf("toy", "h200", 1<<20, 1, nil); err == nil {
		t.Error("a position beyond the model's context gave a floor")
	}
	if _, err := FloorOf("no-such-model", "h200", 0, 1, nil); err == nil {
		t.Error("an unknown model gave a floor")
	}
}

// BenchmarkFloorOf is what a campaign's floors cost once (FloorOf caches
// them): a model load and one lowering of the default point.
func BenchmarkFloorOf(b *testing.B) {
	for _, name := range []string{"small", "llama-1b"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := lowerFloor(floorKey{model: name, gpu: "h200", pos: 200, batch: 1}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
