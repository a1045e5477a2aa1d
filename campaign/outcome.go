package campaign

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// result is one classified experiment, before it is applied to the state.
type result struct {
	trial       int // -1 for a recorded experiment
	source      string
	scheduleID  string
	sched       *schedule.Point // the point, parsed once; nil when absent or malformed
	pointErr    error           // why point did not parse
	complexity  int
	tag         string
	correctness string
	latency     *float64
	kind        trial.LatencyKind
	pct         *float64
	bound       *float64
	allWeights  *float64 // the verdict's all_weights_bound_us
	score       *float64 // what keep/revert compared (nil: no latency)
	description string
	regions     map[string]float64
	positions   []trial.PositionVerdict // a workload trial's per-position figures
	region      int                     // the search region the trial was proposed in
	infra       bool                    // no evaluation happened: the point is not tried
	opening     bool
	worker      string
	newBest     bool // the result becomes the best
	baseline    bool // the result is the canonical default's (docs/spec/rules.md R10)
	// refusal is why the evaluator refused the trial before evaluating it
	// (trial.Failure.Refusal: no memory for the model, no GPU for a cuda
	// trial); "" otherwise.
	refusal string
}

// MaxRefusals is how many trials in a row the evaluators may refuse
// (trial.Failure.Refusal) before the campaign pauses itself: its trials
// would all be refused until the fleet changes, and it neither queues a
// refused point again nor spends its budget on refusals meanwhile.
const MaxRefusals = 3

// CheckOutcome refuses an outcome of a trial in flight that does not
// answer the spec issued for it (trial.CheckBound: a replaced spec, an
// outcome of an earlier campaign with this id, a verdict about another
// point). A driver calls it before it records an outcome from outside; it
// is not part of Step, so that a ledger whose journal holds outcomes
// recorded before the check existed still replays. An outcome for a trial
// not in flight is left to Step (a duplicate or an unknown trial).
func (c *Campaign) CheckOutcome(o trial.Outcome) error {
	inf, ok := c.st.InFlight[o.TrialID]
	if !ok || (o.CampaignID != "" && o.CampaignID != c.st.ID) {
		return nil
	}
	if o.CampaignID == "" {
		o.CampaignID = inf.Spec.CampaignID
	}
	return trial.CheckBound(inf.Spec, o)
}

func (c *Campaign) finished(now time.Time, e Finished) (Decision, error) {
	o := e.Outcome
	if o.CampaignID != "" && o.CampaignID != c.st.ID {
		return Decision{}, fmt.Errorf("%w: %q (this is %q)", ErrWrongCampaign, o.CampaignID, c.st.ID)
	}
	inf, ok := c.st.InFlight[o.TrialID]
	if !ok {
		if o.TrialID >= 0 && o.TrialID < c.st.NextTrial {
			return Decision{}, fmt.Errorf("%w: trial %d", ErrDuplicateTrial, o.TrialID)
		}
		return Decision{}, fmt.Errorf("%w: trial %d (next trial is %d)", ErrUnknownTrial, o.TrialID, c.st.NextTrial)
	}
	regions := e.Regions
	if regions == nil {
		regions = o.Regions
	}
	if err := checkRegions(regions); err != nil {
		return Decision{}, err
	}
	r := c.classify(o, inf)
	r.regions = regions
	delete(c.st.InFlight, o.TrialID)
	if !r.infra {
		c.st.TrialSeconds += max(0, now.Sub(inf.IssuedAt).Seconds())
		c.st.TimedTrials++
	}
	d := c.apply(now, r)
	if r.pointErr != nil {
		d.Log = append(d.Log, fmt.Sprintf("trial %d: its point does not parse (%v): no prior example, model observation or corpus record", o.TrialID, r.pointErr))
	}
	if r.infra {
		delete(c.st.Tried, inf.ScheduleID)
		switch {
		case r.refusal != "":
			// Evaluating it again where the same evaluators run refuses it
			// again: the point is not queued again (it may be drawn again).
			d.Log = append(d.Log, fmt.Sprintf("trial %d: refused by its evaluator before evaluation; point %s is not queued again", o.TrialID, inf.ScheduleID))
		case inf.Opening && r.sched != nil:
			c.st.Queue = append([]Queued{{ScheduleID: inf.ScheduleID, Point: *r.sched, Source: inf.Spec.Source}}, c.st.Queue...)
			d.Log = append(d.Log, fmt.Sprintf("trial %d: %s point %s queued again (infrastructure failure)", o.TrialID, inf.Spec.Source, inf.ScheduleID))
		}
	}
	if r.refusal == "" {
		c.st.Refusals = 0
		return d, nil
	}
	c.st.Refusals++
	if c.st.Refusals >= MaxRefusals && c.st.Status == StatusOptimizing {
		c.st.Status, c.st.PausedAt = StatusPaused, &now
		c.st.PauseReason = fmt.Sprintf("%d trials in a row were refused by their evaluators before evaluation (the last: %s); "+
			"resume once the fleet can take them", c.st.Refusals, flywheel.Clip(r.refusal, 240))
		d.Log = append(d.Log, "paused: "+c.st.PauseReason)
	}
	return d, nil
}

func checkRegions(m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := m[k]; !ir.Finite(v) || v < 0 {
			return fmt.Errorf("%w: region %q share %v", ErrInvalid, k, v)
		}
	}
	return nil
}

// classify turns an outcome into a tagged experiment and makes the
// keep/revert decision for a correct one.
func (c *Campaign) classify(o trial.Outcome, inf *InFlight) result {
	r := result{
		trial: o.TrialID, source: inf.Spec.Source, scheduleID: inf.ScheduleID,
		region: inf.Region, opening: inf.Opening, worker: o.Worker,
	}
	if len(inf.Spec.Point) > 0 {
		if p, err := parsePoint(inf.Spec.Point); err != nil {
			r.pointErr = err
		} else {
			r.sched, r.complexity = &p, p.Complexity()
		}
	}
	v := o.Verdict
	switch {
	case v == nil && o.Failure != nil:
		c.classifyFailure(&r, o.Failure)
	case v == nil:
		r.tag, r.correctness, r.infra = flywheel.TagFailed, flywheel.CorrectCrash, true
		r.description = fmt.Sprintf("trial %d FAILED: empty outcome", o.TrialID)
	case !v.Valid:
		reason := ""
		if v.RejectedReason != nil {
			reason = *v.RejectedReason
		}
		r.tag, r.correctness = flywheel.TagRejected, flywheel.CorrectRejected
		r.description = fmt.Sprintf("%s: %s", r.source, flywheel.Clip(reason, 80))
	case v.Correct == nil || !*v.Correct:
		r.tag, r.correctness = flywheel.TagRevert, flywheel.CorrectFail
		r.description = r.source + ": correctness FAIL"
	default:
		c.classifyCorrect(&r, o, inf)
	}
	r.description = flywheel.ClipDescription(r.description + "; kind=" + kindOrNone(r.kind))
	return r
}

func (c *Campaign) classifyFailure(r *result, f *trial.Failure) {
	what := f.Message
	if f.Phase != "" {
		what = f.Phase + ": " + what
	}
	if f.Refusal() {
		r.refusal = what
	}
	switch f.Class {
	case trial.FailCrash:
		r.tag, r.correctness = flywheel.TagCrash, flywheel.CorrectCrash
	case trial.FailTimeout:
		r.tag, r.correctness = flywheel.TagTimeout, flywheel.CorrectTimeout
	default:
		r.tag, r.correctness, r.infra = flywheel.TagFailed, flywheel.CorrectCrash, true
	}
	r.description = flywheel.Clip(fmt.Sprintf("trial %d %s: %s", r.trial, strings.ToUpper(r.tag), what), 160)
}

func (c *Campaign) classifyCorrect(r *result, o trial.Outcome, inf *InFlight) {
	v := o.Verdict
	r.correctness = flywheel.CorrectPass
	if positive(v.BoundUS) {
		r.bound = new(*v.BoundUS)
	}
	if positive(v.AllWeightsBoundUS) {
		r.allWeights = new(*v.AllWeightsBoundUS)
	}
	if v.LatencyUS == nil {
		r.tag = flywheel.TagTried
		r.description = r.source + ": tried (no latency)"
		return
	}
	var kind trial.LatencyKind
	if v.LatencyKind != nil {
		kind = *v.LatencyKind
	}
	if !positive(v.LatencyUS) || (kind != trial.KindMeasuredGPU && kind != trial.KindPredicted) {
		r.tag = flywheel.TagFailed
		r.description = fmt.Sprintf("%s: malformed verdict (latency %v, kind %q)", r.source, *v.LatencyUS, kind)
		return
	}
	lat := *v.LatencyUS
	r.latency, r.kind = new(lat), kind
	switch {
	case positive(v.PctOfRoofline):
		r.pct = new(*v.PctOfRoofline)
	case r.bound != nil:
		if pct, ok := ir.PctOfRoofline(lat, *r.bound); ok {
			r.pct = &pct
		}
	}
	score, how := lat, ""
	if positive(o.Ratio) && inf.IncumbentID != "" {
		if base, ok := c.st.Scores[inf.IncumbentID]; ok {
			score = *o.Ratio * base
			how = fmt.Sprintf(", side-by-side ratio %.4f", *o.Ratio)
			if c.st.Best != nil && inf.IncumbentID != c.st.Best.ScheduleID {
				how += " chained through " + inf.IncumbentID
			}
		}
	}
	r.score = new(score)
	r.positions = v.Positions
	keep, why := c.better(score, kind, r.complexity, r.scheduleID == c.defaultID)
	if keep {
		r.tag, r.newBest = flywheel.TagKept, true
		r.description = r.source + ": kept"
		if why != "" {
			r.description += " (" + why + ")"
		}
	} else {
		r.tag = flywheel.TagTried
		r.description = r.source + ": tried (" + c.marginNote(score) + ")"
	}
	r.description += how + perStep(v.Positions)
}

// perStep sums up a workload trial's per-position latencies for a row:
// "; per step at kv_len 513/576/640: 240.12/245.3/250.2 us" ("" for a
// one-step trial).
func perStep(ps []trial.PositionVerdict) string {
	if len(ps) == 0 {
		return ""
	}
	kv, lat := make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		kv[i] = fmt.Sprint(p.KVLen)
		lat[i] = "-"
		if p.LatencyUS != nil {
			lat[i] = fmt.Sprint(ir.RoundTo(*p.LatencyUS, 2))
		}
	}
	return "; per step at kv_len " + strings.Join(kv, "/") + ": " + strings.Join(lat, "/") + " us"
}

// marginNote says how a correct candidate that was not kept compares with
// the best, naming the keep margin when it was faster by less than that:
// "0.89% faster than the best, under the 1% keep margin", "4.20% slower
// than the best", "as fast as the best".
func (c *Campaign) marginNote(score float64) string {
	b := c.st.Best
	if b == nil || b.Score <= 0 {
		return "not kept"
	}
	pct := (b.Score - score) / b.Score * 100
	switch {
	case math.Abs(pct) < 0.005:
		return "as fast as the best"
	case pct > 0:
		return fmt.Sprintf("%.2f%% faster than the best, under the %.3g%% keep margin", pct, c.st.Settings.MinGain*100)
	}
	return fmt.Sprintf("%.2f%% slower than the best", -pct)
}

// kindRank orders latency kinds: a measurement outranks a prediction.
func kindRank(kind trial.LatencyKind) int {
	switch kind {
	case trial.KindMeasuredGPU:
		return 0
	case trial.KindPredicted:
		return 1
	}
	return 2
}

// better is docs/spec/loop.md's keep rule for a correct candidate with a
// latency: no incumbent → keep; a ≥ min_gain win → keep; within ±min_gain
// a measured latency beats a predicted one, then the simpler point wins if
// it is not slower (a tie-break never gives up speed: chained, slower
// simpler points let the best drift above points the campaign had found,
// up to a best slower than the baseline); and the canonical default, at the
// best's kind, is kept whenever it is faster than the best, so the best is
// never slower than the baseline.
func (c *Campaign) better(score float64, kind trial.LatencyKind, complexity int, isDefault bool) (bool, string) {
	b := c.st.Best
	if b == nil {
		return true, "first correct point"
	}
	g := c.st.Settings.MinGain
	if score < b.Score*(1-g) {
		return true, ""
	}
	kr, br := kindRank(kind), kindRank(b.Kind)
	if score <= b.Score*(1+g) {
		if kr < br {
			return true, "tie-break: measured beats predicted"
		}
		if kr == br && complexity < b.Complexity && score <= b.Score {
			return true, "tie-break: simpler"
		}
	}
	if isDefault && kr == br && score < b.Score {
		return true, "the baseline is faster than the best"
	}
	return false, ""
}

// apply records one classified experiment: counters, best, baseline,
// anchor, prior, row, corpus record, trajectory and the move-on check.
func (c *Campaign) apply(now time.Time, r result) Decision {
	st := &c.st
	st.ExperimentsRun++
	exp := st.ExperimentsRun
	if r.trial >= 0 {
		st.Counts.Trials++
	} else {
		st.Counts.Recorded++
	}
	c.count(r.tag, r.correctness)
	kept := r.tag == flywheel.TagKept
	res := c.resultOf(exp, r)
	var d Decision
	if r.latency != nil && r.correctness == flywheel.CorrectPass && st.Baseline == nil && (r.baseline || r.scheduleID == c.defaultID) {
		st.Baseline = res
		d.Log = append(d.Log, fmt.Sprintf("baseline (the canonical default): %s %s", us(*r.latency), r.kind))
	}
	if r.bound != nil && st.BoundUS == nil {
		st.BoundUS = new(*r.bound)
	}
	if r.allWeights != nil && st.AllWeightsBoundUS == nil {
		st.AllWeightsBoundUS = new(*r.allWeights)
	}
	if kept && r.latency != nil {
		st.ExperimentsKept++
		st.ConsecutiveReverts = 0
		st.NonImprovement = 0
		if r.newBest && res != nil {
			st.Best = res
			st.Scores[r.scheduleID] = res.Score
			if r.sched != nil {
				st.Anchor = &Anchor{ScheduleID: r.scheduleID, Point: r.sched, Score: new(res.Score)}
			}
		}
	} else {
		st.ConsecutiveReverts++
		if r.region == st.Region {
			st.NonImprovement++
			if msg := c.moveAnchor(r); msg != "" {
				d.Log = append(d.Log, msg)
			}
		}
	}
	if !st.Cold && r.pct != nil && r.sched != nil {
		st.Prior = append(st.Prior, flywheel.ExampleOf(st.Shape, c.project(*r.sched), *r.pct))
		c.ranker = nil
	}
	if st.Settings.Proposer == ProposerModel {
		c.observe(r)
	}
	d.Rows = append(d.Rows, c.row(exp, r))
	if kept {
		if rec, ok := c.corpusRecord(now, r); ok {
			d.Corpus = append(d.Corpus, rec)
		} else {
			d.Log = append(d.Log, fmt.Sprintf("experiment %d: kept, but no corpus record (its floor or config is unknown)", exp))
		}
	}
	st.Trajectory = append(st.Trajectory, c.trajectoryPoint(now, exp, r, kept))
	d.Log = append(d.Log, c.outcomeLine(exp, r))
	if st.Status != StatusDone {
		if stop, reason := c.moveOn(now); stop {
			c.finish(now, reason)
			d.Log = append(d.Log, "campaign done: "+reason)
		}
	}
	return d
}

func (c *Campaign) count(tag, correctness string) {
	n := &c.st.Counts
	if correctness == flywheel.CorrectPass {
		n.Correct++
	}
	switch tag {
	case flywheel.TagKept:
		n.Kept++
	case flywheel.TagTried:
		n.Tried++
	case flywheel.TagRevert:
		n.Revert++
	case flywheel.TagRejected:
		n.Rejected++
	case flywheel.TagCrash:
		n.Crash++
	case flywheel.TagTimeout:
		n.Timeout++
	default:
		n.Failed++
	}
}

func (c *Campaign) resultOf(exp int, r result) *Result {
	if r.latency == nil || r.score == nil {
		return nil
	}
	return &Result{
		Trial: r.trial, Experiment: exp, LatencyUS: *r.latency, Kind: r.kind, Score: *r.score,
		PctOfRoofline: r.pct, BoundUS: r.bound, ScheduleID: r.scheduleID, Point: r.sched,
		Source: r.source, Complexity: r.complexity, Regions: r.regions, Positions: r.positions, Worker: r.worker,
	}
}

// moveAnchor follows improvements inside a basin-hop region: the region's
// first correct point, then any ≥ min_gain win over the anchor, becomes the
// point exploitation mutates (the global best is untouched).
func (c *Campaign) moveAnchor(r result) string {
	a := c.st.Anchor
	if a == nil || r.score == nil || c.st.Best == nil || a.ScheduleID == c.st.Best.ScheduleID {
		return ""
	}
	if r.scheduleID == a.ScheduleID {
		a.Score = new(*r.score)
		return ""
	}
	if a.Score != nil && *r.score >= *a.Score*(1-c.st.Settings.MinGain) {
		return ""
	}
	c.st.Anchor = &Anchor{ScheduleID: r.scheduleID, Point: r.sched, Score: new(*r.score)}
	c.st.NonImprovement = 0
	return fmt.Sprintf("region %d: anchor moved to %s (%s)", c.st.Region, r.scheduleID, us(*r.latency))
}

func (c *Campaign) row(exp int, r result) flywheel.Row {
	row := flywheel.Row{
		Experiment: exp, Tag: r.tag, Loop: flywheel.LoopSchedule, Model: c.st.Label, GPU: c.st.GPU,
		Regime: flywheel.RegimeSingle, Correctness: r.correctness, ScheduleID: r.scheduleID,
		Description: r.description,
	}
	if r.correctness == flywheel.CorrectPass {
		row.LatencyUS, row.PctOfRoofline = r.latency, r.pct
	}
	return row
}

func (c *Campaign) corpusRecord(now time.Time, r result) (flywheel.Record, bool) {
	if r.latency == nil || r.sched == nil {
		return flywheel.Record{}, false
	}
	bound, pct := r.bound, r.pct
	switch {
	case bound == nil && pct != nil:
		b, ok := ir.FloorFromPct(*r.latency, *pct)
		if !ok {
			return flywheel.Record{}, false
		}
		bound = &b
	case bound != nil && pct == nil:
		p, ok := ir.PctOfRoofline(*r.latency, *bound)
		if !ok {
			return flywheel.Record{}, false
		}
		pct = &p
	case bound == nil:
		return flywheel.Record{}, false
	}
	if r.sched == nil {
		return flywheel.Record{}, false
	}
	sched := *r.sched
	env := c.st.Env
	if r.worker != "" {
		env.DeviceName = r.worker
	}
	rec := flywheel.Record{
		Model: c.st.Label, GPU: c.st.GPU, Regime: flywheel.RegimeSingle, Correctness: flywheel.CorrectPass,
		LatencyUS: *r.latency, BoundUS: *bound, PctOfRoofline: *pct, Schedule: sched.Value(),
		IRVersion: ir.IRVersion, ABIVersion: ir.ABIVersion,
		Notes:       fmt.Sprintf("%s kept; %s; kind=%s", r.writer(), r.source, r.kind),
		TS:          float64(now.UnixNano()) / 1e9,
		LatencyKind: string(r.kind), Shape: c.st.Shape, ShapeSource: flywheel.ShapeFromConfig, Env: env,
	}
	if rec.Check() != nil {
		return flywheel.Record{}, false
	}
	return rec, true
}

// writer names who produced a result, for corpus notes.
func (r *result) writer() string {
	if r.trial < 0 {
		return "record"
	}
	return "autoresearch"
}

func (c *Campaign) trajectoryPoint(now time.Time, exp int, r result, kept bool) TrajectoryPoint {
	tp := TrajectoryPoint{
		Experiment: exp, Trial: r.trial, Minutes: c.ElapsedMinutes(now), Source: r.source, Tag: r.tag,
		ScheduleID: r.scheduleID, Kind: r.kind, Kept: kept, Recorded: r.trial < 0,
	}
	if r.correctness == flywheel.CorrectPass {
		tp.LatencyUS, tp.PctOfRoofline = r.latency, r.pct
	}
	if c.st.Best != nil {
		tp.BestUS = new(c.st.Best.LatencyUS)
	}
	return tp
}

func (c *Campaign) outcomeLine(exp int, r result) string {
	who := fmt.Sprintf("trial %d", r.trial)
	if r.trial < 0 {
		who = "recorded"
	}
	s := fmt.Sprintf("experiment %d (%s, %s %s): %s %s", exp, who, r.source, r.scheduleID, r.tag, r.correctness)
	if r.latency != nil {
		s += fmt.Sprintf(" %s %s", us(*r.latency), r.kind)
	}
	if b := c.st.Best; b != nil {
		s += fmt.Sprintf(" | best %s (%s)", us(b.LatencyUS), b.ScheduleID)
	}
	return s
}
