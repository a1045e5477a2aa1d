package trial

import (
	"context"
	"errors"
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// ErrDecodeInput marks a decode request that cannot be run as asked (a
// prompt token outside the vocabulary, a prompt plus tokens beyond the
// model's max_seq), as opposed to a schedule that fails.
var ErrDecodeInput = errors.New("bad decode request")

// Decode is a greedy decode through the reference VM: the prompt's tokens
// are fed in turn, then each step's argmax is the next step's input.
type Decode struct {
	Config  model.Config
	Weights model.Weights
	Target  *ir.GpuTarget
	Point   schedule.Point
	Prompt  []int32
	// Tokens is how many tokens to generate.
	Tokens int
	// Verify checks every step's logits against the eager oracle (within
	// the dtype's tolerance) and its greedy token against eager greedy.
	Verify bool
}

// StepMismatch is a step whose logits or greedy token disagree with the
// eager oracle.
type StepMismatch struct {
	Pos       int
	Reason    string
	MaxAbsErr float64
}

// DecodeResult is what a decode produced.
type DecodeResult struct {
	Tokens []int32
	// Steps is the number of decode steps run (prompt and generated).
	Steps int
	// Mismatches lists the steps that disagree with the eager oracle (with
	// Verify only).
	Mismatches []StepMismatch
}

// GreedyDecode runs d. One program is lowered and validated at position 0
// and repositioned for the later steps (lowered and validated afresh where a
// reposition is not possible). It returns an error wrapping ErrDecodeInput
// for a request that cannot be run, and any other error when the schedule
// fails to lower, validate or run; ctx cancels between steps.
func GreedyDecode(ctx context.Context, d Decode) (DecodeResult, error) {
	var res DecodeResult
	if err := d.Check(); err != nil {
		return res, err
	}
	prog, err := lowerValid(d, 0)
	if err != nil {
		return res, err
	}
	var oracle *model.Eager
	if d.Verify {
		if oracle, err = model.NewEager(d.Config, d.Weights); err != nil {
			return res, fmt.Errorf("eager: %w", err)
		}
	}
	var kv map[string]*tensor.Tensor
	tok := d.Prompt[0]
	total := len(d.Prompt) + d.Tokens
	// Positions 0..total-2: the prompt's tokens are fed in turn; from the
	// last prompt position on, each step's greedy token is the next input.
	for pos := 0; pos < total-1; pos++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if pos > 0 {
			if err := schedule.Reposition(prog, pos); err != nil {
				if prog, err = lowerValid(d, pos); err != nil {
					return res, err
				}
			}
		}
		step, err := RunStep(prog, d.Weights, tok, pos, kv)
		if err != nil {
			return res, fmt.Errorf("reference VM at position %d: %w", pos, err)
		}
		res.Steps++
		kv = step.KV
		next := model.Argmax(step.Logits)
		if oracle != nil {
			want, err := oracle.Step(tok, pos)
			if err != nil {
				return res, fmt.Errorf("eager at position %d: %w", pos, err)
			}
			cmp := vm.Compare(step.Logits, want, d.Config.Vocab, d.Config.DType)
			if !cmp.Pass || model.Argmax(want) != next {
				reason := cmp.Reason
				if cmp.Pass {
					reason = "greedy token differs"
				}
				res.Mismatches = append(res.Mismatches, StepMismatch{Pos: pos, Reason: reason, MaxAbsErr: cmp.MaxAbsErr})
			}
		}
		if pos+1 < len(d.Prompt) {
			tok = d.Prompt[pos+1]
			continue
		}
		res.Tokens = append(res.Tokens, next)
		tok = next
	}
	return res, nil
}

// Check refuses a request that cannot be run (before any weights are
// loaded); its errors wrap ErrDecodeInput.
func (d Decode) Check() error {
	switch {
	case len(d.Prompt) == 0:
		return fmt.Errorf("%w: the prompt needs at least one token id", ErrDecodeInput)
	case d.Tokens < 0:
		return fmt.Errorf("%w: the number of tokens to generate must be >= 0", ErrDecodeInput)
	case len(d.Prompt)+d.Tokens > d.Config.MaxSeq:
		return fmt.Errorf("%w: prompt + tokens = %d exceeds the model's max_seq %d", ErrDecodeInput, len(d.Prompt)+d.Tokens, d.Config.MaxSeq)
	case d.Target == nil:
		return fmt.Errorf("%w: no GPU target", ErrDecodeInput)
	}
	for _, id := range d.Prompt {
		if id < 0 || int(id) >= d.Config.Vocab {
			return fmt.Errorf("%w: prompt token %d is outside the vocabulary [0, %d)", ErrDecodeInput, id, d.Config.Vocab)
		}
	}
	return nil
}

// lowerValid lowers the decode's schedule at pos and validates it.
func lowerValid(d Decode, pos int) (*ir.Program, error) {
	prog, err := schedule.Lower(d.Config, d.Target, d.Point, schedule.LowerOptions{Pos: pos})
	if err != nil {
		return nil, err
	}
	if rep := validate.Validate(prog); !rep.OK {
		return nil, fmt.Errorf("program rejected at position %d: %s", pos, rep.Reason(4))
	}
	return prog, nil
}
