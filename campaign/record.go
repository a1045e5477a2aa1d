package campaign

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/trial"
)

// Record status families (the Python reference's `record` vocabulary, plus docs/spec/loop.md's
// "tried" and amk's "baseline").
var (
	keptStatuses    = []string{"kept", "keep", "improved"}
	notKeptStatuses = []string{"tried", "revert", "reverted", "slower", "same"}
	failedStatuses  = []string{"failed", "fail", "error"}
)

var correctnessValues = []string{flywheel.CorrectPass, flywheel.CorrectFail, flywheel.CorrectRejected,
	flywheel.CorrectCrash, flywheel.CorrectTimeout}

// record applies an outside agent's experiment. It is refused by a done
// campaign (docs/spec/rules.md R3). An agent's "kept" is trusted for the counters, as in the
// reference; the best moves only to a strictly lower latency (compared with
// the best's score, which is its latency unless side-by-side ratios were
// chained). A "baseline" result goes through the normal keep rule.
func (c *Campaign) record(now time.Time, e Record) (Decision, error) {
	if c.st.Status == StatusDone {
		return Decision{}, ErrDone
	}
	r, err := c.classifyRecord(e)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: record: %v", ErrInvalid, err)
	}
	if r.scheduleID != "" {
		if _, seen := c.st.Tried[r.scheduleID]; !seen {
			c.st.Tried[r.scheduleID] = -1
		}
	}
	return c.apply(now, r), nil
}

func (c *Campaign) classifyRecord(e Record) (result, error) {
	status := strings.ToLower(strings.TrimSpace(e.Status))
	corr := strings.ToUpper(strings.TrimSpace(e.Correctness))
	r := result{trial: -1, source: e.Source, region: c.st.Region, regions: e.Regions, kind: e.Kind}
	if r.source == "" {
		r.source = SourceAgent
	} else if slices.Contains(builtinSources, r.source) {
		r.source = "ext:" + r.source
	}
	if err := checkRegions(e.Regions); err != nil {
		return r, err
	}
	family := ""
	switch {
	case slices.Contains(keptStatuses, status):
		family = flywheel.TagKept
	case slices.Contains(notKeptStatuses, status):
		family = flywheel.TagTried
	case slices.Contains(failedStatuses, status):
		family = flywheel.TagFailed
	case status == SourceBaseline, status == flywheel.TagCrash, status == flywheel.TagTimeout, status == flywheel.TagRejected:
		family = status
	default:
		return r, fmt.Errorf("unknown status %q", e.Status)
	}
	if corr == "" {
		corr = map[string]string{
			flywheel.TagKept: flywheel.CorrectPass, flywheel.TagTried: flywheel.CorrectPass,
			SourceBaseline: flywheel.CorrectPass, flywheel.TagFailed: flywheel.CorrectFail,
			flywheel.TagCrash: flywheel.CorrectCrash, flywheel.TagTimeout: flywheel.CorrectTimeout,
			flywheel.TagRejected: flywheel.CorrectRejected,
		}[family]
	}
	if !slices.Contains(correctnessValues, corr) {
		return r, fmt.Errorf("unknown correctness %q", e.Correctness)
	}
	r.correctness = corr
	if err := c.recordNumbers(&r, e); err != nil {
		return r, err
	}
	if err := c.recordPoint(&r, e); err != nil {
		return r, err
	}
	pass := corr == flywheel.CorrectPass
	switch family {
	case flywheel.TagKept, SourceBaseline:
		if !pass || r.latency == nil {
			return r, fmt.Errorf("%s needs correctness PASS and a latency", status)
		}
	}
	switch family {
	case flywheel.TagKept:
		r.tag = flywheel.TagKept
		r.score = new(*r.latency)
		r.newBest = c.st.Best == nil || *r.latency < c.st.Best.Score
	case SourceBaseline:
		r.baseline = true
		r.score = new(*r.latency)
		r.tag = flywheel.TagTried
		if keep, _ := c.better(*r.score, r.kind, r.complexity, true); keep {
			r.tag, r.newBest = flywheel.TagKept, true
		}
	case flywheel.TagTried, flywheel.TagFailed:
		switch {
		case pass && family == flywheel.TagTried:
			r.tag = flywheel.TagTried
		case corr == flywheel.CorrectFail:
			r.tag = flywheel.TagRevert
		default:
			r.tag = flywheel.TagFailed
		}
	default:
		r.tag = family
	}
	r.description = flywheel.ClipDescription(e.Description + "; kind=" + kindOrNone(r.kind))
	return r, nil
}

// recordNumbers checks and takes the latency, pct and floor of a record.
func (c *Campaign) recordNumbers(r *result, e Record) error {
	for _, n := range []struct {
		name string
		f    *float64
	}{{"latency", e.LatencyUS}, {"pct_of_roofline", e.PctOfRoofline}, {"bound_us", e.BoundUS}} {
		if n.f != nil && !positive(n.f) {
			return fmt.Errorf("%s %v is not a positive number", n.name, *n.f)
		}
	}
	if e.LatencyUS != nil {
		if r.correctness != flywheel.CorrectPass {
			return fmt.Errorf("a latency needs correctness PASS (got %s)", r.correctness)
		}
		if e.Kind != trial.KindMeasuredGPU && e.Kind != trial.KindPredicted {
			return fmt.Errorf("a latency needs its kind (measured-gpu or predicted), got %q", e.Kind)
		}
		r.latency = new(*e.LatencyUS)
	} else {
		r.kind = ""
	}
	if e.BoundUS != nil {
		r.bound = new(*e.BoundUS)
	}
	switch {
	case e.PctOfRoofline != nil:
		r.pct = new(*e.PctOfRoofline)
	case r.latency != nil && r.bound != nil:
		if pct, ok := ir.PctOfRoofline(*r.latency, *r.bound); ok {
			r.pct = &pct
		}
	}
	return nil
}

// recordPoint parses the record's config, if any, and fixes its id.
func (c *Campaign) recordPoint(r *result, e Record) error {
	r.scheduleID = e.ScheduleID
	if len(e.Point) == 0 {
		return nil
	}
	p, err := parsePoint(e.Point)
	if err != nil {
		return fmt.Errorf("config: %v", err)
	}
	p = c.project(p)
	r.sched = &p
	r.complexity = p.Complexity()
	if r.scheduleID == "" {
		r.scheduleID = p.ID()
	}
	return nil
}
