package vm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// BindWeights binds every WEIGHT and CONST buffer whose state-dict key
// (Buffer.Source, else the buffer name) is in weights. The tensors are not
// copied and never written. Keys the program does not use are ignored;
// buffers left unbound are reported by Run. Each tensor is checked against
// its buffer's dtype and shape; the mismatches come back joined, and the
// matching tensors are bound regardless.
func (v *VM) BindWeights(weights map[string]*tensor.Tensor) error {
	var errs []error
	for i := range v.prog.Buffers {
		b := &v.prog.Buffers[i]
		if b.Kind != ir.Weight && b.Kind != ir.Const {
			continue
		}
		key := weightKey(b)
		t, ok := weights[key]
		if !ok {
			continue
		}
		if err := checkTensor(b, t); err != nil {
			errs = append(errs, fmt.Errorf("weight %q: %w", key, err))
			continue
		}
		v.bound[i] = t
	}
	return errors.Join(errs...)
}

// Bind binds an IO_INPUT or KV_CACHE buffer by name. An input is read in
// place; a KV cache is copied at the start of every Run, so t is never
// modified.
func (v *VM) Bind(name string, t *tensor.Tensor) error {
	ids, ok := v.byName[name]
	if !ok {
		return fmt.Errorf("bind: the program has no buffer named %q", name)
	}
	for _, id := range ids {
		b := &v.prog.Buffers[id]
		if b.Kind != ir.IOInput && b.Kind != ir.KVCache {
			return fmt.Errorf("bind: buffer %q is a %s; only IO_INPUT and KV_CACHE buffers are bound by name (weights and constants: BindWeights)", name, b.Kind)
		}
		if err := checkTensor(b, t); err != nil {
			return fmt.Errorf("bind %q: %w", name, err)
		}
	}
	for _, id := range ids {
		v.bound[id] = t
	}
	return nil
}

// BindKV binds every KV_CACHE buffer whose name is in kv (typically the KV
// of the previous step's Result). Names that are not KV caches of this
// program are ignored.
func (v *VM) BindKV(kv map[string]*tensor.Tensor) error {
	var errs []error
	for name, t := range kv {
		ids := v.byName[name]
		if len(ids) == 0 || v.prog.Buffers[ids[0]].Kind != ir.KVCache {
			continue
		}
		if err := v.Bind(name, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func weightKey(b *ir.Buffer) string {
	if b.Source != nil && *b.Source != "" {
		return *b.Source
	}
	return b.Name
}

// checkTensor checks a tensor against its buffer (docs/spec/rules.md R26): same dtype, same
// shape, and storage that holds exactly that many elements.
func checkTensor(b *ir.Buffer, t *tensor.Tensor) error {
	if t == nil {
		return fmt.Errorf("nil tensor for buffer %q", b.Name)
	}
	if t.DType != b.DType || !sameShape(t.Shape, b.Shape) {
		return fmt.Errorf("buffer %q is %s%s, got a %s%s tensor", b.Name, b.DType, shapeString(b.Shape), t.DType, shapeString(t.Shape))
	}
	n := tensor.Numel(t.Shape)
	var have, want int
	var field string
	switch {
	case t.DType == ir.I4:
		field, have, want = "packed bytes", len(t.Packed), (n+1)/2
	case t.DType.IsFloat():
		field, have, want = "float values", t.FloatCount(), n
	default:
		field, have, want = "integer values", t.IntCount(), n
	}
	if have != want {
		return fmt.Errorf("buffer %q: a %s%s tensor needs %d %s, it holds %d", b.Name, t.DType, shapeString(t.Shape), want, field, have)
	}
	return nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// materialize builds the per-run tensor of every buffer: bound weights and
// inputs as they are, bound KV caches copied, everything else zeroed.
func (v *VM) materialize() ([]*tensor.Tensor, error) {
	bufs := make([]*tensor.Tensor, len(v.prog.Buffers))
	var missing []string
	for i := range v.prog.Buffers {
		b := &v.prog.Buffers[i]
		switch b.Kind {
		case ir.Weight, ir.Const, ir.IOInput:
			if v.bound[i] == nil {
				what := fmt.Sprintf("%s %q", b.Kind, b.Name)
				if b.Kind != ir.IOInput && b.Source != nil {
					what += fmt.Sprintf(" (source %q)", *b.Source)
				}
				missing = append(missing, what)
				continue
			}
			bufs[i] = v.bound[i]
		case ir.KVCache:
			if v.bound[i] != nil {
				bufs[i] = v.bound[i].Clone()
			} else {
				bufs[i] = tensor.New(b.DType, b.Shape...)
			}
		default:
			bufs[i] = tensor.New(b.DType, b.Shape...)
		}
	}
	if len(missing) > 0 {
		shown := missing
		more := ""
		if len(shown) > 8 {
			shown, more = shown[:8], fmt.Sprintf(" and %d more", len(missing)-8)
		}
		return nil, fmt.Errorf("run: unbound buffers: %s%s", strings.Join(shown, ", "), more)
	}
	return bufs, nil
}
