package main

import (
	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
)

func init() { addVerb(groupCampaign, newLoopCmd) }

// newLoopCmd is docs/spec/loop.md's "loop MODEL --gpu G --budget N": the keep/revert
// loop of N trials, the same campaign engine as autoresearch.
func newLoopCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loop MODEL --gpu G [--budget N] [--device cpu|cuda] [--workspace DIR]",
		Short: "the keep/revert loop: N trials of an autoresearch campaign (resumable)",
		Long: `loop runs the keep/revert autoresearch loop for --budget trials (default 8,
the reference's) and prints the final status; it is autoresearch with
--iters spelled --budget, and takes the same flags.`,
		ValidArgsFunction: completeModels,
	}
	budget := cmd.Flags().Int("budget", control.DefaultLoopBudget, "trials this invocation adds (an addition, not the campaign's total)")
	return campaignRunCmd(cmd, "loop", budget)
}
