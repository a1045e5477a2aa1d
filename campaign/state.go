package campaign

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// StateVersion is the version of the serialised State.
const StateVersion = 1

// Status is where a campaign stands: optimizing, paused by its operator, or
// done. It is a string so the state file and the API keep their JSON.
type Status string

// Statuses.
const (
	StatusOptimizing Status = "optimizing"
	StatusPaused     Status = "paused"
	StatusDone       Status = "done"
)

// Proposal sources.
const (
	SourceDefault  = "default"
	SourceBaseline = "baseline"
	SourceWarmSeed = "warm_seed"
	SourceRandom   = "random"
	SourceMutate   = "mutate"
	SourcePrior    = "prior"
	SourceRestart  = "restart"
	SourceModel    = "model"
	SourceAgent    = "ext:agent"
)

var builtinSources = []string{SourceDefault, SourceBaseline, SourceWarmSeed, SourceRandom,
	SourceMutate, SourcePrior, SourceRestart, SourceModel}

// Region names of a breakdown (the cost model's, minus "other").
var Regions = []string{"attention", "mlp", "lm_head"}

// State is everything a campaign is: it serialises to JSON and a campaign
// reloaded from it continues exactly as the original would have.
type State struct {
	Version int             `json:"version"`
	ID      string          `json:"id"`
	Name    string          `json:"name,omitempty"`
	Model   string          `json:"model"`
	Label   string          `json:"label"`
	GPU     string          `json:"gpu"`
	Device  schedule.Device `json:"device"`
	Weights string          `json:"weights,omitempty"`
	// Incarnation is Start's: every spec the campaign issues carries it
	// ("" for a campaign created before outcomes were bound to specs).
	Incarnation string `json:"incarnation,omitempty"`
	// WeightsID is Start's: the weights the campaign's trials are for,
	// carried by every spec it issues (nil for a campaign created before
	// weights were identified).
	WeightsID *trial.WeightsID `json:"weights_id,omitempty"`
	// LatencyKind is the kind this campaign's evaluator produces.
	LatencyKind  trial.LatencyKind `json:"latency_kind"`
	Status       Status            `json:"status"`
	MoveOnReason string            `json:"move_on_reason,omitempty"`

	StartedAt     time.Time  `json:"started_at"`
	LastEventAt   time.Time  `json:"last_event_at"`
	PausedAt      *time.Time `json:"paused_at,omitempty"`
	PausedSeconds float64    `json:"paused_seconds"`
	// PauseReason says why a paused campaign is paused: its operator (with
	// the command's note), or the campaign itself (MaxRefusals).
	PauseReason string `json:"pause_reason,omitempty"`
	// Refusals counts the trials in a row the evaluators refused before
	// evaluating them (trial.Failure.Refusal).
	Refusals int `json:"evaluator_refusals,omitempty"`
	// DoneAt is when the campaign became done: its elapsed time stops
	// there (a reopen adds the time it spent done to PausedSeconds).
	DoneAt *time.Time `json:"done_at,omitempty"`

	Settings Settings       `json:"settings"`
	Shape    flywheel.Shape `json:"model_shape"`
	Env      flywheel.Env   `json:"env"`
	Cold     bool           `json:"cold"`
	Seed     uint64         `json:"seed"`
	// RNG is the PCG generator's state (MarshalBinary).
	RNG []byte `json:"rng"`

	// BoundUS is the streamed-bytes floor (trial.Verdict.BoundUS) reported
	// by the first verdict that had one; AllWeightsBoundUS the seed's
	// all-weights floor of the first verdict that had one, a second figure.
	BoundUS           *float64 `json:"bound_us"`
	AllWeightsBoundUS *float64 `json:"all_weights_bound_us,omitempty"`
	Baseline          *Result  `json:"baseline"`
	Best              *Result  `json:"best"`
	// Anchor is the point exploitation mutates: the best, or after a basin
	// hop the current region's best point.
	Anchor *Anchor `json:"anchor"`

	ExperimentsRun     int `json:"experiments_run"`
	ExperimentsKept    int `json:"experiments_kept"`
	ConsecutiveReverts int `json:"consecutive_reverts"`
	// NonImprovement counts outcomes since the last global or in-region
	// improvement (it drives basin hopping).
	NonImprovement int    `json:"non_improvement_streak"`
	Restarts       int    `json:"restarts"`
	Region         int    `json:"region"`
	Counts         Counts `json:"counts"`

	// Tried maps each schedule id ever evaluated or in flight to the trial
	// that took it (-1 for an agent's recorded experiment).
	Tried     map[string]int    `json:"tried"`
	InFlight  map[int]*InFlight `json:"in_flight"`
	NextTrial int               `json:"next_trial"`
	// Queue holds the opening points (warm seeds, baseline) not yet issued.
	Queue     []Queued `json:"queue"`
	WarmSeeds int      `json:"warm_seeds"`
	// Prior is the ranker's training data: the corpus snapshot taken at
	// Start plus this campaign's correct outcomes (warm campaigns only).
	Prior []flywheel.Example `json:"prior"`
	// Scores maps every incumbent's schedule id to its score, for chaining
	// side-by-side ratios.
	Scores     map[string]float64 `json:"incumbent_scores"`
	Trajectory []TrajectoryPoint  `json:"trajectory"`
	// Observations are the evaluated points the model proposer learns
	// from, in outcome order (kept only when it is the proposer).
	Observations []Observation `json:"observations,omitempty"`
	// TrialSeconds and TimedTrials measure the evaluator's cost: the sum
	// of issue-to-outcome times of the campaign's evaluated trials, and
	// how many there were (the scaled plateau threshold reads them).
	TrialSeconds float64 `json:"trial_seconds,omitempty"`
	TimedTrials  int     `json:"timed_trials,omitempty"`
	Exhausted    bool    `json:"exhausted"`
	// Notes are the operators' notes, oldest first.
	Notes []Note `json:"notes,omitempty"`
	// LastRun is the allowance of the run that last opened the campaign
	// (OpDriverOpened), nil when that run had no limits (or the ledger
	// predates runs carrying them).
	LastRun *RunAllowance `json:"last_run,omitempty"`
}

// RunAllowance is a run's limits with where the campaign stood when the
// run opened it: the trials issued so far (NextTrial) and the campaign
// time in minutes.
type RunAllowance struct {
	RunLimits
	TrialsAtOpen  int     `json:"trials_at_open"`
	MinutesAtOpen float64 `json:"minutes_at_open"`
}

// Result is an evaluated point the campaign keeps: the baseline or the best.
// Score is what keep/revert compares: the latency, or for side-by-side
// measurements the ratio chained onto the incumbent's score.
type Result struct {
	Trial         int                `json:"trial"` // -1: an agent's recorded experiment
	Experiment    int                `json:"experiment"`
	LatencyUS     float64            `json:"latency_us"`
	Kind          trial.LatencyKind  `json:"latency_kind"`
	Score         float64            `json:"score"`
	PctOfRoofline *float64           `json:"pct_of_roofline"`
	BoundUS       *float64           `json:"bound_us"`
	ScheduleID    string             `json:"schedule_id"`
	Point         *schedule.Point    `json:"point,omitempty"`
	Source        string             `json:"source"`
	Complexity    int                `json:"complexity"`
	Regions       map[string]float64 `json:"region_breakdown,omitempty"`
	// Positions are a workload trial's per-position figures (its
	// verdict's), for the report's latency against KV length.
	Positions []trial.PositionVerdict `json:"positions,omitempty"`
	// Worker is who evaluated it: host, device and amk build (trial.Environment).
	Worker string `json:"worker,omitempty"`
}

// Anchor is the exploration incumbent.
type Anchor struct {
	ScheduleID string          `json:"schedule_id"`
	Point      *schedule.Point `json:"point,omitempty"`
	Score      *float64        `json:"score"`
}

// InFlight is an issued trial awaiting its outcome.
type InFlight struct {
	Spec       trial.Spec `json:"spec"`
	ScheduleID string     `json:"schedule_id"`
	// IncumbentID is the best's id the trial is measured against, if any.
	IncumbentID string    `json:"incumbent_id,omitempty"`
	Region      int       `json:"region"`
	Opening     bool      `json:"opening,omitempty"` // a warm seed or the baseline
	IssuedAt    time.Time `json:"issued_at"`
}

// Queued is an opening point waiting to be issued.
type Queued struct {
	ScheduleID string         `json:"schedule_id"`
	Point      schedule.Point `json:"point"`
	Source     string         `json:"source"`
}

// Counts tallies experiments by outcome.
type Counts struct {
	Trials   int `json:"trials"`   // outcomes of the campaign's own trials
	Recorded int `json:"recorded"` // experiments recorded by an agent
	Correct  int `json:"correct"`
	Kept     int `json:"kept"`
	Tried    int `json:"tried"`
	Revert   int `json:"revert"`
	Rejected int `json:"rejected"`
	Failed   int `json:"failed"`
	Crash    int `json:"crash"`
	Timeout  int `json:"timeout"`
}

// TrajectoryPoint is one experiment, for plots and milestones.
type TrajectoryPoint struct {
	Experiment    int               `json:"experiment"`
	Trial         int               `json:"trial"`
	Minutes       float64           `json:"minutes"`
	Source        string            `json:"source"`
	Tag           string            `json:"tag"`
	ScheduleID    string            `json:"schedule_id"`
	LatencyUS     *float64          `json:"latency_us"`
	Kind          trial.LatencyKind `json:"latency_kind,omitempty"`
	PctOfRoofline *float64          `json:"pct_of_roofline"`
	Kept          bool              `json:"kept"`
	BestUS        *float64          `json:"best_us"`
	// Recorded marks an experiment an outside agent recorded (its figures
	// are the agent's, checked but not evaluated by amk).
	Recorded bool `json:"recorded,omitempty"`
}

// ID derives a campaign's id from what it optimises and where: model, GPU
// target, device and an optional user-chosen name. Ids are safe file and
// directory names; a model given as a path (or with other characters an id
// cannot hold) gets a short hash so two such models never share an id.
func ID(model, gpu string, device schedule.Device, name string) string {
	parts := []string{idPart(model, "model"), idPart(gpu, "gpu"), idPart(string(device), "device")}
	if name != "" {
		parts = append(parts, idPart(name, "name"))
	}
	return strings.Join(parts, "-")
}

// MaxIDLen bounds a campaign id (ID's are far shorter: four parts of at
// most 47 bytes).
const MaxIDLen = 255

// ErrBadID is wrapped by ValidID's errors.
var ErrBadID = errors.New("not a campaign id")

// ValidID is the one grammar of campaign ids, shared by every layer that
// takes an id from outside (the HTTP API, the scheduler, the workspace, the
// queue): 1 to MaxIDLen bytes of ASCII letters of either case, digits, '.',
// '_' and '-', starting with a letter, digit or '_'. Every id ID produces
// matches it, and no such id can name a path outside a directory ("." and
// ".." cannot match, nor can any separator).
func ValidID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrBadID, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !idByte(c) || (i == 0 && (c == '.' || c == '-')) {
			return fmt.Errorf("%w: %q (letters, digits, '.', '_', '-'; not starting with '.' or '-')", ErrBadID, id)
		}
	}
	return nil
}

// idByte reports whether c may appear in a campaign id.
func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func idPart(s, empty string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r < 0x80 && idByte(byte(r)) && r != '-'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.Trim(b.String(), "-.")
	if slug == "" {
		slug = empty
	}
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-.")
	}
	if slug != s {
		sum := sha1.Sum([]byte(s))
		slug += "-" + hex.EncodeToString(sum[:3])
	}
	return slug
}
