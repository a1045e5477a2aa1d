package trial

import (
	"context"
	"errors"
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
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
	// Device names the device the program also ran on (VerifyProgramOn;
	// empty: the reference VM only), DeviceMaxAbsErr how far its logits were
	// from the reference VM's. Correct is false when they do not match.
	Device          string   `json:"device,omitempty"`
	DeviceMaxAbsErr *float64 `json:"device_max_abs_err,omitempty"`
}

// ProgramDevice runs one program, one decode step, on a device (the CUDA
// launcher of a GPU or of the CPU emulator): the model's weights bound, the
// KV caches a history left (nil: zeros), token at pos; it returns the
// step's logits.
type ProgramDevice interface {
	Name() string
	RunProgram(ctx context.Context, prog *ir.Program, m *LoadedModel, token int32, pos int, kv map[string]*tensor.Tensor) ([]float32, error)
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
	return VerifyProgramOn(ctx, prog, lm, token, nil)
}

// VerifyProgramOn is VerifyProgram, then, with dev, the same step on the
// device: from the KV caches the reference VM's history left, its logits
// must match the reference VM's at the model dtype's tolerance (vm.Compare),
// or the program is not correct. A batched program (B > 1) is checked on
// the reference VM only, with a note: the devices bind one sequence.
func VerifyProgramOn(ctx context.Context, prog *ir.Program, lm *LoadedModel, token int, dev ProgramDevice) (*ProgramCheck, error) {
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
	if dev == nil {
		return res, nil
	}
	if res.Batch > 1 {
		res.Notes = append(res.Notes, fmt.Sprintf("not run on %s: a batched program (B=%d) is checked on the reference VM only", dev.Name(), res.Batch))
		return res, nil
	}
	kv, err := referenceHistory(ctx, lm, prog.Target, schedule.Default(), token, res.Pos, 1)
	if err != nil {
		return nil, err
	}
	got, err := dev.RunProgram(ctx, prog, lm, int32(token), res.Pos, kv)
	if err != nil {
		return nil, fmt.Errorf("on %s: %w", dev.Name(), err)
	}
	cmp := vm.Compare(got, check.logits, lm.Config.Vocab, lm.Config.DType)
	res.Device, res.DeviceMaxAbsErr = dev.Name(), finiteOrNil(cmp.MaxAbsErr)
	if !cmp.Pass {
		res.Correct = false
		res.Reason = fmt.Sprintf("on %s the logits differ from the reference VM's: %s", dev.Name(), cmp.Reason)
		return res, nil
	}
	res.Notes = append(res.Notes, fmt.Sprintf("the program ran on %s from the same KV caches: its logits match the reference VM's (max_abs_err %.3g, top1 %.4f)",
		dev.Name(), cmp.MaxAbsErr, cmp.Top1Agreement))
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
	return VerifySuiteOn(ctx, models, nil)
}

// VerifySuiteOn is VerifySuite with each program also run on a device
// (VerifyProgramOn); dev, when not nil, is called with the suite's target
// (h200) and returns it.
func VerifySuiteOn(ctx context.Context, models *ModelCache, dev func(target string) (ProgramDevice, error)) []SuiteCase {
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
			var on ProgramDevice
			if dev != nil {
				var derr error
				if on, derr = dev(target.Name); derr != nil {
					c.Error = derr.Error()
					out = append(out, c)
					continue
				}
			}
			res, verr := VerifyProgramOn(ctx, prog, lm, DefaultToken, on)
			if verr != nil {
				c.Error = verr.Error()
			}
			c.Result = res
			out = append(out, c)
		}
	}
	return out
}
