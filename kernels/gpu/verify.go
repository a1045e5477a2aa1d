package gpu

import (
	"context"
	"fmt"
	"maps"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// checked is the outcome of a passing device check.
type checked struct {
	// isCandidate: the check handle now holds the trial's own program at
	// its position (the model is not truncated), so it is what gets timed.
	isCandidate bool
	// logits are the checked launch's: what the timed launches of the
	// check handle must leave behind again.
	logits []float32
	notes  []string
}

// verify runs the check model on the device through every decode position
// up to req.Pos — the history tokens of trial.HistoryToken, then the
// trial's token — or, for a workload trial (req.KV set), the one step at
// req.Pos from the seeded KV caches the reference VM started from, and
// compares the final logits with the reference VM's (req.Expected) at the
// model dtype. A mismatch is a *trial.MismatchError.
func (l *Launcher) verify(ctx context.Context, req trial.TimeRequest, ws launch.WeightSource, v kernels.Variant) (*checked, error) {
	m := req.Model
	truncated := m.Truncated()
	check := m.Check
	check.MaxSeq = lowering(req).MaxSeq
	b := max(1, req.Batch)
	programAt := func(pos int) (*ir.Program, error) {
		if pos == req.Pos && !truncated {
			return req.Program, nil
		}
		return lowerChecked(check, req.Target, req.Point, pos, b)
	}
	token := func(pos int, _ []float32) []int32 { return batchTokens(req.Token, pos, req.Pos, b, m.Check.Vocab) }
	first, start := 0, map[string]launch.WireTensor(nil)
	if req.KV != nil {
		first, start = req.Pos, map[string]launch.WireTensor{}
		for name, t := range req.KV {
			w, err := launch.ToWire(t)
			if err != nil {
				return nil, &trial.LaunchError{Class: trial.FailCrash, Phase: "check", Message: "the seeded KV cache " + name + ": " + err.Error()}
			}
			start[name] = w
		}
	}
	var logits []float32
	notes, err := l.walk(ctx, handleCheck, ws, v, first, req.Pos, start, programAt, token, func(pos int, lg []float32) { logits = lg })
	if err != nil {
		return nil, err
	}
	cmp := vm.Compare(logits, req.Expected, m.Check.Vocab, m.Check.DType)
	if !cmp.Pass {
		return nil, &trial.MismatchError{Device: l.name, Comparison: cmp}
	}
	notes = append(notes, fmt.Sprintf("%s logits match the reference VM at pos %d (%s): max_abs_err %.3g, %.1f%% of the tolerance, top1 %.4f",
		l.what(), req.Pos, m.Check.DType, cmp.MaxAbsErr, 100*cmp.ToleranceShare, cmp.Top1Agreement))
	return &checked{isCandidate: !truncated, logits: logits, notes: notes}, nil
}

// Greedy decodes on the device: the prompt, then n tokens, each the argmax
// of the previous step's logits, under point lowered for target at every
// position, with the model's own weights (seeded or safetensors). It
// returns the generated tokens and every step's logits. The handle it uses
// is unloaded at the end.
func (l *Launcher) Greedy(ctx context.Context, m *trial.LoadedModel, target *ir.GpuTarget, point schedule.Point, prompt []int32, n int) ([]int32, [][]float32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := m.Config
	if len(prompt) == 0 || n < 0 || len(prompt)+n > cfg.MaxSeq {
		return nil, nil, fmt.Errorf("greedy decode: want a prompt and prompt + n <= max_seq %d", cfg.MaxSeq)
	}
	if n == 0 {
		return nil, nil, nil
	}
	v, _, err := variantOf(point)
	if err != nil {
		return nil, nil, err
	}
	var out []int32
	var steps [][]float32
	token := func(pos int, prev []float32) []int32 {
		if pos < len(prompt) {
			return []int32{prompt[pos]}
		}
		t := argmax(prev)
		out = append(out, t)
		return []int32{t}
	}
	programAt := func(pos int) (*ir.Program, error) { return lowerChecked(cfg, target, point, pos, 1) }
	last := len(prompt) + n - 2 // the last position whose logits pick a token
	defer func() { _ = l.unload(ctx, handleCheck) }()
	_, err = l.walk(ctx, handleCheck, weightSource(m), v, 0, last, nil, programAt, token, func(pos int, lg []float32) {
		steps = append(steps, lg)
	})
	if err != nil {
		return nil, nil, err
	}
	out = append(out, argmax(steps[len(steps)-1]))
	return out, steps, nil
}

func argmax(xs []float32) int32 {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return int32(best)
}

// lowerChecked lowers and validates one decode step (a program the
// validator rejects never reaches a device).
func lowerChecked(cfg model.Config, target *ir.GpuTarget, point schedule.Point, pos, b int) (*ir.Program, error) {
	p, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: pos, B: b})
	if err != nil {
		return nil, &trial.LaunchError{Class: trial.ClassRejected, Phase: "check", Message: fmt.Sprintf("lowering %s at pos %d: %v", cfg.Name, pos, err)}
	}
	if rep := validate.Validate(p); !rep.OK {
		return nil, &trial.LaunchError{Class: trial.ClassRejected, Phase: "check", Message: fmt.Sprintf("program at pos %d: %s", pos, rep.Reason(2))}
	}
	return p, nil
}

// walk runs decode positions first..last on the device under handle: the
// program of each position from programAt, the batch's tokens from
// token(pos, previous logits), the KV caches bound from start at the first position
// (nil: the loaded program's zeroed caches) and then carried in device
// memory — launch Update when the next position's program has the same
// layout (docs/spec/rules.md R28), otherwise a reload with the caches read
// back and bound again. step receives every position's logits. It returns
// the load notes.
func (l *Launcher) walk(ctx context.Context, handle string, ws launch.WeightSource, v kernels.Variant, first, last int,
	start map[string]launch.WireTensor, programAt func(int) (*ir.Program, error), token func(pos int, prev []float32) []int32,
	step func(pos int, logits []float32)) ([]string, error) {
	cur, err := programAt(first)
	if err != nil {
		return nil, err
	}
	resp, err := l.load(ctx, handle, cur, ws, v)
	if err != nil {
		return nil, err
	}
	notes := l.loadNotes(handle, resp)
	carry := start
	var prev []float32
	for pos := first; pos <= last; pos++ {
		var next *ir.Program
		if pos < last {
			if next, err = programAt(pos + 1); err != nil {
				return nil, err
			}
		}
		inputs, err := stepInputs(token(pos, prev), pos)
		if err != nil {
			return nil, err
		}
		maps.Copy(inputs, carry)
		reload := next != nil && !sameLayout(cur, next)
		var read []string
		if reload {
			read = kvNames(cur)
		}
		rctx, cancel := context.WithTimeout(ctx, l.opts.RunTimeout)
		res, err := l.c.Run(rctx, &launch.RunRequest{Handle: handle, Inputs: inputs, Read: read})
		cancel()
		if err != nil {
			return nil, classify(err, "run")
		}
		if err := statusError(res, fmt.Sprintf("run pos %d", pos)); err != nil {
			return nil, err
		}
		if prev, err = logitsOf(res); err != nil {
			return nil, err
		}
		step(pos, prev)
		if next == nil {
			break
		}
		carry = nil
		if reload {
			carry = map[string]launch.WireTensor{}
			for _, name := range read {
				t, ok := res.Outputs[name]
				if !ok {
					return nil, &trial.LaunchError{Class: trial.FailCrash, Phase: "run", Message: "the device returned no KV cache " + name}
				}
				carry[name] = t
			}
			if _, err := l.load(ctx, handle, next, ws, v); err != nil {
				return nil, err
			}
		} else {
			uctx, cancel := context.WithTimeout(ctx, l.opts.RunTimeout)
			err := l.c.Update(uctx, &launch.UpdateRequest{Handle: handle, Program: ir.Encode(next)})
			cancel()
			if err != nil {
				return nil, classify(err, "update")
			}
		}
		cur = next
	}
	return notes, nil
}

func logitsOf(res *launch.RunResponse) ([]float32, error) {
	w, ok := res.Outputs[schedule.LogitsOutput]
	if !ok {
		return nil, &trial.LaunchError{Class: trial.FailCrash, Phase: "run", Message: "the device returned no logits"}
	}
	t, err := w.Tensor()
	if err != nil {
		return nil, &trial.LaunchError{Class: trial.FailCrash, Phase: "run", Message: "decoding the device logits: " + err.Error()}
	}
	return t.Floats(), nil
}

// RunProgram implements trial.ProgramDevice: it loads prog with m's
// weights (the default kernel variant at the program's block size), binds
// the KV caches kv (nil: zeros), launches the step of token at pos once and
// returns its logits. The handle is unloaded afterwards.
func (l *Launcher) RunProgram(ctx context.Context, prog *ir.Program, m *trial.LoadedModel, token int32, pos int, kv map[string]*tensor.Tensor) ([]float32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { _ = l.unload(ctx, handleCheck) }()
	if _, err := l.load(ctx, handleCheck, prog, weightSource(m), kernels.Variant{}); err != nil {
		return nil, err
	}
	inputs, err := stepInputs([]int32{token}, pos)
	if err != nil {
		return nil, err
	}
	for name, t := range kv {
		if inputs[name], err = launch.ToWire(t); err != nil {
			return nil, err
		}
	}
	return l.launchOnce(ctx, handleCheck, inputs, pos)
}
