package campaign

import (
	"encoding/json"
	"fmt"
)

// The reference (AMK) keeps one campaign in one workspace, in files of
// fixed names that its tools read: amk_orchestrate.py and its MCP server
// read the state and results.tsv, a person or an agent reads the wake-up
// report. amk keeps many campaigns per workspace (campaigns/<id>/), so it
// writes these files for one campaign on request (control.ExportAMKFiles).
const (
	AMKStateFile        = "amk_orchestration_state.json"
	AMKResultsFile      = "results.tsv"
	AMKOvernightJSON    = "amk_overnight_report.json"
	AMKOvernightMD      = "amk_overnight_report.md"
	amkHonestyStatement = "Every latency is correctness-gated: a trial's output was checked against the eager oracle before " +
		"any latency was kept; best_kind says whether it was timed on a GPU (measured-gpu) or is the cost model's " +
		"(predicted). The speedup is against amk's own default schedule, not a claim of beating other libraries."
)

// amkRegions are the regions of the reference's state, in its order.
var amkRegions = []string{"attention", "mlp", "lm_head"}

// AMKState is amk_orchestration_state.json as the reference writes it
// (amk_orchestrate._fresh_state's keys, in its order).
type AMKState struct {
	Model              string              `json:"model"`
	GPU                string              `json:"gpu"`
	Status             Status              `json:"status"`
	StartedAt          string              `json:"started_at"`
	BaselineUS         *float64            `json:"baseline_us"`
	BestUS             *float64            `json:"best_us"`
	BestConfig         json.RawMessage     `json:"best_config"`
	BestPctRoofline    *float64            `json:"best_pct_roofline"`
	BestKind           *string             `json:"best_kind"`
	Speedup            *float64            `json:"speedup"`
	ExperimentsRun     int                 `json:"experiments_run"`
	ExperimentsKept    int                 `json:"experiments_kept"`
	ConsecutiveReverts int                 `json:"consecutive_reverts"`
	RegionBreakdown    map[string]*float64 `json:"region_breakdown"`
	MoveOnReason       *string             `json:"move_on_reason"`
}

// AMKState is the status as the reference's orchestration state. A paused
// campaign reads as optimizing there (the reference has no pause); regions
// the reference does not know are left out.
func (r StatusReport) AMKState() AMKState {
	s := AMKState{
		Model: r.Model, GPU: r.GPU, Status: r.Status, StartedAt: r.StartedAt,
		BaselineUS: r.BaselineUS, BestUS: r.BestUS, BestConfig: nullIfEmpty(r.BestConfig),
		BestPctRoofline: r.BestPctOfRoofline, Speedup: r.Speedup,
		ExperimentsRun: r.ExperimentsRun, ExperimentsKept: r.ExperimentsKept, ConsecutiveReverts: r.ConsecutiveReverts,
		RegionBreakdown: map[string]*float64{},
	}
	if s.Status == StatusPaused {
		s.Status = StatusOptimizing
	}
	if r.BestUS != nil && r.BestKind != "" {
		s.BestKind = new(string(r.BestKind))
	}
	if r.MoveOnReason != "" {
		s.MoveOnReason = new(r.MoveOnReason)
	}
	for _, region := range amkRegions {
		s.RegionBreakdown[region] = nil
		if v, ok := r.RegionBreakdown[region]; ok {
			s.RegionBreakdown[region] = new(v)
		}
	}
	return s
}

// AMKMilestone is one improvement of the reference's overnight report.
type AMKMilestone struct {
	Iter   int     `json:"iter"`
	BestUS float64 `json:"best_us"`
	Source string  `json:"source"`
}

// AMKOvernight is amk_overnight_report.json as the reference's
// autoresearch writes it (its keys, in its order), plus the campaign's amk
// id.
type AMKOvernight struct {
	Campaign              string          `json:"campaign"`
	Device                string          `json:"device"`
	ElapsedMinutes        float64         `json:"elapsed_minutes"`
	IterationsThisRun     int             `json:"iterations_this_run"`
	TotalExperiments      int             `json:"total_experiments"`
	Kept                  int             `json:"kept"`
	Correct               int             `json:"correct"`
	RejectedOrFailed      int             `json:"rejected_or_failed"`
	CrashOrTimeout        int             `json:"crash_or_timeout"`
	BasinHopRestarts      int             `json:"basin_hop_restarts"`
	BaselineUS            *float64        `json:"baseline_us"`
	BestUS                *float64        `json:"best_us"`
	BestKind              *string         `json:"best_kind"`
	BestPctOfRoofline     *float64        `json:"best_pct_of_roofline"`
	SpeedupVsBaseline     *float64        `json:"speedup_vs_baseline"`
	BestConfig            json.RawMessage `json:"best_config"`
	ImprovementMilestones []AMKMilestone  `json:"improvement_milestones"`
	Honesty               string          `json:"honesty"`
	ID                    string          `json:"amk_campaign_id"`
}

// AMKOvernight is the wake-up report as the reference's overnight report.
func (w WakeUp) AMKOvernight() AMKOvernight {
	o := AMKOvernight{
		Campaign: fmt.Sprintf("%s / %s", w.Model, w.GPU), Device: string(w.Device),
		ElapsedMinutes: w.ElapsedMinutes, IterationsThisRun: w.Iterations, TotalExperiments: w.TotalExperiments,
		Kept: w.Kept, Correct: w.Correct, RejectedOrFailed: w.RejectedOrFailed, CrashOrTimeout: w.CrashOrTimeout,
		BasinHopRestarts: w.BasinHopRestarts, BaselineUS: w.BaselineUS, BestUS: w.BestUS,
		BestPctOfRoofline: w.BestPctOfRoofline, SpeedupVsBaseline: w.SpeedupVsBaseline,
		BestConfig: nullIfEmpty(w.BestConfig), ImprovementMilestones: []AMKMilestone{},
		Honesty: amkHonestyStatement, ID: w.ID,
	}
	if w.BestKind != nil {
		o.BestKind = new(string(*w.BestKind))
	}
	for _, m := range w.ImprovementMilestones {
		o.ImprovementMilestones = append(o.ImprovementMilestones, AMKMilestone{Iter: m.Iter, BestUS: m.BestUS, Source: m.Source})
	}
	return o
}

// nullIfEmpty is raw JSON, or null for none.
func nullIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
