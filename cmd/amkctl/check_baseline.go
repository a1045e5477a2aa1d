package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/baseline"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/model"
)

func init() { addVerb(groupFormats, newCheckBaselineCmd) }

func newCheckBaselineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check-baseline MODEL --file baseline.json [--weights F] [--json]",
		Short: "check an outside implementation's decode (an amk-baseline-v1 file) against amk's eager oracle: exit 0 iff the same model",
		Long: `check-baseline replays the tokens an outside implementation fed at every position
(scripts/gpu/torch_baseline.py writes the file) through amk's eager oracle with the
same weights (the seeded ones export-weights wrote, the model's own checkpoint, or --weights) and compares the
logits position by position at the model dtype's tolerance. Exit 0 when every
position passes, 1 when one does not, 2 when the file does not fit the model.`,
		ValidArgsFunction: completeModels,
	}
	fs := cmd.Flags()
	file := fs.String("file", "", "the amk-baseline-v1 file (required)")
	weights := fs.String("weights", "", "a .safetensors file with the weights"+checkpointDefault)
	jsonOut := addJSONFlags(cmd, "print the report as JSON")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		return checkBaseline(args, *file, *weights, *jsonOut, stdout, stderr)
	})
	return cmd
}

func checkBaseline(args []string, file, weights string, jsonOut bool, stdout, stderr io.Writer) int {
	if len(args) != 1 || file == "" {
		fmt.Fprintln(stderr, "amkctl check-baseline: one MODEL and --file are required")
		return exitBadInput
	}
	f, _, err := inputfile.Open(file) // regular files only, never blocks
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return exitBadInput
	}
	bf, err := baseline.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return exitBadInput
	}
	cfg, err := model.Load(args[0])
	if err == nil {
		err = bf.Fits(cfg) // before loading any weights
	}
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return exitBadInput
	}
	m, err := baseline.LoadModel(args[0], weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return exitBadInput
	}
	if bf.Model != "" && bf.Model != args[0] {
		fmt.Fprintf(stderr, "amkctl check-baseline: note: the file names model %q, checking against %q\n", bf.Model, args[0])
	}
	rep, err := baseline.Check(bf, m.Config, m.Weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return exitBadInput
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "amkctl check-baseline:", err)
			return exitInternal
		}
	} else {
		fmt.Fprintf(stdout, "%s vs amk eager (%s, %s weights)\n", rep.Implementation, m.Config.Name, m.Source)
		fmt.Fprintln(stdout, "POS  INPUT  THEIR_ARGMAX  OUR_ARGMAX  MAX_ABS_ERR  KL          PASS")
		for _, s := range rep.Steps {
			fmt.Fprintf(stdout, "%-4d %-6d %-13d %-11d %-12.4g %-11.3g %v\n", s.Pos, s.Input, s.TheirArgmax, s.OurArgmax, s.MaxAbsErr, s.KL, s.Pass)
		}
		verdict := "PASS: the same model"
		if !rep.Pass {
			verdict = "FAIL: " + rep.Reason
		}
		fmt.Fprintf(stdout, "%s (argmax agrees at %d of %d positions)\n", verdict, rep.ArgmaxAgree, len(rep.Steps))
	}
	if !rep.Pass {
		return exitRejected
	}
	return exitOK
}
