package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
)

func init() { addVerb(groupCampaign, newAutoresearchCmd) }

func newAutoresearchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "autoresearch MODEL --gpu G [--iters N] [--minutes M] [--reopen] [--device cpu|emu|cuda] [--prompt-len N] [--gen-len N] [--batch B | --workload F] [--speedup-target X] [--workers K] [--cold] [--seed S] [--overnight] [--restart-after N] [--workspace DIR]",
		Short:             "run an unattended keep/revert campaign on this machine (resumable)",
		ValidArgsFunction: completeModels,
	}
	iters := cmd.Flags().Int("iters", 0, "experiments this invocation adds (an addition, not the campaign's total); 20 when neither --iters nor --minutes is given")
	return campaignRunCmd(cmd, "autoresearch", iters)
}

// campaignRunCmd adds the flags and the body shared by autoresearch and
// loop; iters is the verb's trial-count flag.
func campaignRunCmd(cmd *cobra.Command, verb string, iters *int) *cobra.Command {
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "")
	minutes := fs.Float64("minutes", 0, "wall-clock minutes of this invocation (an addition, not the campaign's total)")
	device := addDeviceFlag(cmd, "")
	workers := fs.Int("workers", 0, "trials evaluated at once; 0: min(4, CPUs) on cpu, 1 on emu and cuda")
	cold := fs.Bool("cold", false, "ignore the flywheel prior (no warm start, no ranking)")
	seed := fs.Uint64("seed", 0, "random seed of the campaign's proposer")
	overnight := fs.Bool("overnight", false, "never stop on a plateau; basin-hop after --restart-after non-improvements")
	restartAfter := fs.Int("restart-after", 6, "non-improvements before an overnight basin hop")
	epsilon := fs.Float64("epsilon", 0.30, "probability an exploit step skips the prior's ranking")
	workspace := fs.String("workspace", "workspace", "workspace directory (campaign ledgers, results.tsv, reports, corpus)")
	name := fs.String("name", "", "optional campaign name, to run several campaigns on one model/gpu/device")
	weights := fs.String("weights", "", "optional .safetensors file with real weights"+checkpointDefault)
	importCorpus := fs.String("import-corpus", "", "import a reference corpus.jsonl into the workspace's flywheel first")
	reopen := fs.Bool("reopen", false, "when the campaign is done (a plateau, or stopped), reopen it first, so that this invocation adds experiments to it")
	wf := addCampaignWorkloadFlags(cmd)
	quantize := addQuantizeFlag(cmd)
	var ref runner.ReferencePaths
	fs.StringVar(&ref.Corpus, "corpus", "", "the flywheel corpus file (the reference's flag; default WORKSPACE/flywheel/corpus.jsonl)")
	fs.StringVar(&ref.Results, "results", "", "the reference's results.tsv path: its directory is the workspace (rows go to campaigns/<id>/results.tsv)")
	fs.StringVar(&ref.State, "state", "", "the reference's state file: its directory is the workspace (state goes to campaigns/<id>/ledger.json)")
	jsonOut := addJSONFlags(cmd, "print the final summary as JSON")
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		fail := func(code int, format string, a ...any) int {
			fmt.Fprintf(stderr, "amkctl "+verb+": "+format+"\n", a...)
			return code
		}
		if len(pos0) != 1 {
			return fail(exitBadInput, "exactly one MODEL (a preset name or a config.json path) is required")
		}
		if *iters < 0 || !(*minutes >= 0) || math.IsInf(*minutes, 0) || *restartAfter < 1 || *epsilon < 0 || *epsilon > 1 {
			return fail(exitBadInput, "--iters/--budget must be >= 0, --minutes a finite number >= 0, --restart-after >= 1, --epsilon in [0, 1]")
		}
		if *iters == 0 && *minutes == 0 {
			*iters = control.DefaultIterations
		}
		var err error
		if pos0[0], err = quantizedModel(pos0[0], *quantize); err != nil {
			return fail(exitBadInput, "%v", err)
		}
		if _, err := model.Load(pos0[0]); err != nil {
			return fail(exitBadInput, "%v", err)
		}
		target, err := ir.Target(*gpu)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		launcher, dev, err := launcherFor(*device, target.Name, stderr)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		defer closeLauncher(launcher)
		wsDir, corpusFile, notes, err := ref.Workspace(*workspace, cmd.Flags().Changed("workspace"))
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		for _, n := range notes {
			fmt.Fprintf(stderr, "amkctl %s: %s\n", verb, n)
		}
		ws, err := runner.OpenWorkspace(wsDir)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		ws.Corpus = corpusFile
		if *importCorpus != "" {
			n, skipped, err := flywheel.ImportReferenceFile(ws.CorpusPath(), *importCorpus)
			if skipped > 0 {
				fmt.Fprintf(stderr, "import: skipped %d lines that were not corpus records\n", skipped)
			}
			if err != nil {
				return fail(exitBadInput, "import: %v", err)
			}
			fmt.Fprintf(stderr, "imported %d corpus records from %s\n", n, *importCorpus)
		}
		req := control.CreateRequest{Model: pos0[0], GPU: target.Name, Device: dev, Name: *name, Weights: *weights, Seed: *seed,
			Cold: *cold, Overnight: *overnight, RestartAfter: restartAfter, Epsilon: epsilon, Workers: *workers}
		if err := wf.apply(&req); err != nil {
			return fail(exitBadInput, "%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		local := &control.Local{Workspace: ws, Env: flywheel.Env{AMKVersion: version.String()}}
		run, err := local.StartRun(req, control.RunOptions{Launcher: launcher,
			Log: warnLog(stderr), OnWedge: func() {
				fmt.Fprintf(stderr, "amkctl %s: the GPU is wedged (a trial ignored its cancellation); stopping the run\n", verb)
				stop()
			}})
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		defer run.Close()
		if run.CorpusSkipped > 0 {
			fmt.Fprintf(stderr, "corpus: skipped %d malformed lines\n", run.CorpusSkipped)
		}
		ledger := run.Ledger
		action := "resuming"
		if run.Created {
			action = "starting"
		}
		st := ledger.Campaign().State()
		fmt.Fprintf(stderr, "%s campaign %s (%d experiments so far) in %s; %d worker(s), device %s\n",
			action, ledger.ID(), st.ExperimentsRun, ledger.Dir(), run.Workers, dev)
		summary := func(sum runner.RunSummary) int {
			wake := ledger.Campaign().WakeUp(time.Now().UTC())
			fmt.Fprintf(stderr, "report: %s/report.md (json, svg beside it); results: %s\n", ledger.Dir(), ledger.ResultsPath())
			if *jsonOut {
				// amk's fields, and those of the reference's summary
				// (best_pct_roofline, iters_run, n_*, state_path are its
				// names for what amk calls otherwise).
				st := ledger.Campaign().State()
				summary := map[string]any{"campaign": ledger.ID(), "run": sum, "best_us": wake.BestUS, "best_kind": wake.BestKind,
					"best_pct_of_roofline": wake.BestPctOfRoofline, "baseline_us": wake.BaselineUS, "speedup_vs_baseline": wake.SpeedupVsBaseline,
					"best_config": wake.BestConfig, "report": ledger.Dir() + "/report.md",
					"model": st.Model, "gpu": st.GPU, "device": st.Device, "cold": wake.Cold,
					"iters_to_best": wake.ItersToBest, "warm_seeds": wake.WarmSeeds, "ranker_trained": wake.RankerTrained, "ranker": wake.Ranker,
					"best_pct_roofline": wake.BestPctOfRoofline, "iters_run": sum.Recorded, "n_kept": wake.Kept, "n_correct": wake.Correct,
					"n_rejected": wake.RejectedOrFailed, "n_crash": wake.CrashOrTimeout, "state_path": ledger.Dir() + "/ledger.json"}
				if err := printJSON(stdout, summary); err != nil {
					return exitInternal
				}
			} else {
				fmt.Fprint(stdout, ledger.Campaign().StatusText(time.Now().UTC()))
			}
			if wake.BestUS == nil {
				return exitRejected
			}
			return exitOK
		}
		if run.Done() && *reopen {
			rep := ledger.Campaign().StatusReport(time.Now().UTC())
			if _, err := run.Reopen(ctx, verb+" --reopen"); err != nil {
				return fail(exitRejected, "campaign %s is done (%s) and was not reopened: %v", ledger.ID(), orDash(rep.MoveOnReason), err)
			}
			fmt.Fprintf(stderr, "campaign %s was done (%s) after %d experiments: reopened (--reopen), to add up to %s more\n",
				ledger.ID(), orDash(rep.MoveOnReason), st.ExperimentsRun, runLength(*iters, *minutes))
		}
		if run.Done() {
			// Nothing to run, and nothing rewritten: say how to go on, in
			// commands that run as printed.
			rep := ledger.Campaign().StatusReport(time.Now().UTC())
			fmt.Fprintf(stderr, "campaign %s is done (%s) after %d experiments: nothing to run.\n"+
				"  to add experiments to it, run this again with --reopen, or: %s reopen %s --workspace %s, then run this again;\n"+
				"  or start another campaign on the same model with --name NAME\n",
				ledger.ID(), orDash(rep.MoveOnReason), st.ExperimentsRun, selfCommand(), ledger.ID(), shellQuote(*workspace))
			return summary(runner.RunSummary{Status: rep.Status, Reason: rep.MoveOnReason, StopReason: "campaign already done"})
		}
		cfg, _ := model.Load(pos0[0])
		fmt.Fprintf(stderr, "preparing: %s weights (%.1f MB) and the eager reference load with the first trial; its result follows\n",
			cfg.Name, float64(cfg.WeightBytes())/1e6)

		progress := runner.NewProgress(stderr, *iters)
		run.Driver.Progress = progress
		sum, err := run.Drive(ctx, runner.Limits{Iterations: *iters, Minutes: *minutes})
		progress.Finish()
		if err != nil {
			return fail(exitRejected, "%v", err)
		}
		fmt.Fprintf(stderr, "stopped: %s", sum.StopReason)
		if sum.StopReason != "campaign "+string(sum.Status) {
			fmt.Fprintf(stderr, "; campaign %s", sum.Status)
		}
		if sum.Reason != "" {
			fmt.Fprintf(stderr, " (%s)", sum.Reason)
		}
		fmt.Fprintln(stderr)
		return summary(sum)
	})
	return cmd
}

// runLength says how much one invocation runs: "20 experiments", "5
// minutes" or both.
func runLength(iters int, minutes float64) string {
	switch {
	case iters > 0 && minutes > 0:
		return fmt.Sprintf("%d experiments or %g minutes", iters, minutes)
	case minutes > 0:
		return fmt.Sprintf("%g minutes", minutes)
	}
	return fmt.Sprintf("%d experiments", iters)
}
