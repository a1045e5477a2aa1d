package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupCampaign, newEvalCmd) }

func newEvalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval MODEL --gpu G [--schedule cfg.json|-] [--device cpu|cuda] [--token-id T] [--pos P] [--weights F] [--quantize w8a16|w4a16] [--quality N]",
		Short: "evaluate one schedule config: one JSON verdict on stdout (exit 0 iff valid and correct)",
		Long: `eval lowers MODEL with one schedule config, validates the program, runs one
decode step, checks it against the eager oracle and prints the verdict as
JSON on stdout (nothing else goes to stdout). Unknown config keys are not an
error (seed 000's forward compatibility) but each is named in the verdict's
notes and on stderr. Exit 0 iff the program is valid and correct, 1
otherwise.`,
		ValidArgsFunction: completeModels,
	}
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "")
	cfgPath := addScheduleFlag(cmd, "schedule config JSON file, or - for stdin; empty: the canonical default config")
	device := addDeviceFlag(cmd, "")
	token := fs.Int("token-id", trial.DefaultToken, "token id fed to the checked decode step (--token is the old name)")
	flagAliases(fs, map[string]string{"token": "token-id"})
	pos := fs.Int("pos", 0, "decode position of the checked step")
	weights := fs.String("weights", "", "optional .safetensors file with real weights (HF state-dict keys)")
	batch := fs.Int("batch", 1, "decode batch B (B > 1 lowers GEMM tiles; every sequence is checked; --device cpu)")
	quantize := addQuantizeFlag(cmd)
	quality := fs.Int("quality", 0, "with a quantised model: also compare its logits with the float model's over N greedy tokens "+
		"(verdict model_quality; a figure of the weights, not of the schedule)")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 1 {
			fmt.Fprintln(stderr, "amkctl eval: exactly one MODEL (a preset name or a config.json path) is required")
			return exitBadInput
		}
		var point []byte
		if *cfgPath != "" {
			var err error
			if point, err = inputfile.Read(*cfgPath, 1<<20); err != nil {
				fmt.Fprintln(stderr, "amkctl eval:", err)
				return exitBadInput
			}
		} else {
			point = []byte(schedulePointJSON(schedule.Default()))
		}
		launcher, dev, err := launcherFor(*device, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		name, err := quantizedModel(args[0], *quantize)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		if *quality < 0 {
			fmt.Fprintln(stderr, "amkctl eval: --quality must be a token count >= 0")
			return exitBadInput
		}
		spec := trial.Spec{Model: name, Weights: *weights, GPU: *gpu, Device: dev, Point: point, Token: *token, Pos: *pos, Batch: *batch}
		models := trial.NewModelCache(0)
		out := evaluateOnce(context.Background(), dev, spec, trial.Options{Launcher: launcher, Models: models, Version: version.String()}, stderr)
		if *quality > 0 && out.Verdict != nil {
			q, err := trial.ModelQuality(context.Background(), models, name, *weights, trial.DefaultQualityPrompt, *quality)
			if err != nil {
				fmt.Fprintln(stderr, "amkctl eval: --quality:", err)
				return exitBadInput
			}
			out.Verdict.ModelQuality = q
		}
		if out.Verdict != nil {
			for _, n := range out.Verdict.Notes {
				if strings.HasPrefix(n, trial.IgnoredKeysPrefix) {
					fmt.Fprintln(stderr, "amkctl eval: warning:", n)
				}
			}
		}
		if out.Failure != nil {
			fmt.Fprintf(stderr, "amkctl eval: %s during %s: %s\n", out.Failure.Class, out.Failure.Phase, out.Failure.Message)
			return exitRejected
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out.Verdict); err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitInternal
		}
		if out.Verdict.Valid && out.Verdict.Correct != nil && *out.Verdict.Correct {
			return exitOK
		}
		return exitRejected
	})
	return cmd
}
