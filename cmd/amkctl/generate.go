package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

func init() {
	register(command{name: "generate", summary: "greedy decode through the reference VM (one validated program reused across positions)", run: runGenerate})
}

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("generate", "generate MODEL --prompt-ids 1,2,3 --max-tokens N [--gpu G] [--config cfg.json] [--weights F] [--verify]", stderr)
	gpu := fs.String("gpu", "h100", "GPU target record the schedule is lowered for")
	cfgPath := fs.String("config", "", "schedule config JSON (default: the canonical default)")
	prompt := fs.String("prompt-ids", "", "comma-separated prompt token ids (required)")
	maxTokens := fs.Int("max-tokens", 8, "number of tokens to generate")
	weights := fs.String("weights", "", "optional .safetensors file (HF state-dict keys); default: seeded weights")
	verify := fs.Bool("verify", false, "check every step's logits against the eager oracle and the tokens against eager greedy")
	device := fs.String("device", "cpu", "cpu (the reference VM) or cuda (the megakernel on GPU 0; a -tags cuda build)")
	pos0, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl generate: "+format+"\n", a...)
		return code
	}
	if len(pos0) != 1 {
		return fail(2, "exactly one MODEL is required")
	}
	ids, err := splitIDs(*prompt)
	if err != nil || len(ids) == 0 {
		return fail(2, "--prompt-ids needs at least one token id (%v)", err)
	}
	if *maxTokens < 0 {
		return fail(2, "--max-tokens must be >= 0")
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		return fail(2, "%v", err)
	}
	for _, id := range ids {
		if int(id) >= cfg.Vocab {
			return fail(2, "prompt token %d is outside the vocabulary [0, %d)", id, cfg.Vocab)
		}
	}
	if len(ids)+*maxTokens > cfg.MaxSeq {
		return fail(2, "prompt + max-tokens = %d exceeds the model's max_seq %d", len(ids)+*maxTokens, cfg.MaxSeq)
	}
	target, err := ir.Target(*gpu)
	if err != nil {
		return fail(2, "%v", err)
	}
	point, err := loadPoint(*cfgPath)
	if err != nil {
		return fail(2, "config: %v", err)
	}
	if *device == "cuda" {
		return generateOnGPU(cfg, pos0[0], *weights, target, point, ids, *maxTokens, *verify, stdout, stderr)
	}
	if *device != "cpu" {
		return fail(2, "--device must be cpu or cuda, got %q", *device)
	}
	var w model.Weights
	if *weights != "" {
		w, err = model.LoadSafetensors(*weights, cfg)
	} else {
		w, err = model.InitWeights(cfg, trial.WeightSeed)
	}
	if err != nil {
		return fail(2, "weights: %v", err)
	}
	prog, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: 0})
	if err != nil {
		return fail(1, "%v", err)
	}
	if rep := validate.Validate(prog); !rep.OK {
		return fail(1, "lowered program rejected: %s", rep.Reason(4))
	}
	var oracle *model.Eager
	if *verify {
		if oracle, err = model.NewEager(cfg, w); err != nil {
			return fail(2, "eager: %v", err)
		}
	}
	var kv map[string]*tensor.Tensor
	var generated []int32
	tok := ids[0]
	total := len(ids) + *maxTokens
	mismatches := 0
	// Positions 0..total-2: the prompt's tokens are fed in turn; from the last
	// prompt position on, each step's greedy token is the next step's input.
	for pos := 0; pos < total-1; pos++ {
		if pos > 0 {
			if err := schedule.Reposition(prog, pos); err != nil {
				if prog, err = schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: pos}); err != nil {
					return fail(1, "%v", err)
				}
				if rep := validate.Validate(prog); !rep.OK {
					return fail(1, "program rejected at position %d: %s", pos, rep.Reason(4))
				}
			}
		}
		step, err := trial.RunStep(prog, w, tok, pos, kv)
		if err != nil {
			return fail(1, "reference VM at position %d: %v", pos, err)
		}
		kv = step.KV
		next := model.Argmax(step.Logits)
		if oracle != nil {
			want, err := oracle.Step(tok, pos)
			if err != nil {
				return fail(1, "eager at position %d: %v", pos, err)
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
			return 1
		}
		fmt.Fprintf(stderr, "verify: all %d steps match the eager oracle (%s tolerance); tokens identical\n", total-1, cfg.DType)
	}
	return 0
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
		return 2
	}
	g, ok := launcher.(greedyDecoder)
	if !ok {
		fmt.Fprintln(stderr, "amkctl generate: this launcher cannot decode on the device")
		return 2
	}
	lm, err := trial.NewModelCache(0).Get(name, weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate:", err)
		return 2
	}
	if lm.Truncated() {
		fmt.Fprintln(stderr, "amkctl generate: the model's weights do not fit the host check budget; decode it with a smaller model")
		return 2
	}
	tokens, logits, err := g.Greedy(context.Background(), lm, target, point, prompt, n)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate: GPU decode:", err)
		return 1
	}
	strs := make([]string, len(tokens))
	for i, tok := range tokens {
		strs[i] = fmt.Sprint(tok)
	}
	fmt.Fprintln(stdout, strings.Join(strs, " "))
	if !verify {
		return 0
	}
	e, err := model.NewEager(cfg, lm.Weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate: eager:", err)
		return 2
	}
	want, err := e.Greedy(prompt, n)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl generate: eager:", err)
		return 2
	}
	mismatch := len(want) != len(tokens)
	for i := 0; !mismatch && i < len(want); i++ {
		mismatch = want[i] != tokens[i]
	}
	if mismatch {
		fmt.Fprintf(stderr, "verify: GPU tokens %v differ from eager greedy %v (%d steps of logits returned)\n", tokens, want, len(logits))
		return 1
	}
	fmt.Fprintf(stderr, "verify: %d GPU tokens identical to eager greedy\n", len(tokens))
	return 0
}
