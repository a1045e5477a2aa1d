package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// CampaignInput is what loop and autoresearch take: the campaign (created
// when new, resumed otherwise) and this run's limits.
type CampaignInput struct {
	Model         string          `json:"model" jsonschema:"model preset, a HuggingFace config.json path, or a HuggingFace id ORG/NAME[@REVISION] from the local cache (its checkpoint supplies the weights)"`
	GPU           string          `json:"gpu" jsonschema:"GPU target record"`
	Device        string          `json:"device,omitempty" jsonschema:"cpu (default: predicted latencies), cuda (measured-gpu) or auto (cuda when a CUDA device answers here, cpu otherwise)"`
	Name          string          `json:"name,omitempty" jsonschema:"optional campaign name, to run several campaigns on one model, gpu and device"`
	Minutes       float64         `json:"minutes,omitempty" jsonschema:"wall-clock budget of this run in minutes (0: none)"`
	Workers       int             `json:"workers,omitempty" jsonschema:"trials evaluated at once; default min(4, CPUs) on cpu, 1 on cuda"`
	Cold          bool            `json:"cold,omitempty" jsonschema:"ignore the flywheel prior (no warm start, no ranking)"`
	Seed          uint64          `json:"seed,omitempty" jsonschema:"random seed of the campaign's proposer"`
	Overnight     bool            `json:"overnight,omitempty" jsonschema:"never stop on a plateau; basin-hop after restart_after non-improvements"`
	RestartAfter  *int            `json:"restart_after,omitempty" jsonschema:"non-improvements before an overnight basin hop (default 6)"`
	Epsilon       *float64        `json:"epsilon,omitempty" jsonschema:"probability an exploit step skips the prior's ranking, in [0, 1] (default 0.30)"`
	Batch         int             `json:"batch,omitempty" jsonschema:"decode batch B every trial lowers and checks (default 1; B > 1: GEMM tiles); the workload's batch"`
	Workload      *trial.Workload `json:"workload,omitempty" jsonschema:"what the campaign tunes for: prompt_lens (prompt lengths), gen_len (tokens generated after each), batch; default a 512-token prompt, 128 generated tokens, batch 1; a workload other than the default names its own campaign"`
	SpeedupTarget *float64        `json:"speedup_target,omitempty" jsonschema:"a new campaign stops once this fast against its baseline (default 3, the default move-on criterion; 0: never)"`
	Weights       string          `json:"weights,omitempty" jsonschema:"optional .safetensors file with real weights; default: the model's own checkpoint (a HuggingFace id's snapshot, or beside its config.json), else seeded weights"`
}

// LoopInput is loop's arguments.
type LoopInput struct {
	CampaignInput
	Budget int `json:"budget,omitempty" jsonschema:"trials to run (default 8, the reference's)"`
}

// AutoresearchInput is autoresearch's arguments.
type AutoresearchInput struct {
	CampaignInput
	Iters int `json:"iters,omitempty" jsonschema:"trials to run; 20 when neither iters nor minutes is given"`
}

// RunSummary is what one run of a campaign did, and the error that ended
// it, if any.
type RunSummary struct {
	runner.RunSummary
	Error string `json:"error,omitempty"`
}

// RunAnswer answers loop, autoresearch and cancel.
type RunAnswer struct {
	Campaign string `json:"campaign"`
	Created  bool   `json:"created"`
	Where    string `json:"where"`
	// Background is true when the run goes on after the answer.
	Background bool `json:"background"`
	// Run is the finished run (loop, cancel).
	Run *RunSummary `json:"run,omitempty"`
	// Status is the campaign's status at the answer.
	Status campaign.StatusReport `json:"status"`
	// Report is the wake-up report (loop, cancel): best config, latency and
	// its kind, speedup over the default schedule.
	Report *campaign.WakeUp `json:"report,omitempty"`
	Next   string           `json:"next"`
}

// localRun is a campaign this server drives on the local workspace: it
// holds the campaign's run (its ledger, and so its lock) from startLocal to
// finish.
type localRun struct {
	*control.Run
	id string
	// cancel ends the run (the cancel tool, a wedged GPU).
	cancel context.CancelFunc
	// finish releases the run (its ledger, dispatcher and launcher),
	// forgets it and closes done.
	finish func()
	done   chan struct{}
	sum    RunSummary
}

func (s *Server) running(id string) *localRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// runningIDs are the campaigns this server runs, sorted.
func (s *Server) runningIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.runs))
}

// createRequest makes the create request of a campaign's arguments,
// checked as every front's (control.CreateRequest.Check, whose messages
// name the argument).
func (s *Server) createRequest(in CampaignInput) (control.CreateRequest, error) {
	if control.IsAutoDevice(in.Device) {
		if s.local == nil {
			return control.CreateRequest{}, errors.New("argument device: auto picks this machine's device; a scheduler's campaign needs cpu or cuda")
		}
		_, device, _, release, err := s.launcher(in.Device)
		if err != nil {
			return control.CreateRequest{}, err
		}
		release()
		in.Device = string(device)
	}
	if in.Minutes < 0 {
		return control.CreateRequest{}, fmt.Errorf("argument minutes: must be >= 0, got %v", in.Minutes)
	}
	req := control.CreateRequest{Model: in.Model, GPU: in.GPU, Device: schedule.Device(in.Device), Name: in.Name, Weights: in.Weights,
		Seed: in.Seed, Cold: in.Cold, Overnight: in.Overnight, RestartAfter: in.RestartAfter, Epsilon: in.Epsilon, Workers: in.Workers}
	if in.Batch != 0 && in.Batch != 1 {
		req.Batch = &in.Batch
	}
	req.Workload = in.Workload
	if in.SpeedupTarget != nil {
		req.MoveOn = &control.MoveOn{SpeedupTarget: in.SpeedupTarget}
	}
	if err := req.Check(); err != nil {
		return control.CreateRequest{}, fmt.Errorf("argument %w", err)
	}
	return req, nil
}

// startLocal creates (or finds) the campaign in the local workspace, takes
// its lock and registers the run; the caller drives it, then calls
// run.finish. cancel ends the context the caller drives it with.
func (s *Server) startLocal(req control.CreateRequest, cancel context.CancelFunc) (*localRun, control.CreateResponse, error) {
	id := req.ID()
	if s.running(id) != nil {
		return nil, control.CreateResponse{}, fmt.Errorf("campaign %s is already running in this server (watch it with status; end it with cancel)", id)
	}
	launcher, _, _, release, err := s.launcher(string(req.Device))
	if err != nil {
		return nil, control.CreateResponse{}, err
	}
	started, err := s.local.StartRun(req, control.RunOptions{Launcher: launcher, ReleaseLauncher: release, Models: s.models, Log: s.log,
		OnWedge: func() {
			// As amkctl autoresearch does: a wedged GPU ends the run.
			s.log.Error("the GPU is wedged (a trial ignored its cancellation); ending the run", "campaign", id)
			cancel()
		}})
	if errors.Is(err, runner.ErrLocked) {
		return nil, control.CreateResponse{}, fmt.Errorf("campaign %s is driven by another process (amkctl autoresearch or a scheduler on this workspace): watch it with status", id)
	}
	if err != nil {
		return nil, control.CreateResponse{}, err
	}
	resp := control.CreateResponse{ID: started.Ledger.ID(), Created: started.Created, Campaign: started.Ledger.Campaign().StatusReport(time.Now().UTC())}
	if started.Done() {
		started.Close()
		return nil, resp, fmt.Errorf("campaign %s is done (%s) after %d experiments: nothing to run; reopen it (amkctl reopen %s) or give another name",
			resp.ID, resp.Campaign.MoveOnReason, resp.Campaign.ExperimentsRun, resp.ID)
	}
	run := &localRun{Run: started, id: resp.ID, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.runs[resp.ID]; busy {
		started.Close()
		return nil, resp, fmt.Errorf("campaign %s is already running in this server", resp.ID)
	}
	s.runs[resp.ID] = run
	run.finish = func() {
		started.Close()
		s.mu.Lock()
		delete(s.runs, resp.ID)
		s.mu.Unlock()
		close(run.done)
	}
	return run, resp, nil
}

// drive runs the campaign to the limits or until ctx ends; notify, when
// set, hears of every recorded experiment. A panic ends the run with an
// error, not the server.
func (run *localRun) drive(ctx context.Context, lim runner.Limits, notify func(done int, line string)) {
	defer func() {
		if r := recover(); r != nil {
			run.sum.Error = fmt.Sprintf("internal error: %v", r)
		}
	}()
	if notify != nil {
		ledger := run.Ledger
		first := ledger.Campaign().State().ExperimentsRun
		last := 0
		// The driver calls the progress writer on its own goroutine, between
		// its changes to the campaign, so the campaign can be read here.
		run.Driver.Progress = runner.NewProgress(lineWriter(func(line string) {
			if done := ledger.Campaign().State().ExperimentsRun - first; done > last {
				last = done
				notify(done, line)
			}
		}), lim.Iterations)
	}
	sum, err := run.Drive(ctx, lim)
	run.sum = RunSummary{RunSummary: sum}
	if err != nil {
		run.sum.Error = err.Error()
	}
}

// lineWriter calls fn with every complete line written to it.
type lineWriter func(line string)

func (w lineWriter) Write(p []byte) (int, error) {
	for line := range bytes.SplitSeq(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(line) > 0 {
			w(string(line))
		}
	}
	return len(p), nil
}

func (s *Server) loop(ctx context.Context, req *mcp.CallToolRequest, in LoopInput) (*mcp.CallToolResult, RunAnswer, error) {
	if in.Budget < 0 {
		return nil, RunAnswer{}, fmt.Errorf("argument budget: must be >= 1, got %d", in.Budget)
	}
	if in.Budget == 0 {
		in.Budget = control.DefaultLoopBudget
	}
	creq, err := s.createRequest(in.CampaignInput)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	notify := progress(ctx, req)
	if s.local == nil {
		return s.remoteLoop(ctx, creq, in.Budget, notify)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	run, resp, err := s.startLocal(creq, cancel)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	total := float64(in.Budget)
	run.drive(runCtx, runner.Limits{Iterations: in.Budget, Minutes: in.Minutes}, func(done int, line string) {
		notify(float64(done), total, line)
	})
	run.finish()
	if err := runCtx.Err(); err != nil {
		return nil, RunAnswer{}, fmt.Errorf("loop cancelled after %d recorded experiment(s); campaign %s keeps them and resumes on the next loop or autoresearch: %w", run.sum.Recorded, resp.ID, err)
	}
	ans, err := s.finished(ctx, resp, run.sum)
	if err == nil && run.sum.Error != "" {
		err = fmt.Errorf("loop: %s", run.sum.Error)
	}
	return nil, ans, err
}

// finished answers a finished local run.
func (s *Server) finished(ctx context.Context, resp control.CreateResponse, sum RunSummary) (RunAnswer, error) {
	rep, err := s.opts.Campaigns.Status(ctx, resp.ID)
	if err != nil {
		return RunAnswer{}, err
	}
	wake, err := s.opts.Campaigns.Report(ctx, resp.ID)
	if err != nil {
		return RunAnswer{}, err
	}
	return RunAnswer{Campaign: resp.ID, Created: resp.Created, Where: s.local.Where(), Run: &sum, Status: rep, Report: &wake,
		Next: "results.tsv and report.md are in the campaign's directory (resources amk://campaigns/" + resp.ID + "/results.tsv and .../report.md); loop again to continue"}, nil
}

// remoteLoop creates the campaign on the scheduler with the loop's budget
// and watches it until it stops; cancelling the call pauses it.
func (s *Server) remoteLoop(ctx context.Context, creq control.CreateRequest, budget int, notify func(done, total float64, message string)) (*mcp.CallToolResult, RunAnswer, error) {
	cs := s.opts.Campaigns
	creq.Budget = &campaign.Budget{Iterations: budget}
	resp, err := cs.Create(ctx, creq)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	if !resp.Created {
		return nil, RunAnswer{}, fmt.Errorf("campaign %s already exists %s: loop creates a campaign with the loop's budget; watch that one with status, or give loop a new name", resp.ID, cs.Where())
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := -1
	for {
		rep, err := cs.Status(ctx, resp.ID)
		if err != nil && ctx.Err() == nil {
			return nil, RunAnswer{}, err
		}
		if err == nil {
			if rep.ExperimentsRun > last {
				last = rep.ExperimentsRun
				notify(float64(last), float64(budget), fmt.Sprintf("[%s] %d/%d experiments on the scheduler", resp.ID, last, budget))
			}
			if rep.Status != campaign.StatusOptimizing && len(rep.InFlight) == 0 {
				wake, err := cs.Report(ctx, resp.ID)
				if err != nil {
					return nil, RunAnswer{}, err
				}
				return nil, RunAnswer{Campaign: resp.ID, Created: true, Where: cs.Where(), Status: rep, Report: &wake,
					Next: "the campaign's files are on the scheduler's machine"}, nil
			}
		}
		select {
		case <-ctx.Done():
			pause, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, perr := cs.Command(pause, resp.ID, campaign.OpPause, control.CommandRequest{Note: "loop cancelled by the MCP client"})
			cancel()
			msg := "paused it"
			if perr != nil {
				msg = "could not pause it: " + perr.Error()
			}
			return nil, RunAnswer{}, fmt.Errorf("loop cancelled; campaign %s %s: %w", resp.ID, msg, ctx.Err())
		case <-tick.C:
		}
	}
}

func (s *Server) autoresearch(ctx context.Context, _ *mcp.CallToolRequest, in AutoresearchInput) (*mcp.CallToolResult, RunAnswer, error) {
	if in.Iters < 0 {
		return nil, RunAnswer{}, fmt.Errorf("argument iters: must be >= 0, got %d", in.Iters)
	}
	if in.Iters == 0 && in.Minutes == 0 {
		in.Iters = control.DefaultIterations
	}
	creq, err := s.createRequest(in.CampaignInput)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	if s.local == nil {
		cs := s.opts.Campaigns
		creq.Budget = &campaign.Budget{Iterations: in.Iters, Minutes: in.Minutes}
		resp, err := cs.Create(ctx, creq)
		if err != nil {
			return nil, RunAnswer{}, err
		}
		return nil, RunAnswer{Campaign: resp.ID, Created: resp.Created, Where: cs.Where(), Background: true, Status: resp.Campaign,
			Next: "the scheduler runs it: watch it with status and next, read it with report"}, nil
	}
	runCtx, cancel := context.WithCancel(s.base)
	run, resp, err := s.startLocal(creq, cancel)
	if err != nil {
		cancel()
		return nil, RunAnswer{}, err
	}
	s.wg.Go(func() {
		defer cancel()
		defer run.finish()
		run.drive(runCtx, runner.Limits{Iterations: in.Iters, Minutes: in.Minutes}, nil)
		s.log.Info("background run ended", "campaign", run.id, "recorded", run.sum.Recorded, "stop", run.sum.StopReason, "error", run.sum.Error)
	})
	rep, err := s.opts.Campaigns.Status(ctx, resp.ID)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	return nil, RunAnswer{Campaign: resp.ID, Created: resp.Created, Where: s.local.Where(), Background: true, Status: rep,
		Next: "running in the background of this server: watch it with status and next, read it with report, end it with cancel (it resumes with autoresearch)"}, nil
}

func (s *Server) cancel(ctx context.Context, _ *mcp.CallToolRequest, in Selector) (*mcp.CallToolResult, RunAnswer, error) {
	id, err := s.resolve(ctx, in)
	if err != nil {
		return nil, RunAnswer{}, err
	}
	if s.local == nil {
		resp, err := s.opts.Campaigns.Command(ctx, id, campaign.OpPause, control.CommandRequest{Note: "cancelled by an MCP client"})
		if err != nil {
			return nil, RunAnswer{}, err
		}
		return nil, RunAnswer{Campaign: id, Where: s.opts.Campaigns.Where(), Status: resp.Campaign,
			Next: "paused on the scheduler: the resume tool (or amkctl resume) continues it"}, nil
	}
	run := s.running(id)
	if run == nil {
		return nil, RunAnswer{}, fmt.Errorf("campaign %s is not running in this server (running here: %v)", id, s.runningIDs())
	}
	run.cancel()
	select {
	case <-run.done:
	case <-ctx.Done():
		return nil, RunAnswer{}, ctx.Err()
	}
	ans, err := s.finished(ctx, control.CreateResponse{ID: id}, run.sum)
	ans.Next = "cancelled; the campaign keeps its experiments and resumes with autoresearch"
	return nil, ans, err
}
