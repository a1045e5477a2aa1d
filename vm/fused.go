package vm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/tensor"
)

// A FUSED task runs params.recipe = {"steps": [step, ...]} over transient
// scratch, each step
//
//	{"op": <opcode int>, "args": [{"in": k} | {"s": j}, ...],
//	 "out": <scratch int j> | "final" | -1, "params": {...},
//	 "out_shape": [...], "out_dtype": "<name>"}
//
// "final" (or -1) writes the task's output. Scratch starts zeroed with
// out_shape and out_dtype (default: args[0]'s shape and dtype). A recipe is
// checked in full when the VM loads (parseRecipe); a malformed one is an
// error, never a panic.

// recipeDTypes is the out_dtype allowlist. amk tensors have no float64:
// a float64 scratch is held at float32 precision.
var recipeDTypes = map[string]ir.DType{
	"float32": ir.F32, "float16": ir.F16, "bfloat16": ir.BF16,
	"float64": ir.F32, "int8": ir.I8, "int32": ir.I32,
}

// maxScratchElems bounds one scratch tensor (scratch is on-chip state).
const maxScratchElems = 1 << 22

type recipeArg struct {
	scratch bool // false: a task input
	index   int
}

type recipeStep struct {
	op       ir.Op
	args     []recipeArg
	final    bool
	out      int
	params   ir.Params
	shape    []int // nil: args[0]'s shape
	dtype    ir.DType
	hasDType bool
}

type recipe struct {
	steps []recipeStep
}

// parseRecipe validates and compiles a recipe for a task with nInputs
// inputs. The error lists the first four problems.
func parseRecipe(v pyjson.Value, nInputs int) (*recipe, error) {
	r, errs := compileRecipe(v, nInputs)
	if len(errs) > 0 {
		if len(errs) > 4 {
			errs = errs[:4]
		}
		return nil, fmt.Errorf("malformed FUSED recipe: %s", strings.Join(errs, "; "))
	}
	return r, nil
}

func compileRecipe(v pyjson.Value, nInputs int) (*recipe, []string) {
	if v.Kind != pyjson.Object {
		return nil, []string{"recipe must be a dict"}
	}
	steps, ok := v.Get("steps")
	if !ok || steps.Kind != pyjson.Array || len(steps.Arr) == 0 {
		return nil, []string{"recipe.steps must be a non-empty list"}
	}
	r := &recipe{}
	var errs []string
	produced := map[int]bool{}
	wroteFinal := false
	for i, sv := range steps.Arr {
		st, stepErrs := compileStep(i, sv, nInputs, produced)
		errs = append(errs, stepErrs...)
		if st == nil {
			continue
		}
		if st.final {
			wroteFinal = true
		} else {
			produced[st.out] = true
		}
		r.steps = append(r.steps, *st)
	}
	if !wroteFinal {
		errs = append(errs, "recipe never writes its final output (no step with out=='final')")
	}
	return r, errs
}

// compileStep checks one step. It returns the step (nil when it is not an
// object) and its problems.
func compileStep(i int, sv pyjson.Value, nInputs int, produced map[int]bool) (*recipeStep, []string) {
	if sv.Kind != pyjson.Object {
		return nil, []string{fmt.Sprintf("step %d must be a dict", i)}
	}
	var errs []string
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Sprintf("step %d: ", i)+fmt.Sprintf(format, a...))
	}
	st := &recipeStep{}
	opv, _ := sv.Get("op")
	code, isInt := opv.Int64()
	switch {
	case !isInt || !ir.Op(code).Valid():
		bad("bad op %s", opv.Repr())
	case ir.Op(code) == ir.OpFUSED:
		bad("nested FUSED is not allowed")
	default:
		st.op = ir.Op(code)
	}
	if av, ok := sv.Get("args"); ok && av.Kind != pyjson.Null {
		if av.Kind != pyjson.Array {
			bad("args must be a list, got %s", av.Repr())
		}
		for _, a := range av.Arr {
			if arg, ok := compileArg(a, nInputs, produced, bad); ok {
				st.args = append(st.args, arg)
			}
		}
	}
	outv, _ := sv.Get("out")
	switch n, isInt := outv.Int64(); {
	case outv.Kind == pyjson.String && outv.S == "final", isInt && n == -1:
		st.final = true
	case isInt && n >= -maxParamInt && n <= maxParamInt:
		st.out = int(n)
	default:
		bad("out must be 'final' or an int scratch index, got %s", outv.Repr())
	}
	if dv, ok := sv.Get("out_dtype"); ok && dv.Kind != pyjson.Null {
		dt, known := recipeDTypes[dv.S]
		if dv.Kind != pyjson.String || !known {
			bad("out_dtype %s not in the allowlist %s", dv.Repr(), allowlist())
		}
		st.dtype, st.hasDType = dt, true
	}
	if pv, ok := sv.Get("params"); ok && pv.Kind != pyjson.Null {
		if pv.Kind != pyjson.Object {
			bad("params must be a dict, got %s", pv.Repr())
		}
		for _, m := range pv.Obj {
			st.params = append(st.params, ir.Param{Key: m.Key, Val: m.Val})
		}
	}
	if shv, ok := sv.Get("out_shape"); ok && shv.Kind != pyjson.Null {
		shape, err := compileShape(shv)
		if err != "" {
			bad("%s", err)
		}
		st.shape = shape
	}
	if !st.final && st.shape == nil && len(st.args) == 0 {
		bad("a scratch output needs out_shape or an argument to take its shape from")
	}
	if spec, ok := st.op.Spec(); ok && st.op != ir.OpFUSED {
		maxIn := spec.MaxInputs
		if maxIn == ir.Variadic {
			maxIn = ir.MaxInputs
		}
		if n := len(st.args); n < spec.MinInputs || n > maxIn {
			bad("%s takes %d..%d args, got %d", st.op, spec.MinInputs, maxIn, n)
		}
	}
	return st, errs
}

func compileArg(a pyjson.Value, nInputs int, produced map[int]bool, bad func(string, ...any)) (recipeArg, bool) {
	if a.Kind != pyjson.Object || len(a.Obj) != 1 {
		bad("bad arg %s", a.Repr())
		return recipeArg{}, false
	}
	m := a.Obj[0]
	k, isInt := m.Val.Int64()
	switch m.Key {
	case "in":
		if !isInt || k < 0 || k >= int64(nInputs) {
			bad("input index %s out of range [0,%d)", m.Val.Repr(), nInputs)
			return recipeArg{}, false
		}
		return recipeArg{index: int(k)}, true
	case "s":
		if !isInt || k < -maxParamInt || k > maxParamInt || !produced[int(k)] {
			bad("reads scratch %s not written by an earlier step", m.Val.Repr())
			return recipeArg{}, false
		}
		return recipeArg{scratch: true, index: int(k)}, true
	}
	bad("arg must be {'in':k} or {'s':j}, got %s", a.Repr())
	return recipeArg{}, false
}

func compileShape(v pyjson.Value) ([]int, string) {
	if v.Kind != pyjson.Array || len(v.Arr) > ir.MaxRank {
		return nil, fmt.Sprintf("out_shape must be a list of at most %d ints, got %s", ir.MaxRank, v.Repr())
	}
	shape := make([]int, 0, len(v.Arr))
	n := int64(1)
	for _, d := range v.Arr {
		k, ok := d.Int64()
		if !ok || k < 0 || k > maxScratchElems {
			return nil, fmt.Sprintf("bad out_shape %s", v.Repr())
		}
		n *= k
		if n > maxScratchElems {
			return nil, fmt.Sprintf("out_shape %s exceeds %d elements", v.Repr(), maxScratchElems)
		}
		shape = append(shape, int(k))
	}
	return shape, ""
}

func allowlist() string {
	names := make([]string, 0, len(recipeDTypes))
	for n := range recipeDTypes {
		names = append(names, "'"+n+"'")
	}
	sort.Strings(names)
	return "[" + strings.Join(names, ", ") + "]"
}

// runRecipe executes a compiled recipe. Each step runs the same kernel as
// the unfused op, so a recipe whose scratch shapes and dtypes match the
// unfused intermediates is bit-identical to the unfused sequence.
func runRecipe(r *recipe, in, out []*tensor.Tensor) error {
	if r == nil {
		return fmt.Errorf("FUSED task has no compiled recipe")
	}
	if len(out) < 1 {
		return fmt.Errorf("FUSED writes 1 output, got %d", len(out))
	}
	scratch := map[int]*tensor.Tensor{}
	for i := range r.steps {
		st := &r.steps[i]
		args := make([]*tensor.Tensor, len(st.args))
		for k, a := range st.args {
			if a.scratch {
				args[k] = scratch[a.index]
			} else {
				args[k] = in[a.index]
			}
		}
		var dst *tensor.Tensor
		if st.final {
			dst = out[0]
		} else {
			shape := st.shape
			dt := st.dtype
			if shape == nil || !st.hasDType {
				if shape == nil {
					shape = args[0].Shape
					if int64(tensor.Numel(shape)) > maxScratchElems {
						return fmt.Errorf("step %d: scratch of %v exceeds %d elements", i, shape, maxScratchElems)
					}
				}
				if !st.hasDType {
					dt = args[0].DType
				}
			}
			dst = tensor.New(dt, shape...)
			scratch[st.out] = dst
		}
		outs := []*tensor.Tensor{dst}
		if spec, _ := st.op.Spec(); spec.NOutputs == 0 {
			outs = nil
		}
		if err := runOp(st.op, args, outs, st.params); err != nil {
			return fmt.Errorf("recipe step %d (%s): %w", i, st.op, err)
		}
	}
	return nil
}
