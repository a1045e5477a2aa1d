package campaign

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// WakeUp is the wake-up report (what an operator reads after an unattended
// run: best found, against the baseline and the floor) with a trajectory for plots.
type WakeUp struct {
	Campaign          string             `json:"campaign"`
	ID                string             `json:"id"`
	Device            schedule.Device    `json:"device"`
	Status            Status             `json:"status"`
	MoveOnReason      string             `json:"move_on_reason,omitempty"`
	ElapsedMinutes    float64            `json:"elapsed_minutes"`
	Iterations        int                `json:"iterations"`
	TotalExperiments  int                `json:"total_experiments"`
	Kept              int                `json:"kept"`
	Correct           int                `json:"correct"`
	RejectedOrFailed  int                `json:"rejected_or_failed"`
	CrashOrTimeout    int                `json:"crash_or_timeout"`
	BasinHopRestarts  int                `json:"basin_hop_restarts"`
	BaselineUS        *float64           `json:"baseline_us"`
	BestUS            *float64           `json:"best_us"`
	BestKind          *trial.LatencyKind `json:"best_kind"`
	BestPctOfRoofline *float64           `json:"best_pct_of_roofline"`
	SpeedupVsBaseline *float64           `json:"speedup_vs_baseline"`
	BestScheduleID    string             `json:"best_schedule_id,omitempty"`
	BestConfig        json.RawMessage    `json:"best_config"`
	// ItersToBest is the experiment (counted from 1) that recorded the
	// best; nil before a best.
	ItersToBest *int `json:"iters_to_best"`
	// Cold, WarmSeeds, RankerTrained and Ranker are the flywheel's part:
	// a cold campaign has no prior; a warm one started from WarmSeeds
	// corpus points and ranks its proposals once the ranker is trained.
	Cold                  bool              `json:"cold"`
	WarmSeeds             int               `json:"warm_seeds"`
	RankerTrained         bool              `json:"ranker_trained"`
	Ranker                string            `json:"ranker"`
	BoundUS               *float64          `json:"bound_us"` // the streamed-bytes floor
	AllWeightsBoundUS     *float64          `json:"all_weights_bound_us,omitempty"`
	ImprovementMilestones []Milestone       `json:"improvement_milestones"`
	Honesty               string            `json:"honesty"`
	Trajectory            []TrajectoryPoint `json:"trajectory"`
	// SearchSpaceExhausted says every point of the space was tried; Widen
	// what would give the campaign new points.
	SearchSpacePoints    int      `json:"search_space_points"`
	SearchSpaceExhausted bool     `json:"search_space_exhausted"`
	Widen                []string `json:"widen,omitempty"`
	// Notes are the operators' notes, oldest first.
	Notes []Note `json:"notes,omitempty"`
}

// Milestone is one kept experiment.
type Milestone struct {
	Iter    int     `json:"iter"`
	Trial   int     `json:"trial"`
	Minutes float64 `json:"minutes"`
	BestUS  float64 `json:"best_us"`
	Source  string  `json:"source"`
}

const (
	honestyMeasured = "All latencies are CUDA-event timings of the megakernel, correctness-gated against the " +
		"CPU reference VM; keep/revert compares candidate and incumbent timed side by side on the same device, " +
		"and readings below the streamed-bytes floor are withheld. The speedup is vs amk's own canonical default schedule, " +
		"NOT a claim of beating cuBLAS/vLLM."
	honestyPredicted = "All latencies are cost-model predictions (latency_kind=predicted), not measurements: every " +
		"point was validated and passed the CPU reference VM's correctness check before its latency was " +
		"predicted. The speedup is vs amk's own canonical default schedule predicted the same way; it is not a " +
		"claim about real hardware."
)

// WakeUp builds the wake-up report at now.
func (c *Campaign) WakeUp(now time.Time) WakeUp {
	st := &c.st
	n := st.Counts
	w := WakeUp{
		Campaign: st.Label + " / " + st.GPU, ID: st.ID, Device: st.Device, Status: st.Status,
		MoveOnReason: st.MoveOnReason, ElapsedMinutes: math.Round(c.ElapsedMinutes(now)*10) / 10,
		Iterations: n.Trials, TotalExperiments: st.ExperimentsRun, Kept: st.ExperimentsKept,
		Correct: n.Correct, RejectedOrFailed: n.Rejected + n.Revert + n.Failed,
		CrashOrTimeout: n.Crash + n.Timeout, BasinHopRestarts: st.Restarts,
		SpeedupVsBaseline: c.Speedup(), BestConfig: json.RawMessage("null"), BoundUS: st.BoundUS,
		AllWeightsBoundUS:     st.AllWeightsBoundUS,
		ImprovementMilestones: []Milestone{}, Trajectory: st.Trajectory, Honesty: honestyPredicted,
		SearchSpacePoints: c.SpacePoints(), SearchSpaceExhausted: st.Exhausted, Widen: c.Widen(),
		Notes: st.Notes, Cold: st.Cold, WarmSeeds: st.WarmSeeds, Ranker: "off (cold campaign)",
	}
	if !st.Cold {
		w.Ranker, w.RankerTrained = c.rankerStatus(), c.rankerFor().Trained()
	}
	if st.LatencyKind == trial.KindMeasuredGPU {
		w.Honesty = honestyMeasured
	}
	if w.Trajectory == nil {
		w.Trajectory = []TrajectoryPoint{}
	}
	if b := st.Baseline; b != nil {
		w.BaselineUS = new(b.LatencyUS)
	}
	if b := st.Best; b != nil {
		kind := b.Kind
		w.BestUS, w.BestKind, w.BestPctOfRoofline, w.BestScheduleID = new(b.LatencyUS), &kind, b.PctOfRoofline, b.ScheduleID
		w.ItersToBest = new(b.Experiment)
		if b.Point != nil {
			w.BestConfig = pointJSON(*b.Point)
		}
	}
	for _, t := range st.Trajectory {
		if t.Kept && t.BestUS != nil {
			w.ImprovementMilestones = append(w.ImprovementMilestones,
				Milestone{Iter: t.Experiment, Trial: t.Trial, Minutes: t.Minutes, BestUS: *t.BestUS, Source: t.Source})
		}
	}
	return w
}

// Markdown renders the wake-up report like the reference's
// amk_overnight_report.md.
func (w WakeUp) Markdown() string {
	var l []string
	add := func(format string, args ...any) { l = append(l, fmt.Sprintf(format, args...)) }
	add("# AMK overnight run, wake-up report")
	add("")
	add("- Campaign: **%s** (device=%s, id `%s`)", w.Campaign, w.Device, w.ID)
	add("- Ran: **%s min**, %d iterations (%d total experiments in campaign)", trimFloat(w.ElapsedMinutes), w.Iterations, w.TotalExperiments)
	add("- Kept %d / correct %d / rejected+failed %d / crash+timeout %d", w.Kept, w.Correct, w.RejectedOrFailed, w.CrashOrTimeout)
	add("- Basin-hop restarts: %d", w.BasinHopRestarts)
	if w.Cold {
		add("- Flywheel: cold (no prior)")
	} else {
		add("- Flywheel: %d warm seed(s), ranker %s", w.WarmSeeds, w.Ranker)
	}
	if w.ItersToBest != nil {
		add("- Best found at experiment %d", *w.ItersToBest)
	}
	status := "- Status: " + strings.ToUpper(string(w.Status))
	if w.MoveOnReason != "" {
		status += " (" + w.MoveOnReason + ")"
	}
	add("%s", status)
	if w.SearchSpaceExhausted {
		add("")
		add("## Search space exhausted")
		add("")
		add("This campaign's search space (%d points) is used up: the run ended because nothing was left to try, not because it stalled. To go further:", w.SearchSpacePoints)
		add("")
		for _, s := range w.Widen {
			add("- %s", s)
		}
	}
	add("")
	add("## Result")
	add("")
	switch {
	case w.BestUS != nil && w.BaselineUS != nil:
		add("- Baseline (default schedule): **%.1f us**", *w.BaselineUS)
		s := fmt.Sprintf("- Best found: **%.1f us** (%s)", *w.BestUS, *w.BestKind)
		if w.SpeedupVsBaseline != nil {
			s += fmt.Sprintf(", **%.3fx** faster than baseline", *w.SpeedupVsBaseline)
		}
		if w.BestPctOfRoofline != nil {
			s += fmt.Sprintf(", %.0f%% of the streamed-bytes floor (100%% is the floor; above 100%% is slower than it)", *w.BestPctOfRoofline)
		}
		add("%s", s)
	case w.BestUS != nil:
		add("- Best found: **%.1f us** (%s)", *w.BestUS, *w.BestKind)
	default:
		add("- No correct schedule found yet.")
	}
	if w.BoundUS != nil {
		s := fmt.Sprintf("- Streamed-bytes floor: %.3f us (the bytes a step streams: weights once, the gathered embedding rows, the KV window)", *w.BoundUS)
		if w.AllWeightsBoundUS != nil {
			s += fmt.Sprintf("; all-weights floor (every weight byte, the seed's figure): %.3f us", *w.AllWeightsBoundUS)
		}
		add("%s", s)
	}
	if len(w.ImprovementMilestones) > 0 {
		add("")
		add("## Improvement milestones")
		add("")
		add("An experiment is a row of results.tsv, numbered in the order results arrived; a trial is the")
		add("campaign's own evaluation it came from, numbered in the order trials were issued (-1 for an")
		add("experiment an agent recorded). With trials in flight side by side the two orders differ.")
		add("")
		add("| experiment | trial | minutes | best (us) | source |")
		add("|---:|---:|---:|---:|---|")
		for _, m := range w.ImprovementMilestones {
			add("| %d | %d | %.1f | %.3f | %s |", m.Iter, m.Trial, m.Minutes, m.BestUS, m.Source)
		}
	}
	add("%s", notesMarkdown(w.Notes))
	add("## Best config")
	add("")
	add("```json")
	add("%s", indentJSON(w.BestConfig))
	add("```")
	add("")
	add("## Honesty")
	add("")
	add("%s", w.Honesty)
	add("")
	return strings.Join(l, "\n")
}

// notesMarkdown is the operators' notes section (a blank line when there
// are none), one line per note, a note's own line breaks folded.
func notesMarkdown(notes []Note) string {
	if len(notes) == 0 {
		return ""
	}
	l := []string{"", "## Operator notes", ""}
	for _, n := range notes {
		l = append(l, fmt.Sprintf("- %s: %s", n.Time.UTC().Format("2006-01-02 15:04 UTC"), strings.Join(strings.Fields(n.Text), " ")))
	}
	return strings.Join(append(l, ""), "\n")
}

func trimFloat(f float64) string { return fmt.Sprintf("%.1f", f) }
