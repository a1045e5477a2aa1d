package control

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

// Trial states.
const (
	TrialInFlight = "in_flight" // issued, no outcome yet
	TrialFinished = "finished"  // its outcome is recorded
)

// TrialReport is one trial of a campaign (GET /v1/campaigns/{id}/trials/{n},
// amkctl trial).
type TrialReport struct {
	Campaign string `json:"campaign"`
	Trial    int    `json:"trial"`
	State    string `json:"state"`
	// In flight: the spec as issued, when and since how long.
	Spec     *trial.Spec `json:"spec,omitempty"`
	IssuedAt *time.Time  `json:"issued_at,omitempty"`
	AgeS     *float64    `json:"age_s,omitempty"`
	// Finished: the experiment it became (number, tag, source, minutes
	// into the campaign) and its outcome: the verdict (what was evaluated,
	// correctness, latency and its kind) or the failure, the worker, each
	// pipeline stage's seconds and the evaluation's elapsed seconds.
	Experiment *campaign.TrajectoryPoint `json:"experiment,omitempty"`
	Outcome    *trial.Outcome            `json:"outcome,omitempty"`
}

// Trial reports one trial of a campaign.
func (s *Campaigns) Trial(_ context.Context, id string, trialID int) (TrialReport, error) {
	rep := TrialReport{Campaign: id, Trial: trialID}
	var next int
	var point *campaign.TrajectoryPoint
	err := s.read(id, func(c *campaign.Campaign) {
		st := c.State()
		next = st.NextTrial
		if f, ok := st.InFlight[trialID]; ok {
			spec, at := f.Spec, f.IssuedAt
			age := s.now().Sub(at).Seconds()
			rep.State, rep.Spec, rep.IssuedAt, rep.AgeS = TrialInFlight, &spec, &at, &age
			return
		}
		for i := range st.Trajectory {
			if st.Trajectory[i].Trial == trialID {
				p := st.Trajectory[i]
				point = &p
			}
		}
	})
	if err != nil || rep.State == TrialInFlight {
		return rep, err
	}
	out, found, err := runner.TrialOutcome(s.b.Dir(id), trialID)
	if err != nil {
		return rep, Errorf(ErrUnavailable, "campaign %s: %v", id, err)
	}
	if !found && point == nil {
		return rep, Errorf(ErrNotFound, "campaign %s has no trial %d (its trials are 0 to %d; amkctl status lists those in flight)", id, trialID, next-1)
	}
	rep.State, rep.Experiment = TrialFinished, point
	if found {
		rep.Outcome = &out
	}
	return rep, nil
}

// Text renders the report for a terminal.
func (r TrialReport) Text() string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	line("Trial %d of campaign %s: %s", r.Trial, r.Campaign, strings.ReplaceAll(r.State, "_", " "))
	if r.Spec != nil {
		line("  spec: model %s, GPU %s, device %s, source %s, position %d", r.Spec.Model, r.Spec.GPU, r.Spec.Device, orDash(r.Spec.Source), r.Spec.Pos)
		line("  config: %s", strings.TrimSpace(string(r.Spec.Point)))
	}
	if r.IssuedAt != nil && r.AgeS != nil {
		line("  issued: %s (%.0f s ago)", r.IssuedAt.UTC().Format(time.RFC3339), *r.AgeS)
	}
	if e := r.Experiment; e != nil {
		line("  experiment %d: %s, source %s, %.1f min into the campaign", e.Experiment, e.Tag, orDash(e.Source), e.Minutes)
	}
	o := r.Outcome
	if o == nil {
		if r.State == TrialFinished {
			line("  (its outcome is not in trials.jsonl)")
		}
		return b.String()
	}
	if v := o.Verdict; v != nil {
		line("  schedule: %s", v.ScheduleID)
		if len(v.Point) > 0 {
			line("  config: %s", strings.TrimSpace(string(v.Point)))
		}
		switch {
		case !v.Valid:
			line("  verdict: rejected: %s", derefOr(v.RejectedReason, "no reason given"))
		case v.Correct == nil || !*v.Correct:
			line("  verdict: incorrect (max abs error %s)", floatOr(v.MaxAbsErr, "-"))
		default:
			kind := "unlabelled"
			if v.LatencyKind != nil {
				kind = string(*v.LatencyKind)
			}
			line("  verdict: correct, latency %s us (%s), %s%% of the floor", floatOr(v.LatencyUS, "withheld"), kind, floatOr(v.PctOfRoofline, "-"))
		}
		for _, n := range v.Notes {
			line("  note: %s", n)
		}
	}
	if f := o.Failure; f != nil {
		line("  failure: %s: %s", f.Class, f.Message)
	}
	line("  worker: %s", orDash(o.Worker))
	if o.ElapsedS > 0 {
		line("  elapsed: %.3f s", o.ElapsedS)
	}
	// The pipeline's stages in their order, then any other, by name.
	order := slices.Clone(trial.Stages)
	for _, st := range slices.Sorted(maps.Keys(o.Stages)) {
		if !slices.Contains(order, st) {
			order = append(order, st)
		}
	}
	for _, st := range order {
		if sec, ok := o.Stages[st]; ok {
			line("    %-13s %.3f s", st, sec)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func derefOr(s *string, or string) string {
	if s == nil {
		return or
	}
	return *s
}

func floatOr(f *float64, or string) string {
	if f == nil {
		return or
	}
	return fmt.Sprintf("%.3f", *f)
}
