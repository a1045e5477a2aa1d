package campaign

import (
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

var (
	searchCompare = flag.Bool("search.compare", false, "run the proposer comparison on the cost model (docs/results/search.md)")
	searchSeeds   = flag.Int("search.seeds", 10, "seeds per proposer in the comparison")
	searchModel   = flag.String("search.model", "small", "model preset of the comparison")
	searchWarmOn  = flag.String("search.warm-from", "llama-1b", "model preset whose cold campaign's corpus warms the warm runs")
	searchGPU     = flag.String("search.gpu", "h200", "GPU target of the comparison")
	searchTrialS  = flag.Float64("search.trial-seconds", 2, "simulated evaluator time per trial")
)

// costLandscape evaluates points the way the CPU evaluator times them
// (lowering, launch check, schedule.Predict), without the reference VM:
// every valid lowering of a preset is correct.
type costLandscape struct {
	cfg    model.Config
	target *ir.GpuTarget
	cache  map[string]trial.Verdict
}

func newCostLandscape(t testing.TB, preset, gpu string) *costLandscape {
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	target, err := ir.Target(gpu)
	if err != nil {
		t.Fatal(err)
	}
	return &costLandscape{cfg: cfg, target: target, cache: map[string]trial.Verdict{}}
}

func (l *costLandscape) verdict(p schedule.Point) trial.Verdict {
	id := p.ID()
	if v, ok := l.cache[id]; ok {
		return v
	}
	v := trial.Verdict{GPU: l.target.Name, Device: "cpu", ScheduleID: id}
	prog, err := schedule.Lower(l.cfg, l.target, p, schedule.LowerOptions{})
	if err == nil {
		err = schedule.CheckLaunch(p, l.target)
	}
	if err != nil {
		reason := err.Error()
		v.RejectedReason = &reason
	} else {
		v.Valid = true
		yes, kind := true, trial.KindPredicted
		lat := math.Round(schedule.Predict(prog, l.target, p).PredictedUS*1e4) / 1e4
		bound := l.target.BandwidthBoundUS(prog.TotalWeightBytes())
		v.Correct, v.LatencyUS, v.LatencyKind, v.BoundUS = &yes, &lat, &kind, &bound
		v.PctOfRoofline = new(round3(lat / bound * 100))
	}
	l.cache[id] = v
	return v
}

// optimum is the best latency over the whole CPU search space: what an
// overnight campaign can at best find.
func (l *costLandscape) optimum(t testing.TB) float64 {
	c := New()
	s := DefaultSettings()
	if _, err := c.Step(Start{Time: epoch, Model: "m", GPU: l.target.Name, Device: "cpu", Cold: true, Settings: s}); err != nil {
		t.Fatal(err)
	}
	best := math.Inf(1)
	for _, mc := range c.modelCandidates(c.searchKnobs(), schedule.Default()) {
		if v := l.verdict(mc.p); v.LatencyUS != nil {
			best = min(best, *v.LatencyUS)
		}
	}
	return best
}

// searchRun is one campaign of the comparison.
type searchRun struct {
	trials   int     // experiments when the campaign stopped
	within   int     // first experiment whose best is within 1% of the optimum (0: never)
	gap      float64 // best / optimum - 1 at the stop
	corpus   []flywheel.Record
	stopText string
}

// runSearch drives one non-overnight campaign with one worker until it
// stops (or maxTrials), each trial taking trialS seconds.
func runSearch(t testing.TB, l *costLandscape, s Settings, seed uint64, shape flywheel.Shape, corpus []flywheel.Record, opt float64, maxTrials int, trialS float64) searchRun {
	c := New()
	now := epoch
	start := Start{Time: now, Model: l.cfg.Name, GPU: l.target.Name, Device: "cpu", Seed: seed, Shape: shape,
		Cold: corpus == nil, Corpus: corpus, Settings: s, Env: flywheel.Env{AMKVersion: "search"}}
	if _, err := c.Step(start); err != nil {
		t.Fatal(err)
	}
	var run searchRun
	for c.st.ExperimentsRun < maxTrials {
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
		v := l.verdict(p)
		now = now.Add(time.Duration(trialS * float64(time.Second)))
		d, err = c.Step(Finished{Time: now, Outcome: trial.Outcome{TrialID: spec.TrialID, Verdict: &v}})
		if err != nil {
			t.Fatal(err)
		}
		run.corpus = append(run.corpus, d.Corpus...)
		if b := c.st.Best; run.within == 0 && b != nil && b.LatencyUS <= opt*1.01 {
			run.within = c.st.ExperimentsRun
		}
		if c.st.Status == StatusDone {
			break
		}
	}
	run.trials = c.st.ExperimentsRun
	if c.st.Best != nil {
		run.gap = c.st.Best.LatencyUS/opt - 1
	}
	run.stopText = c.st.MoveOnReason
	return run
}

func shapeOf(cfg model.Config) flywheel.Shape {
	return flywheel.Shape{Hidden: cfg.Hidden, NLayers: cfg.NLayers, NHeads: cfg.NHeads, NKVHeads: cfg.NKVHeads,
		HeadDim: cfg.HeadDim, Intermediate: cfg.Intermediate, Vocab: cfg.Vocab}
}

// armResult sums up one proposer arm over many seeds.
type armResult struct {
	hit, seeds        int
	within, stops     []int // sorted
	gaps              []float64
	medWithin, maxWin int // 0 when no run got within 1%
}

// warmStart is where an arm's campaigns start from: cold (corpus nil), or
// warm from the corpus records of a cold campaign with the corpus
// settings on another preset, cut after trials experiments (0: 200).
type warmStart struct {
	name   string
	corpus *Settings
	trials int
}

// warmStarts are the starts of the comparison: cold; warm from a model
// proposer's campaign (what a user of the defaults has in the corpus);
// warm from one cut after 15 trials (an interrupted campaign: its best is
// usually a knob or two from the optimum); warm from a reference
// proposer's campaign with the fixed plateau, which stops early and leaves
// a poorer corpus.
func warmStarts() []warmStart {
	ref := referenceSettings()
	return []warmStart{{"cold", nil, 0}, {"warm (model corpus)", new(DefaultSettings()), 0},
		{"warm (model corpus, 15 trials)", new(DefaultSettings()), 15}, {"warm (reference corpus)", &ref, 0}}
}

// runArm runs seeds 1..n of one arm from start: cold, or warm from the
// corpus of a cold campaign (seed 1000+i) on warmFrom.
func runArm(t testing.TB, l, warmFrom *costLandscape, opt, warmOpt float64, s Settings, start warmStart, n int, trialS float64) armResult {
	r := armResult{seeds: n}
	for seed := 1; seed <= n; seed++ {
		var corpus []flywheel.Record
		if start.corpus != nil {
			trials := start.trials
			if trials == 0 {
				trials = 200
			}
			corpus = runSearch(t, warmFrom, *start.corpus, uint64(1000+seed), shapeOf(warmFrom.cfg), nil, warmOpt, trials, trialS).corpus
		}
		run := runSearch(t, l, s, uint64(seed), shapeOf(l.cfg), corpus, opt, 400, trialS)
		if run.within > 0 {
			r.hit++
			r.within = append(r.within, run.within)
		}
		r.stops = append(r.stops, run.trials)
		r.gaps = append(r.gaps, run.gap)
		t.Logf("%s seed %d: within@%d, stop@%d (%s), gap %.2f%%", start.name, seed, run.within, run.trials, run.stopText, 100*run.gap)
	}
	sort.Ints(r.within)
	sort.Ints(r.stops)
	sort.Float64s(r.gaps)
	if len(r.within) > 0 {
		r.medWithin, r.maxWin = r.within[len(r.within)/2], r.within[len(r.within)-1]
	}
	return r
}

// referenceSettings are today's proposer with its fixed plateau.
func referenceSettings() Settings {
	ref := DefaultSettings()
	ref.Proposer, ref.PlateauScaling = ProposerReference, false
	return ref
}

// comparisonArms are today's proposer with its fixed plateau and the new
// defaults.
func comparisonArms() []struct {
	name string
	s    Settings
} {
	return []struct {
		name string
		s    Settings
	}{{"reference, plateau 8", referenceSettings()}, {"model, scaled plateau", DefaultSettings()}}
}

// TestSearchComparison compares the reference proposer with its fixed
// plateau against the model proposer with the scaled plateau, cold and
// warm, over many seeds, on the cost-model landscape of a preset. It runs
// only with -search.compare and prints the table of docs/results/search.md.
func TestSearchComparison(t *testing.T) {
	if !*searchCompare {
		t.Skip("run with -search.compare")
	}
	l := newCostLandscape(t, *searchModel, *searchGPU)
	opt := l.optimum(t)
	warmFrom := newCostLandscape(t, *searchWarmOn, *searchGPU)
	warmOpt := warmFrom.optimum(t)
	var b strings.Builder
	fmt.Fprintf(&b, "landscape: %s on %s, optimum %.4f us over the CPU space; warm corpora from cold campaigns on %s (optimum %.4f us); %d seeds; %.0f s per trial\n\n",
		l.cfg.Name, *searchGPU, opt, warmFrom.cfg.Name, warmOpt, *searchSeeds, *searchTrialS)
	b.WriteString("| proposer | start | within 1% (runs) | trials to within 1%: median / max | trials at stop: median | gap at stop: median / worst |\n|---|---|---:|---:|---:|---:|\n")
	for _, a := range comparisonArms() {
		for _, start := range warmStarts() {
			r := runArm(t, l, warmFrom, opt, warmOpt, a.s, start, *searchSeeds, *searchTrialS)
			med, worst := "-", "-"
			if r.hit > 0 {
				med, worst = fmt.Sprint(r.medWithin), fmt.Sprint(r.maxWin)
			}
			fmt.Fprintf(&b, "| %s | %s | %d/%d | %s / %s | %d | %.2f%% / %.2f%% |\n", a.name, start.name, r.hit, r.seeds,
				med, worst, r.stops[len(r.stops)/2], 100*r.gaps[len(r.gaps)/2], 100*r.gaps[len(r.gaps)-1])
		}
	}
	t.Log("\n" + b.String())
}

// TestSearchGoals holds the default proposer to issue 14's search goals on
// small/h200 over seeds 1..10 of the comparison (the cost model is
// deterministic, so is this): every cold campaign gets within 1% of the
// space's optimum within 40 trials, and every campaign warm from a model
// proposer's corpus on llama-1b within 10.
func TestSearchGoals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 campaigns on the cost model")
	}
	l := newCostLandscape(t, "small", "h200")
	opt := l.optimum(t)
	warmFrom := newCostLandscape(t, "llama-1b", "h200")
	starts := warmStarts()
	for _, g := range []struct {
		start warmStart
		limit int
	}{{starts[0], 40}, {starts[1], 10}} {
		// The corpus campaigns' own distance to their optimum is not
		// needed here: 0 spares enumerating llama-1b's space.
		r := runArm(t, l, warmFrom, opt, 0, DefaultSettings(), g.start, 10, 2)
		if r.hit != r.seeds || r.maxWin > g.limit {
			t.Errorf("%s: %d/%d runs within 1%%, worst after %d trials; want every run within %d", g.start.name, r.hit, r.seeds, r.maxWin, g.limit)
		}
	}
}

// BenchmarkProposerSearch runs the comparison's arms over 10 seeds on
// small/h200 (the cost model: deterministic, so the metrics are too), cold
// and warm from a model proposer's corpus on llama-1b, and reports how
// many runs got within 1% of the space's optimum and the median and worst
// number of trials they needed.
func BenchmarkProposerSearch(b *testing.B) {
	l := newCostLandscape(b, "small", "h200")
	opt := l.optimum(b)
	warmFrom := newCostLandscape(b, "llama-1b", "h200")
	warmOpt := warmFrom.optimum(b)
	for _, a := range comparisonArms() {
		for _, start := range warmStarts()[:2] {
			name := strings.NewReplacer(", ", "-", " ", "-").Replace(a.name)
			if start.corpus != nil {
				name += "-warm"
			}
			b.Run(name, func(b *testing.B) {
				var r armResult
				for i := 0; i < b.N; i++ {
					r = runArm(b, l, warmFrom, opt, warmOpt, a.s, start, 10, 2)
				}
				b.ReportMetric(float64(r.hit), "runs-within-1%/10")
				b.ReportMetric(float64(r.medWithin), "median-trials-to-1%")
				b.ReportMetric(float64(r.maxWin), "max-trials-to-1%")
			})
		}
	}
}
