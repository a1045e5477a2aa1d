package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
)

func init() { addVerb(groupCampaign, newTrialCmd) }

// newTrialCmd is "trial": one trial of a campaign.
func newTrialCmd() *cobra.Command {
	cmd, cf := campaignVerb("trial [CAMPAIGN | MODEL --gpu G | --campaign ID] N [--workspace DIR | --server URL] [--json]",
		"show one trial: its spec while in flight; its verdict, worker and stage times once finished")
	cmd.Long = `trial shows trial N of a campaign (the only campaign there is, unless one is
named). In flight: the spec it was issued with (model, GPU, device, config) and
its age. Finished: the experiment it became (number, tag, source), the verdict
(schedule, config, correctness, latency and its kind, or the rejection) or the
failure, the worker that evaluated it and the seconds of each pipeline stage.`
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if len(pos) == 0 {
			fmt.Fprintln(stderr, "amkctl trial: the trial number N is required (amkctl status lists the trials in flight)")
			return exitBadInput
		}
		n, err := strconv.Atoi(pos[len(pos)-1])
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "amkctl trial: %q is not a trial number (0 or more)\n", pos[len(pos)-1])
			return exitBadInput
		}
		return cf.onCampaign("trial", pos[:len(pos)-1], stderr, func(ctx context.Context, cs control.Service, id string) error {
			rep, err := cs.Trial(ctx, id, n)
			if err != nil {
				return err
			}
			if *cf.jsonOut {
				return printJSON(stdout, rep)
			}
			fmt.Fprint(stdout, rep.Text())
			return nil
		})
	})
	return cmd
}
