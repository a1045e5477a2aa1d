package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
)

func init() { addVerb(groupCampaign, newExportAMKCmd) }

func newExportAMKCmd() *cobra.Command {
	cmd, cf := campaignVerb("export-amk [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR] [--out DIR]",
		"write a campaign under AMK's file names (results.tsv, amk_orchestration_state.json, amk_overnight_report.json and .md) for AMK's tools")
	cmd.Long = `export-amk writes one campaign of the workspace under the file names of
AutoMegaKernel (AMK), the Python reference, so that AMK's tools pointed at the
directory find it: results.tsv (the campaign's rows, already in AMK's columns),
amk_orchestration_state.json (its status as AMK's orchestrator keeps it) and
amk_overnight_report.json and .md (the wake-up report). The default directory
is the workspace itself, where AMK keeps them:

  amkctl export-amk small --gpu h200
  python amk_orchestrate.py --state workspace/amk_orchestration_state.json status

AMK keeps one campaign per workspace and amk many, so amk writes these files
on request for the campaign you name, as a snapshot (export again to refresh);
it never reads them back. AMK's own files import with amkctl corpus import.`
	out := cmd.Flags().String("out", "", "directory to write into (default: the workspace)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		return cf.onCampaign("export-amk", pos, stderr, func(ctx context.Context, cs control.Service, id string) error {
			dir := *out
			if dir == "" {
				dir = *cf.workspace
			}
			files, err := control.ExportAMKFiles(ctx, cs, id, dir)
			for _, f := range files {
				fmt.Fprintln(stdout, f)
			}
			return err
		})
	})
	return cmd
}
