package ir

import (
	"fmt"
	"slices"

	"github.com/amk-dev/amk/pyjson"
)

// The reference (AMK) describes a FUSED task by params.recipe, a list of
// primitive steps over scratch (the VM's runRecipe reads the same form), and
// its validator requires that param; amk names one of its fused patterns in
// params.flags bits 16-31 instead. PatternRecipe writes a pattern task's
// recipe, step for step the unfused ops the pattern stands for, with the
// numerics the pattern table states (staging and sums rounded to the
// activation's dtype, epilogues computed from those), so the recipe computes
// the pattern's values bit for bit:
//
//	GEMV_ADD        s0 = GEMV_TILE(x, W); out = ADD(s0, residual)
//	NORM_GEMV       s0 = RMSNORM(x, norm_w); out = GEMV_TILE(s0, W)
//	SILU_GEMV       s0 = SILU_MUL(gate, up); out = GEMV_TILE(s0, W)
//	SILU_GEMV_ADD   s0 = SILU_MUL(gate, up); s1 = GEMV_TILE(s0, W); out = ADD(s1, residual)
//	..._ROPE        s = GEMV_TILE(...); s' = EMBED(reshape_id0, s) (heads); out = ROPE(s', pos)
//	..._APPEND      ... ; out = KV_APPEND(s, cache) (the cache becomes an input too)
//
// EMBED of the one-row table by reshape_id0 is the reshape to heads the
// lowering itself uses between a projection and ROPE (the op set has no
// reshape). A recipe's GEMV_TILE writes only its tile, but ADD, ROPE and
// KV_APPEND write their whole output, so the epilogue patterns have a
// recipe only for a tile that covers the projection (n_off 0, N_tile the
// projection's width); NORM_GEMV and SILU_GEMV have one for any tile.

// ReshapeIDInput is the IO_INPUT buffer of row ids (0 for one sequence)
// that reshapes a flat activation to heads by EMBED.
const ReshapeIDInput = "reshape_id0"

// recipe step arguments.
func recipeIn(k int) pyjson.Value {
	return pyjson.ObjectValue(pyjson.M("in", pyjson.IntValue(int64(k))))
}
func recipeS(j int) pyjson.Value { return pyjson.ObjectValue(pyjson.M("s", pyjson.IntValue(int64(j)))) }

// recipeDTypeNames are the reference's recipe dtype names.
var recipeDTypeNames = map[DType]string{F32: "float32", F16: "float16", BF16: "bfloat16"}

// recipeBuilder collects a recipe's steps.
type recipeBuilder struct {
	steps   []pyjson.Value
	scratch int
	dtype   string
}

// step adds op(args) with params; shape nil writes the final output, else
// a new scratch of that shape (returned as its arg).
func (b *recipeBuilder) step(op Op, args []pyjson.Value, params []pyjson.Member, shape []int) pyjson.Value {
	st := pyjson.ObjectValue(pyjson.M("op", pyjson.IntValue(int64(op))), pyjson.M("args", pyjson.ArrayValue(args...)))
	var ref pyjson.Value
	if shape == nil {
		st.Set("out", pyjson.StringValue("final"))
	} else {
		st.Set("out", pyjson.IntValue(int64(b.scratch)))
		ref = recipeS(b.scratch)
		b.scratch++
	}
	if len(params) > 0 {
		st.Set("params", pyjson.ObjectValue(params...))
	}
	if shape != nil {
		dims := make([]pyjson.Value, len(shape))
		for i, d := range shape {
			dims[i] = pyjson.IntValue(int64(d))
		}
		st.Set("out_shape", pyjson.ArrayValue(dims...))
		st.Set("out_dtype", pyjson.StringValue(b.dtype))
	}
	b.steps = append(b.steps, st)
	return ref
}

// pick returns the named params of ps as recipe step params (missing ones
// are left out; the caller checked the pattern's required params).
func pick(ps Params, keys ...string) []pyjson.Member {
	var out []pyjson.Member
	for _, k := range keys {
		if v, ok := ps.Get(k); ok {
			out = append(out, pyjson.M(k, v))
		}
	}
	return out
}

// PatternRecipe returns the recipe of a FUSED pattern task of p and the
// inputs the recipe needs beyond the pattern's (the reshape ids, the KV
// cache), or a reason why the pattern has no recipe for this task.
func PatternRecipe(p *Program, t *Task) (recipe pyjson.Value, extraInputs []int, reason string) {
	id := TaskFusedPattern(t)
	pat, ok := FusedPatternByID(id)
	if !ok {
		return pyjson.Value{}, nil, "not a fused pattern task (params.flags names no pattern)"
	}
	fail := func(format string, args ...any) (pyjson.Value, []int, string) {
		return pyjson.Value{}, nil, pat.Name + ": " + fmt.Sprintf(format, args...)
	}
	buf := func(i int) *Buffer {
		if i < 0 || i >= len(p.Buffers) {
			return nil
		}
		return &p.Buffers[i]
	}
	if len(t.Inputs) != len(pat.Inputs) || len(t.Outputs) != 1 {
		return fail("has %d inputs and %d outputs, the pattern %d and 1", len(t.Inputs), len(t.Outputs), len(pat.Inputs))
	}
	for _, k := range pat.RequiredParams() {
		if !t.Params.Has(k) {
			return fail("lacks param %s", k)
		}
	}
	if t.Params.Has("M_tile") || t.Params.Has("qdtype") {
		return fail("a batched or quantised tile: the reference's recipes here cover the float single-sequence GEMV")
	}
	if t.Params.IntOr("flags", 0)&FlagPairedTile != 0 {
		return fail("a paired tile (two half-head column ranges): a recipe's GEMV_TILE writes one range")
	}
	x, out := buf(t.Inputs[0]), buf(t.Outputs[0])
	if x == nil || out == nil {
		return fail("names a buffer the program lacks")
	}
	if w := buf(t.Inputs[pat.Role(RoleW)]); w == nil || recipeDTypeNames[w.DType] == "" {
		return fail("the weight is not a float tensor (a quantised projection): no recipe here")
	}
	dt, ok := recipeDTypeNames[x.DType]
	if !ok {
		return fail("activation dtype %s has no recipe dtype", x.DType)
	}
	if len(x.Shape) != 2 || x.Shape[0] != 1 {
		return fail("activation shape %v: the recipes here are for one sequence ([1, K])", x.Shape)
	}
	K, nTile, nOff := t.Params.IntOr("K", 0), t.Params.IntOr("N_tile", 0), t.Params.IntOr("n_off", 0)
	width := int64(out.Numel()) // the projection's width when the output is the projection
	if pat.WritesCache() {
		width = t.Params.IntOr("N", 0)
	}
	whole := nOff == 0 && nTile == width
	if pat.Epilogue != EpilogueNone && !whole {
		return fail("tile [%d, %d) of a %d-wide projection: the epilogue's %s writes the whole output, so only a tile covering the projection has a recipe",
			nOff, nOff+nTile, width, map[FusedEpilogue]string{EpilogueAdd: "ADD", EpilogueRoPE: "ROPE", EpilogueRoPEAppend: "KV_APPEND", EpilogueAppend: "KV_APPEND"}[pat.Epilogue])
	}
	b := &recipeBuilder{dtype: dt}
	// staging
	act := recipeIn(pat.Role(RoleX))
	switch pat.Staging {
	case StageRMSNorm:
		act = b.step(OpRMSNORM, []pyjson.Value{recipeIn(pat.Role(RoleX)), recipeIn(pat.Role(RoleNormW))}, pick(t.Params, "eps", "hidden"), x.Shape)
	case StageSiLUMul:
		act = b.step(OpSiLUMul, []pyjson.Value{recipeIn(pat.Role(RoleGate)), recipeIn(pat.Role(RoleUp))}, nil, x.Shape)
		if K != int64(x.Shape[1]) {
			return fail("K %d differs from the activation's width %d", K, x.Shape[1])
		}
	}
	gemv := []pyjson.Value{act, recipeIn(pat.Role(RoleW))}
	gemvParams := pick(t.Params, "K", "N_tile", "n_off")
	if pat.Epilogue == EpilogueNone {
		b.step(OpGEMVTile, gemv, gemvParams, nil)
		return pyjson.ObjectValue(pyjson.M("steps", pyjson.ArrayValue(b.steps...))), nil, ""
	}
	sums := b.step(OpGEMVTile, gemv, gemvParams, []int{1, int(width)})
	next := len(t.Inputs)
	switch pat.Epilogue {
	case EpilogueAdd:
		b.step(OpADD, []pyjson.Value{sums, recipeIn(pat.Role(RoleResidual))}, nil, nil)
	case EpilogueRoPE, EpilogueRoPEAppend:
		reshape := slices.IndexFunc(p.Buffers, func(bb Buffer) bool { return bb.Name == ReshapeIDInput && bb.Kind == IOInput })
		if reshape < 0 {
			return fail("the program has no %s input to reshape the projection to heads", ReshapeIDInput)
		}
		headDim := t.Params.IntOr("head_dim", 0)
		if headDim <= 0 || width%headDim != 0 {
			return fail("head_dim %d does not divide the projection's width %d", headDim, width)
		}
		heads := []int{int(width / headDim), int(headDim)}
		if pat.WritesCache() {
			heads = []int{1, int(width / headDim), int(headDim)} // one cache row
		} else if !slices.Equal(out.Shape, heads) {
			return fail("output shape %v is not the heads %v", out.Shape, heads)
		}
		extraInputs = append(extraInputs, reshape)
		h := b.step(OpEMBED, []pyjson.Value{recipeIn(next), sums}, []pyjson.Member{pyjson.M("hidden", pyjson.IntValue(headDim))}, heads)
		next++
		rope := []pyjson.Value{h, recipeIn(pat.Role(RolePos))}
		ropeParams := pick(t.Params, "head_dim", "theta")
		if pat.Epilogue == EpilogueRoPE {
			b.step(OpROPE, rope, ropeParams, nil)
			break
		}
		roped := b.step(OpROPE, rope, ropeParams, heads)
		extraInputs = append(extraInputs, t.Outputs[0])
		b.step(OpKVAppend, []pyjson.Value{roped, recipeIn(next)}, pick(t.Params, "pos"), nil)
	case EpilogueAppend:
		extraInputs = append(extraInputs, t.Outputs[0])
		b.step(OpKVAppend, []pyjson.Value{sums, recipeIn(next)}, pick(t.Params, "pos"), nil)
	}
	return pyjson.ObjectValue(pyjson.M("steps", pyjson.ArrayValue(b.steps...))), extraInputs, ""
}

// RecipeNote says what became of one FUSED task in a conversion.
type RecipeNote struct {
	Task   string // Task.Describe()
	Reason string
}

// WithRecipes returns a copy of p in which every fused pattern task also
// carries params.recipe, so the reference's validator and CPU oracle take
// the program. A task whose recipe reads only the pattern's inputs keeps
// its pattern in params.flags (the reference's device ABI reads pattern
// ids there, GEMV_ADD being 1 in both); one whose recipe reads more (the
// reshape ids, the KV cache) gets them as inputs and loses the pattern
// bits, so it is a plain recipe task to amk's validator and VM too.
// Tasks without a recipe are left as they are and noted with the reason,
// and so are several tiles writing one output: the reference's validator
// proves disjoint writes only for GEMV_TILE and GEMM_TILE tasks, so it
// reports them as a write-after-write race.
func WithRecipes(p *Program) (*Program, []RecipeNote) {
	q := shallowCopy(p)
	var notes []RecipeNote
	writers := map[int]int{}
	for i := range q.Tasks {
		t := &q.Tasks[i]
		if t.Op != OpFUSED || t.Params.Has("recipe") {
			continue
		}
		r, extra, reason := PatternRecipe(p, &p.Tasks[i])
		if reason != "" {
			notes = append(notes, RecipeNote{t.Describe(), reason})
			continue
		}
		t.Params = append(slices.Clip(t.Params), Param{Key: "recipe", Val: r})
		if len(extra) > 0 { // no longer the pattern's inputs: a recipe task (WithPatterns turns it back)
			t.Inputs = append(slices.Clip(t.Inputs), extra...)
			t.Params = withoutKey(t.Params, "flags")
			if rest := p.Tasks[i].Params.IntOr("flags", 0) &^ (0xFFFF << FusedPatternShift); rest != 0 {
				t.Params = append(t.Params, IntParam("flags", rest))
			}
		}
		writers[t.Outputs[0]]++
	}
	for i := range q.Tasks {
		t := &q.Tasks[i]
		if t.Op == OpFUSED && len(t.Outputs) == 1 && writers[t.Outputs[0]] > 1 && TaskFusedPattern(&p.Tasks[i]) != FusedNone {
			notes = append(notes, RecipeNote{t.Describe(), fmt.Sprintf("one of %d FUSED tiles writing %s: the reference's validator treats a FUSED task as writing its whole output and will report a write-after-write race; lower with tiling.gemv.N_tile covering the projection (one tile each)",
				writers[t.Outputs[0]], q.Buffers[t.Outputs[0]].Name)})
		}
	}
	return q, notes
}

// WithPatterns returns a copy of p in which every FUSED task whose recipe
// is the recipe of one of amk's fused patterns (PatternRecipe, for the
// task's inputs and params) becomes that pattern task: params.flags names
// the pattern, the recipe and the inputs only the recipe read are dropped,
// and the params the pattern needs come from the recipe's steps. Tasks with
// another recipe keep it (the reference VM runs any recipe; the GPU kernels
// run patterns only) and are noted.
func WithPatterns(p *Program) (*Program, []RecipeNote) {
	q := shallowCopy(p)
	var notes []RecipeNote
	for i := range q.Tasks {
		t := &q.Tasks[i]
		r, ok := t.Params.Get("recipe")
		if t.Op != OpFUSED || !ok {
			continue
		}
		if cand, ok := matchPattern(q, t, r); ok {
			*t = cand
			continue
		}
		notes = append(notes, RecipeNote{t.Describe(), "its recipe is none of amk's fused patterns: the reference VM runs it as it is; the GPU kernels cannot"})
	}
	return q, notes
}

// matchPattern finds the pattern whose recipe is r for task t.
func matchPattern(p *Program, t *Task, r pyjson.Value) (Task, bool) {
	want := pyjson.Compact(r, true)
	steps := recipeStepParams(r)
	for _, pat := range FusedPatterns()[1:] {
		if len(t.Inputs) < len(pat.Inputs) {
			continue
		}
		cand := *t
		cand.Inputs = slices.Clone(t.Inputs[:len(pat.Inputs)])
		if own := withoutKey(t.Params, "recipe"); TaskFusedPattern(t) == pat.ID {
			cand.Params = own // amk's own task, exported: its params as they were
		} else {
			cand.Params = patternParams(own, steps, pat, p, t)
		}
		got, extra, reason := PatternRecipe(p, &cand)
		if reason != "" || pyjson.Compact(got, true) != want || !slices.Equal(append(slices.Clone(cand.Inputs), extra...), t.Inputs) {
			continue
		}
		return cand, true
	}
	return Task{}, false
}

// recipeStepParams merges every step's params of a recipe (later steps
// do not override earlier ones).
func recipeStepParams(r pyjson.Value) map[string]pyjson.Value {
	out := map[string]pyjson.Value{}
	steps, _ := r.Get("steps")
	for _, st := range steps.Arr {
		ps, _ := st.Get("params")
		for _, m := range ps.Obj {
			if _, seen := out[m.Key]; !seen {
				out[m.Key] = m.Val
			}
		}
	}
	return out
}

// patternParams are a pattern task's params in the lowering's order: K,
// N_tile, n_off, the pattern's required params, flags; each from the
// task's own params, else from the recipe's steps (head_dim of an append
// without RoPE from the cache, N from the tile).
func patternParams(own Params, steps map[string]pyjson.Value, pat FusedPattern, p *Program, t *Task) Params {
	var ps Params
	for _, k := range pat.RequiredParams() {
		if v, ok := own.Get(k); ok {
			ps = append(ps, Param{k, v})
			continue
		}
		if v, ok := steps[k]; ok {
			ps = append(ps, Param{k, v})
			continue
		}
		switch k {
		case "N":
			if v, ok := steps["N_tile"]; ok {
				ps = append(ps, Param{k, v})
			}
		case "head_dim":
			if len(t.Outputs) == 1 && t.Outputs[0] >= 0 && t.Outputs[0] < len(p.Buffers) {
				if s := p.Buffers[t.Outputs[0]].Shape; len(s) > 0 {
					ps = append(ps, IntParam(k, int64(s[len(s)-1])))
				}
			}
		}
	}
	flags := own.IntOr("flags", 0)&^(0xFFFF<<FusedPatternShift) | FusedPatternFlags(pat.ID)
	return append(ps, IntParam("flags", flags))
}

// shallowCopy copies p with its own task list (tasks are replaced, never
// edited in place; buffers and counters are shared).
func shallowCopy(p *Program) *Program {
	q := *p
	q.Tasks = slices.Clone(p.Tasks)
	return &q
}

// withoutKey is ps without key.
func withoutKey(ps Params, key string) Params {
	return slices.DeleteFunc(slices.Clone(ps), func(p Param) bool { return p.Key == key })
}
