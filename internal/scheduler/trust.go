package scheduler

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Outcomes arrive from workers over the queue; the scheduler trusts only
// what it cannot compute itself (a measured latency, a correctness result,
// a side-by-side ratio). Every figure derived from those — the two floors,
// the byte counts, the percentage of the floor — is recomputed here from
// the campaign's own model, target, decode position and batch before the
// campaign sees the outcome (the campaign derives the speedup from
// latencies it recorded), and a latency that must not be shown (below the
// streamed-bytes floor, not finite, or without a correctness PASS) is
// withheld, as the trial pipeline itself would.

// floor is a campaign's pair of floors, as trial.Evaluate states them: the
// streamed-bytes floor (ir.Program.StreamedBytes: weights once, the
// embedding rows EMBED gathers, the K/V window attention reads), which is
// bound_us and the denominator of pct_of_roofline, and the seed's
// all-weights floor (ir.Program.TotalWeightBytes), a second figure. Neither
// depends on the schedule point (schedule.TestStreamedBytesIndependentOfThePoint):
// they depend on the model, the target, the decode position (the KV window)
// and the batch (rows gathered, windows read), which a campaign fixes at
// its start, so one lowering per campaign gives them.
type floor struct {
	streamedUS, allWeightsUS   float64
	streamedBytes, weightBytes int64
	// steps, for a workload campaign, are the floors of its evaluated
	// positions (streamedUS and streamedBytes are then their weighted
	// means, as trial.Evaluate states them).
	steps []trial.StepFloor
}

// recomputing is the fleet's transport with every outcome's derived figures
// recomputed.
type recomputing struct {
	under dispatch.Dispatcher
	floor func(campaignID string) (floor, bool)
	out   chan trial.Outcome
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newRecomputing(under dispatch.Dispatcher, floorOf func(string) (floor, bool)) *recomputing {
	r := &recomputing{under: under, floor: floorOf, out: make(chan trial.Outcome), done: make(chan struct{})}
	r.wg.Add(1)
	go r.run()
	return r
}

func (r *recomputing) run() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case o, ok := <-r.under.Outcomes():
			if !ok {
				return
			}
			f, known := r.floor(o.CampaignID)
			if !known {
				f = floor{streamedUS: math.NaN(), allWeightsUS: math.NaN()} // strip what cannot be checked
			}
			recompute(&o, f)
			select {
			case r.out <- o:
			case <-r.done:
				return
			}
		}
	}
}

func (r *recomputing) Submit(ctx context.Context, spec trial.Spec) error {
	return r.under.Submit(ctx, spec)
}

// Withdraw takes back a queued trial from the transport, where it can.
func (r *recomputing) Withdraw(ctx context.Context, spec trial.Spec) (bool, error) {
	return dispatch.Withdraw(ctx, r.under, spec)
}

func (r *recomputing) Outcomes() <-chan trial.Outcome { return r.out }

func (r *recomputing) Close() error {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
	return r.under.Close()
}

// recompute replaces o's derived figures with the scheduler's own.
func recompute(o *trial.Outcome, f floor) {
	if o.Ratio != nil && !positiveFinite(*o.Ratio) {
		o.Ratio = nil
	}
	if o.IncumbentUS != nil && !positiveFinite(*o.IncumbentUS) {
		o.IncumbentUS = nil
	}
	v := o.Verdict
	if v == nil || !v.Valid {
		return
	}
	v.PctOfRoofline, v.BoundUS, v.AllWeightsBoundUS = nil, nil, nil
	v.WeightMB, v.StreamedMB = 0, 0
	if positiveFinite(f.streamedUS) {
		bound := ir.RoundTo(f.streamedUS, 4)
		v.BoundUS = &bound
		v.StreamedMB = ir.RoundTo(float64(f.streamedBytes)/1e6, 4)
	}
	if positiveFinite(f.allWeightsUS) {
		all := ir.RoundTo(f.allWeightsUS, 4)
		v.AllWeightsBoundUS = &all
		v.WeightMB = ir.RoundTo(float64(f.weightBytes)/1e6, 4)
	}
	stepsOK := recomputeSteps(v, f)
	if v.LatencyUS == nil {
		return
	}
	lat := *v.LatencyUS
	why := ""
	switch {
	case !stepsOK:
		why = "its positions are not the campaign's workload's, or one is below its streamed-bytes floor (recomputed by the scheduler)"
	case v.Correct == nil || !*v.Correct:
		why = "latency reported without a correctness PASS"
	case !positiveFinite(lat):
		why = fmt.Sprintf("latency %v is not a positive number", lat)
	case !positiveFinite(f.streamedUS):
		why = "no streamed-bytes floor known to the scheduler for this campaign"
	case lat < f.streamedUS:
		why = fmt.Sprintf("latency %.4fus is below the streamed-bytes floor %.4fus (recomputed by the scheduler)", lat, f.streamedUS)
	}
	if why != "" {
		v.LatencyUS, v.LatencyKind = nil, nil
		v.Notes = append(v.Notes, why+"; withheld")
		return
	}
	pct, _ := ir.PctOfRoofline(lat, f.streamedUS)
	v.PctOfRoofline = &pct
}

// recomputeSteps replaces a workload verdict's per-position floors with the
// scheduler's and their percentages, and reports whether every position is
// one of the campaign's with its latency at or above its floor (a verdict
// without positions, for a campaign without a workload, is fine).
func recomputeSteps(v *trial.Verdict, f floor) bool {
	if len(v.Positions) == 0 && len(f.steps) == 0 {
		return true
	}
	ok := len(v.Positions) == len(f.steps)
	for i := range v.Positions {
		p := &v.Positions[i]
		p.BoundUS, p.PctOfRoofline, p.StreamedMB = nil, nil, 0
		if !ok || p.Pos != f.steps[i].Pos || !positiveFinite(f.steps[i].StreamedUS) {
			ok = false
			p.LatencyUS = nil
			continue
		}
		s := f.steps[i]
		p.BoundUS = new(ir.RoundTo(s.StreamedUS, 4))
		p.StreamedMB = ir.RoundTo(float64(s.StreamedBytes)/1e6, 4)
		switch {
		case p.LatencyUS == nil:
		case !positiveFinite(*p.LatencyUS) || *p.LatencyUS < s.StreamedUS:
			ok = false
			p.LatencyUS = nil
		default:
			p.PctOfRoofline = new(ir.RoundTo(*p.LatencyUS/s.StreamedUS*100, 3))
		}
	}
	if !ok {
		for i := range v.Positions {
			v.Positions[i].LatencyUS, v.Positions[i].PctOfRoofline = nil, nil
		}
	}
	return ok
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// floorOf computes (once per campaign) the floors of a driven campaign.
func (f *Fleet) floorOf(id string) (floor, bool) {
	f.floorsMu.Lock()
	defer f.floorsMu.Unlock()
	if fl, ok := f.floors[id]; ok {
		return fl, true
	}
	var st campaign.State
	if err := f.Read(id, func(c *campaign.Campaign) { st = c.State() }); err != nil {
		return floor{}, false
	}
	fl, err := floorFor(st.Model, st.GPU, st.Settings.Pos, st.Settings.Batch, st.Settings.Workload)
	if err != nil {
		f.log.Warn("no floor for the campaign's outcomes", "campaign", id, "err", err)
		return floor{}, false
	}
	f.floors[id] = fl
	return fl, true
}

// floorFor lowers the default schedule point of model on gpu at decode
// position pos for batch sequences (0 means one) — or, for a workload, at
// each of its positions with its context (trial.StepFloors) — and states
// its floors at the target's spec HBM bandwidth, exactly as trial.Evaluate
// does for the point it evaluates.
func floorFor(modelName, gpu string, pos, batch int, w *trial.Workload) (floor, error) {
	cfg, err := model.Load(modelName)
	if err != nil {
		return floor{}, err
	}
	target, err := ir.Target(gpu)
	if err != nil {
		return floor{}, err
	}
	var fl floor
	if w != nil {
		if cfg, err = trial.ContextConfig(cfg, modelName, *w); err != nil {
			return floor{}, err
		}
		if fl.steps, fl.weightBytes, err = trial.StepFloors(cfg, target, *w); err != nil {
			return floor{}, err
		}
		var bytes float64
		for _, s := range fl.steps {
			fl.streamedUS += s.Weight * s.StreamedUS
			bytes += s.Weight * float64(s.StreamedBytes)
		}
		fl.streamedBytes = int64(math.Round(bytes))
	} else {
		prog, err := schedule.Lower(cfg, target, schedule.Default(), schedule.LowerOptions{Pos: pos, B: max(1, batch)})
		if err != nil {
			return floor{}, fmt.Errorf("lowering the default point: %w", err)
		}
		fl.streamedBytes, fl.weightBytes = prog.StreamedBytes(), prog.TotalWeightBytes()
		fl.streamedUS = target.BandwidthBoundUS(fl.streamedBytes)
	}
	fl.allWeightsUS = target.BandwidthBoundUS(fl.weightBytes)
	if !positiveFinite(fl.streamedUS) {
		return floor{}, fmt.Errorf("target %s gives no streamed-bytes floor (HBM bandwidth unknown?)", target.Name)
	}
	return fl, nil
}
