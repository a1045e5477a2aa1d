package pipeline

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
)

// Simulation window: the first simWarmup iterations warm the pipeline up
// (the prologue's drain, the first refills); iterations simWarmup up to the
// last one (excluded: its loads run past the end) are measured.
const (
	simIterations = 12
	simWarmup     = 4
)

// Timing is the simulator's prediction for a schedule on a target.
type Timing struct {
	Target             string            `json:"target"`
	Schedule           string            `json:"schedule"`
	CyclesPerIteration float64           `json:"cycles_per_iteration"`         // steady state, one main iteration (both partitions)
	MMABusyPerIter     float64           `json:"mma_busy_per_iteration"`       // cycles the matrix pipe is busy per iteration: the ideal
	MMAUtilisation     float64           `json:"mma_utilisation"`              // MMABusyPerIter / CyclesPerIteration, in [0, 1]
	PrologueCycles     int               `json:"prologue_cycles"`              // from the first op to the end of the prologue's drain
	StallVM            float64           `json:"stall_global_per_iteration"`   // cycles the wave waited on the global counter
	StallLDS           float64           `json:"stall_lds_per_iteration"`      // cycles the wave waited on the LDS counter
	StallMMAPipe       float64           `json:"stall_mma_pipe_per_iteration"` // cycles an MMA waited for the busy matrix pipe
	BarrierCycles      float64           `json:"barrier_per_iteration"`
	Latencies          ir.PipelineTiming `json:"latencies"`
	Kind               string            `json:"latency_kind"` // always "predicted"
}

// Simulate predicts a safe schedule's steady-state MMA utilisation on a
// target from the target's pipeline timing. A schedule with hazards is
// refused: a prediction for a wrong kernel means nothing.
//
// The model, one wave in issue order: an op issues once the wave's issue is
// free (the previous op's Issue cycles), its unit is free (the previous op
// of its class's Busy cycles) and its derived waits are met — a wait on a
// counter lasts until the op it drains to and every earlier op of that
// counter completed (Latency after issue), plus WaitOverhead when it
// stalls; an MMA also waits for the previous MMA of its quadrant (the
// accumulator) to complete; every partition starts with a workgroup barrier (Barrier cycles);
// the prologue ends with a full drain.
func Simulate(s *Schedule, t *ir.GpuTarget) (Timing, error) {
	if t == nil || t.Pipeline == nil {
		name := "<nil>"
		if t != nil {
			name = t.Name
		}
		return Timing{}, fmt.Errorf("target %s has no pipeline timing data (the AMD targets have it)", name)
	}
	if h := Check(s).Hazards(); len(h) > 0 {
		return Timing{}, fmt.Errorf("the schedule has %d hazards (amkctl pipeline check lists them); first: %s", len(h), h[0])
	}
	stream, _ := analyze(s, simIterations)
	pt := *t.Pipeline
	timing := func(c Class) ir.OpTiming {
		switch c {
		case GlobalLoad:
			return pt.GlobalLoad
		case FragmentLoad:
			return pt.LDSLoad
		case MMAClass:
			return pt.MMA
		}
		return pt.Compute
	}
	done := make(map[*inst]int, len(stream))    // completion cycle
	drained := make(map[*inst]int, len(stream)) // completion of this op and every earlier op of its counter
	lastDone := map[Class]int{}                 // running max of completions per class
	unitFree := map[Class]int{}
	accumulator := map[[2]int]int{} // when each quadrant's last MMA result is ready
	cursor := 0
	var iterStart [simIterations]int
	var stallVM, stallLDS, stallPipe, barrier float64
	prologueEnd := -1
	measured := func(in *inst) bool { return in.iter >= simWarmup && in.iter < simIterations-1 }
	for _, in := range stream {
		if in.drain {
			for _, d := range lastDone {
				cursor = max(cursor, d)
			}
			prologueEnd = cursor
		}
		if in.halfStart {
			if in.part == 0 && in.iter >= 0 {
				iterStart[in.iter] = cursor
			}
			cursor += pt.Barrier
			if measured(in) {
				barrier += float64(pt.Barrier)
			}
		}
		ready := cursor
		for _, w := range []*inst{in.waitVM, in.waitLDS} {
			if w == nil {
				continue
			}
			if d := drained[w]; d > ready {
				if measured(in) {
					if w.op.Kind.Class() == GlobalLoad {
						stallVM += float64(d - ready)
					} else {
						stallLDS += float64(d - ready)
					}
				}
				ready = d + pt.WaitOverhead
			}
		}
		cl := in.op.Kind.Class()
		ot := timing(cl)
		start := max(ready, unitFree[cl])
		if cl == MMAClass { // an MMA accumulates into its quadrant's previous result
			start = max(start, accumulator[in.op.Quadrant])
		}
		if cl == MMAClass && measured(in) {
			stallPipe += float64(start - ready)
		}
		unitFree[cl] = start + ot.Busy
		cursor = start + ot.Issue
		done[in] = start + ot.Latency
		if cl == MMAClass {
			accumulator[in.op.Quadrant] = done[in]
		}
		lastDone[cl] = max(lastDone[cl], done[in])
		drained[in] = lastDone[cl]
	}
	n := float64(simIterations - 1 - simWarmup)
	mmas := 0
	for _, m := range s.Body {
		for _, o := range m.Ops {
			if o.Kind == MMA {
				mmas++
			}
		}
	}
	perIter := float64(iterStart[simIterations-1]-iterStart[simWarmup]) / n
	busy := float64(mmas * s.Partitions * pt.MMA.Busy)
	out := Timing{Target: t.Name, Schedule: s.Name, CyclesPerIteration: perIter, MMABusyPerIter: busy,
		PrologueCycles: prologueEnd, StallVM: stallVM / n, StallLDS: stallLDS / n, StallMMAPipe: stallPipe / n,
		BarrierCycles: barrier / n, Latencies: pt, Kind: "predicted"}
	if perIter > 0 {
		out.MMAUtilisation = min(1, busy/perIter)
	}
	return out, nil
}
