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
		return nil, fmt.Errorf("model %s is too large to verify on this host (its %s weights exceed the check budget)", lm.Config.Name, lm.Config.DType)
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

// SuiteCase is one built-in proof of VerifySuite.
type SuiteCase struct {
	Name   string        `json:"name"`
	Result *ProgramCheck `json:"result,omitempty"`
	Error  string        `json:"error,omitempty"`
}

// OK reports whether the case lowered, validated and matched the oracle.
func (c SuiteCase) OK() bool {
	return c.Error == "" && c.Result != nil && c.Result.Valid && c.Result.Correct
}

// VerifySuite is the built-in proof that the reference VM reproduces the
// eager oracle (the reference's `amk verify`): the toy presets lowered on
// h200 under the default schedule and under points that exercise every
// lowering path (thin and wide tiles, round-robin placement, split-KV
// attention with its combine, a later position, a batch), each checked by
// VerifyProgram.
func VerifySuite(ctx context.Context, models *ModelCache) []SuiteCase {
	type variant struct {
		name   string
		edit   func(p *schedule.Point)
		pos, b int
	}
	variants := []variant{
		{name: "default", edit: func(*schedule.Point) {}},
		{name: "N_tile=16 round_robin depth=0", edit: func(p *schedule.Point) {
			p.Config.SetTile("gemv", "N_tile", 16)
			p.Config.SMAssignment = ir.SMAssignment{Policy: schedule.PolicyRoundRobin}
			p.Config.PipeliningDepth = 0
		}},
		{name: "N_tile=512 tpb=128", edit: func(p *schedule.Point) {
			p.Config.SetTile("gemv", "N_tile", 512)
			p.Config.ThreadsPerBlock = 128
		}},
		{name: "split-KV n_partitions=4 at pos 40", edit: func(p *schedule.Point) {
			p.Config.SetTile("attention", "n_partitions", 4)
		}, pos: 40},
		{name: "batch B=3 at pos 5", edit: func(*schedule.Point) {}, pos: 5, b: 3},
	}
	target, _ := ir.Target("h200")
	var out []SuiteCase
	for _, preset := range []string{"toy", "toy-2L"} {
		lm, err := models.Get(preset, "")
		for _, v := range variants {
			c := SuiteCase{Name: preset + ": " + v.name}
			if err != nil {
				c.Error = err.Error()
				out = append(out, c)
				continue
			}
			p := schedule.Default()
			v.edit(&p)
			prog, lerr := schedule.Lower(lm.Config, target, p, schedule.LowerOptions{Pos: v.pos, B: v.b})
			if lerr != nil {
				c.Error = "lowering: " + lerr.Error()
				out = append(out, c)
				continue
			}
			res, verr := VerifyProgram(ctx, prog, lm, DefaultToken)
			if verr != nil {
				c.Error = verr.Error()
			}
			c.Result = res
			out = append(out, c)
		}
	}
	return out
}
