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
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

func init() { addVerb(newGenerateCmd) }

// generateFlags are generate's settings.
type generateFlags struct {
	gpu, cfgPath, prompt, weights, device string
	maxTokens                             int
	verify                                bool
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
	fs.StringVar(&g.prompt, "prompt-ids", "", "comma-separated prompt token ids (required)")
	fs.IntVar(&g.maxTokens, "max-tokens", 8, "number of tokens to generate")
	fs.StringVar(&g.weights, "weights", "", "optional .safetensors file (HF state-dict keys); empty: seeded weights")
	fs.BoolVar(&g.verify, "verify", false, "check every step's logits against the eager oracle and the tokens against eager greedy")
	device := addDeviceFlag(cmd, "cpu (the reference VM) or cuda (the megakernel on GPU 0; a -tags cuda build)")
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		g.cfgPath, g.device = *cfgPath, *device
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
		return fail(exitBadInput, "--prompt-ids needs at least one token id (%v)", err)
	}
	if g.maxTokens < 0 {
		return fail(exitBadInput, "--max-tokens must be >= 0")
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	for _, id := range ids {
		if int(id) >= cfg.Vocab {
			return fail(exitBadInput, "prompt token %d is outside the vocabulary [0, %d)", id, cfg.Vocab)
		}
	}
	if len(ids)+g.maxTokens > cfg.MaxSeq {
		return fail(exitBadInput, "prompt + max-tokens = %d exceeds the model's max_seq %d", len(ids)+g.maxTokens, cfg.MaxSeq)
	}
	target, err := ir.Target(g.gpu)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	point, err := loadPoint(g.cfgPath)
	if err != nil {
		return fail(exitBadInput, "config: %v", err)
	}
	if g.device == "cuda" {
		return generateOnGPU(cfg, pos0[0], g.weights, target, point, ids, g.maxTokens, g.verify, stdout, stderr)
	}
	if g.device != "cpu" {
		return fail(exitBadInput, "--device must be cpu or cuda, got %q", g.device)
	}
	var w model.Weights
	if g.weights != "" {
		w, err = model.LoadSafetensors(g.weights, cfg)
	} else {
		w, err = model.InitWeights(cfg, trial.WeightSeed)
	}
	if err != nil {
		return fail(exitBadInput, "weights: %v", err)
	}
	prog, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: 0})
	if err != nil {
		return fail(exitRejected, "%v", err)
	}
	if rep := validate.Validate(prog); !rep.OK {
		return fail(exitRejected, "lowered program rejected: %s", rep.Reason(4))
	}
	var oracle *model.Eager
	if g.verify {
		if oracle, err = model.NewEager(cfg, w); err != nil {
			return fail(exitBadInput, "eager: %v", err)
		}
	}
	var kv map[string]*tensor.Tensor
	var generated []int32
	tok := ids[0]
	total := len(ids) + g.maxTokens
	mismatches := 0
	// Positions 0..total-2: the prompt's tokens are fed in turn; from the last
	// prompt position on, each step's greedy token is the next step's input.
	for pos := 0; pos < total-1; pos++ {
		if pos > 0 {
			if err := schedule.Reposition(prog, pos); err != nil {
				if prog, err = schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: pos}); err != nil {
					return fail(exitRejected, "%v", err)
				}
				if rep := validate.Validate(prog); !rep.OK {
					return fail(exitRejected, "program rejected at position %d: %s", pos, rep.Reason(4))
				}
			}
		}
		step, err := trial.RunStep(prog, w, tok, pos, kv)
		if err != nil {
			return fail(exitRejected, "reference VM at position %d: %v", pos, err)
		}
		kv = step.KV
		next := model.Argmax(step.Logits)
		if oracle != nil {
			want, err := oracle.Step(tok, pos)
			if err != nil {
				return fail(exitRejected, "eager at position %d: %v", pos, err)
			}
			cmp := vm.Compare(step.Logits, want, cfg.Vocab, cfg.DType)
			if !cmp.Pass || model.Argmax(want) != next {
				mismatches++
				fmt.Fprintf(stderr, "position %d: MISMATCH vs eager (%s, max abs err %.3g)\n", pos, cmp.Reason, cmp.MaxAbsErr)
			}
		}
		if pos+1 < len(ids) {
			tok = ids[pos+1]
			continue
		}
		generated = append(generated, next)
		tok = next
	}
	strs := make([]string, len(generated))
	for i, g := range generated {
		strs[i] = fmt.Sprint(g)
	}
	fmt.Fprintln(stdout, strings.Join(strs, " "))
	if oracle != nil {
		if mismatches > 0 {
			fmt.Fprintf(stderr, "verify: %d of %d steps disagree with the eager oracle\n", mismatches, total-1)
			return exitRejected
		}
		fmt.Fprintf(stderr, "verify: all %d steps match the eager oracle (%s tolerance); tokens identical\n", total-1, cfg.DType)
	}
	return exitOK
}

// greedyDecoder is what the CUDA launcher offers for a whole decode on the
// device.
type greedyDecoder interface {
	Greedy(ctx context.Context, m *trial.LoadedModel, target *ir.GpuTarget, point schedule.Point, prompt []int32, n int) ([]int32, [][]float32, error)
}

// generateOnGPU decodes greedily with the megakernel on the GPU and, with
// verify, compares every step's logits and the tokens with the eager pass.
func generateOnGPU(cfg model.Config, name, weights string, target *ir.GpuTarget, point schedule.Point, prompt []int32, n int, verify bool, stdout, stderr io.Writer) int {
	launcher, _, err := launcherFor("cuda")
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate:", err)
		return exitBadInput
	}
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
		fmt.Fprintln(stderr, "amkctl generate: GPU decode:", err)
		return exitRejected
	}
	strs := make([]string, len(tokens))
	for i, tok := range tokens {
		strs[i] = fmt.Sprint(tok)
	}
	fmt.Fprintln(stdout, strings.Join(strs, " "))
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
		fmt.Fprintf(stderr, "verify: GPU tokens %v differ from eager greedy %v (%d steps of logits returned)\n", tokens, want, len(logits))
		return exitRejected
	}
	fmt.Fprintf(stderr, "verify: %d GPU tokens identical to eager greedy\n", len(tokens))
	return exitOK
}
