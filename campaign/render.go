package campaign

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

const rule = "============================================================"

// StatusReport is the campaign's status as data (`status --json`).
type StatusReport struct {
	ID                 string             `json:"id"`
	Campaign           string             `json:"campaign"`
	Model              string             `json:"model"`
	GPU                string             `json:"gpu"`
	Device             schedule.Device    `json:"device"`
	LatencyKind        trial.LatencyKind  `json:"latency_kind"`
	Status             Status             `json:"status"`
	MoveOnReason       string             `json:"move_on_reason,omitempty"`
	PauseReason        string             `json:"pause_reason,omitempty"`
	StartedAt          string             `json:"started_at"`
	ElapsedMinutes     float64            `json:"elapsed_minutes"`
	ExperimentsRun     int                `json:"experiments_run"`
	ExperimentsKept    int                `json:"experiments_kept"`
	ConsecutiveReverts int                `json:"consecutive_reverts"`
	NonImprovement     int                `json:"non_improvement_streak"`
	Restarts           int                `json:"restarts"`
	InFlight           []int              `json:"in_flight"`
	Tried              int                `json:"tried"`
	Counts             Counts             `json:"counts"`
	BaselineUS         *float64           `json:"baseline_us"`
	BaselineKind       trial.LatencyKind  `json:"baseline_kind,omitempty"`
	BestUS             *float64           `json:"best_us"`
	BestKind           trial.LatencyKind  `json:"best_kind,omitempty"`
	BestPctOfRoofline  *float64           `json:"best_pct_roofline"`
	BestScheduleID     string             `json:"best_schedule_id,omitempty"`
	BestConfig         json.RawMessage    `json:"best_config"`
	Speedup            *float64           `json:"speedup"`
	RegionBreakdown    map[string]float64 `json:"region_breakdown"`
	MoveOn             Criterion          `json:"move_on"`
	Settings           Settings           `json:"settings"`
	// SearchSpacePoints is the size of the campaign's search space;
	// SearchSpaceExhausted says every point of it was tried, and Widen what
	// would give the campaign new points.
	SearchSpacePoints    int      `json:"search_space_points"`
	SearchSpaceExhausted bool     `json:"search_space_exhausted"`
	Widen                []string `json:"widen,omitempty"`
	// Workload names what the campaign tunes for ("" for a campaign that
	// checks one decode step; settings.workload has it as data).
	Workload string `json:"workload,omitempty"`
	// LastEventAt is when the campaign's ledger last took an event (a
	// driver ticks a running campaign every few seconds), and Alerts what
	// is wrong with the campaign where it lives: both are filled by the
	// control plane, which knows who drives the campaign and which
	// workers serve it (the campaign alone knows neither).
	LastEventAt string  `json:"last_event_at,omitempty"`
	Alerts      []Alert `json:"alerts,omitempty"`
	// Stalled is why the campaign's ledger cannot be written (a full or
	// read-only disk), filled by the control plane while the process that
	// drives it cannot record; "" otherwise.
	Stalled string `json:"stalled,omitempty"`
	// WeightsID is the weights the campaign's figures are for (absent for
	// a campaign created before weights were identified).
	WeightsID *trial.WeightsID `json:"weights_id,omitempty"`
}

// Alert is something wrong with a campaign that whoever reads its status
// must know, and what to do about it.
type Alert struct {
	// Kind is one of the Alert* constants; Title says it in a few words.
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Message says what is wrong; Fix what to do, as commands where there
	// are some.
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// The kinds of alerts.
const (
	// AlertNoDriver: the campaign is optimizing but no process drives it
	// (the run that drove it was killed, or it was never run).
	AlertNoDriver = "no_driver"
	// AlertUnserved: no live worker serves the campaign's GPU target, so
	// its trials wait in the queue.
	AlertUnserved = "unserved"
	// AlertStalled: a process holds the campaign but its ledger has taken
	// no event for a while (the driver is stuck, or failing and retrying),
	// or, at once, its ledger cannot be written (StatusReport.Stalled).
	AlertStalled = "stalled"
	// AlertStuckTrials: a trial has been in flight far longer than a trial
	// may take.
	AlertStuckTrials = "stuck_trials"
	// AlertQueueWait: the oldest trial waiting in the campaign's GPU queue
	// has waited long: the workers serving that target do not keep up.
	AlertQueueWait = "queue_wait"
)

// AlertKinds lists every kind, for metrics that report each.
var AlertKinds = []string{AlertNoDriver, AlertUnserved, AlertStalled, AlertStuckTrials, AlertQueueWait}

// Status reports the campaign at now.
func (c *Campaign) StatusReport(now time.Time) StatusReport {
	st := &c.st
	stop, reason := c.moveOn(c.clock(now))
	r := StatusReport{
		ID: st.ID, Campaign: st.Label + " / " + st.GPU, Model: st.Model, GPU: st.GPU, Device: st.Device,
		LatencyKind: st.LatencyKind, Status: st.Status, MoveOnReason: st.MoveOnReason, PauseReason: st.PauseReason,
		StartedAt: stamp(st.StartedAt), ElapsedMinutes: round3(c.ElapsedMinutes(now)),
		ExperimentsRun: st.ExperimentsRun, ExperimentsKept: st.ExperimentsKept,
		ConsecutiveReverts: st.ConsecutiveReverts, NonImprovement: st.NonImprovement, Restarts: st.Restarts,
		InFlight: c.inFlightIDs(), Tried: len(st.Tried), Counts: st.Counts, Speedup: c.Speedup(),
		BestConfig: json.RawMessage("null"), Settings: st.Settings,
		MoveOn:            Criterion{Stop: stop && st.Status != StatusDone, Reason: reason},
		SearchSpacePoints: c.SpacePoints(), SearchSpaceExhausted: st.Exhausted, Widen: c.Widen(),
		WeightsID: st.WeightsID,
	}
	if st.Status == StatusDone {
		r.MoveOn = Criterion{Stop: true, Reason: st.MoveOnReason}
	}
	if w := st.Settings.Workload; w != nil {
		r.Workload = w.String()
	}
	if b := st.Baseline; b != nil {
		r.BaselineUS, r.BaselineKind = new(b.LatencyUS), b.Kind
	}
	if b := st.Best; b != nil {
		r.BestUS, r.BestKind, r.BestPctOfRoofline, r.BestScheduleID = new(b.LatencyUS), b.Kind, b.PctOfRoofline, b.ScheduleID
		if b.Point != nil {
			r.BestConfig = pointJSON(*b.Point)
		}
		r.RegionBreakdown = b.Regions
	}
	return r
}

// stamp is the reference's started_at format.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }

// StatusText renders the status like the Python reference's `status`,
// with amk's extra lines (id, device, elapsed time, in-flight trials).
func (c *Campaign) StatusText(now time.Time) string {
	st := &c.st
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("")
	line(rule)
	line("  AMK Autoresearch Orchestration Status")
	line(rule)
	line("  campaign     : %s / %s", st.Label, st.GPU)
	line("  id           : %s  (device %s, %s latencies)", st.ID, st.Device, st.LatencyKind)
	if w := st.WeightsID; w != nil {
		line("  weights      : %s", w)
	}
	if w := st.Settings.Workload; w != nil {
		line("  workload     : %s (mean time per decode step at KV lengths %s)", w, kvLens(w.Positions()))
	}
	line("  status       : %s", strings.ToUpper(string(st.Status)))
	if st.Status == StatusPaused && st.PauseReason != "" {
		line("  paused       : %s", st.PauseReason)
	}
	line("  elapsed      : %.1f min since %s UTC", c.ElapsedMinutes(now), stamp(st.StartedAt))
	reverts := fmt.Sprintf("  experiments  : %d (%d kept), %d consecutive reverts", st.ExperimentsRun, st.ExperimentsKept, st.ConsecutiveReverts)
	if note := c.plateauScalingNote(); note != "" && !st.Settings.Overnight {
		reverts += fmt.Sprintf(" (moves on at %d%s)", c.plateauThreshold(), note)
	}
	line("%s", reverts)
	line("  in flight    : %d trial(s), %d points tried, %d basin-hop restart(s)", len(st.InFlight), len(st.Tried), st.Restarts)
	sp := c.Speedup()
	switch base, best := st.Baseline, st.Best; {
	case base != nil && best != nil:
		s := fmt.Sprintf("  baseline     : %.3fus -> best %.3fus", base.LatencyUS, best.LatencyUS)
		if sp != nil && *sp != 0 {
			s += fmt.Sprintf("  (%.2fx faster)", *sp)
		}
		line("%s", s)
	case base != nil:
		line("  baseline     : %.3fus (no improvement yet)", base.LatencyUS)
	case best != nil:
		line("  best         : %.3fus (no baseline: the default has no correct latency yet)", best.LatencyUS)
	}
	if best := st.Best; best != nil && best.Trial < 0 {
		line("  best source  : %s (%s), not evaluated by amk", RecordedMark, best.Source)
	}
	if p := c.bestPct(); p != nil {
		line("  best roofline: %.1f%% of the streamed-bytes floor (100%% == floor; lower is better)  kind=%s", *p, st.Best.Kind)
	}
	if split := c.regionSplit(); split != "" {
		line("  region split : %s  (share of critical path -> where to spend budget)", split)
	}
	if st.MoveOnReason != "" {
		line("  move-on      : %s", st.MoveOnReason)
	}
	if st.Exhausted && st.Status != StatusDone {
		line("  search space : EXHAUSTED (%d of %d points tried); waiting for %d trial(s) in flight", len(st.Tried), c.SpacePoints(), len(st.InFlight))
	}
	line("")
	return b.String()
}

func (c *Campaign) regionSplit() string {
	if c.st.Best == nil {
		return ""
	}
	var parts []string
	for _, r := range Regions {
		if v, ok := c.st.Best.Regions[r]; ok {
			parts = append(parts, fmt.Sprintf("%s=%.0f%%", r, v*100))
		}
	}
	return strings.Join(parts, ", ")
}

// NextReport is `next`'s continue/stop decision.
type NextReport struct {
	Decision           string   `json:"decision"` // continue | stop | paused
	Campaign           string   `json:"campaign"`
	Reason             string   `json:"reason"`
	ExperimentsRun     int      `json:"experiments_run"`
	Speedup            *float64 `json:"speedup"`
	ConsecutiveReverts int      `json:"consecutive_reverts"`
	RevertThreshold    int      `json:"consecutive_reverts_threshold"`
	InFlight           int      `json:"in_flight"`
	HottestRegion      string   `json:"hottest_region,omitempty"`
	HottestShare       *float64 `json:"hottest_share,omitempty"`
	// Widen, when the search space is exhausted, says what to widen.
	Widen []string `json:"widen,omitempty"`
}

// Next decides whether to continue at now. It does not change the
// campaign: send a Tick to make a time-based stop stick.
func (c *Campaign) Next(now time.Time) NextReport {
	st := &c.st
	n := NextReport{
		Campaign: st.Label + "/" + st.GPU, ExperimentsRun: st.ExperimentsRun, Speedup: c.Speedup(),
		ConsecutiveReverts: st.ConsecutiveReverts, RevertThreshold: c.plateauThreshold(),
		InFlight: len(st.InFlight),
	}
	stop, reason := c.moveOn(c.clock(now))
	n.Widen = c.Widen()
	switch {
	case st.Status == StatusDone:
		n.Decision, n.Reason = "stop", st.MoveOnReason
	case st.Exhausted:
		n.Decision, n.Reason = "stop", c.exhaustedMessage()+fmt.Sprintf("; %d trial(s) still in flight", len(st.InFlight))
	case stop:
		n.Decision, n.Reason = "stop", reason
	case st.Status == StatusPaused:
		n.Decision, n.Reason = "paused", "paused by operator; resume to continue"
		if st.PauseReason != "" {
			n.Reason = st.PauseReason + "; resume to continue"
		}
	default:
		n.Decision, n.Reason = "continue", reason
	}
	if st.Best != nil {
		for _, r := range Regions {
			if v, ok := st.Best.Regions[r]; ok && (n.HottestShare == nil || v > *n.HottestShare) {
				n.HottestRegion, n.HottestShare = r, new(v)
			}
		}
	}
	return n
}

// Text renders the decision like the reference's `next`.
func (n NextReport) Text() string {
	var b strings.Builder
	switch n.Decision {
	case "stop":
		fmt.Fprintf(&b, "DECISION: STOP optimizing %s\n", n.Campaign)
		fmt.Fprintf(&b, "  Reason: %s\n", n.Reason)
		if len(n.Widen) > 0 {
			b.WriteString("  Nothing is left to try in this search space. To go further, widen it:\n")
			for _, w := range n.Widen {
				fmt.Fprintf(&b, "    - %s\n", w)
			}
		}
		b.WriteString("  Campaign complete. Run `amkctl report` for the summary.\n")
		return b.String()
	case "paused":
		fmt.Fprintf(&b, "DECISION: PAUSED optimizing %s\n", n.Campaign)
		fmt.Fprintf(&b, "  Reason: %s\n", n.Reason)
		return b.String()
	}
	sp := "N/A"
	if n.Speedup != nil && *n.Speedup != 0 {
		sp = pyjson.FormatFloat(*n.Speedup)
	}
	fmt.Fprintf(&b, "DECISION: CONTINUE optimizing %s\n", n.Campaign)
	fmt.Fprintf(&b, "  Reason: %s\n", n.Reason)
	fmt.Fprintf(&b, "  Experiments run: %d | speedup: %s | consecutive reverts: %d/%d\n",
		n.ExperimentsRun, sp, n.ConsecutiveReverts, n.RevertThreshold)
	if n.HottestShare != nil {
		fmt.Fprintf(&b, "  Hottest region: %s (%.0f%% of the critical path) -> mutate knobs that touch it (e.g. tiling/pipelining/sm_assignment).\n",
			n.HottestRegion, *n.HottestShare*100)
	}
	return b.String()
}

// ReportMarkdown is the aggregate campaign report (the reference's
// `report`), generated at now.
func (c *Campaign) ReportMarkdown(now time.Time) string {
	st := &c.st
	var l []string
	add := func(format string, args ...any) { l = append(l, fmt.Sprintf(format, args...)) }
	add("# AMK, Autoresearch Campaign Report")
	add("")
	add("Generated: %s", c.clock(now).Format("2006-01-02 15:04:05 UTC"))
	add("")
	add("- Campaign: **%s / %s**", st.Label, st.GPU)
	add("- Campaign id: `%s` (device %s, %s latencies)", st.ID, st.Device, st.LatencyKind)
	if w := st.WeightsID; w != nil {
		add("- Weights: %s", w)
	}
	status := fmt.Sprintf("- Status: **%s**", strings.ToUpper(string(st.Status)))
	if st.MoveOnReason != "" {
		status += " (" + st.MoveOnReason + ")"
	}
	add("%s", status)
	add("- Elapsed: %.1f min since %s UTC", c.ElapsedMinutes(now), stamp(st.StartedAt))
	add("- Experiments run: %d (%d kept)", st.ExperimentsRun, st.ExperimentsKept)
	add("- Consecutive reverts at stop: %d", st.ConsecutiveReverts)
	if st.Exhausted {
		add("- **Search space exhausted**: %d of its %d points tried and no other found; this is the end of the space, not a stall", len(st.Tried), c.SpacePoints())
	}
	add("")
	add("## Result")
	add("")
	base, best, sp := st.Baseline, st.Best, c.Speedup()
	switch {
	case best != nil:
		if base != nil {
			add("- Baseline (default schedule): **%.3f us**", base.LatencyUS)
		} else {
			add("- Baseline (default schedule): not measured (no correct latency for the default yet)")
		}
		s := fmt.Sprintf("- Best schedule: **%.3f us**", best.LatencyUS)
		if sp != nil && *sp != 0 {
			s += fmt.Sprintf(", **%.2fx** faster than baseline", *sp)
		}
		add("%s", s)
		add("- Best latency kind: %s", best.Kind)
		if best.Trial < 0 {
			add("- The best was %s: %s", RecordedMark, recordedBest)
		}
		if best.PctOfRoofline != nil {
			add("- Distance to roofline: **%.1f%%** of the streamed-bytes floor (100%% == the floor)", *best.PctOfRoofline)
		}
	default:
		add("- No correct schedule recorded yet.")
	}
	add("")
	if best != nil && len(best.Regions) > 0 {
		add("## Region breakdown (best schedule's critical path)")
		add("")
		for _, r := range Regions {
			if v, ok := best.Regions[r]; ok {
				add("- %s: %.1f%%", r, v*100)
			}
		}
		add("")
	}
	add("## Best config")
	add("")
	add("```json")
	add("%s", c.bestConfigIndented())
	add("```")
	if len(st.Notes) > 0 {
		add("%s", strings.TrimSuffix(notesMarkdown(st.Notes), "\n"))
	}
	add("")
	return strings.Join(l, "\n")
}

func (c *Campaign) bestConfigIndented() string {
	if c.st.Best == nil || c.st.Best.Point == nil {
		return "null"
	}
	return indentJSON(pointJSON(*c.st.Best.Point))
}

// indentJSON writes raw JSON as Python's json.dumps(indent=2) would.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	v, err := pyjson.Parse(raw)
	if err != nil {
		return string(raw)
	}
	return string(pyjson.Indent(v))
}
