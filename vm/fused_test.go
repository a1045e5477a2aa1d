package vm

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/tensor"
)

const addNormRecipe = `{"steps": [
 {"op": 11, "args": [{"in": 0}, {"in": 1}], "out": 0, "out_shape": [1, 8], "out_dtype": "bfloat16"},
 {"op": 3, "args": [{"s": 0}, {"in": 2}], "out": "final", "params": {"eps": 1e-06, "hidden": 8}}]}`

func TestFusedAddRMSNormBitIdentical(t *testing.T) {
	a := ft(t, ir.BF16, shp(1, 8), wave(8, 1.3)...)
	b := ft(t, ir.BF16, shp(1, 8), wave(8, 0.7)...)
	wt := ft(t, ir.BF16, shp(8), wave(8, 2.1)...)

	h := tensor.New(ir.BF16, 1, 8)
	kernel(t, ir.OpADD, []*tensor.Tensor{a, b}, h)
	unfused := tensor.New(ir.BF16, 1, 8)
	kernel(t, ir.OpRMSNORM, []*tensor.Tensor{h, wt}, unfused, fp("eps", 1e-6), ip("hidden", 8))

	r, err := parseRecipe(recipeParam(t, addNormRecipe).Val, 3)
	if err != nil {
		t.Fatal(err)
	}
	fused := tensor.New(ir.BF16, 1, 8)
	if err := runRecipe(r, []*tensor.Tensor{a, b, wt}, []*tensor.Tensor{fused}); err != nil {
		t.Fatal(err)
	}
	same(t, "fused vs unfused", fused.F, unfused.F)

	// An f32 scratch skips the bf16 rounding of the sum: still the same
	// kernels, so it equals the unfused pair with an f32 intermediate.
	r32, err := parseRecipe(recipeParam(t, strings.Replace(addNormRecipe, "bfloat16", "float32", 1)).Val, 3)
	if err != nil {
		t.Fatal(err)
	}
	h32 := tensor.New(ir.F32, 1, 8)
	kernel(t, ir.OpADD, []*tensor.Tensor{a, b}, h32)
	kernel(t, ir.OpRMSNORM, []*tensor.Tensor{h32, wt}, unfused, fp("eps", 1e-6), ip("hidden", 8))
	if err := runRecipe(r32, []*tensor.Tensor{a, b, wt}, []*tensor.Tensor{fused}); err != nil {
		t.Fatal(err)
	}
	same(t, "fused f32 scratch", fused.F, unfused.F)
}

func TestMalformedRecipesRejected(t *testing.T) {
	step := func(s string) string { return `{"steps": [` + s + `]}` }
	final := `{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": "final"}`
	cases := []struct{ recipe, want string }{
		{`[1]`, "recipe must be a dict"},
		{`null`, "recipe must be a dict"},
		{`{}`, "recipe.steps must be a non-empty list"},
		{step(``), "recipe.steps must be a non-empty list"},
		{step(`1`), "step 0 must be a dict"},
		{step(`{"op": 99, "args": [{"in": 0}], "out": "final"}`), "step 0: bad op 99"},
		{step(`{"op": "ADD", "args": [{"in": 0}, {"in": 1}], "out": "final"}`), "step 0: bad op 'ADD'"},
		{step(`{"op": 19, "args": [{"in": 0}], "out": "final"}`), "step 0: nested FUSED is not allowed"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 2}], "out": "final"}`), "step 0: input index 2 out of range [0,2)"},
		{step(`{"op": 11, "args": [{"in": 0}, {"s": 0}], "out": "final"}`), "step 0: reads scratch 0 not written by an earlier step"},
		{step(`{"op": 11, "args": [{"in": 0}, {"x": 0}], "out": "final"}`), "step 0: arg must be {'in':k} or {'s':j}"},
		{step(`{"op": 11, "args": [{"in": 0, "s": 1}, {"in": 1}], "out": "final"}`), "step 0: bad arg"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": "x"}`), "step 0: out must be 'final' or an int scratch index, got 'x'"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": "final", "out_dtype": "float8"}`), "step 0: out_dtype 'float8' not in the allowlist"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": 0}`), "recipe never writes its final output"},
		{step(`{"op": 11, "args": [{"in": 0}], "out": "final"}`), "step 0: ADD takes 2..2 args, got 1"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": "final", "params": [1]}`), "step 0: params must be a dict"},
		{step(`{"op": 11, "args": 3, "out": "final"}`), "step 0: args must be a list"},
		{step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": 0, "out_shape": [-1]}, ` + final), "step 0: bad out_shape"},
		{step(`{"op": 0, "args": [], "out": 1}, ` + final), "step 0: a scratch output needs out_shape"},
		// The scratch written by a later step cannot be read earlier.
		{step(`{"op": 11, "args": [{"s": 1}, {"in": 1}], "out": "final"}, {"op": 11, "args": [{"in": 0}, {"in": 1}], "out": 1}`),
			"step 0: reads scratch 1 not written by an earlier step"},
	}
	for _, c := range cases {
		v, err := pyjson.Parse([]byte(c.recipe))
		if err != nil {
			t.Fatalf("%s: %v", c.recipe, err)
		}
		_, err = parseRecipe(v, 2)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "malformed FUSED recipe: ") {
			t.Errorf("%s:\n  err = %v\n want %q", c.recipe, err, c.want)
		}
	}
	// -1 means final, like "final".
	v, _ := pyjson.Parse([]byte(step(`{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": -1}`)))
	if _, err := parseRecipe(v, 2); err != nil {
		t.Errorf("out -1: %v", err)
	}
}

// A step that fails at run time (here a shape mismatch) is an error naming
// the step.
func TestRecipeRuntimeError(t *testing.T) {
	r, err := parseRecipe(recipeParam(t, `{"steps": [{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": "final"}]}`).Val, 2)
	if err != nil {
		t.Fatal(err)
	}
	err = runRecipe(r, []*tensor.Tensor{ft(t, ir.F32, shp(3), 1, 2, 3), ft(t, ir.F32, shp(2), 1, 2)}, []*tensor.Tensor{tensor.New(ir.F32, 3)})
	if err == nil || !strings.Contains(err.Error(), "recipe step 0 (ADD)") {
		t.Errorf("err = %v", err)
	}
}

func FuzzFusedRecipe(f *testing.F) {
	f.Add(addNormRecipe)
	f.Add(`{"steps": [{"op": 14, "args": [{"in": 0}], "out": 3, "params": {"dim": 0}}, {"op": 12, "args": [{"s": 3}, {"in": 1}], "out": "final"}]}`)
	f.Add(`{"steps": [{"op": 5, "args": [{"in": 0}, {"in": 0}], "out": "final", "params": {"K": 4, "N_tile": 2, "n_off": 2}}]}`)
	f.Add(`{"steps": [{"op": 2, "args": [{"in": 1}, {"in": 0}], "out": 1, "out_shape": [4, 4], "out_dtype": "int8"}, {"op": 17, "args": [{"s": 1}], "out": "final"}]}`)
	f.Add(`{"steps": [{"op": 8, "args": [{"in": 0}, {"in": 1}], "out": "final", "params": {"head_dim": 4, "theta": 10000.0}}]}`)
	f.Add(`{"steps": [{"op": 19}]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, js string) {
		v, err := pyjson.Parse([]byte(js))
		if err != nil {
			return
		}
		r, err := parseRecipe(v, 2)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "malformed FUSED recipe: ") {
				t.Fatalf("unexpected error form: %v", err)
			}
			return
		}
		x, _ := tensor.FromFloats(ir.F32, []int{2, 4}, []float32{1, -2, 3, 0.5, 0, 1, 2, 3})
		y, _ := tensor.FromFloats(ir.BF16, []int{4}, []float32{0.5, 1, 2, 3})
		_ = runRecipe(r, []*tensor.Tensor{x, y}, []*tensor.Tensor{tensor.New(ir.F32, 2, 4)})
	})
}
