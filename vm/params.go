package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// maxParamInt bounds integer params so that index arithmetic cannot
// overflow (tensor extents are far smaller).
const maxParamInt = int64(1) << 40

// SetIntParam changes one of the params that advance between decode steps
// (docs/spec/ir.md §2: pos, kv_start, kv_len) on one task, so that one validated
// program serves every position (docs/spec/rules.md R28). The new value is bounds-checked
// against the task's KV cache: pos in [0, max_seq), kv_start >= 0,
// kv_len >= 1 and kv_start+kv_len <= max_seq. Any other change needs a new
// lowering. Not safe to call during Run.
func (v *VM) SetIntParam(taskID int, key string, value int64) error {
	if taskID < 0 || taskID >= len(v.tasks) {
		return fmt.Errorf("SetIntParam: no task %d", taskID)
	}
	t := &v.tasks[taskID]
	switch {
	case key == "pos" && t.op == ir.OpKVAppend:
		maxSeq, err := v.cacheSeqLen(t, t.out)
		if err != nil {
			return err
		}
		if value < 0 || value >= int64(maxSeq) {
			return fmt.Errorf("SetIntParam: task %s: pos %d outside [0, %d)", t.label, value, maxSeq)
		}
	case (key == "kv_start" || key == "kv_len") && t.op == ir.OpAttentionTile:
		var cache []int
		if len(t.in) > 1 {
			cache = t.in[1:2]
		}
		maxSeq, err := v.cacheSeqLen(t, cache)
		if err != nil {
			return err
		}
		start, length := t.params.IntOr("kv_start", 0), t.params.IntOr("kv_len", int64(maxSeq))
		if key == "kv_start" {
			start = value
		} else {
			length = value
		}
		if start < 0 || length < 1 || start+length > int64(maxSeq) {
			return fmt.Errorf("SetIntParam: task %s: window [%d, %d) outside the cache's %d rows", t.label, start, start+length, maxSeq)
		}
	default:
		return fmt.Errorf("SetIntParam: task %s (%s): only KV_APPEND pos and ATTENTION_TILE kv_start/kv_len change between steps; re-lower for %q", t.label, t.op, key)
	}
	setParam(&t.params, key, pyjson.IntValue(value))
	return nil
}

// SetPosition moves a decode-step program to position pos following the
// lowering convention of schedule.Lower: every KV_APPEND writes row pos and
// every whole-window ATTENTION_TILE (kv_start 0, no PARTIAL_WRITE) reads
// kv_len = pos+1. Split-KV shards change in number and extent with the
// position, so a program holding them must be re-lowered and SetPosition
// refuses it. The position IO input (if any) is the caller's to bind. On
// error nothing is changed.
func (v *VM) SetPosition(pos int) error {
	type edit struct {
		task int
		key  string
	}
	var edits []edit
	for i := range v.tasks {
		t := &v.tasks[i]
		switch t.op {
		case ir.OpKVAppend:
			edits = append(edits, edit{i, "pos"})
		case ir.OpAttentionTile:
			if t.params.IntOr("flags", 0)&ir.FlagPartialWrite != 0 || t.params.IntOr("kv_start", 0) != 0 {
				return fmt.Errorf("SetPosition: task %s is a split-KV shard; re-lower the program for position %d", t.label, pos)
			}
			edits = append(edits, edit{i, "kv_len"})
		}
	}
	saved := make([]ir.Params, len(edits))
	for k, e := range edits {
		saved[k] = append(ir.Params(nil), v.tasks[e.task].params...)
	}
	for k, e := range edits {
		val := int64(pos)
		if e.key == "kv_len" {
			val = int64(pos) + 1
		}
		if err := v.SetIntParam(e.task, e.key, val); err != nil {
			for j := range k {
				v.tasks[edits[j].task].params = saved[j]
			}
			return err
		}
	}
	return nil
}

// cacheSeqLen is the max_seq extent of the KV cache buffer a task uses:
// dim 0 of a rank-3 cache, dim 1 of a rank-4 one.
func (v *VM) cacheSeqLen(t *task, ids []int) (int, error) {
	if len(ids) == 0 {
		return 0, fmt.Errorf("task %s has no KV cache operand", t.label)
	}
	b := &v.prog.Buffers[ids[0]]
	switch len(b.Shape) {
	case 3:
		return b.Shape[0], nil
	case 4:
		return b.Shape[1], nil
	}
	return 0, fmt.Errorf("task %s: KV cache %q has rank %d, want 3 or 4", t.label, b.Name, len(b.Shape))
}

func setParam(ps *ir.Params, key string, val pyjson.Value) {
	for i := range *ps {
		if (*ps)[i].Key == key {
			(*ps)[i].Val = val
		}
	}
	if !ps.Has(key) {
		*ps = append(*ps, ir.Param{Key: key, Val: val})
	}
}

// paramInt reads an integer param: absent -> (0, false, nil); an integral
// JSON number -> its value; anything else is an error.
func paramInt(p ir.Params, key string) (int, bool, error) {
	v, ok := p.Get(key)
	if !ok {
		return 0, false, nil
	}
	if i, ok := v.Int64(); ok {
		if i > maxParamInt || i < -maxParamInt {
			return 0, true, fmt.Errorf("param %s = %d is out of range", key, i)
		}
		return int(i), true, nil
	}
	if f, ok := v.Float64(); ok && v.Kind == pyjson.Float && f == math.Trunc(f) && math.Abs(f) <= float64(maxParamInt) {
		return int(f), true, nil
	}
	return 0, true, fmt.Errorf("param %s must be an integer, got %s", key, v.Repr())
}

// needInt reads a required integer param.
func needInt(p ir.Params, key string) (int, error) {
	i, ok, err := paramInt(p, key)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("missing required param %s", key)
	}
	return i, nil
}

// intOr reads an optional integer param.
func intOr(p ir.Params, key string, def int) (int, error) {
	i, ok, err := paramInt(p, key)
	if err != nil || !ok {
		return def, err
	}
	return i, nil
}

// floatOr reads an optional finite real param.
func floatOr(p ir.Params, key string, def float64) (float64, error) {
	v, ok := p.Get(key)
	if !ok {
		return def, nil
	}
	f, ok := v.Float64()
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("param %s must be a finite real number, got %s", key, v.Repr())
	}
	return f, nil
}
