package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/schedule"
)

func init() {
	addVerb(groupCampaign, newStartCmd)
	addVerb(groupCampaign, lifecycleVerb(campaign.OpPause, "pause a campaign (no new trials; trials in flight are still recorded)"))
	addVerb(groupCampaign, lifecycleVerb(campaign.OpResume, "resume a paused campaign"))
	addVerb(groupCampaign, lifecycleVerb(campaign.OpStop, "stop a campaign (it becomes done)"))
	addVerb(groupCampaign, lifecycleVerb(campaign.OpReopen, "reopen a done campaign, optionally with a new budget"))
	addVerb(groupCampaign, newBudgetCmd)
	addVerb(groupCampaign, newNoteCmd)
}

// startFlags are the settings of a new campaign.
type startFlags struct {
	iters, restartAfter, workers, maxReverts *int
	minutes, epsilon, trialTimeout           *float64
	seed                                     *uint64
	cold, overnight                          *bool
	weights                                  *string
}

func newStartCmd() *cobra.Command {
	cmd, cf := campaignVerb("start MODEL --gpu G [--iters N] [--minutes M] [--device cpu|cuda] [--prompt-len N] [--gen-len N] [--batch B | --workload F] [--speedup-target X] [--name N] [--workers K] [--cold] [--seed S] [--overnight] [--workspace DIR | --server URL] [--json]",
		"create a campaign (on a scheduler it starts running; prints its id)")
	cmd.ValidArgsFunction = completeModels
	fs := cmd.Flags()
	sf := startFlags{
		iters:        fs.Int("iters", 0, "the campaign's total budget of experiments; 0: unbounded"),
		minutes:      fs.Float64("minutes", 0, "the campaign's total budget of (unpaused) minutes; 0: unbounded"),
		workers:      fs.Int("workers", 0, "trials kept in flight (scheduler only); 0: the scheduler's setting"),
		seed:         fs.Uint64("seed", 0, "random seed of the campaign's proposer"),
		cold:         fs.Bool("cold", false, "ignore the flywheel prior (no warm start, no ranking)"),
		overnight:    fs.Bool("overnight", false, "never stop on a plateau; basin-hop after --restart-after non-improvements"),
		restartAfter: fs.Int("restart-after", 6, "non-improvements before an overnight basin hop"),
		epsilon:      fs.Float64("epsilon", 0.30, "probability an exploit step skips the prior's ranking"),
		trialTimeout: fs.Float64("trial-timeout", 0, "wall-clock limit of one trial in seconds; 0: the worker's setting"),
		maxReverts:   fs.Int("max-reverts", -1, "base of the plateau threshold: the campaign moves on after this many consecutive reverts × 1 to 2 (cheaper trials: more) × 1 to 2 (more untried points: more), so 5 can mean up to 20; status shows the threshold in use; negative: the default 8, 0: never"),
		weights:      fs.String("weights", "", "optional .safetensors file with real weights (a path on the evaluating machines)"+checkpointDefault),
	}
	wf := addCampaignWorkloadFlags(cmd)
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if len(pos) != 1 || *cf.gpu == "" || *cf.id != "" {
			fmt.Fprintln(stderr, "amkctl start: exactly one MODEL and --gpu G are required")
			return exitBadInput
		}
		req := control.CreateRequest{Model: pos[0], GPU: *cf.gpu, Device: schedule.Device(*cf.device), Name: *cf.name, Weights: *sf.weights,
			Seed: *sf.seed, Cold: *sf.cold, Overnight: *sf.overnight, RestartAfter: sf.restartAfter, Epsilon: sf.epsilon,
			Budget: &campaign.Budget{Iterations: *sf.iters, Minutes: *sf.minutes}, Workers: *sf.workers}
		if *sf.trialTimeout > 0 {
			req.TrialTimeoutS = sf.trialTimeout
		}
		if *sf.maxReverts >= 0 {
			req.MoveOn = &control.MoveOn{ConsecutiveReverts: sf.maxReverts}
		}
		if err := wf.apply(&req); err != nil {
			fmt.Fprintln(stderr, "amkctl start:", err)
			return exitBadInput
		}
		if *sf.iters < 0 || *sf.minutes < 0 || *sf.workers < 0 || *sf.restartAfter < 1 || *sf.epsilon < 0 || *sf.epsilon > 1 {
			fmt.Fprintln(stderr, "amkctl start: --iters, --minutes and --workers must be >= 0, --restart-after >= 1, --epsilon in [0, 1]")
			return exitBadInput
		}
		cs, code := cf.open("start", true, stderr)
		if cs == nil {
			return code
		}
		remote := isRemote(cs)
		if !remote && *sf.workers != 0 {
			fmt.Fprintln(stderr, "amkctl start: --workers applies to a scheduler (--server); locally, pass --workers to amkctl autoresearch")
			return exitBadInput
		}
		ctx, cancel := remoteContext()
		defer cancel()
		resp, err := cs.Create(ctx, req)
		if err != nil {
			return campaignFail(stderr, "start", err)
		}
		if *cf.jsonOut {
			if err := printJSON(stdout, resp); err != nil {
				return exitInternal
			}
			return exitOK
		}
		if resp.Created {
			where := cs.Where() + " (run it with amkctl autoresearch, or have a scheduler on this workspace drive it: amkctl start with --server URL)"
			if remote {
				where = fmt.Sprintf("%s with %d trial(s) in flight", cs.Where(), resp.Workers)
			}
			fmt.Fprintf(stderr, "created campaign %s %s\n", resp.ID, where)
		} else {
			fmt.Fprintf(stderr, "campaign %s already exists (%s, %d experiments); left as it is (change its budget with amkctl budget, or reopen it)\n",
				resp.ID, resp.Campaign.Status, resp.Campaign.ExperimentsRun)
		}
		fmt.Fprintln(stdout, resp.ID)
		return exitOK
	})
	return cmd
}

// lifecycleVerb is the constructor of pause, resume, stop or reopen.
func lifecycleVerb(op, short string) func() *cobra.Command {
	return func() *cobra.Command {
		use := op + " [CAMPAIGN | MODEL --gpu G | --campaign ID] [--note TEXT] [--workspace DIR | --server URL] [--json]"
		if op == campaign.OpReopen {
			use = op + " [CAMPAIGN | MODEL --gpu G | --campaign ID] [--iters N] [--minutes M] [--max-reverts N] [--note TEXT] [--workspace DIR | --server URL] [--json]"
		}
		cmd, cf := campaignVerb(use, short)
		fs := cmd.Flags()
		note := fs.String("note", "", "free text kept in the campaign's log")
		var iters, maxReverts *int
		var minutes *float64
		if op == campaign.OpReopen {
			iters = fs.Int("iters", 0, "the campaign's new total budget of experiments, counting those already run (a total: 33 run and 20 more is --iters 53); 0: unbounded")
			minutes = fs.Float64("minutes", 0, "the campaign's new total budget of (unpaused) minutes, counting those already spent; 0: unbounded")
			maxReverts = fs.Int("max-reverts", 0, "new base of the plateau threshold (scaled × 1 to 4 with trial cost and untried space, as on start; status shows the threshold in use); 0: never move on")
		}
		cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
			req := control.CommandRequest{Note: *note}
			if op == campaign.OpReopen {
				if fs.Changed("iters") || fs.Changed("minutes") {
					if *iters < 0 || *minutes < 0 {
						fmt.Fprintln(stderr, "amkctl reopen: --iters and --minutes must be >= 0")
						return exitBadInput
					}
					req.Budget = &campaign.Budget{Iterations: *iters, Minutes: *minutes}
				}
				if fs.Changed("max-reverts") {
					req.MoveOn = &control.MoveOn{ConsecutiveReverts: maxReverts}
				}
			}
			return sendCommand(op, cf, pos, req, stdout, stderr)
		})
		return cmd
	}
}

func newBudgetCmd() *cobra.Command {
	cmd, cf := campaignVerb("budget [CAMPAIGN | MODEL --gpu G | --campaign ID] --iters N --minutes M [--workspace DIR | --server URL] [--json]",
		"replace a campaign's budget (experiments and/or minutes)")
	fs := cmd.Flags()
	iters := fs.Int("iters", 0, "the campaign's total budget of experiments, counting those already run (a total, not an addition); 0: unbounded")
	minutes := fs.Float64("minutes", 0, "the campaign's total budget of (unpaused) minutes, counting those already spent; 0: unbounded")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if !fs.Changed("iters") && !fs.Changed("minutes") {
			fmt.Fprintln(stderr, "amkctl budget: give --iters and/or --minutes (the budget is replaced: an omitted one becomes 0 = unbounded)")
			return exitBadInput
		}
		if *iters < 0 || *minutes < 0 {
			fmt.Fprintln(stderr, "amkctl budget: --iters and --minutes must be >= 0")
			return exitBadInput
		}
		return sendCommand(campaign.OpBudget, cf, pos, control.CommandRequest{Budget: &campaign.Budget{Iterations: *iters, Minutes: *minutes}}, stdout, stderr)
	})
	return cmd
}

func newNoteCmd() *cobra.Command {
	cmd, cf := campaignVerb("note [CAMPAIGN | MODEL --gpu G | --campaign ID] TEXT [--workspace DIR | --server URL] [--json]",
		"keep an operator's note in a campaign (its ledger, report.md and the web view show it)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if len(pos) == 0 {
			fmt.Fprintln(stderr, "amkctl note: the note's TEXT is required (the last argument)")
			return exitBadInput
		}
		last := len(pos) - 1
		return sendCommand(campaign.OpNote, cf, pos[:last], control.CommandRequest{Note: pos[last]}, stdout, stderr)
	})
	return cmd
}

// sendCommand applies an operator command on the scheduler or, without
// one, to the local ledger (when no other process drives the campaign).
func sendCommand(op string, cf campaignFlags, pos []string, req control.CommandRequest, stdout, stderr io.Writer) int {
	return cf.onCampaign(op, pos, stderr, func(ctx context.Context, cs control.Service, id string) error {
		resp, err := cs.Command(ctx, id, op, req)
		if err != nil {
			return err
		}
		if *cf.jsonOut {
			printLog(stderr, id, resp.Log)
			return printJSON(stdout, resp.Campaign)
		}
		printLog(stdout, id, resp.Log)
		text, err := cs.StatusText(ctx, id)
		fmt.Fprint(stdout, text)
		return err
	})
}

func printLog(w io.Writer, id string, lines []string) {
	for _, ln := range lines {
		fmt.Fprintf(w, "%s: %s\n", id, strings.TrimSpace(ln))
	}
}
