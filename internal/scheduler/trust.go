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
	"github.com/amk-dev/amk/trial"
)

// Outcomes arrive from workers over the queue; the scheduler trusts only
// what it cannot compute itself (a measured latency, a correctness result,
// a side-by-side ratio). Every figure derived from those — the HBM floor,
// the weight size, the percentage of the floor — is recomputed here from
// the campaign's own model and target before the campaign sees the outcome
// (the campaign derives the speedup from latencies it recorded), and a
// latency that must not be shown (below the floor, not finite, or without a
// correctness PASS) is withheld, as the trial pipeline itself would.

// floor is a campaign's HBM floor: the model's weight bytes over the
// target's sustained bandwidth. Every schedule of a model moves the same
// weights, so it does not depend on the trial.
type floor struct {
	us          float64
	weightBytes int64
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
				f = floor{us: math.NaN()} // strip what cannot be checked
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
	v.PctOfRoofline = nil
	v.BoundUS = nil
	if positiveFinite(f.us) {
		bound := ir.RoundTo(f.us, 4)
		v.BoundUS = &bound
		v.WeightMB = ir.RoundTo(float64(f.weightBytes)/1e6, 4)
	}
	if v.LatencyUS == nil {
		return
	}
	lat := *v.LatencyUS
	why := ""
	switch {
	case v.Correct == nil || !*v.Correct:
		why = "latency reported without a correctness PASS"
	case !positiveFinite(lat):
		why = fmt.Sprintf("latency %v is not a positive number", lat)
	case !positiveFinite(f.us):
		why = "no HBM floor known to the scheduler for this campaign"
	case lat < f.us:
		why = fmt.Sprintf("latency %.4fus is below the HBM floor %.4fus (recomputed by the scheduler)", lat, f.us)
	}
	if why != "" {
		v.LatencyUS, v.LatencyKind = nil, nil
		v.Notes = append(v.Notes, why+"; withheld")
		return
	}
	pct := ir.RoundTo(lat/f.us*100, 3)
	v.PctOfRoofline = &pct
}

func positiveFinite(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// floorOf computes (once per campaign) the floor of a driven campaign.
func (f *Fleet) floorOf(id string) (floor, bool) {
	f.floorsMu.Lock()
	defer f.floorsMu.Unlock()
	if fl, ok := f.floors[id]; ok {
		return fl, true
	}
	var modelName, gpu string
	read := func(c *campaign.Campaign) { st := c.State(); modelName, gpu = st.Model, st.GPU }
	if err := f.Read(id, read); err != nil {
		return floor{}, false
	}
	cfg, err := model.Load(modelName)
	if err != nil {
		return floor{}, false
	}
	target, err := ir.Target(gpu)
	if err != nil {
		return floor{}, false
	}
	wb := cfg.WeightBytes()
	us := target.BandwidthBoundUS(wb)
	if !positiveFinite(us) {
		return floor{}, false
	}
	fl := floor{us: us, weightBytes: wb}
	f.floors[id] = fl
	return fl, true
}
