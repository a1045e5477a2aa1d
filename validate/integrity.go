package validate

import (
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// checkDenseIDs is docs/spec/rules.md R18: every buffer, counter and task id must equal its list
// position. It also rejects negative dimensions, which only a program built
// in code can carry (the decoder refuses them). It reports whether the ids
// are dense.
func (c *checker) checkDenseIDs() bool {
	p := c.p
	dense := true
	for i := range p.Buffers {
		if id := p.Buffers[i].ID; id != i {
			dense = false
			c.errf(CodeDenseIDs, -1, id, -1, "buffer id %d at list position %d: ids must be dense and equal to list positions", id, i)
		}
	}
	for i := range p.Counters {
		if id := p.Counters[i].ID; id != i {
			dense = false
			c.errf(CodeDenseIDs, -1, -1, id, "counter id %d at list position %d: ids must be dense and equal to list positions", id, i)
		}
	}
	for i := range p.Tasks {
		if id := p.Tasks[i].ID; id != i {
			dense = false
			c.errf(CodeDenseIDs, id, -1, -1, "task id %d at list position %d: ids must be dense and equal to list positions", id, i)
		}
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		for _, d := range b.Shape {
			if d < 0 {
				c.errf(CodeBadShape, -1, b.ID, -1, "buffer #%d (%s) has a negative dimension in shape %s", b.ID, pyStr(b.Name), pyInts(b.Shape))
				break
			}
		}
	}
	return dense
}

// checkTasks is step 1: per task, in list order, referential integrity, ABI
// caps, wait sanity, self-waits, the op table (arity, outputs, required
// params) and param keys and types.
func (c *checker) checkTasks() {
	p := c.p
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for _, b := range t.Inputs {
			if c.buffer(b) == nil {
				c.errf(CodeMissingBuffer, t.ID, b, -1, "task %d (%s) reads missing buffer %d", t.ID, t.Label, b)
			}
		}
		for _, b := range t.Outputs {
			if c.buffer(b) == nil {
				c.errf(CodeMissingBuffer, t.ID, b, -1, "task %d (%s) writes missing buffer %d", t.ID, t.Label, b)
			}
		}
		if !c.hasCounter(t.OutCounter) {
			c.errf(CodeMissingCounter, t.ID, -1, t.OutCounter, "task %d (%s) increments missing counter %d", t.ID, t.Label, t.OutCounter)
		}
		if n := len(t.Inputs); n > ir.MaxInputs {
			c.errf(CodeABICap, t.ID, -1, -1, "task %d has %d inputs > ABI_MAX_INPUTS=%d", t.ID, n, ir.MaxInputs)
		}
		if n := len(t.Outputs); n > ir.MaxOutputs {
			c.errf(CodeABICap, t.ID, -1, -1, "task %d has %d outputs > ABI_MAX_OUTPUTS=%d", t.ID, n, ir.MaxOutputs)
		}
		if n := len(t.Waits); n > ir.MaxWaits {
			c.errf(CodeABICap, t.ID, -1, -1, "task %d has %d waits > ABI_MAX_WAITS=%d", t.ID, n, ir.MaxWaits)
		}
		c.checkRanks(t, t.Inputs)
		c.checkRanks(t, t.Outputs)
		for _, w := range t.Waits {
			if !c.hasCounter(w.Counter) {
				c.errf(CodeMissingCounter, t.ID, -1, w.Counter, "task %d (%s) waits on missing counter %d", t.ID, t.Label, w.Counter)
			}
			if w.Threshold < 1 {
				c.errf(CodeBadThreshold, t.ID, -1, w.Counter, "task %d (%s) threshold %d on counter %d is not a positive static int", t.ID, t.Label, w.Threshold, w.Counter)
			}
		}
		for _, w := range t.Waits {
			if w.Counter == t.OutCounter {
				c.errf(CodeSelfWait, t.ID, -1, w.Counter, "task %d (%s) waits on its OWN out_counter %d, self-deadlock", t.ID, t.Label, t.OutCounter)
			}
		}
		c.checkOpTable(t)
		c.checkParams(t)
	}
}

func (c *checker) hasCounter(id int) bool { return id >= 0 && id < len(c.p.Counters) }

func (c *checker) checkRanks(t *ir.Task, bufs []int) {
	for _, b := range bufs {
		if buf := c.buffer(b); buf != nil && len(buf.Shape) > ir.MaxRank {
			c.errf(CodeRankCap, t.ID, b, -1, "task %d buffer %d rank %d > ABI_MAX_RANK=%d", t.ID, b, len(buf.Shape), ir.MaxRank)
		}
	}
}

func (c *checker) checkOpTable(t *ir.Task) {
	spec, ok := t.Op.Spec()
	if !ok {
		c.errf(CodeUnknownOp, t.ID, -1, -1, "task %d uses unregistered opcode %d", t.ID, int(t.Op))
		return
	}
	n := len(t.Inputs)
	if n < spec.MinInputs || (spec.MaxInputs != ir.Variadic && n > spec.MaxInputs) {
		c.errf(CodeArity, t.ID, -1, -1, "task %d (%s) arity: %d inputs, expected [%d,%d]", t.ID, spec.Name, n, spec.MinInputs, spec.MaxInputs)
	}
	if spec.NOutputs != -1 && len(t.Outputs) != spec.NOutputs {
		c.errf(CodeArity, t.ID, -1, -1, "task %d (%s) expected %d outputs, got %d", t.ID, spec.Name, spec.NOutputs, len(t.Outputs))
	}
	required := spec.Required
	if id := ir.TaskFusedPattern(t); id != ir.FusedNone {
		pat, ok := ir.FusedPatternByID(id)
		if !ok {
			c.errf(CodeFusedPattern, t.ID, -1, -1, "task %d (%s) names unknown fused pattern %d (params.flags bits 16-31)", t.ID, spec.Name, id)
			return
		}
		if want := pat.TaskArity(t); n != want {
			roles := pat.Inputs
			if want > len(pat.Inputs) {
				roles = append(append([]string{}, pat.Inputs...), ir.RoleScales)
			}
			c.errf(CodeFusedPattern, t.ID, -1, -1, "task %d (%s) pattern %s takes %d inputs %v, got %d", t.ID, spec.Name, pat.Name, want, roles, n)
		}
		required = pat.RequiredParams() // a pattern replaces params.recipe
	}
	for _, k := range required {
		if !t.Params.Has(k) {
			c.errf(CodeMissingParam, t.ID, -1, -1, "task %d (%s) missing required param '%s'", t.ID, spec.Name, k)
		}
	}
}

func (c *checker) checkParams(t *ir.Task) {
	for _, prm := range uniqueParams(t.Params) {
		typ, known := paramType(prm.Key)
		switch {
		case !known:
			c.warnf(CodeUnknownParam, t.ID, -1, -1, "task %d (%s) param '%s' is not a known amk_params_t field (will not marshal to the device)", t.ID, t.Op, prm.Key)
		case typ == ir.ParamInt32:
			if _, ok := int32Value(prm.Val); !ok {
				c.errf(CodeParamType, t.ID, -1, -1, "task %d param '%s'=%s must be an int32", t.ID, prm.Key, pyRepr(prm.Val))
			}
		case typ == ir.ParamReal:
			if _, ok := realValue(prm.Val); !ok {
				c.errf(CodeParamType, t.ID, -1, -1, "task %d param '%s'=%s must be a real number", t.ID, prm.Key, pyRepr(prm.Val))
			}
		}
	}
}

// uniqueParams returns the params as Python's dict would hold them: one entry
// per key, at the key's first position, with its last value.
func uniqueParams(ps ir.Params) ir.Params {
	dup := false
	if len(ps) <= 16 {
		for i := 1; i < len(ps) && !dup; i++ {
			for j := 0; j < i; j++ {
				if ps[i].Key == ps[j].Key {
					dup = true
					break
				}
			}
		}
	} else {
		seen := make(map[string]struct{}, len(ps))
		for _, prm := range ps {
			if _, ok := seen[prm.Key]; ok {
				dup = true
				break
			}
			seen[prm.Key] = struct{}{}
		}
	}
	if !dup {
		return ps
	}
	at := make(map[string]int, len(ps))
	out := make(ir.Params, 0, len(ps))
	for _, prm := range ps {
		if i, ok := at[prm.Key]; ok {
			out[i].Val = prm.Val
			continue
		}
		at[prm.Key] = len(out)
		out = append(out, prm)
	}
	return out
}

// int32Value accepts a JSON integer (never a bool or a float) in int32 range.
func int32Value(v pyjson.Value) (int64, bool) {
	i, ok := intValue(v)
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, false
	}
	return i, true
}

// intValue is v.Int64 with a fast path for the short literals params hold.
func intValue(v pyjson.Value) (int64, bool) {
	if v.Kind != pyjson.Int {
		return 0, false
	}
	s := v.Num
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 {
		return v.Int64()
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return v.Int64()
		}
		n = n*10 + int64(d)
	}
	if neg {
		n = -n
	}
	return n, true
}

// paramInt returns a task's integer param (any int64), ok false when absent
// or not an integer.
func paramInt(t *ir.Task, key string) (int64, bool) {
	v, ok := t.Params.Get(key)
	if !ok {
		return 0, false
	}
	return intValue(v)
}

// paramTypes is ir.ParamFields as a map.
var paramTypes = func() map[string]ir.ParamType {
	m := make(map[string]ir.ParamType, len(ir.ParamFields))
	for _, f := range ir.ParamFields {
		m[f.Name] = f.Type
	}
	return m
}()

// paramType looks a key up in ir.ParamFields, with the common keys first.
func paramType(key string) (ir.ParamType, bool) {
	switch key {
	case "K", "N_tile", "n_off", "hidden", "head_dim", "pos":
		return ir.ParamInt32, true
	case "eps", "theta", "scale":
		return ir.ParamReal, true
	}
	t, ok := paramTypes[key]
	return t, ok
}

// intParam returns a task's int32 param, ok only when present and well typed
// (a badly typed param is reported once, by step 1).
func intParam(t *ir.Task, key string) (int64, bool) {
	v, ok := t.Params.Get(key)
	if !ok {
		return 0, false
	}
	return int32Value(v)
}

// realValue accepts an int or float that is finite and representable as the
// float32 it marshals to (docs/spec/rules.md R22: bools, NaN and infinities are not real numbers).
func realValue(v pyjson.Value) (float64, bool) {
	f, ok := v.Float64()
	if !ok || math.IsNaN(f) || math.Abs(f) > math.MaxFloat32 {
		return 0, false
	}
	return f, true
}
