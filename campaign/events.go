package campaign

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Event is one input to a campaign. Time only ever arrives in events.
type Event interface{ At() time.Time }

// Start creates the campaign. Model is what workers load (a preset name or a
// HuggingFace config path); Label is the display name in rows, reports and
// the corpus (Model when empty). Corpus is the flywheel corpus as read by the
// caller; a warm campaign takes its warm seeds and the ranker's training
// examples from it once, here, and keeps them in its state.
type Start struct {
	Time     time.Time
	Model    string
	Label    string
	GPU      string
	Device   schedule.Device // "cpu" (predicted latencies) or "cuda" (measured)
	Name     string          // optional: distinguishes campaigns on one model/gpu/device
	Weights  string
	Seed     uint64
	Shape    flywheel.Shape
	Corpus   []flywheel.Record
	Cold     bool
	Settings Settings
	Env      flywheel.Env
	// Incarnation tells this campaign from any other that has had or will
	// have its id (one deleted and created again): a random string the
	// creator draws. Every spec carries it, so an outcome of another
	// incarnation answers another spec and is refused (trial.CheckBound).
	Incarnation string
	// WeightsID identifies the weights the campaign's trials are for
	// (trial.IdentifyWeights of Model and Weights on the creating host):
	// every spec carries it, and an evaluator that would load other
	// weights refuses the trial.
	WeightsID *trial.WeightsID
}

// Propose asks for up to N new trials, one per free worker.
type Propose struct {
	Time time.Time
	N    int
}

// Finished delivers a trial's outcome. Regions optionally carries the
// candidate's critical-path share per region (attention, mlp, lm_head);
// when nil, the outcome's own Regions are used.
type Finished struct {
	Time    time.Time
	Outcome trial.Outcome
	Regions map[string]float64
}

// Tick tells the campaign what time it is (time-based criteria).
type Tick struct{ Time time.Time }

// Command ops.
const (
	OpPause    = "pause"
	OpResume   = "resume"
	OpStop     = "stop"
	OpReopen   = "reopen"
	OpBudget   = "budget"   // replace the budget
	OpCriteria = "criteria" // replace the move-on criteria
	OpNote     = "note"     // keep an operator's note (Note) in the campaign
	// OpWithdraw takes trials in flight (Trials) back: the transport took
	// them off its queue before any evaluator started them (a stopped
	// campaign's queued trials), so no outcome of theirs will come. Their
	// points may be proposed again. Drivers send it; it is no operator's.
	OpWithdraw = "withdraw"
	// OpDriverOpened says a driver has just opened the campaign to run it
	// (a resume after its previous driver was killed or interrupted). An
	// optimizing campaign's time since its last event, when no process
	// ran it, is then not campaign time: it is added to the time spent
	// paused, so a minutes budget counts only time a driver had it open.
	// It carries the opening run's limits (Run), which the campaign keeps
	// with its trial count and campaign time at the opening
	// (State.LastRun). Drivers send it; it is no operator's.
	OpDriverOpened = "driver-opened"
)

// MaxNoteBytes bounds the text of an operator's note.
const MaxNoteBytes = 4096

// Command is an operator command. Budget goes with budget (and optionally
// reopen), MoveOn with criteria (and optionally reopen); Note is free text,
// and with note the text kept (State.Notes, the reports).
type Command struct {
	Time   time.Time
	Op     string
	Budget *Budget
	MoveOn *MoveOn
	Note   string
	// Trials are the trials in flight withdraw takes back.
	Trials []int `json:",omitempty"`
	// Run is what the run a driver-opened event announces may do (nil:
	// no limit, as for a scheduler's driver or a ledger written before
	// runs carried their limits).
	Run *RunLimits `json:",omitempty"`
}

// RunLimits are the limits of one run of a driver (amkctl autoresearch
// --iters and --minutes): the trials it may propose and the minutes it may
// run. Zero means no limit. The campaign's own budget bounds the whole
// campaign; these bound one run, and whoever drives the campaign next
// without being asked to (a scheduler run with --adopt) drives only what
// is left of them (Campaign.LeftOfLastRun).
type RunLimits struct {
	Iterations int     `json:"iterations,omitempty"`
	Minutes    float64 `json:"minutes,omitempty"`
}

// Check refuses negative or non-finite limits.
func (r RunLimits) Check() error {
	if r.Iterations < 0 || r.Minutes < 0 || math.IsNaN(r.Minutes) || math.IsInf(r.Minutes, 0) {
		return fmt.Errorf("run limits: %d iterations, %v minutes: want finite figures >= 0", r.Iterations, r.Minutes)
	}
	return nil
}

// Unlimited says neither limit is set.
func (r RunLimits) Unlimited() bool { return r.Iterations == 0 && r.Minutes == 0 }

// Record is an outside agent's own experiment (the reference's `record`).
// Status uses the reference vocabulary (kept/keep/improved, revert/reverted/
// slower/same, failed/fail/error, crash, timeout, rejected) plus docs/spec/loop.md's
// "tried" and "baseline" (the default point's own result). Correctness
// defaults from the status; a latency needs correctness PASS and a kind.
type Record struct {
	Time          time.Time
	Status        string
	Correctness   string
	LatencyUS     *float64
	PctOfRoofline *float64
	BoundUS       *float64
	Kind          trial.LatencyKind
	Point         json.RawMessage // the config JSON, optional
	ScheduleID    string          // optional; computed from Point when empty
	Description   string
	Source        string // provenance; prefixed "ext:" when it names a built-in source
	Regions       map[string]float64
}

func (e Start) At() time.Time    { return e.Time }
func (e Propose) At() time.Time  { return e.Time }
func (e Finished) At() time.Time { return e.Time }
func (e Tick) At() time.Time     { return e.Time }
func (e Command) At() time.Time  { return e.Time }
func (e Record) At() time.Time   { return e.Time }

// Decision is what the campaign asks its driver to do after one event, in
// order: persist the state, append Rows to results.tsv and Corpus to the
// corpus, enqueue the specs.
type Decision struct {
	Enqueue []trial.Spec
	Rows    []flywheel.Row
	Corpus  []flywheel.Record
	Status  Status
	Log     []string
}

// Errors an event can be refused with. A refused event changes nothing.
var (
	ErrNotStarted     = errors.New("campaign not started")
	ErrStarted        = errors.New("campaign already started")
	ErrDone           = errors.New("campaign is done (reopen it first)")
	ErrUnknownTrial   = errors.New("unknown trial")
	ErrDuplicateTrial = errors.New("trial already recorded")
	ErrWrongCampaign  = errors.New("outcome belongs to another campaign")
	ErrInvalid        = errors.New("invalid event")
)
