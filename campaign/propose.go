package campaign

import (
	"fmt"
	"sort"
	"time"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// drawsPerGenerator is how many draws a proposal's own generator gets
// before the search falls back to uniform random draws.
const drawsPerGenerator = 16

type candidate struct {
	p       schedule.Point
	id      string
	source  string
	opening bool
}

func (c *Campaign) proposeN(now time.Time, n int) (Decision, error) {
	if n < 0 {
		return Decision{}, fmt.Errorf("%w: propose n=%d", ErrInvalid, n)
	}
	var d Decision
	for len(d.Enqueue) < n {
		if c.st.Status != StatusOptimizing {
			d.Log = append(d.Log, fmt.Sprintf("not proposing: campaign is %s", c.st.Status))
			break
		}
		if b := c.st.Settings.Budget.Iterations; b > 0 && c.st.ExperimentsRun+len(c.st.InFlight) >= b {
			d.Log = append(d.Log, fmt.Sprintf("not proposing: the budget of %d experiments is fully issued", b))
			break
		}
		cand, logs, ok := c.next()
		d.Log = append(d.Log, logs...)
		if !ok {
			c.st.Exhausted = true
			msg := c.exhaustedMessage()
			d.Log = append(d.Log, msg)
			if len(c.st.InFlight) == 0 && len(d.Enqueue) == 0 {
				c.finish(now, msg)
				d.Log = append(d.Log, "campaign done: "+msg)
			}
			break
		}
		spec := c.issue(now, cand)
		d.Enqueue = append(d.Enqueue, spec)
		d.Log = append(d.Log, fmt.Sprintf("trial %d issued: %s %s", spec.TrialID, cand.source, cand.id))
	}
	return d, nil
}

// issue records a candidate as in flight (write-ahead) and builds its spec.
func (c *Campaign) issue(now time.Time, cand candidate) trial.Spec {
	id := c.st.NextTrial
	c.st.NextTrial++
	s := &c.st.Settings
	spec := trial.Spec{
		CampaignID: c.st.ID, TrialID: id, Model: c.st.Model, Weights: c.st.Weights,
		GPU: c.st.GPU, Device: c.st.Device, Point: pointJSON(cand.p), Source: cand.source,
		Token: s.Token, Pos: s.Pos, Batch: s.Batch, Workload: s.Workload, TimeoutSeconds: s.TrialTimeoutS, Incarnation: c.st.Incarnation,
		WeightsID: c.st.WeightsID,
	}
	inf := &InFlight{ScheduleID: cand.id, Region: c.st.Region, Opening: cand.opening, IssuedAt: now}
	if c.st.Device == schedule.DeviceCUDA && c.st.Best != nil && c.st.Best.Point != nil {
		spec.Incumbent = pointJSON(*c.st.Best.Point)
		inf.IncumbentID = c.st.Best.ScheduleID
	}
	inf.Spec = spec
	c.st.InFlight[id] = inf
	c.st.Tried[cand.id] = id
	return spec
}

// next picks the next point to evaluate.
func (c *Campaign) next() (candidate, []string, bool) {
	for len(c.st.Queue) > 0 {
		q := c.st.Queue[0]
		c.st.Queue = c.st.Queue[1:]
		if _, seen := c.st.Tried[q.ScheduleID]; seen {
			continue
		}
		return candidate{p: q.Point, id: q.ScheduleID, source: q.Source, opening: true}, nil, true
	}
	s := &c.st.Settings
	if s.Overnight && c.st.Best != nil && c.st.NonImprovement >= s.RestartAfter {
		return c.restart()
	}
	anchor := c.anchorPoint()
	if s.Proposer == ProposerModel {
		cand, ok := c.modelNext(anchor)
		return cand, nil, ok
	}
	if c.rng.Float64() < s.Explore {
		cand, ok := c.fresh(SourceRandom, c.random)
		return cand, nil, ok
	}
	mutate := func() schedule.Point { return schedule.MutateIn(anchor, c.rng, c.searchSpace()) }
	if r := c.rankerFor(); r.Trained() && c.rng.Float64() >= s.Epsilon {
		if cand, ok := c.ranked(mutate); ok {
			return cand, nil, true
		}
	}
	cand, ok := c.fresh(SourceMutate, mutate)
	return cand, nil, ok
}

// restart is the overnight basin hop: a fresh random region.
func (c *Campaign) restart() (candidate, []string, bool) {
	cand, ok := c.fresh(SourceRestart, c.random)
	if !ok {
		return cand, nil, false
	}
	cand.source = SourceRestart
	c.st.Restarts++
	c.st.Region++
	c.st.NonImprovement = 0
	c.st.ConsecutiveReverts = 0
	c.st.Anchor = &Anchor{ScheduleID: cand.id, Point: new(cand.p)}
	msg := fmt.Sprintf("basin-hop restart #%d: new region at %s (global best %s kept)",
		c.st.Restarts, cand.id, c.st.Best.ScheduleID)
	return cand, []string{msg}, true
}

func (c *Campaign) random() schedule.Point {
	return schedule.RandomIn(c.rng, c.searchSpace())
}

// searchSpace is the campaign's search space: its target and device, with the
// quantised kernels' knobs for a model spec that names a quantization
// scheme (schedule.SpaceFor).
func (c *Campaign) searchSpace() []schedule.Knob {
	return schedule.SpaceFor(c.target, c.st.Device, schedule.QuantizedSpec(c.st.Model))
}

// fresh draws from gen until an untried point turns up, then falls back to
// uniform random draws; it gives up after MaxDraws draws in all.
func (c *Campaign) fresh(source string, gen func() schedule.Point) (candidate, bool) {
	for i := 0; i < c.st.Settings.MaxDraws; i++ {
		src := source
		draw := gen
		if i >= drawsPerGenerator {
			src, draw = SourceRandom, c.random
			if source == SourceRestart {
				src = SourceRestart
			}
		}
		p := c.project(draw())
		id := p.ID()
		if _, seen := c.st.Tried[id]; !seen {
			return candidate{p: p, id: id, source: src}, true
		}
	}
	return candidate{}, false
}

// ranked draws a pool of mutations, ranks it with the prior and returns the
// best-ranked untried one.
func (c *Campaign) ranked(mutate func() schedule.Point) (candidate, bool) {
	var pool []schedule.Point
	ids := map[string]bool{}
	for i := 0; i < c.st.Settings.RankPool; i++ {
		p := c.project(mutate())
		id := p.ID()
		if _, seen := c.st.Tried[id]; seen || ids[id] {
			continue
		}
		ids[id] = true
		pool = append(pool, p)
	}
	if len(pool) == 0 {
		return candidate{}, false
	}
	best := c.rankerFor().Rank(c.st.Shape, pool)[0]
	return candidate{p: best, id: best.ID(), source: SourcePrior}, true
}

// anchorPoint is the point exploitation mutates: the anchor (after a basin
// hop), else the best, else the canonical default.
func (c *Campaign) anchorPoint() schedule.Point {
	if a := c.st.Anchor; a != nil && a.Point != nil {
		return c.project(*a.Point)
	}
	if b := c.st.Best; b != nil && b.Point != nil {
		return c.project(*b.Point)
	}
	return c.project(schedule.Default())
}

// inFlightIDs returns the in-flight trial ids in order.
func (c *Campaign) inFlightIDs() []int {
	ids := make([]int, 0, len(c.st.InFlight))
	for id := range c.st.InFlight {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}
