package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/baseline"
	"github.com/amk-dev/amk/model"
)

func init() { addVerb(groupFormats, newExportWeightsCmd) }

func newExportWeightsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export-weights MODEL --out DIR [--weights F] [--config-only]",
		Short: "write a model and its weights (amk's seeded init by default) as a HuggingFace Llama directory",
		Long: `export-weights writes DIR/config.json (a LlamaForCausalLM config of the model's
shape) and DIR/model.safetensors (its weights under HuggingFace key names, in the
model dtype): by default the seeded weights every amk evaluator uses, so an outside
implementation loading DIR runs the same model (scripts/gpu/torch_baseline.py;
amkctl check-baseline verifies it). amk reads the directory back as
MODEL=DIR/config.json --weights DIR/model.safetensors.`,
		ValidArgsFunction: completeModels,
	}
	fs := cmd.Flags()
	out := fs.String("out", "", "directory to write config.json and model.safetensors into (required)")
	weights := fs.String("weights", "", "a .safetensors file to re-export"+checkpointDefault)
	configOnly := fs.Bool("config-only", false, "write config.json only")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		return exportWeights(args, *out, *weights, *configOnly, stdout, stderr)
	})
	return cmd
}

func exportWeights(args []string, out, weights string, configOnly bool, stdout, stderr io.Writer) int {
	if len(args) != 1 || out == "" {
		fmt.Fprintln(stderr, "amkctl export-weights: one MODEL and --out DIR are required")
		return exitBadInput
	}
	if configOnly {
		cfg, err := model.Load(args[0])
		if err != nil {
			fmt.Fprintln(stderr, "amkctl export-weights:", err)
			return exitBadInput
		}
		data, err := model.HFConfigJSON(cfg)
		if err == nil {
			if err = os.MkdirAll(out, 0o755); err == nil {
				err = writeFileAtomic(filepath.Join(out, baseline.ConfigFile), data)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "amkctl export-weights:", err)
			return exitRejected
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(out, baseline.ConfigFile))
		return exitOK
	}
	m, err := baseline.LoadModel(args[0], weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl export-weights:", err)
		return exitBadInput
	}
	if err := baseline.ExportHF(out, m.Config, m.Weights); err != nil {
		fmt.Fprintln(stderr, "amkctl export-weights:", err)
		return exitRejected
	}
	fmt.Fprintf(stdout, "wrote %s and %s: %s, %s weights (%s), %.1f MB\n", filepath.Join(out, baseline.ConfigFile),
		baseline.WeightsFile, m.Config.Name, m.Config.DType, m.Source, float64(m.Config.WeightBytes())/1e6)
	return exitOK
}
