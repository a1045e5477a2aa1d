package control

import (
	"fmt"
	"math"
	"sync"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Floor is a campaign's pair of floors, as trial.Evaluate states them for
// every point it evaluates: the streamed-bytes floor
// (ir.Program.StreamedBytes: weights once, the embedding rows EMBED
// gathers, the K/V window attention reads), which is bound_us and the
// denominator of pct_of_roofline, and the seed's all-weights floor
// (ir.Program.TotalWeightBytes), a second figure. Neither depends on the
// schedule point (schedule.TestStreamedBytesIndependentOfThePoint): they
// depend on the model, the target, the decode position (the KV window) and
// the batch (rows gathered, windows read), which a campaign fixes at its
// start, so one lowering per campaign gives them.
//
// Figures that reach a campaign from outside (a worker's outcome, an
// agent's record) are checked against it: what can be derived from the
// campaign itself is never taken as sent.
//
// For a campaign with a workload the floors are those of its evaluated
// positions (trial.StepFloors, in Steps); StreamedUS and StreamedBytes are
// their weighted means, as trial.Evaluate states them.
type Floor struct {
	StreamedUS, AllWeightsUS   float64
	StreamedBytes, WeightBytes int64
	Steps                      []trial.StepFloor
}

// BoundUS is the streamed-bytes floor as verdicts state it (rounded to
// four decimals).
func (f Floor) BoundUS() float64 { return ir.RoundTo(f.StreamedUS, 4) }

// FloorOf lowers the default schedule point of modelName on gpu at decode
// position pos for batch sequences (0 means one) and states its floors at
// the target's spec HBM bandwidth, exactly as trial.Evaluate does for the
// point it evaluates. Results are cached (a campaign's figures are checked
// on every outcome and record).
func FloorOf(modelName, gpu string, pos, batch int, w *trial.Workload) (Floor, error) {
	key := floorKey{model: modelName, gpu: gpu, pos: pos, batch: max(1, batch)}
	if w != nil {
		key.workload = fmt.Sprintf("%v/%d/%d", w.PromptLens, w.GenLen, w.B())
	}
	floors.mu.Lock()
	fl, ok := floors.m[key]
	floors.mu.Unlock()
	if ok {
		return fl, nil
	}
	fl, err := lowerFloor(key, w)
	if err != nil {
		return Floor{}, err
	}
	floors.mu.Lock()
	if len(floors.m) >= maxCachedFloors {
		clear(floors.m)
	}
	floors.m[key] = fl
	floors.mu.Unlock()
	return fl, nil
}

// maxCachedFloors bounds the floors kept (one per campaign shape).
const maxCachedFloors = 256

type floorKey struct {
	model, gpu string
	pos, batch int
	workload   string // the workload's prompts, generated tokens and batch; "" for none
}

var floors = struct {
	mu sync.Mutex
	m  map[floorKey]Floor
}{m: map[floorKey]Floor{}}

func lowerFloor(k floorKey, w *trial.Workload) (Floor, error) {
	cfg, err := model.Load(k.model)
	if err != nil {
		return Floor{}, err
	}
	target, err := ir.Target(k.gpu)
	if err != nil {
		return Floor{}, err
	}
	var fl Floor
	if w != nil {
		if cfg, err = trial.ContextConfig(cfg, k.model, *w); err != nil {
			return Floor{}, err
		}
		if fl.Steps, fl.WeightBytes, err = trial.StepFloors(cfg, target, *w); err != nil {
			return Floor{}, err
		}
		var bytes float64
		for _, s := range fl.Steps {
			fl.StreamedUS += s.Weight * s.StreamedUS
			bytes += s.Weight * float64(s.StreamedBytes)
		}
		fl.StreamedBytes = int64(math.Round(bytes))
	} else {
		prog, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{Pos: k.pos, B: k.batch})
		if err != nil {
			return Floor{}, fmt.Errorf("lowering the default point: %w", err)
		}
		fl.StreamedBytes, fl.WeightBytes = prog.StreamedBytes(), prog.TotalWeightBytes()
		fl.StreamedUS = target.BandwidthBoundUS(fl.StreamedBytes)
	}
	fl.AllWeightsUS = target.BandwidthBoundUS(fl.WeightBytes)
	if !positiveFinite(fl.StreamedUS) {
		return Floor{}, fmt.Errorf("target %s gives no streamed-bytes floor (HBM bandwidth unknown?)", target.Name)
	}
	return fl, nil
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
