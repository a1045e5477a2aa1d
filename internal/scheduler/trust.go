package scheduler

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/ir"
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

// recomputing is the fleet's transport with every outcome's derived figures
// recomputed.
type recomputing struct {
	under dispatch.Dispatcher
	floor func(campaignID string) (control.Floor, trial.LatencyKind, bool)
	out   chan trial.Outcome
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newRecomputing(under dispatch.Dispatcher, floorOf func(string) (control.Floor, trial.LatencyKind, bool)) *recomputing {
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
			f, kind, known := r.floor(o.CampaignID)
			if !known {
				f = control.Floor{StreamedUS: math.NaN(), AllWeightsUS: math.NaN()} // strip what cannot be checked
			}
			recompute(&o, f, kind)
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

func (r *recomputing) Outcomes() <-chan trial.Outcome { return r.out }

func (r *recomputing) Close() error {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
	return r.under.Close()
}

// recompute replaces o's derived figures with the scheduler's own, and
// withholds a latency of another kind than kind, the campaign's (a device
// cpu campaign's latencies are predicted, a device cuda campaign's
// measured-gpu; "" when unknown: any).
func recompute(o *trial.Outcome, f control.Floor, kind trial.LatencyKind) {
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
	if positiveFinite(f.StreamedUS) {
		bound := ir.RoundTo(f.StreamedUS, 4)
		v.BoundUS = &bound
		v.StreamedMB = ir.RoundTo(float64(f.StreamedBytes)/1e6, 4)
	}
	if positiveFinite(f.AllWeightsUS) {
		all := ir.RoundTo(f.AllWeightsUS, 4)
		v.AllWeightsBoundUS = &all
		v.WeightMB = ir.RoundTo(float64(f.WeightBytes)/1e6, 4)
	}
	if v.LatencyUS == nil {
		return
	}
	lat := *v.LatencyUS
	why := ""
	switch {
	case v.Correct == nil || !*v.Correct:
		why = "latency reported without a correctness PASS"
	case kind != "" && (v.LatencyKind == nil || *v.LatencyKind != kind):
		why = fmt.Sprintf("latency of kind %s, not this campaign's %s", kindName(v.LatencyKind), kind)
	case !positiveFinite(lat):
		why = fmt.Sprintf("latency %v is not a positive number", lat)
	case !positiveFinite(f.StreamedUS):
		why = "no streamed-bytes floor known to the scheduler for this campaign"
	case lat < f.StreamedUS:
		why = fmt.Sprintf("latency %.4fus is below the streamed-bytes floor %.4fus (recomputed by the scheduler)", lat, f.StreamedUS)
	}
	if why != "" {
		v.LatencyUS, v.LatencyKind = nil, nil
		v.Notes = append(v.Notes, why+"; withheld")
		return
	}
	pct, _ := ir.PctOfRoofline(lat, f.StreamedUS)
	v.PctOfRoofline = &pct
}

// kindName is a verdict's latency kind, for messages.
func kindName(k *trial.LatencyKind) string {
	if k == nil {
		return "none"
	}
	return string(*k)
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// floorOf states the floors of a campaign of the workspace
// (control.FloorOf, cached per campaign shape) and its latency kind.
func (f *Fleet) floorOf(id string) (control.Floor, trial.LatencyKind, bool) {
	var st campaign.State
	if err := f.Read(id, func(c *campaign.Campaign) { st = c.State() }); err != nil {
		return control.Floor{}, "", false
	}
	fl, err := control.FloorOf(st.Model, st.GPU, st.Settings.Pos, st.Settings.Batch)
	if err != nil {
		f.log.Warn("no floor for the campaign's outcomes", "campaign", id, "err", err)
		return control.Floor{}, st.LatencyKind, false
	}
	return fl, st.LatencyKind, true
}
