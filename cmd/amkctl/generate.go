package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupFormats, newGenerateCmd) }

// generateFlags are generate's settings.
type generateFlags struct {
	gpu, cfgPath, prompt, weights, device string
	maxTokens                             int
	verify, ignoreUnknown                 bool
}

func newGenerateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "generate MODEL --prompt-ids 1,2,3 --max-tokens N [--gpu G] [--schedule cfg.json] [--weights F] [--verify]",
		Short:             "greedy decode through the reference VM (one validated program reused across positions)",
		ValidArgsFunction: completeModels,
	}
	var g generateFlags
	fs := cmd.Flags()
	fs.StringVar(&g.gpu, "gpu", "h100", "GPU target record the schedule is lowered for")
	_ = cmd.RegisterFlagCompletionFunc("gpu", cobra.FixedCompletions(ir.TargetNames(), cobra.ShellCompDirectiveNoFileComp))
	cfgPath := addScheduleFlag(cmd, "schedule config JSON file; empty: the canonical default config")
	ignoreUnknown := addIgnoreUnknownKeysFlag(cmd)
	fs.StringVar(&g.prompt, "prompt-ids", "", "comma-separated prompt token ids (required)")
	fs.IntVar(&g.maxTokens, "max-tokens", 8, "number of tokens to generate")
	fs.StringVar(&g.weights, "weights", "", "optional .safetensors file (HF state-dict keys); empty: the checkpoint beside the model's config.json (model.safetensors or the shards of model.safetensors.index.json), else seeded weights")
	fs.BoolVar(&g.verify, "verify", false, "check every step's logits against the eager oracle and the tokens against eager greedy")
	device := addDeviceFlag(cmd, "cpu (the reference VM), emu (the megakernel on the CPU emulator) or cuda (the megakernel on GPU 0; a -tags cuda build)")
	quantize := addQuantizeFlag(cmd)
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		if len(pos0) == 1 {
			var err error
			if pos0[0], err = quantizedModel(pos0[0], *quantize); err != nil {
				fmt.Fprintln(stderr, "amkctl generate:", err)
				return exitBadInput
			}
		}
		g.cfgPath, g.device, g.ignoreUnknown = *cfgPath, *device, *ignoreUnknown
		return generate(pos0, g, stdout, stderr)
	})
	return cmd
}

func generate(pos0 []string, g generateFlags, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl generate: "+format+"\n", a...)
		return code
	}
	if len(pos0) != 1 {
		return fail(exitBadInput, "exactly one MODEL is required")
	}
	ids, err := splitIDs(g.prompt)
	if err != nil || len(ids) == 0 {
		return fail(exitBadInput, "--prompt-ids needs comma-separated token ids, at least one: %s", promptProblem(g.prompt, err))
	}
	device, err := schedule.ParseDevice(g.device)
	if err != nil {
		return fail(exitBadInput, "--device: %v", err)
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	shards, err := checkpointShards(pos0[0], g.weights)
	if err != nil {
		return fail(exitBadInput, "weights: %v", err)
	}
	if len(shards) > 0 { // a quantised checkpoint states its scheme
		if cfg, err = model.WithCheckpointQuantization(cfg, shards); err != nil {
			return fail(exitBadInput, "%v", err)
		}
	}
	target, err := ir.Target(g.gpu)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	point, err := loadPoint(g.cfgPath, g.ignoreUnknown, "generate", stderr)
	if err != nil {
		return fail(exitBadInput, "--schedule: %v", err)
	}
	d := trial.Decode{Config: cfg, Target: target, Point: point, Prompt: ids, Tokens: g.maxTokens, Verify: g.verify}
	if err := d.Check(); err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if len(shards) > 0 {
		fmt.Fprintf(stderr, "weights: %s\n", strings.Join(shards, ", "))
	}
	if device.RunsKernels() {
		return generateOnGPU(device, cfg, pos0[0], g.weights, target, point, ids, g.maxTokens, g.verify, stdout, stderr)
	}
	if len(shards) > 0 {
		d.Weights, err = model.LoadSafetensorsShards(shards, cfg)
	} else {
		d.Weights, err = model.InitWeights(cfg, trial.WeightSeed)
	}
	if err != nil {
		return fail(exitBadInput, "weights: %v", err)
	}
	res, err := trial.GreedyDecode(context.Background(), d)
	if err != nil {
		return fail(exitRejected, "%v", err)
	}
	printTokens(stdout, res.Tokens)
	if !g.verify {
		return exitOK
	}
	for _, m := range res.Mismatches {
		fmt.Fprintf(stderr, "position %d: MISMATCH vs eager (%s, max abs err %.3g)\n", m.Pos, m.Reason, m.MaxAbsErr)
	}
	if len(res.Mismatches) > 0 {
		fmt.Fprintf(stderr, "verify: %d of %d steps disagree with the eager oracle\n", len(res.Mismatches), res.Steps)
		return exitRejected
	}
	fmt.Fprintf(stderr, "verify: all %d steps match the eager oracle (%s tolerance); tokens identical\n", res.Steps, cfg.DType)
	return exitOK
}

// checkpointDefault ends the help of every --weights flag whose weights
// come from trial.ModelCache.
const checkpointDefault = "; default: the model's own checkpoint (a HuggingFace id's snapshot, or model.safetensors or the shards of " +
	"model.safetensors.index.json beside its config.json), else seeded weights"

// checkpointShards is the weights generate reads: --weights when given,
// else the checkpoint beside the model's config.json (model.Checkpoint: a
// directory or a HuggingFace id from the local cache; model.safetensors,
// or the shards of model.safetensors.index.json), else none (seeded
// weights), as every evaluation reads them (trial.ModelCache).
func checkpointShards(modelArg, weights string) ([]string, error) {
	if weights != "" {
		return []string{weights}, nil
	}
	return model.Checkpoint(modelArg)
}

// printTokens prints token ids on one line.
func printTokens(w io.Writer, tokens []int32) {
	strs := make([]string, len(tokens))
	for i, tok := range tokens {
		strs[i] = fmt.Sprint(tok)
	}
	fmt.Fprintln(w, strings.Join(strs, " "))
}

// greedyDecoder is what the CUDA launcher offers for a whole decode on the
// device.
type greedyDecoder interface {
	Greedy(ctx context.Context, m *trial.LoadedModel, target *ir.GpuTarget, point schedule.Point, prompt []int32, n int) ([]int32, [][]float32, error)
}

// generateOnGPU decodes greedily with the megakernel on the GPU (or the CPU
// emulator) and, with verify, compares every step's logits and the tokens
// with the eager pass. weights is --weights; without it the model cache
// reads the model's checkpoint (every shard), as checkpointShards does.
func generateOnGPU(device schedule.Device, cfg model.Config, name, weights string, target *ir.GpuTarget, point schedule.Point, prompt []int32, n int, verify bool, stdout, stderr io.Writer) int {
	launcher, _, err := launcherFor(string(device), target.Name, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate:", err)
		return exitBadInput
	}
	defer closeLauncher(launcher)
	g, ok := launcher.(greedyDecoder)
	if !ok {
		fmt.Fprintln(stderr, "amkctl generate: this launcher cannot decode on the device")
		return exitBadInput
	}
	lm, err := trial.NewModelCache(0).Get(name, weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate:", err)
		return exitBadInput
	}
	if lm.Truncated() {
		fmt.Fprintln(stderr, "amkctl generate: the model's weights do not fit the host check budget; decode it with a smaller model")
		return exitBadInput
	}
	tokens, logits, err := g.Greedy(context.Background(), lm, target, point, prompt, n)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl generate: %s decode: %v\n", device, err)
		return exitRejected
	}
	printTokens(stdout, tokens)
	if !verify {
		return exitOK
	}
	e, err := model.NewEager(cfg, lm.Weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate: eager:", err)
		return exitBadInput
	}
	want, err := e.Greedy(prompt, n)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate: eager:", err)
		return exitBadInput
	}
	mismatch := len(want) != len(tokens)
	for i := 0; !mismatch && i < len(want); i++ {
		mismatch = want[i] != tokens[i]
	}
	if mismatch {
		fmt.Fprintf(stderr, "verify: %s tokens %v differ from eager greedy %v (%d steps of logits returned)\n", device, tokens, want, len(logits))
		return exitRejected
	}
	fmt.Fprintf(stderr, "verify: %d %s tokens identical to eager greedy\n", len(tokens), device)
	return exitOK
}

// promptProblem says what is wrong with --prompt-ids.
func promptProblem(prompt string, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%q has none", prompt)
}
