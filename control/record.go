package control

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/trial"
)

// figureTolerance is how far (relative) a floor or a percentage an agent
// sends may be from the campaign's own before the answer says it was
// replaced: the rounding of a verdict's figures stays far below it, a
// figure of another position, batch, model, target or floor far above.
const figureTolerance = 0.01

// checkRecord gives an agent's record the checks a worker's outcome gets
// (the fleet's, internal/scheduler/trust.go): the floor and the percentage
// of it are the campaign's own, recomputed from its model, target, decode
// position and batch; a latency below the floor is refused, and so is a
// latency of another kind than the campaign's device gives (a cpu
// campaign's latencies are predicted, a cuda campaign's measured-gpu: the
// two are never compared). ev's floor and percentage are set to the
// campaign's; notes say which figures the agent sent were replaced
// (another floor: the all-weights one, another position, batch, model or
// target), so that the agent learns it.
func checkRecord(ev *campaign.Record, st campaign.State) (notes []string, err error) {
	if ev.LatencyUS == nil {
		if ev.PctOfRoofline != nil {
			return nil, badValue("pct_of_roofline needs a latency (latency_us)")
		}
		if ev.BoundUS == nil {
			return nil, nil
		}
	}
	if ev.LatencyUS != nil && ev.Kind != "" && ev.Kind != st.LatencyKind {
		return nil, badValue("kind %s does not match this campaign: its device is %s, whose latencies are %s (%s); record a %s latency into a campaign of device %s",
			ev.Kind, st.Device, st.LatencyKind, kindSource(st.LatencyKind), ev.Kind, deviceOf(ev.Kind))
	}
	floor, err := FloorOf(st.Model, st.GPU, st.Settings.Pos, st.Settings.Batch, st.Settings.Workload)
	if err != nil {
		return nil, Errorf(ErrConflict, "cannot check the record against the campaign's streamed-bytes floor: %v", err)
	}
	where := fmt.Sprintf("the campaign's streamed-bytes floor (model %s on %s, position %d, batch %d)",
		st.Model, st.GPU, st.Settings.Pos, max(1, st.Settings.Batch))
	if ev.BoundUS != nil && !near(*ev.BoundUS, floor.BoundUS()) {
		notes = append(notes, fmt.Sprintf("bound_us %v replaced by %v us, %s", *ev.BoundUS, floor.BoundUS(), where))
	}
	ev.BoundUS = new(floor.BoundUS())
	if ev.LatencyUS == nil {
		return notes, nil
	}
	lat := *ev.LatencyUS
	if !positiveFinite(lat) {
		return nil, nil // the campaign refuses it, saying why
	}
	if lat < floor.StreamedUS {
		return nil, badValue("latency %v us is below %s, %v us: no schedule streams its bytes faster than the HBM bandwidth allows; check the figure",
			lat, where, floor.BoundUS())
	}
	pct, _ := ir.PctOfRoofline(lat, floor.StreamedUS)
	if ev.PctOfRoofline != nil && !near(*ev.PctOfRoofline, pct) {
		notes = append(notes, fmt.Sprintf("pct_of_roofline %v replaced by %v: latency / %s x 100", *ev.PctOfRoofline, pct, where))
	}
	ev.PctOfRoofline = &pct
	return notes, nil
}

// near reports whether got is within figureTolerance of want.
func near(got, want float64) bool {
	return positiveFinite(got) && math.Abs(got-want) <= figureTolerance*math.Abs(want)
}

// kindSource says where latencies of a kind come from.
func kindSource(k trial.LatencyKind) string {
	if k == trial.KindMeasuredGPU {
		return "CUDA-event timings on a GPU"
	}
	return "the cost model's predictions"
}

// deviceOf is the device whose campaigns record latencies of kind k.
func deviceOf(k trial.LatencyKind) string {
	if k == trial.KindMeasuredGPU {
		return "cuda"
	}
	return "cpu"
}
