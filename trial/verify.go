package trial

import (
	"context"
	"errors"
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

// ProgramCheck is the result of VerifyProgram.
type ProgramCheck struct {
	Valid   bool   `json:"valid"`
	Report  string `json:"report,omitempty"` // the validator's reason when rejected
	Correct bool   `json:"correct"`
	// MaxAbsErr and Top1Agreement are null when not finite; Reason says
	// why a comparison failed.
	MaxAbsErr     *float64 `json:"max_abs_err"`
	Top1Agreement *float64 `json:"top1_agreement"`
	Reason        string   `json:"reason,omitempty"`
	Pos           int      `json:"pos"`
	Batch         int      `json:"batch"`
	Token         int      `json:"token"`
	Notes         []string `json:"notes"`
}

// VerifyProgram checks a program file against the reference numerics: it
// validates the program, runs it on the reference VM with the model's
// weights (positions before the program's own, read from meta.pos, are
// decoded with the canonical default schedule to build the KV caches; the
// batch is the token_id input's length) and compares every sequence's
// logits with the eager oracle (batch sequence r decodes RowToken(token,
// r)). A model too big for the host's check budget cannot be verified (the
// program holds every layer).
func VerifyProgram(ctx context.Context, prog *ir.Program, lm *LoadedModel, token int) (*ProgramCheck, error) {
	if lm.Truncated() {
		return nil, fmt.Errorf("model %s is too large to verify on this host (its float32 weights exceed the check budget)", lm.Config.Name)
	}
	res := &ProgramCheck{Token: token, Batch: 1, Notes: []string{}}
	rep := validate.Validate(prog)
	res.Valid = rep.OK
	if !rep.OK {
		res.Report = rep.Reason(4)
		return res, nil
	}
	if v, ok := prog.Meta.Get("pos"); ok {
		pos, isInt := v.Int64()
		if !isInt || pos < 0 || pos >= int64(lm.Config.MaxSeq) {
			return nil, fmt.Errorf("meta.pos %s is not a position of %s (0..%d)", v.Repr(), lm.Config.Name, lm.Config.MaxSeq-1)
		}
		res.Pos = int(pos)
	}
	for i := range prog.Buffers {
		if b := &prog.Buffers[i]; b.Name == schedule.TokenInput && len(b.Shape) == 1 && b.Shape[0] > 0 {
			res.Batch = b.Shape[0]
		}
	}
	if prog.Target == nil {
		return nil, errors.New("the program has no target (needed to lower the history steps)")
	}
	check, err := lm.check(ctx, prog, token, res.Pos, res.Batch, prog.Target, schedule.Default())
	if err != nil {
		return nil, err
	}
	res.Correct, res.Reason = check.cmp.Pass, check.cmp.Reason
	res.MaxAbsErr, res.Top1Agreement = finiteOrNil(check.cmp.MaxAbsErr), finiteOrNil(check.cmp.Top1Agreement)
	res.Notes = append(res.Notes, check.notes...)
	if res.Pos > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("positions 0..%d decoded with the default schedule to fill the KV caches", res.Pos-1))
	}
	return res, nil
}
