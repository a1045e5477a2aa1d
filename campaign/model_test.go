package campaign

import (
	"sort"
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// proposal is one trial a model-proposer campaign issued, with what the
// campaign knew when it issued it.
type proposal struct {
	trialID int
	source  string
	point   schedule.Point
	// distance is how many search knobs differ from the incumbent's.
	distance int
	// neighbour: the point is one knob move from the incumbent (a move the
	// normalisation follows up, as tiles_per_sm resetting the tile width,
	// is one move).
	neighbour bool
	// untriedNeighbour: an untried one-knob neighbour of the incumbent
	// existed.
	untriedNeighbour bool
	// nearPlateau: the consecutive reverts had reached probeFraction of
	// the plateau threshold.
	nearPlateau bool
}

// driveModel runs a campaign on the fake landscape, one trial at a time,
// until it stops or n trials ran, and describes every proposal.
func driveModel(t *testing.T, s Start, n int) []proposal {
	t.Helper()
	c := New()
	if _, err := c.Step(s); err != nil {
		t.Fatal(err)
	}
	knobs := c.searchKnobs()
	now := s.Time
	var out []proposal
	for len(out) < n && c.Status() == StatusOptimizing {
		incumbent := levelsOf(c.anchorPoint(), knobs)
		moves := map[string]bool{}
		pl := c.newPool(knobs)
		pl.neighboursOf(c.anchorPoint())
		for _, mc := range pl.out {
			moves[mc.id] = true
		}
		untried := len(moves) > 0
		limit := c.plateauThreshold()
		near := limit > 0 && float64(c.st.ConsecutiveReverts) >= probeFraction*float64(limit)
		d, err := c.Step(Propose{Time: now, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Enqueue) == 0 {
			break
		}
		spec := d.Enqueue[0]
		p, err := schedule.ParsePoint(spec.Point)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, proposal{trialID: spec.TrialID, source: spec.Source, point: p,
			distance: differingKnobs(levelsOf(c.project(p), knobs), incumbent), neighbour: moves[c.project(p).ID()],
			untriedNeighbour: untried, nearPlateau: near})
		lat := fakeLatency(p)
		yes, kind, bound := true, c.st.LatencyKind, 1.0
		now = now.Add(time.Minute)
		f := Finished{Time: now}
		f.Outcome.TrialID = spec.TrialID
		f.Outcome.Verdict = verdictOf(&yes, &lat, &kind, &bound)
		if _, err := c.Step(f); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestModelWarmOpensWithCorpusBest: a warm model-proposer campaign first
// tries the corpus's best row, then the baseline and the other warm seeds;
// right after them the model proposes (no random start-up), and all its
// proposals but every warmGlobalEvery-th are one-knob neighbours of the
// incumbent.
func TestModelWarmOpensWithCorpusBest(t *testing.T) {
	corpus := fakeCorpus(40, nearShape, "h200", schedule.DeviceCPU)
	target, err := ir.Target("h200")
	if err != nil {
		t.Fatal(err)
	}
	rows := append([]flywheel.Record(nil), corpus...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].PctOfRoofline < rows[j].PctOfRoofline })
	bestID := ""
	for _, r := range rows {
		p, err := schedule.PointFromValue(r.Schedule)
		if err != nil {
			t.Fatal(err)
		}
		p = flywheel.Project(p, target, schedule.DeviceCPU)
		if schedule.CheckLaunch(p, target) == nil {
			bestID = p.ID()
			break
		}
	}
	if bestID == "" {
		t.Fatal("no launchable corpus row")
	}
	for seed := uint64(1); seed <= 5; seed++ {
		s := startEvent()
		s.Seed, s.Cold, s.Corpus = seed, false, corpus
		props := driveModel(t, s, 24)
		if len(props) < 12 {
			t.Fatalf("seed %d: only %d trials", seed, len(props))
		}
		if props[0].source != SourceWarmSeed || props[0].point.ID() != bestID {
			t.Fatalf("seed %d: trial 0 is %s %s, want the corpus best %s", seed, props[0].source, props[0].point.ID(), bestID)
		}
		want := []string{SourceWarmSeed, SourceBaseline, SourceWarmSeed, SourceWarmSeed, SourceModel}
		for i, src := range want {
			if props[i].source != src {
				t.Fatalf("seed %d: trial %d has source %s, want %s", seed, i, props[i].source, src)
			}
		}
		local := 0
		for _, p := range props[4:] {
			if p.source != SourceModel || p.trialID%warmGlobalEvery == 0 || !p.untriedNeighbour {
				continue
			}
			if !p.neighbour {
				t.Errorf("seed %d: trial %d is %d knobs from the incumbent, want a one-knob neighbour", seed, p.trialID, p.distance)
			}
			local++
		}
		if local == 0 {
			t.Errorf("seed %d: no neighbour proposal to check", seed)
		}
	}
}

// TestModelProbesNeighboursNearPlateau: once a campaign's reverts reach
// probeFraction of the plateau threshold, the model proposes one-knob
// neighbours of the incumbent while any is untried, so a plateau stop
// comes after the incumbent's neighbourhood was on offer.
func TestModelProbesNeighboursNearPlateau(t *testing.T) {
	probes := 0
	for seed := uint64(1); seed <= 5; seed++ {
		s := startEvent()
		s.Seed = seed
		for _, p := range driveModel(t, s, 200) {
			if p.source != SourceModel || !p.nearPlateau || !p.untriedNeighbour {
				continue
			}
			probes++
			if !p.neighbour {
				t.Errorf("seed %d: trial %d near the plateau is %d knobs from the incumbent, want a one-knob neighbour", seed, p.trialID, p.distance)
			}
		}
	}
	if probes == 0 {
		t.Fatal("no proposal near a plateau to check")
	}
}

// TestModelColdFarFromIncumbent guards the probe test above from passing
// vacuously: before the plateau nears, cold campaigns' model proposals are
// global, and some land more than one knob from the incumbent (over seeds
// 1..8: a campaign whose reverts near the plateau at once has none).
func TestModelColdFarFromIncumbent(t *testing.T) {
	far := 0
	for seed := uint64(1); seed <= 8; seed++ {
		s := startEvent()
		s.Seed = seed
		for _, p := range driveModel(t, s, 200) {
			if p.source == SourceModel && !p.nearPlateau && !p.neighbour && p.distance > 1 {
				far++
			}
		}
	}
	if far == 0 {
		t.Fatal("every early model proposal was a neighbour of the incumbent")
	}
}
