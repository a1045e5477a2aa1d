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
	LatencyKind       trial.LatencyKind  `json:"latency_kind"`
	Status            Status             `json:"status"`
	MoveOnReason      string             `json:"move_on_reason,omitempty"`
	PauseReason       string             `json:"pause_reason,omitempty"`
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
	// BestRecorded says the best is an experiment an outside agent
	// recorded, not one of the campaign's own evaluations.
	BestRecorded bool            `json:"best_recorded_by_agent,omitempty"`
	BestConfig   json.RawMessage `json:"best_config"`
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
	// Workload is what the campaign tunes for (nil for a campaign that
	// checks one decode step); BaselinePositions and BestPositions are the
	// baseline's and the best's figures at its evaluated positions, for
	// the latency against KV length.
	Workload          *trial.Workload         `json:"workload,omitempty"`
	BaselinePositions []trial.PositionVerdict `json:"baseline_positions,omitempty"`
	BestPositions     []trial.PositionVerdict `json:"best_positions,omitempty"`
	// SearchedPoints is how many distinct points were tried, and
	// SearchedShare that share of SearchSpacePoints (at most 1).
	SearchedPoints int      `json:"searched_points"`
	SearchedShare  *float64 `json:"searched_share"`
	// Model is the model as the campaign was started (a preset or a
	// config.json path), GPU its target, Seed its proposer's random seed
	// and Build the amk build that started it (version and commit).
	Model string `json:"model"`
	GPU   string `json:"gpu"`
	Seed  uint64 `json:"seed"`
	Build string `json:"build,omitempty"`
	// BestWorker is who evaluated the best: host, device and amk build.
	BestWorker string `json:"best_worker,omitempty"`
	// BestFile is the best config's file beside the report (BestConfigFile)
	// and Reproduce the commands that check it again and lower it; both
	// empty while there is no best.
	BestFile  string   `json:"best_file,omitempty"`
	Reproduce []string `json:"reproduce,omitempty"`
	// KnobImportance ranks the searched knobs by how much of the spread of
	// latencies each explains, and KnobSlice plots every trial against the
	// first one (both empty until enough trials ran; KnobImportances).
	KnobImportance []KnobImportance `json:"knob_importance,omitempty"`
	KnobSlice      *KnobSlice       `json:"knob_slice,omitempty"`
	// Notes are the operators' notes, oldest first.
	Notes []Note `json:"notes,omitempty"`
}

// KnobSliceFile is the name of the slice plot beside report.md: every
// correct trial's latency against the most important knob.
const KnobSliceFile = "knobs.svg"

// BestConfigFile is the name of the file beside report.md that holds the
// best config, ready for amkctl eval --schedule and amkctl lower --schedule.
const BestConfigFile = "best.json"

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

// recordedBest says what a best an agent recorded is.
const recordedBest = "its correctness and latency are the agent's claims, checked against the campaign's floor and latency kind, not an evaluation by amk"

// recordedHonesty is the honesty note of a campaign with n experiments an
// agent recorded.
func recordedHonesty(n int) string {
	return fmt.Sprintf("%d experiment(s) were %s (results.tsv says so in their description): their figures are the agent's, "+
		"checked against the campaign's streamed-bytes floor and latency kind, not evaluated by amk.", n, RecordedMark)
}

// WakeUp builds the wake-up report at now.
func (c *Campaign) WakeUp(now time.Time) WakeUp {
	st := &c.st
	n := st.Counts
	w := WakeUp{
		Campaign: st.Label + " / " + st.GPU, ID: st.ID, Device: st.Device, LatencyKind: st.LatencyKind, Status: st.Status,
		MoveOnReason: st.MoveOnReason, PauseReason: st.PauseReason, ElapsedMinutes: math.Round(c.ElapsedMinutes(now)*10) / 10,
		Iterations: n.Trials, TotalExperiments: st.ExperimentsRun, Kept: st.ExperimentsKept,
		Correct: n.Correct, RejectedOrFailed: n.Rejected + n.Revert + n.Failed,
		CrashOrTimeout: n.Crash + n.Timeout, BasinHopRestarts: st.Restarts,
		SpeedupVsBaseline: c.Speedup(), BestConfig: json.RawMessage("null"), BoundUS: st.BoundUS,
		AllWeightsBoundUS:     st.AllWeightsBoundUS,
		ImprovementMilestones: []Milestone{}, Trajectory: st.Trajectory, Honesty: honestyPredicted,
		SearchSpacePoints: c.SpacePoints(), SearchSpaceExhausted: st.Exhausted, Widen: c.Widen(),
		Notes: st.Notes, SearchedPoints: len(st.Tried), Model: st.Model, GPU: st.GPU, Seed: st.Seed, Build: st.Env.AMKVersion, Cold: st.Cold, WarmSeeds: st.WarmSeeds, Ranker: "off (cold campaign)",
	}
	if !st.Cold {
		w.Ranker, w.RankerTrained = c.rankerStatus(), c.rankerFor().Trained()
	}
	w.KnobImportance, w.KnobSlice = c.KnobImportances()
	if w.SearchSpacePoints > 0 {
		w.SearchedShare = new(min(1, float64(w.SearchedPoints)/float64(w.SearchSpacePoints)))
	}
	if st.LatencyKind == trial.KindMeasuredGPU {
		w.Honesty = honestyMeasured
	}
	if n.Recorded > 0 {
		w.Honesty += " " + recordedHonesty(n.Recorded)
	}
	if w.Trajectory == nil {
		w.Trajectory = []TrajectoryPoint{}
	}
	w.Workload = st.Settings.Workload
	if b := st.Baseline; b != nil {
		w.BaselineUS, w.BaselinePositions = new(b.LatencyUS), b.Positions
	}
	if b := st.Best; b != nil {
		kind := b.Kind
		w.BestUS, w.BestKind, w.BestPctOfRoofline, w.BestScheduleID = new(b.LatencyUS), &kind, b.PctOfRoofline, b.ScheduleID
		w.BestRecorded = b.Trial < 0
		w.BestPositions = b.Positions
		w.BestWorker = b.Worker
		w.ItersToBest = new(b.Experiment)
		if b.Point != nil {
			w.BestConfig = pointJSON(*b.Point)
			w.BestFile, w.Reproduce = BestConfigFile, c.reproduceCommands(BestConfigFile)
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

// reproduceCommands are the amkctl command lines that evaluate the config in
// file again as the campaign's trials did, and lower it into a program.
func (c *Campaign) reproduceCommands(file string) []string {
	st := &c.st
	model := shellWord(st.Model)
	eval := fmt.Sprintf("amkctl eval %s --gpu %s --device %s --schedule %s", model, st.GPU, st.Device, shellWord(file))
	if st.Weights != "" {
		eval += " --weights " + shellWord(st.Weights)
	}
	if st.Settings.Batch > 1 {
		eval += fmt.Sprintf(" --batch %d", st.Settings.Batch)
	}
	if st.Settings.Pos != 0 {
		eval += fmt.Sprintf(" --pos %d", st.Settings.Pos)
	}
	if st.Settings.Token != trial.DefaultToken {
		eval += fmt.Sprintf(" --token-id %d", st.Settings.Token)
	}
	lower := fmt.Sprintf("amkctl lower %s --gpu %s --schedule %s --out best-program.json", model, st.GPU, shellWord(file))
	return []string{eval, lower}
}

// shellWord quotes s for a POSIX shell when it holds anything but letters,
// digits and -_./:=+,@.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	switch {
	case w.MoveOnReason != "":
		status += " (" + w.MoveOnReason + ")"
	case w.Status == StatusPaused && w.PauseReason != "":
		status += " (" + w.PauseReason + ")"
	}
	add("%s", status)
	if w.Workload != nil {
		add("- Workload: **%s**; latencies are its mean time per decode step, evaluated at KV lengths %s", w.Workload, kvLens(w.Workload.Positions()))
	}
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
	if w.BestRecorded {
		add("- The best was %s: %s", RecordedMark, recordedBest)
	}
	if w.BoundUS != nil {
		s := fmt.Sprintf("- Streamed-bytes floor: %.3f us (the bytes a step streams: weights once, the gathered embedding rows, the KV window)", *w.BoundUS)
		if w.AllWeightsBoundUS != nil {
			s += fmt.Sprintf("; all-weights floor (every weight byte, a second, looser floor): %.3f us", *w.AllWeightsBoundUS)
		}
		add("%s", s)
	}
	if len(w.BestPositions) > 0 {
		add("")
		add("## Time per decode step against KV length")
		add("")
		add("| KV length | weight | baseline (us) | best (us) | streamed-bytes floor (us) |")
		add("|---:|---:|---:|---:|---:|")
		base := map[int]*float64{}
		for _, p := range w.BaselinePositions {
			base[p.KVLen] = p.LatencyUS
		}
		for _, p := range w.BestPositions {
			add("| %d | %.3f | %s | %s | %s |", p.KVLen, p.Weight, optUS(base[p.KVLen]), optUS(p.LatencyUS), optUS(p.BoundUS))
		}
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
	if len(w.KnobImportance) > 0 {
		add("## Which knobs mattered")
		add("")
		add("Each knob's share of the spread of the correct trials' log latencies that its value explains on its own")
		add("(importance adds up to 1 over the knobs; the best value is the one with the lowest geometric mean latency).")
		add("")
		add("| knob | importance | | best value | trials per value |")
		add("|---|---:|---|---|---|")
		for _, k := range w.KnobImportance {
			add("| %s | %.2f | %s | %s | %s |", k.Knob, k.Importance, importanceBar(k.Importance), k.bestValue(), k.trialsPerValue())
		}
		add("")
		add("![latency against %s, every correct trial](%s)", w.KnobSlice.Knob, KnobSliceFile)
		add("")
	}
	add("## Provenance and coverage")
	add("")
	add("- Model %s on %s, device %s; proposer random seed %d (`amkctl start --seed %d`)", w.Model, w.GPU, w.Device, w.Seed, w.Seed)
	if w.Build != "" {
		add("- Campaign started by amk %s", w.Build)
	}
	if w.BestWorker != "" {
		add("- Best evaluated by: %s", w.BestWorker)
	}
	if w.SearchedShare != nil {
		add("- Searched %d of the %d points of the search space (%.1f%%)", w.SearchedPoints, w.SearchSpacePoints, *w.SearchedShare*100)
	}
	add("")
	if len(w.Reproduce) > 0 {
		add("## Reproduce and apply")
		add("")
		add("The best config is in `%s` beside this report. Check it again, then lower it into a program:", w.BestFile)
		add("")
		add("```sh")
		for _, cmd := range w.Reproduce {
			add("%s", cmd)
		}
		add("```")
		add("")
	}
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

// optUS writes a latency, "-" when there is none.
func optUS(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *v)
}

// kvLens lists the KV lengths of positions: "513, 576 and 640".
func kvLens(ps []trial.WorkloadPosition) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p.Pos + 1)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
