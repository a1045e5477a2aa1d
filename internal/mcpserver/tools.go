package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/doctor"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// maxConfigBytes bounds a schedule config passed as an argument, as amkctl
// bounds a config file.
const maxConfigBytes = 1 << 20

func (s *Server) addTools() {
	addTool(s, "doctor", "Check this machine (the one amkctl mcp runs on): build and runtime, CPUs and memory, the workspace, nvcc, whether this binary can open a GPU, and that the reference VM matches the eager oracle on toy. ready is false when a check failed; gpu says whether eval and loop can run with device cuda here.", s.doctor)
	addTool(s, "propose", "Read the edit surface of the schedule search: the incumbent schedule_config, its schedule_id and the search space (each knob's choices, default, whether it is effective). Edit ONE knob of schedule_config, then call eval.", s.propose)
	addSchemaTool(s, "eval", "Evaluate one schedule config: lower, validate (deadlock- and race-freedom, launch feasibility), check the numerics against the eager oracle, and only then time it. Answers the verdict JSON; ok is true iff valid and correct (amkctl eval's exit code 0). latency_us is null unless correct; latency_kind says predicted (cost model) or measured-gpu. The schedule's JSON Schema is this tool's input schema and the resource "+schedule.SchemaID+"; a config it refuses is a valid=false verdict naming the problem.", evalInputSchema(), s.eval)
	addTool(s, "loop", "Run the keep/revert loop for budget trials and wait for it (the autoresearch engine; resumable: calling it again continues the campaign). Sends a progress notification per experiment; cancel the request to stop it. Answers the run, the campaign status and the wake-up report (best config, latency and its kind).", s.loop)
	addTool(s, "tune_instruction", "Kernel tuning: tune one ABI micro-kernel's -D knobs on the local GPU (build, verify against the per-op reference, time, keep on a >= 1% win). Needs an amkctl built with -tags cuda on a machine with a GPU.", s.tuneInstruction)
	addTool(s, "autoresearch", "Create (or resume) a campaign and run it in the background; answers at once with the campaign id. Watch it with status, next and report; end this server's run with cancel. With a scheduler, the scheduler runs it.", s.autoresearch)
	addTool(s, "cancel", "End this server's run of a campaign (a background autoresearch, or a loop another call waits for); the campaign keeps its experiments and autoresearch or loop resumes it. On a scheduler: pause the campaign.", s.cancel)
	addTool(s, "status", "A campaign's status: baseline, best (with its latency kind), speedup, plateau counter, counts by outcome. With no selector: the only campaign there is.", s.status)
	addTool(s, "next", "The continue-or-stop decision of a campaign (move-on criteria: plateau, near the floor, time budget, speedup) and its hottest region.", s.next)
	addTool(s, "report", "Write a campaign's report files (report.md, report.json, report.svg, aggregate_report.md) and answer the wake-up report: best config, latency and kind, speedup over the default schedule, milestones.", s.report)
	addTool(s, "record", "Record your own experiment into a campaign (the orchestrator's record): status kept|revert|tried|failed|crash|timeout|rejected; a latency needs correctness PASS and a kind (predicted or measured-gpu).", s.record)
	addTool(s, "campaigns", "List the campaigns with their status.", s.campaigns)
	addTool(s, "trial", "One trial of a campaign (trial: its number): while in flight its spec and age; once finished the experiment it became, its verdict (config, correctness, latency and its kind) or failure, the worker that ran it and each stage's seconds.", s.trial)
	addTool(s, "note", "Keep a note in a campaign (note: the text): it goes into the campaign's ledger and shows in its reports and the web view, with its time. For what an operator or agent should know later: a change made by hand, a suspicion, a reason.", command[CommandInput](s, campaign.OpNote))
	addTool(s, "pause", "Pause a campaign: its driver starts no new trials (trials in flight are still recorded) until resume. Answers the campaign's log lines and its status.", command[LifecycleInput](s, campaign.OpPause))
	addTool(s, "resume", "Resume a paused campaign. Answers the campaign's log lines and its status.", command[LifecycleInput](s, campaign.OpResume))
	addTool(s, "stop", "Stop a campaign for good: it becomes done and keeps its experiments (reopen continues it). Answers the campaign's log lines and its status.", command[LifecycleInput](s, campaign.OpStop))
	addTool(s, "reopen", "Reopen a done campaign, optionally with a new budget (a total, counting what was already spent) and move-on criteria. Answers the campaign's log lines and its status.", command[ReopenInput](s, campaign.OpReopen))
	addTool(s, "budget", "Replace a campaign's budget: iterations (experiments) and minutes (unpaused), totals counting what was already spent; 0 is unbounded. Answers the campaign's log lines and its status.", command[BudgetInput](s, campaign.OpBudget))
	addTool(s, "criteria", "Change a campaign's move-on criteria (those given replace the campaign's; 0 turns one off): consecutive_reverts (the plateau threshold's base), pct_roofline_target, max_minutes, speedup_target. Answers the campaign's log lines and its status.", command[CriteriaInput](s, campaign.OpCriteria))
}

// commandInput is the arguments of an operator command's tool: the
// campaign they name and control's request.
type commandInput interface {
	selector() Selector
	request() control.CommandRequest
}

// CommandInput is the note tool's arguments: the campaign and the note's
// text.
type CommandInput struct {
	Selector
	Note string `json:"note" jsonschema:"free text: the note itself (note), or kept in the campaign's log with the command"`
}

// LifecycleInput is the arguments of pause, resume and stop: the campaign
// and an optional note for its log.
type LifecycleInput struct {
	Selector
	Note string `json:"note,omitempty" jsonschema:"free text kept in the campaign's log with the command"`
}

// ReopenInput is reopen's arguments: LifecycleInput with an optional new
// budget and criteria.
type ReopenInput struct {
	LifecycleInput
	Budget *campaign.Budget `json:"budget,omitempty" jsonschema:"the campaign's new total budget: iterations (experiments) and minutes, counting those already spent; 0: unbounded"`
	MoveOn *control.MoveOn  `json:"move_on,omitempty" jsonschema:"move-on criteria to replace (those given)"`
}

// BudgetInput is budget's arguments.
type BudgetInput struct {
	LifecycleInput
	Budget campaign.Budget `json:"budget" jsonschema:"the campaign's new total budget: iterations (experiments) and minutes, counting those already spent; 0: unbounded"`
}

// CriteriaInput is criteria's arguments.
type CriteriaInput struct {
	LifecycleInput
	MoveOn control.MoveOn `json:"move_on" jsonschema:"the move-on criteria to replace (those given; the others stay)"`
}

func (in CommandInput) selector() Selector { return in.Selector }
func (in CommandInput) request() control.CommandRequest {
	return control.CommandRequest{Note: in.Note}
}
func (in LifecycleInput) selector() Selector { return in.Selector }
func (in LifecycleInput) request() control.CommandRequest {
	return control.CommandRequest{Note: in.Note}
}
func (in ReopenInput) request() control.CommandRequest {
	return control.CommandRequest{Note: in.Note, Budget: in.Budget, MoveOn: in.MoveOn}
}
func (in BudgetInput) request() control.CommandRequest {
	return control.CommandRequest{Note: in.Note, Budget: &in.Budget}
}
func (in CriteriaInput) request() control.CommandRequest {
	return control.CommandRequest{Note: in.Note, MoveOn: &in.MoveOn}
}

// command is the tool of an operator command on one campaign: control's
// Command (which checks what the command takes), answering the campaign's
// log lines and its status afterwards.
func command[In commandInput](s *Server, op string) mcp.ToolHandlerFor[In, control.CommandResponse] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, control.CommandResponse, error) {
		id, err := s.resolve(ctx, in.selector())
		if err != nil {
			return nil, control.CommandResponse{}, err
		}
		resp, err := s.opts.Campaigns.Command(ctx, id, op, in.request())
		return nil, resp, err
	}
}

// Selector names a campaign, as amkctl's campaign verbs do.
type Selector struct {
	Campaign string `json:"campaign,omitempty" jsonschema:"campaign id (see the campaigns tool); or give model and gpu; or nothing for the only campaign"`
	Model    string `json:"model,omitempty" jsonschema:"with gpu: the campaign's model (preset name or config.json path)"`
	GPU      string `json:"gpu,omitempty" jsonschema:"with model: the campaign's GPU target"`
	Device   string `json:"device,omitempty" jsonschema:"with model: the campaign's device, cpu (default) or cuda"`
	Name     string `json:"name,omitempty" jsonschema:"with model: the campaign's name, if it has one"`
}

func (sel Selector) control() control.Selector {
	device := schedule.Device(sel.Device)
	if device == "" {
		device = schedule.DeviceCPU // as amkctl's --device
	}
	return control.Selector{ID: sel.Campaign, Arg: sel.Model, GPU: sel.GPU, Device: device, Name: sel.Name}
}

// resolve names the campaign sel means.
func (s *Server) resolve(ctx context.Context, sel Selector) (string, error) {
	if sel.Model != "" && sel.GPU == "" && sel.Campaign == "" {
		// A lone model is read as a campaign id by control; say what is
		// missing when it is not one.
		id, err := control.Resolve(ctx, s.opts.Campaigns, sel.control())
		if err != nil {
			return "", fmt.Errorf("%v (give gpu with model, or the campaign id)", err)
		}
		return id, nil
	}
	return control.Resolve(ctx, s.opts.Campaigns, sel.control())
}

// ProposeInput is propose's arguments.
type ProposeInput struct {
	Model     string         `json:"model" jsonschema:"model preset (toy, toy-2L, small, llama-1b, tinyllama, llama-8b), a HuggingFace config.json path, or a HuggingFace id ORG/NAME[@REVISION] from the local cache"`
	GPU       string         `json:"gpu" jsonschema:"GPU target record (h100, h200, a100, b200, rtx5090, ...)"`
	Device    string         `json:"device,omitempty" jsonschema:"cpu (default), cuda or auto (cuda when a CUDA device answers here): kernel-build knobs are levers only on cuda"`
	Incumbent map[string]any `json:"incumbent,omitempty" jsonschema:"a schedule_config to present as the incumbent; default: the canonical default config"`
	// IgnoreUnknownKeys is amkctl propose's --ignore-unknown-keys.
	IgnoreUnknownKeys bool `json:"ignore_unknown_keys,omitempty" jsonschema:"read past incumbent keys amk does not know instead of refusing it"`
}

func (s *Server) propose(_ context.Context, _ *mcp.CallToolRequest, in ProposeInput) (*mcp.CallToolResult, any, error) {
	cfg, err := model.Load(in.Model)
	if err != nil {
		return nil, nil, argError("model", err)
	}
	target, err := ir.Target(in.GPU)
	if err != nil {
		return nil, nil, argError("gpu", err)
	}
	device, err := s.proposeDevice(in.Device)
	if err != nil {
		return nil, nil, err
	}
	inc := schedule.Default()
	if in.Incumbent != nil {
		data, err := configJSON("incumbent", in.Incumbent)
		if err != nil {
			return nil, nil, err
		}
		cfg, _, err := userConfig("incumbent", data, in.IgnoreUnknownKeys)
		if err != nil {
			return nil, nil, err
		}
		if inc, err = schedule.PointFromValue(cfg.Value); err != nil {
			return nil, nil, argError("incumbent", err)
		}
	}
	surface := schedule.SurfaceFor(cfg.Name, target, device, cfg.Quant.On(), inc)
	return nil, json.RawMessage(pyjson.Compact(surface, false)), nil
}

// EvalInput is eval's arguments.
type EvalInput struct {
	Model    string         `json:"model" jsonschema:"model preset, a HuggingFace config.json path, or a HuggingFace id ORG/NAME[@REVISION] from the local cache (its checkpoint supplies the weights)"`
	GPU      string         `json:"gpu" jsonschema:"GPU target record"`
	Schedule map[string]any `json:"schedule,omitempty" jsonschema:"the schedule_config to evaluate (propose's schedule_config with ONE knob edited); default: the canonical default config"`
	// Config is the reference's name for Schedule: a config object, or
	// the JSON text of one.
	Config   any             `json:"config,omitempty" jsonschema:"the reference's name for schedule: a schedule_config object, or its JSON text"`
	Device   string          `json:"device,omitempty" jsonschema:"cpu (default: cost-model latencies, labelled predicted), cuda (measured-gpu; a cuda build on a GPU machine) or auto (cuda when a CUDA device answers here, cpu otherwise; the verdict's notes say which)"`
	TokenID  *int            `json:"token_id,omitempty" jsonschema:"token id fed to the checked decode step"`
	Pos      int             `json:"pos,omitempty" jsonschema:"decode position of the checked step"`
	Weights  string          `json:"weights,omitempty" jsonschema:"optional .safetensors file with real weights; default: the model's own checkpoint (a HuggingFace id's snapshot, or beside its config.json), else seeded weights"`
	Batch    int             `json:"batch,omitempty" jsonschema:"decode batch B (default 1; B > 1 lowers GEMM tiles and checks every sequence)"`
	Workload *trial.Workload `json:"workload,omitempty" jsonschema:"evaluate for a workload instead of one step at pos: prompt_lens, gen_len, batch; the trial is checked at a few KV lengths spanning it and its latency is the mean time per decode step"`
	// IgnoreUnknownKeys is amkctl eval's --ignore-unknown-keys.
	IgnoreUnknownKeys bool `json:"ignore_unknown_keys,omitempty" jsonschema:"read past schedule config keys amk does not know (the verdict's notes name them) instead of refusing the config; default false: an unknown key is an error naming the key probably meant"`
}

// EvalAnswer is the verdict with amkctl eval's exit code as a boolean.
type EvalAnswer struct {
	trial.Verdict
	// OK is true iff the config is valid and correct (amkctl eval exits 0).
	OK bool `json:"ok"`
}

func (s *Server) eval(ctx context.Context, _ *mcp.CallToolRequest, in EvalInput) (*mcp.CallToolResult, EvalAnswer, error) {
	var none EvalAnswer
	if _, err := model.Load(in.Model); err != nil {
		return nil, none, argError("model", err)
	}
	if _, err := ir.Target(in.GPU); err != nil {
		return nil, none, argError("gpu", err)
	}
	if in.Pos < 0 {
		return nil, none, fmt.Errorf("argument pos: must be >= 0, got %d", in.Pos)
	}
	if in.Batch < 0 || in.Batch > schedule.MaxBatch {
		return nil, none, fmt.Errorf("argument batch: must be in [1, %d], got %d", schedule.MaxBatch, in.Batch)
	}
	arg, point, err := scheduleArg(in.Schedule, in.Config)
	if err != nil {
		return nil, none, err
	}
	var readNotes []string
	if point == nil {
		point = pyjson.Indent(schedule.Default().Value())
	} else {
		var cfg schedule.UserConfig
		if cfg, readNotes, err = userConfig(arg, point, in.IgnoreUnknownKeys); err != nil {
			return nil, none, err
		}
		point = cfg.JSON()
	}
	launcher, device, picked, release, err := s.launcher(in.Device)
	if err != nil {
		return nil, none, err
	}
	defer release()
	token := trial.DefaultToken
	if in.TokenID != nil {
		token = *in.TokenID
	}
	spec := trial.Spec{Model: in.Model, Weights: in.Weights, GPU: in.GPU, Device: device, Point: point, Token: token, Pos: in.Pos, Batch: in.Batch}
	if in.Workload != nil {
		if in.Pos != 0 {
			return nil, none, errors.New("argument pos: a workload's positions are evaluated; give pos or workload, not both")
		}
		w, err := in.Workload.WithBatch(in.Batch)
		if err != nil {
			return nil, none, argError("workload", err)
		}
		spec.Workload, spec.Pos, spec.Batch = &w, 0, 0
	}
	// On a GPU under the watchdog, as amkctl eval and the gpuworker run trials.
	eval, _ := control.DeviceEvaluator(device, trial.Options{Launcher: launcher, Models: s.models, Version: s.opts.Version}, s.log)
	out := eval(ctx, spec)
	if err := ctx.Err(); err != nil {
		return nil, none, fmt.Errorf("eval cancelled: %w", err)
	}
	if out.Failure != nil {
		return nil, none, fmt.Errorf("eval: %s during %s: %s", out.Failure.Class, out.Failure.Phase, out.Failure.Message)
	}
	if out.Verdict == nil {
		return nil, none, errors.New("eval: internal error: no verdict and no failure")
	}
	v := *out.Verdict
	v.Notes = append(v.Notes, readNotes...)
	if picked != "" {
		v.Notes = append(v.Notes, picked)
	}
	return nil, EvalAnswer{Verdict: v, OK: v.Valid && v.Correct != nil && *v.Correct}, nil
}

// TuneInput is tune_instruction's arguments.
type TuneInput struct {
	Op      string `json:"op" jsonschema:"ABI op: gemv_tile, rmsnorm, silu_mul, add, rope, attention_tile, embed"`
	GPU     string `json:"gpu" jsonschema:"GPU target record of the roofline"`
	Budget  int    `json:"budget,omitempty" jsonschema:"variants to try, >= 1 (default 6; variant 0 is the built-in defaults)"`
	DType   string `json:"dtype,omitempty" jsonschema:"fp32 (default), fp16 or bf16"`
	Results string `json:"results,omitempty" jsonschema:"results.tsv to append loop=instruction rows to; default: none"`
	Device  string `json:"device,omitempty" jsonschema:"cuda (ordinal 0, the default) or cuda:N"`
}

func (s *Server) tuneInstruction(ctx context.Context, req *mcp.CallToolRequest, in TuneInput) (*mcp.CallToolResult, *tune.Summary, error) {
	op, err := tune.ParseOp(in.Op)
	if err != nil {
		return nil, nil, argError("op", err)
	}
	if in.DType == "" {
		in.DType = "fp32"
	}
	dt, err := tune.ParseDType(in.DType)
	if err != nil {
		return nil, nil, argError("dtype", err)
	}
	target, err := ir.Target(in.GPU)
	if err != nil {
		return nil, nil, argError("gpu", err)
	}
	if in.Budget == 0 {
		in.Budget = 6
	}
	if in.Budget < 1 {
		return nil, nil, fmt.Errorf("argument budget: must be >= 1, got %d", in.Budget)
	}
	device := in.Device
	if device == "" {
		device = "cuda"
	}
	ordinal, err := tune.ParseCUDADevice(device)
	if err != nil {
		return nil, nil, argError("device", err)
	}
	if s.opts.OpenTuneDevice == nil {
		return nil, nil, errors.New("tune_instruction: this amkctl was built without CUDA support (rebuild with -tags cuda on a machine with the CUDA driver): kernel tuning builds and times real kernels")
	}
	dev, release, err := s.opts.OpenTuneDevice(ordinal)
	if err != nil {
		return nil, nil, fmt.Errorf("tune_instruction: CUDA device %d: %v", ordinal, err)
	}
	defer func() { _ = release() }()
	// Loop 1's log lines (build, verify, time per variant) become progress
	// notifications: a count of lines, with no total.
	notify, lines := progress(ctx, req), 0
	log := lineWriter(func(line string) {
		lines++
		notify(float64(lines), 0, line)
	})
	sum, err := tune.Tune(ctx, dev, tune.Options{Op: op, DType: dt, Target: target, Budget: in.Budget, Results: in.Results, Log: log})
	if err != nil && sum == nil {
		return nil, nil, fmt.Errorf("tune_instruction: %v", err)
	}
	if err != nil {
		sum.Notes = append(sum.Notes, "stopped early: "+err.Error())
	}
	return nil, sum, nil
}

// StatusAnswer is a campaign's status with its text block.
type StatusAnswer struct {
	campaign.StatusReport
	// Running is true while this server drives the campaign.
	Running bool `json:"running_here"`
}

func (s *Server) status(ctx context.Context, _ *mcp.CallToolRequest, in Selector) (*mcp.CallToolResult, StatusAnswer, error) {
	id, err := s.resolve(ctx, in)
	if err != nil {
		return nil, StatusAnswer{}, err
	}
	rep, err := s.opts.Campaigns.Status(ctx, id)
	if err != nil {
		return nil, StatusAnswer{}, err
	}
	text, err := s.opts.Campaigns.StatusText(ctx, id)
	if err != nil {
		return nil, StatusAnswer{}, err
	}
	ans := StatusAnswer{StatusReport: rep, Running: s.running(id) != nil}
	return textAnd(text), ans, nil
}

// NextAnswer is the continue-or-stop decision with the campaign's latency
// kind.
type NextAnswer struct {
	campaign.NextReport
	// LatencyKind is the kind of the campaign's latencies.
	LatencyKind string `json:"latency_kind"`
}

func (s *Server) next(ctx context.Context, _ *mcp.CallToolRequest, in Selector) (*mcp.CallToolResult, NextAnswer, error) {
	id, err := s.resolve(ctx, in)
	if err != nil {
		return nil, NextAnswer{}, err
	}
	n, err := s.opts.Campaigns.Next(ctx, id)
	if err != nil {
		return nil, NextAnswer{}, err
	}
	rep, err := s.opts.Campaigns.Status(ctx, id)
	if err != nil {
		return nil, NextAnswer{}, err
	}
	return textAnd(n.Text()), NextAnswer{NextReport: n, LatencyKind: string(rep.LatencyKind)}, nil
}

// TrialInput selects one trial of a campaign.
type TrialInput struct {
	Selector
	Trial int `json:"trial" jsonschema:"the trial number (status lists the trials in flight; the report and the web view give finished ones)"`
}

func (s *Server) trial(ctx context.Context, _ *mcp.CallToolRequest, in TrialInput) (*mcp.CallToolResult, control.TrialReport, error) {
	id, err := s.resolve(ctx, in.Selector)
	if err != nil {
		return nil, control.TrialReport{}, err
	}
	rep, err := s.opts.Campaigns.Trial(ctx, id, in.Trial)
	if err != nil {
		return nil, control.TrialReport{}, err
	}
	return textAnd(rep.Text()), rep, nil
}

// ReportAnswer is the wake-up report and the files written.
type ReportAnswer struct {
	Report campaign.WakeUp     `json:"report"`
	Files  control.ReportFiles `json:"files"`
}

func (s *Server) report(ctx context.Context, _ *mcp.CallToolRequest, in Selector) (*mcp.CallToolResult, ReportAnswer, error) {
	id, err := s.resolve(ctx, in)
	if err != nil {
		return nil, ReportAnswer{}, err
	}
	files, err := s.opts.Campaigns.WriteReport(ctx, id)
	if err != nil {
		return nil, ReportAnswer{}, err
	}
	wake, err := s.opts.Campaigns.Report(ctx, id)
	if err != nil {
		return nil, ReportAnswer{}, err
	}
	return nil, ReportAnswer{Report: wake, Files: files}, nil
}

// RecordInput is record's arguments.
type RecordInput struct {
	Selector
	Status        string             `json:"status" jsonschema:"kept, revert, tried, failed, crash, timeout or rejected"`
	Correctness   string             `json:"correctness,omitempty" jsonschema:"PASS, FAIL, REJECTED, CRASH or TIMEOUT; default: from status"`
	LatencyUS     *float64           `json:"latency_us,omitempty" jsonschema:"latency in microseconds; only with correctness PASS"`
	Kind          string             `json:"kind,omitempty" jsonschema:"the latency's kind: predicted or measured-gpu (required with latency_us)"`
	PctOfRoofline *float64           `json:"pct_of_roofline,omitempty" jsonschema:"latency / streamed-bytes floor x 100"`
	PctRoofline   *float64           `json:"pct_roofline,omitempty" jsonschema:"the reference's name for pct_of_roofline"`
	BoundUS       *float64           `json:"bound_us,omitempty" jsonschema:"the streamed-bytes floor (bytes a step streams at the HBM bandwidth) in microseconds"`
	Schedule      map[string]any     `json:"schedule,omitempty" jsonschema:"the schedule_config the experiment used"`
	Config        any                `json:"config,omitempty" jsonschema:"the reference's name for schedule: a schedule_config object, or its JSON text"`
	ScheduleID    string             `json:"schedule_id,omitempty" jsonschema:"the schedule id; default: computed from schedule"`
	Description   string             `json:"description,omitempty" jsonschema:"what was tried, in a few words"`
	Source        string             `json:"source,omitempty" jsonschema:"provenance of the experiment (default agent)"`
	Regions       map[string]float64 `json:"regions,omitempty" jsonschema:"critical-path shares, e.g. {attention: 0.4, mlp: 0.5, lm_head: 0.1}"`
}

func (s *Server) record(ctx context.Context, _ *mcp.CallToolRequest, in RecordInput) (*mcp.CallToolResult, control.RecordResponse, error) {
	var none control.RecordResponse
	if in.Status == "" {
		return nil, none, errors.New("argument status: required (kept, revert, tried, failed, crash, timeout or rejected)")
	}
	id, err := s.resolve(ctx, in.Selector)
	if err != nil {
		return nil, none, err
	}
	source := in.Source
	if source == "" {
		source = "agent"
	}
	pct := in.PctOfRoofline
	if in.PctRoofline != nil {
		if pct != nil {
			return nil, none, errors.New("argument pct_roofline: give pct_of_roofline or pct_roofline (the reference's name for it), not both")
		}
		pct = in.PctRoofline
	}
	req := control.RecordRequest{Status: in.Status, Correctness: in.Correctness, LatencyUS: in.LatencyUS,
		PctOfRoofline: pct, BoundUS: in.BoundUS, Kind: trial.LatencyKind(in.Kind), ScheduleID: in.ScheduleID,
		Description: in.Description, Source: source, Regions: in.Regions}
	if _, req.Config, err = scheduleArg(in.Schedule, in.Config); err != nil {
		return nil, none, err
	}
	// A campaign this server runs takes the record through its driver.
	resp, err := s.opts.Campaigns.Record(ctx, id, req)
	return nil, resp, err
}

// CampaignsInput is campaigns' arguments (none).
type CampaignsInput struct{}

// CampaignsAnswer lists the campaigns.
type CampaignsAnswer struct {
	Where     string                  `json:"where"`
	Campaigns []campaign.StatusReport `json:"campaigns"`
	// Unreadable names campaigns that could not be read, with why.
	Unreadable string `json:"unreadable,omitempty"`
	// RunningHere are the campaigns this server drives now.
	RunningHere []string `json:"running_here"`
}

func (s *Server) campaigns(ctx context.Context, _ *mcp.CallToolRequest, _ CampaignsInput) (*mcp.CallToolResult, CampaignsAnswer, error) {
	list, err := s.opts.Campaigns.List(ctx)
	if err != nil && list == nil {
		return nil, CampaignsAnswer{}, err
	}
	ans := CampaignsAnswer{Where: s.opts.Campaigns.Where(), Campaigns: list, RunningHere: s.runningIDs()}
	if ans.Campaigns == nil {
		ans.Campaigns = []campaign.StatusReport{}
	}
	if err != nil {
		ans.Unreadable = err.Error()
	}
	return nil, ans, nil
}

// argError names the argument a failure is about.
func argError(arg string, err error) error { return fmt.Errorf("argument %s: %v", arg, err) }

// proposeDevice is the device of propose's surface: cpu or cuda as given
// (no device is opened), or the device auto picks.
func (s *Server) proposeDevice(arg string) (schedule.Device, error) {
	if !control.IsAutoDevice(arg) {
		d, err := schedule.ParseDevice(arg)
		if err != nil {
			return "", argError("device", fmt.Errorf("%v, or auto", err))
		}
		return d, nil
	}
	_, device, _, release, err := s.launcher(arg)
	if err != nil {
		return "", err
	}
	release()
	return device, nil
}

// scheduleArg is the config of a schedule argument or of config, its name
// in the reference's tools (an object, or the JSON text of one), and the
// name of the argument it came from; nil when neither is given.
func scheduleArg(sched map[string]any, config any) (string, []byte, error) {
	switch c := config.(type) {
	case nil:
		if sched == nil {
			return "", nil, nil
		}
		data, err := configJSON("schedule", sched)
		return "schedule", data, err
	case map[string]any:
		if sched != nil {
			return "", nil, errors.New("argument config: give schedule or config (the reference's name for it), not both")
		}
		data, err := configJSON("config", c)
		return "config", data, err
	case string:
		if sched != nil {
			return "", nil, errors.New("argument config: give schedule or config (the reference's name for it), not both")
		}
		if len(c) > maxConfigBytes {
			return "", nil, fmt.Errorf("argument config: %d bytes, more than the %d a schedule config may have", len(c), maxConfigBytes)
		}
		return "config", []byte(c), nil
	}
	return "", nil, fmt.Errorf("argument config: a schedule_config object or its JSON text, got %T", config)
}

// userConfig reads the config of a schedule (or config) argument as amkctl
// reads a --schedule file, with schedule.ReadUserConfig: propose's whole
// answer stands for its schedule_config (a note says so), and a key amk
// does not know is an error naming the key probably meant, unless
// ignoreUnknown (the evaluation's verdict then names each key read past).
// Input that is not a JSON object, or an object that sets no schedule
// setting, is an error too; a value of a known knob that is wrong is not
// (the verdict rejects the config and says why).
func userConfig(arg string, data []byte, ignoreUnknown bool) (schedule.UserConfig, []string, error) {
	cfg, err := schedule.ReadUserConfig(data, ignoreUnknown)
	var unknown *schedule.UnknownKeysError
	if errors.As(err, &unknown) {
		return cfg, nil, fmt.Errorf("argument %s: %v (ignore_unknown_keys: true reads past them)", arg, err)
	}
	if err != nil {
		return cfg, nil, argError(arg, err)
	}
	var notes []string
	if cfg.FromSurface {
		notes = append(notes, "the "+arg+" argument is propose's answer: its schedule_config was read")
	}
	return cfg, notes, nil
}

// configJSON encodes a schedule config argument, bounded in size.
func configJSON(arg string, cfg map[string]any) ([]byte, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, argError(arg, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("argument %s: %d bytes, more than the %d a schedule config may have", arg, len(data), maxConfigBytes)
	}
	return data, nil
}

// launcher opens the latency source of a device argument (cpu, cuda or
// auto); picked says which device auto picked and why; release frees it.
func (s *Server) launcher(arg string) (trial.Launcher, schedule.Device, string, func(), error) {
	var openCUDA func() (trial.Launcher, error)
	if s.opts.OpenLauncher != nil {
		openCUDA = func() (trial.Launcher, error) {
			l, _, err := s.opts.OpenLauncher(string(schedule.DeviceCUDA))
			return l, err
		}
	}
	// The MCP tools name no GPU target for the emulator to stand in for.
	l, device, picked, err := control.OpenDevice(arg, openCUDA, nil)
	if err != nil {
		return nil, "", "", nil, argError("device", err)
	}
	release := func() {
		if c, ok := l.(io.Closer); ok {
			_ = c.Close()
		}
	}
	return l, device, picked, release, nil
}

// DoctorInput is doctor's arguments (none).
type DoctorInput struct{}

func (s *Server) doctor(ctx context.Context, _ *mcp.CallToolRequest, _ DoctorInput) (*mcp.CallToolResult, doctor.Report, error) {
	workspace := s.opts.Workspace
	if workspace == "" && s.local != nil {
		workspace = s.local.Workspace.Dir
	}
	if workspace == "" {
		workspace = "workspace"
	}
	r := doctor.Run(ctx, doctor.Options{Workspace: workspace, GPUProbe: s.opts.GPUProbe})
	return nil, r, nil
}

// textAnd is a result whose text content is text; the structured content
// is filled in by the SDK from the answer.
func textAnd(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
