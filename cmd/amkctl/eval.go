package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupCampaign, newEvalCmd) }

func newEvalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval MODEL --gpu G [--schedule cfg.json|-] [--device cpu|emu|cuda] [--token-id T] [--pos P | --prompt-len N --gen-len N | --workload F] [--batch B] [--weights F] [--quantize w8a16|w4a16] [--quality N]",
		Short: "evaluate one schedule config: one JSON verdict on stdout (exit 0 iff valid and correct)",
		Long: `eval lowers MODEL with one schedule config, validates the program, runs one
decode step, checks it against the eager oracle and prints the verdict as
JSON on stdout (nothing else goes to stdout). With --prompt-len, --gen-len
or --workload it evaluates a decode workload instead: the start, middle and
end of each generation, each checked from the same seeded KV cache, and
the verdict's latency is the workload's mean time per decode step (its
"positions" keep each one's figures). --schedule takes a config object, or
propose's whole answer as it is (its schedule_config is evaluated). A
config key amk does not know is an error (exit 2, with the keys it probably
meant) unless --ignore-unknown-keys, which names each ignored key in the
verdict's notes and on stderr. A value off the search grid is evaluated as
written, with a note. Exit 0 iff the program is valid and correct, 1 if it
is rejected or incorrect, 2 for an unknown model or GPU or a config file
that is not a JSON object.`,
		ValidArgsFunction: completeModels,
	}
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "")
	cfgPath := addScheduleFlag(cmd, "schedule config JSON file (or propose's answer), - for stdin; empty: the canonical default config")
	ignoreUnknown := addIgnoreUnknownKeysFlag(cmd)
	device := addDeviceFlag(cmd, "")
	token := fs.Int("token-id", trial.DefaultToken, "token id fed to the checked decode step (--token is the old name)")
	flagAliases(fs, map[string]string{"token": "token-id"})
	pos := fs.Int("pos", 0, "decode position of the checked step")
	weights := fs.String("weights", "", "optional .safetensors file with real weights (HF state-dict keys)"+checkpointDefault)
	batch := fs.Int("batch", 1, "decode batch B (B > 1 lowers GEMM tiles; every sequence is checked)")
	wf := addWorkloadFlags(cmd, "; without a workload flag eval checks one step at --pos")
	quantize := addQuantizeFlag(cmd)
	quality := fs.Int("quality", 0, "with a quantised model: also compare its logits with the float model's over N greedy tokens "+
		"(verdict model_quality; a figure of the weights, not of the schedule)")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 1 {
			fmt.Fprintln(stderr, "amkctl eval: exactly one MODEL (a preset name or a config.json path) is required")
			return exitBadInput
		}
		name, err := quantizedModel(args[0], *quantize)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		// A name amk does not know is bad input, answered in one line, not
		// a rejected verdict.
		modelCfg, err := model.Load(name)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		// A token the model cannot embed is bad input, not a failed check.
		if *token < 0 || *token >= modelCfg.Vocab {
			fmt.Fprintf(stderr, "amkctl eval: --token-id %d is outside the vocabulary of %s [0, %d)\n", *token, args[0], modelCfg.Vocab)
			return exitBadInput
		}
		if _, err := ir.Target(*gpu); err != nil {
			fmt.Fprintln(stderr, "amkctl eval: --gpu:", err)
			return exitBadInput
		}
		var point []byte
		if *cfgPath != "" {
			cfg, err := readConfig(*cfgPath, *ignoreUnknown, "eval", stderr)
			if err != nil {
				fmt.Fprintln(stderr, "amkctl eval: --schedule:", err)
				return exitBadInput
			}
			point = cfg.JSON()
		} else {
			point = []byte(schedulePointJSON(schedule.Default()))
		}
		launcher, dev, err := launcherFor(*device, *gpu, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		defer closeLauncher(launcher)
		if *quality < 0 {
			fmt.Fprintln(stderr, "amkctl eval: --quality must be a token count >= 0")
			return exitBadInput
		}
		spec := trial.Spec{Model: name, Weights: *weights, GPU: *gpu, Device: dev, Point: point, Token: *token, Pos: *pos, Batch: *batch}
		if spec.Workload, err = wf.resolve(*batch); err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return exitBadInput
		}
		if spec.Workload != nil {
			if cmd.Flags().Changed("pos") {
				fmt.Fprintln(stderr, "amkctl eval: --pos and a workload: the workload's positions are evaluated; give one or the other")
				return exitBadInput
			}
			spec.Pos, spec.Batch = 0, 0
		}
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
				if strings.Contains(n, schedule.OffGridMarker) {
					fmt.Fprintln(stderr, "amkctl eval: note:", n)
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
