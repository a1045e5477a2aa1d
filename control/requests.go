package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// The requests of the campaign operations, what each answers, their checks
// and their translation into campaign events: written once here, whatever
// front (the command line, the HTTP API, the MCP server, the web view)
// carries them.

// MaxWorkers bounds a campaign's trials in flight.
const MaxWorkers = 256

// CreateRequest creates a campaign (POST /v1/campaigns, amkctl start, the
// MCP server's loop and autoresearch). Model and GPU are required;
// everything else has the defaults of `amkctl autoresearch`.
type CreateRequest struct {
	// Model is a preset name or a path to a HuggingFace config.json (or its
	// directory); through the HTTP API, relative to the scheduler's models
	// directory (models_dir).
	Model string `json:"model"`
	GPU   string `json:"gpu"`
	// Device is "cpu" (predicted latencies, the default) or "cuda".
	Device schedule.Device `json:"device,omitempty"`
	// Name distinguishes campaigns on one model, GPU and device.
	Name    string `json:"name,omitempty"`
	Weights string `json:"weights,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	// Cold ignores the flywheel prior (no warm start, no ranking).
	Cold bool `json:"cold,omitempty"`
	// Overnight never stops on a plateau and basin-hops after
	// RestartAfter consecutive non-improvements.
	Overnight     bool     `json:"overnight,omitempty"`
	RestartAfter  *int     `json:"restart_after,omitempty"`
	Epsilon       *float64 `json:"epsilon,omitempty"`
	Explore       *float64 `json:"explore_fraction,omitempty"`
	MinGain       *float64 `json:"min_gain,omitempty"`
	TrialTimeoutS *float64 `json:"trial_timeout_s,omitempty"`
	// Batch is the decode batch every trial lowers and checks (B > 1:
	// GEMM tiles): the workload's batch.
	Batch *int `json:"batch,omitempty"`
	// Workload is what the campaign tunes for (default: a 512-token
	// prompt, 128 generated tokens, batch 1; Batch, when set, is its
	// batch). A campaign for another workload than the default without a
	// Name is named after it (trial.Workload.Name), so it is a campaign of
	// its own.
	Workload *trial.Workload `json:"workload,omitempty"`
	// Budget bounds the whole campaign (0 = unbounded).
	Budget *campaign.Budget `json:"budget,omitempty"`
	// MoveOn overrides some of the move-on criteria.
	MoveOn *MoveOn `json:"move_on,omitempty"`
	// Workers is the most trials the campaign keeps in flight (default:
	// the scheduler's; a run on this machine takes its own).
	Workers int `json:"workers,omitempty"`

	// weightsID is the identity of the weights the campaign's trials are
	// for, once IdentifyWeights has computed it.
	weightsID *trial.WeightsID
}

// IdentifyWeights computes, once, the identity of the weights the
// request's campaign is evaluated on: trial.IdentifyWeights of Model and
// Weights on this host, which hashes the weights files. A creator that
// holds a lock while it creates calls it first, so that hashing a large
// checkpoint happens outside the lock. Hashing stops with ctx, and the
// next create goes on from where it stopped (an ErrUnavailable says so).
func (r *CreateRequest) IdentifyWeights(ctx context.Context) error {
	if r.weightsID != nil {
		return nil
	}
	id, err := trial.IdentifyWeights(ctx, r.Model, r.Weights)
	switch {
	case errors.Is(err, trial.ErrHashing):
		return Errorf(ErrUnavailable, "identifying the campaign's weights: %v: create the campaign again to go on", err)
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return badValue("weights: %v", err)
	}
	r.weightsID = &id
	return nil
}

// Check normalises the request (the GPU to its target's name, the device's
// default) and refuses what no campaign could be created from: a missing
// or unknown model or GPU, an unknown device, settings out of range. Each
// message starts with the field it is about. Errors wrap ErrBadValue.
func (r *CreateRequest) Check() error {
	r.Model, r.GPU = strings.TrimSpace(r.Model), strings.ToLower(strings.TrimSpace(r.GPU))
	device, deviceErr := schedule.ParseDevice(string(r.Device))
	r.Device = device
	switch {
	case r.Model == "":
		return badValue("model is required (a preset name or a config.json path)")
	case r.GPU == "":
		return badValue("gpu is required (a GPU target, e.g. h100)")
	case deviceErr != nil:
		return badValue("device: %v", deviceErr)
	case r.Workers < 0 || r.Workers > MaxWorkers:
		return badValue("workers: %d is not in 0..%d", r.Workers, MaxWorkers)
	case r.Batch != nil && (*r.Batch < 1 || *r.Batch > schedule.MaxBatch):
		return badValue("batch: %d is not in 1..%d", *r.Batch, schedule.MaxBatch)
	}
	target, err := ir.Target(r.GPU)
	if err != nil {
		return badValue("gpu: %v", err)
	}
	r.GPU = target.Name
	cfg, err := model.Load(r.Model)
	if err != nil {
		return badValue("model: %v", err)
	}
	w, err := r.ResolvedWorkload()
	if err != nil {
		return badValue("workload: %v", err)
	}
	if _, err := trial.ContextConfig(cfg, r.Model, w); err != nil {
		return badValue("workload: %v", err)
	}
	if err := r.MoveOn.check(); err != nil {
		return err
	}
	s := r.settings()
	if err := s.Check(); err != nil {
		return badValue("%v", err)
	}
	return nil
}

// ID is the id of the campaign the request names.
func (r CreateRequest) ID() string { return campaign.ID(r.Model, r.GPU, r.Device, r.CampaignName()) }

// ResolvedWorkload is the workload the request's campaign tunes for: its
// Workload (the default when absent), with Batch as its batch when set.
func (r CreateRequest) ResolvedWorkload() (trial.Workload, error) {
	w := trial.DefaultWorkload()
	if r.Workload != nil {
		w = *r.Workload
	}
	b := 0
	if r.Batch != nil {
		b = *r.Batch
		if b < 1 {
			return w, fmt.Errorf("batch %d is not in 1..%d", b, schedule.MaxBatch)
		}
	}
	return w.WithBatch(b)
}

// CampaignName is the name in the id of the request's campaign: Name, or
// for a workload other than the default without one, the workload's short
// name ("p2048-g128"), so that each workload has a campaign of its own.
func (r CreateRequest) CampaignName() string {
	if r.Name != "" {
		return r.Name
	}
	if w, err := r.ResolvedWorkload(); err == nil && !w.Equal(trial.DefaultWorkload()) {
		return w.Name()
	}
	return ""
}

// sameWorkload refuses to resume or find, for a request that names a
// workload (or a batch), an existing campaign tuned for another one (has:
// its settings' workload, nil for a campaign that checks one decode step):
// a conflict, which a request with another name avoids.
func (r CreateRequest) sameWorkload(has *trial.Workload) error {
	if r.Workload == nil && r.Batch == nil {
		return nil
	}
	want, err := r.ResolvedWorkload()
	if err != nil {
		return badValue("workload: %v", err)
	}
	switch {
	case has == nil:
		return Errorf(ErrConflict, "campaign %s checks one decode step at a fixed position, not the workload %s: give another name", r.ID(), want)
	case !has.Equal(want):
		return Errorf(ErrConflict, "campaign %s is tuned for %s, not %s: give another name", r.ID(), has, want)
	}
	return nil
}

// settings are the campaign's settings: campaign.DefaultSettings with the
// request's overrides.
func (r CreateRequest) settings() campaign.Settings {
	s := campaign.DefaultSettings()
	s.Overnight = r.Overnight
	setIf(&s.RestartAfter, r.RestartAfter)
	setIf(&s.Epsilon, r.Epsilon)
	setIf(&s.Explore, r.Explore)
	setIf(&s.MinGain, r.MinGain)
	setIf(&s.TrialTimeoutS, r.TrialTimeoutS)
	if w, err := r.ResolvedWorkload(); err == nil {
		s.Workload = &w
	} else {
		s.Workload = &trial.Workload{} // refused by Settings.Check, naming the workload
	}
	if r.Budget != nil {
		s.Budget = *r.Budget
	}
	s.MoveOn = r.MoveOn.Over(s.MoveOn)
	return s
}

// Start is the first event of the campaign the request creates: target is
// the record of the request's GPU, corpus the workspace's flywheel corpus
// and env describes the evaluating machines. A model that does not load
// is a bad value.
func (r CreateRequest) Start(now time.Time, target *ir.GpuTarget, corpus []flywheel.Record, env flywheel.Env) (campaign.Start, error) {
	cfg, err := model.Load(r.Model)
	if err != nil {
		return campaign.Start{}, badValue("%v", err)
	}
	return campaign.Start{
		Time: now, Model: r.Model, Label: cfg.Name, GPU: target.Name, Device: r.Device, Name: r.CampaignName(),
		Weights: r.Weights, Seed: r.Seed, Shape: ShapeOf(cfg), Corpus: corpus, Cold: r.Cold, Settings: r.settings(), Env: env,
	}, nil
}

// ShapeOf is a model's shape as the flywheel compares it.
func ShapeOf(c model.Config) flywheel.Shape {
	return flywheel.Shape{Hidden: c.Hidden, NLayers: c.NLayers, NHeads: c.NHeads, NKVHeads: c.NKVHeads,
		HeadDim: c.HeadDim, Intermediate: c.Intermediate, Vocab: c.Vocab}
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// MoveOn overrides move-on thresholds; a field left out keeps its value
// (0 disables a criterion).
type MoveOn struct {
	ConsecutiveReverts *int     `json:"consecutive_reverts,omitempty"`
	PctRooflineTarget  *float64 `json:"pct_roofline_target,omitempty"`
	MaxMinutes         *float64 `json:"max_minutes,omitempty"`
	SpeedupTarget      *float64 `json:"speedup_target,omitempty"`
}

// Over returns base with the overrides applied.
func (m *MoveOn) Over(base campaign.MoveOn) campaign.MoveOn {
	if m == nil {
		return base
	}
	setIf(&base.ConsecutiveReverts, m.ConsecutiveReverts)
	setIf(&base.PctRooflineTarget, m.PctRooflineTarget)
	setIf(&base.MaxMinutes, m.MaxMinutes)
	setIf(&base.SpeedupTarget, m.SpeedupTarget)
	return base
}

// check refuses overrides no campaign takes (over any base: a negative or
// non-finite threshold).
func (m *MoveOn) check() error {
	if err := m.Over(campaign.MoveOn{}).Check(); err != nil {
		return badValue("move_on: %v", err)
	}
	return nil
}

// CreateResponse answers a create: Created is false when the campaign
// already existed (it is returned as it is; the request's settings are
// ignored).
type CreateResponse struct {
	ID      string `json:"id"`
	Created bool   `json:"created"`
	// Workers is the trials the campaign keeps in flight where it is driven
	// (0: a campaign created here without a driver).
	Workers  int                   `json:"workers"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// CommandRequest is an operator command's request: what each command
// takes is in Commands (a Note with every one; Budget with budget and
// reopen; MoveOn with criteria and reopen).
type CommandRequest struct {
	Note   string           `json:"note,omitempty"`
	Budget *campaign.Budget `json:"budget,omitempty"`
	MoveOn *MoveOn          `json:"move_on,omitempty"`
}

// CommandResponse answers a command: the campaign's log lines and its
// status afterwards.
type CommandResponse struct {
	ID       string                `json:"id"`
	Log      []string              `json:"log"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// CommandSpec says what an operator command takes and what its refusal
// means.
type CommandSpec struct {
	// Budget and MoveOn: the command takes that field; Needs names the one
	// it cannot go without ("budget", "move_on" or "note").
	Budget, MoveOn bool
	Needs          string
	// StateConflict: a refusal by the campaign is a conflict with its
	// state (pause a paused campaign: ErrConflict), not a bad value.
	StateConflict bool
}

// Commands are the operator commands, by campaign op. Adding one is a line
// here (and its case in the campaign's state machine); Command then checks
// and applies it, and each front offers it with one line (docs: doc.go).
var Commands = map[string]CommandSpec{
	campaign.OpPause:    {StateConflict: true},
	campaign.OpResume:   {StateConflict: true},
	campaign.OpStop:     {StateConflict: true},
	campaign.OpReopen:   {Budget: true, MoveOn: true, StateConflict: true},
	campaign.OpBudget:   {Budget: true, Needs: "budget"},
	campaign.OpCriteria: {MoveOn: true, Needs: "move_on"},
	campaign.OpNote:     {Needs: "note"},
}

// Check refuses a request the command op does not take, or op when it is
// not a command.
func (r CommandRequest) Check(op string) error {
	_, err := r.check(op)
	return err
}

// check is Check, with the command's spec.
func (r CommandRequest) check(op string) (CommandSpec, error) {
	spec, ok := Commands[op]
	if !ok {
		return spec, badValue("%q is not a command", op)
	}
	switch {
	case r.Budget != nil && !spec.Budget:
		return spec, badValue("%s takes no budget (change a live campaign's budget with the budget command)", op)
	case r.MoveOn != nil && !spec.MoveOn:
		return spec, badValue("%s takes no move_on (change the criteria with the criteria command, or reopen)", op)
	case spec.Needs == "budget" && r.Budget == nil:
		return spec, badValue("a %s command needs the new budget", op)
	case spec.Needs == "move_on" && r.MoveOn == nil:
		return spec, badValue("a %s command needs the move-on criteria", op)
	case spec.Needs == "note" && strings.TrimSpace(r.Note) == "":
		return spec, badValue("a %s command needs the note's text", op)
	case len(r.Note) > campaign.MaxNoteBytes:
		return spec, badValue("the note has %d bytes, more than %d", len(r.Note), campaign.MaxNoteBytes)
	}
	if r.Budget != nil {
		if err := r.Budget.Check(); err != nil {
			return spec, badValue("%v", err)
		}
	}
	return spec, r.MoveOn.check()
}

// event is the command's event at now; current are the campaign's
// criteria, which MoveOn overrides.
func (r CommandRequest) event(op string, now time.Time, current campaign.MoveOn) campaign.Command {
	ev := campaign.Command{Time: now, Op: op, Note: r.Note, Budget: r.Budget}
	if r.MoveOn != nil {
		mo := r.MoveOn.Over(current)
		ev.MoveOn = &mo
	}
	return ev
}

// RecordRequest is an outside agent's own experiment (amkctl record, POST
// /v1/campaigns/{id}/record, the MCP record tool).
type RecordRequest struct {
	// Status is kept, revert, tried, failed, crash, timeout, rejected or
	// baseline (and the reference's synonyms).
	Status        string            `json:"status"`
	Correctness   string            `json:"correctness,omitempty"`
	LatencyUS     *float64          `json:"latency_us,omitempty"`
	PctOfRoofline *float64          `json:"pct_of_roofline,omitempty"`
	BoundUS       *float64          `json:"bound_us,omitempty"`
	Kind          trial.LatencyKind `json:"kind,omitempty"`
	// Config is the schedule config JSON the experiment used.
	Config      json.RawMessage    `json:"config,omitempty"`
	ScheduleID  string             `json:"schedule_id,omitempty"`
	Description string             `json:"description,omitempty"`
	Source      string             `json:"source,omitempty"`
	Regions     map[string]float64 `json:"regions,omitempty"`
}

// check refuses a record without a status (the campaign checks the rest).
func (r RecordRequest) check() error {
	if strings.TrimSpace(r.Status) == "" {
		return badValue("field \"status\" is required (kept, revert, tried, failed, crash, timeout, rejected or baseline)")
	}
	return nil
}

// Event is the campaign event of an agent's experiment, recorded at now.
func (r RecordRequest) Event(now time.Time) campaign.Record {
	ev := campaign.Record{Time: now, Status: r.Status, Correctness: r.Correctness,
		LatencyUS: r.LatencyUS, PctOfRoofline: r.PctOfRoofline, BoundUS: r.BoundUS, Kind: r.Kind,
		Point: r.Config, ScheduleID: r.ScheduleID, Description: r.Description, Source: r.Source,
		Regions: r.Regions}
	if string(r.Config) == "null" {
		ev.Point = nil
	}
	return ev
}

// RecordResponse answers a record: the results.tsv rows written.
type RecordResponse struct {
	ID       string                `json:"id"`
	Rows     []flywheel.Row        `json:"rows"`
	Log      []string              `json:"log"`
	Campaign campaign.StatusReport `json:"campaign"`
}

// ReportFiles answers a report written: the files in the campaign's
// directory on the campaigns' machine.
type ReportFiles struct {
	ID    string   `json:"id"`
	Dir   string   `json:"dir"`
	Files []string `json:"files"`
}
