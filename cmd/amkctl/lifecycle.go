package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
)

func init() {
	register(command{name: "start", summary: "create a campaign (on a scheduler it starts running; prints its id)", run: runStart})
	register(command{name: "pause", summary: "pause a campaign (no new trials; trials in flight are still recorded)", run: lifecycleVerb(campaign.OpPause)})
	register(command{name: "resume", summary: "resume a paused campaign", run: lifecycleVerb(campaign.OpResume)})
	register(command{name: "stop", summary: "stop a campaign (it becomes done)", run: lifecycleVerb(campaign.OpStop)})
	register(command{name: "reopen", summary: "reopen a done campaign, optionally with a new budget", run: lifecycleVerb(campaign.OpReopen)})
	register(command{name: "budget", summary: "replace a campaign's budget (experiments and/or minutes)", run: runBudget})
	for _, v := range []string{"start", "pause", "resume", "stop", "reopen", "budget"} {
		remoteVerbs[v] = true
	}
}

// startFlags are the settings of a new campaign.
type startFlags struct {
	iters, restartAfter, workers, maxReverts *int
	minutes, epsilon, trialTimeout           *float64
	seed                                     *uint64
	cold, overnight                          *bool
	weights                                  *string
}

func runStart(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("start", "start MODEL --gpu G [--iters N] [--minutes M] [--device cpu|cuda] [--name N] [--workers K] [--cold] [--seed S] [--overnight] [--workspace DIR | --server URL] [--json]", stderr)
	cf := addCampaignFlags(fs)
	sf := startFlags{
		iters:        fs.Int("iters", 0, "the campaign's budget of experiments (0 = unbounded)"),
		minutes:      fs.Float64("minutes", 0, "the campaign's budget of (unpaused) minutes (0 = unbounded)"),
		workers:      fs.Int("workers", 0, "trials kept in flight (scheduler only; default the scheduler's)"),
		seed:         fs.Uint64("seed", 0, "random seed of the campaign's proposer"),
		cold:         fs.Bool("cold", false, "ignore the flywheel prior (no warm start, no ranking)"),
		overnight:    fs.Bool("overnight", false, "never stop on a plateau; basin-hop after --restart-after non-improvements"),
		restartAfter: fs.Int("restart-after", 6, "non-improvements before an overnight basin hop"),
		epsilon:      fs.Float64("epsilon", 0.30, "probability an exploit step skips the prior's ranking"),
		trialTimeout: fs.Float64("trial-timeout", 0, "wall-clock limit of one trial in seconds (0 = the worker's default)"),
		maxReverts:   fs.Int("max-reverts", -1, "consecutive reverts before the campaign moves on (default 8; 0 disables)"),
		weights:      fs.String("weights", "", "optional .safetensors file with real weights (a path on the evaluating machines)"),
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 || *cf.gpu == "" || *cf.id != "" {
		fmt.Fprintln(stderr, "amkctl start: exactly one MODEL and --gpu G are required")
		return 2
	}
	req := api.CreateRequest{Model: pos[0], GPU: *cf.gpu, Device: *cf.device, Name: *cf.name, Weights: *sf.weights,
		Seed: *sf.seed, Cold: *sf.cold, Overnight: *sf.overnight, RestartAfter: sf.restartAfter, Epsilon: sf.epsilon,
		Budget: &campaign.Budget{Iterations: *sf.iters, Minutes: *sf.minutes}, Workers: *sf.workers}
	if *sf.trialTimeout > 0 {
		req.TrialTimeoutS = sf.trialTimeout
	}
	if *sf.maxReverts >= 0 {
		req.MoveOn = &api.MoveOn{ConsecutiveReverts: sf.maxReverts}
	}
	if *sf.iters < 0 || *sf.minutes < 0 || *sf.workers < 0 || *sf.restartAfter < 1 || *sf.epsilon < 0 || *sf.epsilon > 1 {
		fmt.Fprintln(stderr, "amkctl start: --iters, --minutes and --workers must be >= 0, --restart-after >= 1, --epsilon in [0, 1]")
		return 2
	}
	c, err := cf.remote.client()
	if err != nil {
		fmt.Fprintln(stderr, "amkctl start:", err)
		return 2
	}
	var resp api.CreateResponse
	if c != nil {
		ctx, cancel := remoteContext()
		defer cancel()
		if resp, err = c.Create(ctx, req); err != nil {
			return remoteFail(stderr, "start", err)
		}
	} else {
		if *sf.workers != 0 {
			fmt.Fprintln(stderr, "amkctl start: --workers applies to a scheduler (--server); locally, pass --workers to amkctl autoresearch")
			return 2
		}
		if resp, err = startLocal(*cf.workspace, req); err != nil {
			fmt.Fprintln(stderr, "amkctl start:", err)
			return 1
		}
	}
	if *cf.jsonOut {
		return printJSON(stdout, resp)
	}
	if resp.Created {
		where := "locally (run it with amkctl autoresearch, or let a scheduler on this workspace adopt it)"
		if c != nil {
			where = fmt.Sprintf("on %s with %d trial(s) in flight", c.Server(), resp.Workers)
		}
		fmt.Fprintf(stderr, "created campaign %s %s\n", resp.ID, where)
	} else {
		fmt.Fprintf(stderr, "campaign %s already exists (%s, %d experiments); left as it is (change its budget with amkctl budget, or reopen it)\n",
			resp.ID, resp.Campaign.Status, resp.Campaign.ExperimentsRun)
	}
	fmt.Fprintln(stdout, resp.ID)
	return 0
}

// startLocal creates the campaign in a workspace without running it.
func startLocal(workspace string, req api.CreateRequest) (api.CreateResponse, error) {
	cfg, err := model.Load(req.Model)
	if err != nil {
		return api.CreateResponse{}, err
	}
	target, err := ir.Target(req.GPU)
	if err != nil {
		return api.CreateResponse{}, err
	}
	if req.Device != "cpu" && req.Device != "cuda" {
		return api.CreateResponse{}, fmt.Errorf("--device must be cpu or cuda, got %q", req.Device)
	}
	ws, err := runner.OpenWorkspace(workspace)
	if err != nil {
		return api.CreateResponse{}, err
	}
	corpus, _, err := flywheel.ReadCorpus(ws.CorpusPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return api.CreateResponse{}, fmt.Errorf("corpus: %w", err)
	}
	s := campaign.DefaultSettings()
	s.Overnight, s.RestartAfter, s.Epsilon, s.Budget = req.Overnight, *req.RestartAfter, *req.Epsilon, *req.Budget
	if req.Batch != nil {
		s.Batch = *req.Batch
	}
	if req.TrialTimeoutS != nil {
		s.TrialTimeoutS = *req.TrialTimeoutS
	}
	s.MoveOn = req.MoveOn.Over(s.MoveOn)
	host, _ := os.Hostname()
	l, created, err := ws.Create(campaign.Start{
		Time: time.Now().UTC(), Model: req.Model, Label: cfg.Name, GPU: target.Name, Device: req.Device, Name: req.Name,
		Weights: req.Weights, Seed: req.Seed, Shape: shapeOf(cfg), Corpus: corpus, Cold: req.Cold, Settings: s,
		Env: flywheel.Env{Target: target.Name, Device: req.Device, DeviceName: req.Device + "@" + host, AMKVersion: Version},
	})
	if err != nil {
		return api.CreateResponse{}, err
	}
	defer l.Close()
	return api.CreateResponse{ID: l.ID(), Created: created, Campaign: l.Campaign().StatusReport(time.Now().UTC())}, nil
}

// lifecycleVerb is pause, resume, stop or reopen.
func lifecycleVerb(op string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		usage := op + " [CAMPAIGN | MODEL --gpu G | --campaign ID] [--note TEXT] [--workspace DIR | --server URL] [--json]"
		if op == campaign.OpReopen {
			usage = op + " [CAMPAIGN | MODEL --gpu G | --campaign ID] [--iters N] [--minutes M] [--max-reverts N] [--note TEXT] [--workspace DIR | --server URL] [--json]"
		}
		fs := newFlagSet(op, usage, stderr)
		cf := addCampaignFlags(fs)
		note := fs.String("note", "", "free text kept in the campaign's log")
		var iters, maxReverts *int
		var minutes *float64
		if op == campaign.OpReopen {
			iters = fs.Int("iters", 0, "new budget of experiments (0 = unbounded)")
			minutes = fs.Float64("minutes", 0, "new budget of minutes (0 = unbounded)")
			maxReverts = fs.Int("max-reverts", 0, "new consecutive-reverts threshold (0 disables)")
		}
		pos, err := parseArgs(fs, args)
		if err != nil {
			return flagExit(err)
		}
		req := api.CommandRequest{Note: *note}
		if op == campaign.OpReopen {
			if flagSet(fs, "iters") || flagSet(fs, "minutes") {
				if *iters < 0 || *minutes < 0 {
					fmt.Fprintln(stderr, "amkctl reopen: --iters and --minutes must be >= 0")
					return 2
				}
				req.Budget = &campaign.Budget{Iterations: *iters, Minutes: *minutes}
			}
			if flagSet(fs, "max-reverts") {
				req.MoveOn = &api.MoveOn{ConsecutiveReverts: maxReverts}
			}
		}
		return sendCommand(op, cf, pos, req, stdout, stderr)
	}
}

func runBudget(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("budget", "budget [CAMPAIGN | MODEL --gpu G | --campaign ID] --iters N --minutes M [--workspace DIR | --server URL] [--json]", stderr)
	cf := addCampaignFlags(fs)
	iters := fs.Int("iters", 0, "the campaign's budget of experiments (0 = unbounded)")
	minutes := fs.Float64("minutes", 0, "the campaign's budget of (unpaused) minutes (0 = unbounded)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if !flagSet(fs, "iters") && !flagSet(fs, "minutes") {
		fmt.Fprintln(stderr, "amkctl budget: give --iters and/or --minutes (the budget is replaced: an omitted one becomes 0 = unbounded)")
		return 2
	}
	if *iters < 0 || *minutes < 0 {
		fmt.Fprintln(stderr, "amkctl budget: --iters and --minutes must be >= 0")
		return 2
	}
	return sendCommand(campaign.OpBudget, cf, pos, api.CommandRequest{Budget: &campaign.Budget{Iterations: *iters, Minutes: *minutes}}, stdout, stderr)
}

// sendCommand applies an operator command on the scheduler or, without
// one, to the local ledger (when no other process drives the campaign).
func sendCommand(op string, cf campaignFlags, pos []string, req api.CommandRequest, stdout, stderr io.Writer) int {
	c, err := cf.remote.client()
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", op, err)
		return 2
	}
	if c != nil {
		ctx, cancel := remoteContext()
		defer cancel()
		id, err := cf.remoteCampaign(ctx, c, pos)
		if err != nil {
			return remoteFail(stderr, op, err)
		}
		var resp api.CommandResponse
		if op == campaign.OpBudget {
			resp, err = c.SetBudget(ctx, id, *req.Budget)
		} else {
			resp, err = c.Command(ctx, id, op, req)
		}
		if err != nil {
			return remoteFail(stderr, op, err)
		}
		if *cf.jsonOut {
			printLog(stderr, id, resp.Log)
			return printJSON(stdout, resp.Campaign)
		}
		printLog(stdout, id, resp.Log)
		text, err := c.StatusText(ctx, id)
		if err != nil {
			return remoteFail(stderr, op, err)
		}
		fmt.Fprint(stdout, text)
		return 0
	}
	return localCommand(op, cf, pos, req, stdout, stderr)
}

func localCommand(op string, cf campaignFlags, pos []string, req api.CommandRequest, stdout, stderr io.Writer) int {
	ws, id, err := cf.resolve(pos)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", op, err)
		return 1
	}
	l, err := ws.Open(id)
	if errors.Is(err, runner.ErrLocked) {
		fmt.Fprintf(stderr, "amkctl %s: %v\n  another process drives it: send the command to its scheduler (--server URL), or stop amkctl autoresearch first\n", op, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", op, err)
		return 1
	}
	defer l.Close()
	now := time.Now().UTC()
	ev := campaign.Command{Time: now, Op: op, Note: req.Note, Budget: req.Budget}
	if req.MoveOn != nil {
		mo := req.MoveOn.Over(l.Campaign().State().Settings.MoveOn)
		ev.MoveOn = &mo
	}
	dec, err := l.Apply(ev)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: refused: %v\n", op, err)
		return 1
	}
	if *cf.jsonOut {
		printLog(stderr, id, dec.Log)
		return printJSON(stdout, l.Campaign().StatusReport(now))
	}
	printLog(stdout, id, dec.Log)
	fmt.Fprint(stdout, l.Campaign().StatusText(now))
	return 0
}

func printLog(w io.Writer, id string, lines []string) {
	for _, ln := range lines {
		fmt.Fprintf(w, "%s: %s\n", id, strings.TrimSpace(ln))
	}
}
