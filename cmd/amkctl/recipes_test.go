package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

// Fused lowerings: every fusion, one tile per projection (N_tile is clamped
// to the projection), and the same without the norm folded into the GEMV
// (the plain GEMV_ROPE / GEMV_APPEND patterns).
const (
	allFusions   = `[["q","k","v"],["gate","up"],["rmsnorm","gemv"],["rope","kv_append"],["gemv","add"],["silu","down"]]`
	noNormFusion = `[["q","k","v"],["gate","up"],["rope","kv_append"],["silu","down"]]`
)

// lowerTo lowers model with config cfg into dir/name and returns the path.
func lowerTo(t *testing.T, dir, name, model, cfg string) string {
	t.Helper()
	cfgPath := filepath.Join(dir, name+".cfg.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if code, _, errOut := runCmd(t, "lower", model, "--gpu", "h100", "--schedule", cfgPath, "--out", out); code != 0 {
		t.Fatalf("lower %s %s: %s", model, cfg, errOut)
	}
	return out
}

// writeStdout runs amkctl args and writes its stdout to path; it returns
// the exit code and stderr.
func writeStdout(t *testing.T, path string, args ...string) (int, string) {
	t.Helper()
	code, out, errOut := runCmd(t, args...)
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return code, errOut
}

// stripPatterns rewrites a program file as the reference writes fused
// tasks: params.recipe alone (no pattern in flags, none of amk's params);
// everything else keeps its order.
func stripPatterns(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := pyjson.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := prog.Get("tasks")
	n := 0
	for i := range tasks.Arr {
		task := &tasks.Arr[i]
		if op, _ := task.Get("op"); op.S != "FUSED" {
			continue
		}
		params, _ := task.Get("params")
		recipe, ok := params.Get("recipe")
		if !ok {
			t.Fatalf("a FUSED task has no recipe: %s", task.Repr())
		}
		task.Set("params", pyjson.ObjectValue(pyjson.M("recipe", recipe)))
		n++
	}
	if n == 0 {
		t.Fatal("no FUSED task")
	}
	prog.Set("tasks", tasks)
	if err := os.WriteFile(dst, pyjson.Indent(prog), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Fused programs go to the reference's recipes and back: the recipes
// compute the patterns' values exactly (the VM runs them with every
// pattern removed, against the eager oracle, max_abs_err 0), amk's own
// validator takes the exported program, and reading it back (also from
// recipes alone, as the reference writes them) gives the original program
// byte for byte.
func TestFusedPatternsToRecipesAndBack(t *testing.T) {
	dir := t.TempDir()
	for name, fusion := range map[string]string{"all": allFusions, "nonorm": noNormFusion} {
		t.Run(name, func(t *testing.T) {
			orig := lowerTo(t, dir, name+".json", "toy", `{"tiling": {"gemv": {"N_tile": 65536}}, "fusion_grouping": `+fusion+`}`)
			exported := filepath.Join(dir, name+".recipes.json")
			if code, errOut := writeStdout(t, exported, "ir", "recipes", orig); code != 0 {
				t.Fatalf("ir recipes: exit %d: %s", code, errOut)
			}
			if code, out, errOut := runCmd(t, "validate", exported); code != 0 {
				t.Fatalf("amk's validator rejects the exported program: %s%s", out, errOut)
			}
			referenceForm := filepath.Join(dir, name+".reference.json")
			stripPatterns(t, exported, referenceForm)
			if code, out, errOut := runCmd(t, "verify", referenceForm); code != 0 || !strings.Contains(out+errOut, "max_abs_err 0,") {
				t.Fatalf("the recipes alone do not compute the patterns' values: exit %d %s%s", code, out, errOut)
			}
			_, canonical, _ := runCmd(t, "ir", "roundtrip", orig)
			for _, src := range []string{exported, referenceForm} {
				code, back, errOut := runCmd(t, "ir", "patterns", src)
				if code != 0 {
					t.Fatalf("ir patterns %s: exit %d: %s", src, code, errOut)
				}
				if back != canonical {
					t.Errorf("ir patterns %s is not the original program", filepath.Base(src))
				}
			}
		})
	}
}

// Where a pattern has no recipe, the export names the task and why; a
// recipe that is no pattern is kept and named.
func TestRecipesNameWhatDoesNotMap(t *testing.T) {
	dir := t.TempDir()
	tiled := lowerTo(t, dir, "tiled.json", "toy", `{"tiling": {"gemv": {"N_tile": 16}}, "fusion_grouping": `+allFusions+`}`)
	code, errOut := writeStdout(t, filepath.Join(dir, "tiled.recipes.json"), "ir", "recipes", tiled)
	if code != exitRejected {
		t.Fatalf("exit %d, want %d: %s", code, exitRejected, errOut)
	}
	for _, want := range []string{"L0.o_proj[t1]: GEMV_ADD: tile [16, 32) of a 64-wide projection", "only a tile covering the projection has a recipe",
		"write-after-write race", "tiling.gemv.N_tile"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the notes do not say %q:\n%.2000s", want, errOut)
		}
	}
	// An outside recipe that is no pattern (ADD then RMSNORM) stays a recipe.
	prog := `{"ir_version": "0.2.0", "abi_version": "0.2.0", "meta": {}, "target": null,
 "buffers": [{"id": 0, "name": "x", "kind": "IO_INPUT", "dtype": "F32", "shape": [1, 8], "space": "HBM", "source": null},
  {"id": 1, "name": "r", "kind": "IO_INPUT", "dtype": "F32", "shape": [1, 8], "space": "HBM", "source": null},
  {"id": 2, "name": "w", "kind": "WEIGHT", "dtype": "F32", "shape": [8], "space": "HBM", "source": "w"},
  {"id": 3, "name": "y", "kind": "IO_OUTPUT", "dtype": "F32", "shape": [1, 8], "space": "HBM", "source": null}],
 "counters": [{"id": 0, "init": 0, "note": ""}],
 "tasks": [{"id": 0, "op": "FUSED", "inputs": [0, 1, 2], "outputs": [3], "out_counter": 0, "waits": [], "sm": null, "est_bytes": 0, "est_flops": 0, "label": "add_norm",
  "params": {"recipe": {"steps": [{"op": 11, "args": [{"in": 0}, {"in": 1}], "out": 0, "out_shape": [1, 8], "out_dtype": "float32"},
   {"op": 3, "args": [{"s": 0}, {"in": 2}], "out": "final", "params": {"eps": 1e-05, "hidden": 8}}]}}}],
 "pages": null, "config": null}`
	path := filepath.Join(dir, "addnorm.json")
	if err := os.WriteFile(path, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "ir", "patterns", path)
	if code != exitRejected || !strings.Contains(errOut, "0:add_norm: its recipe is none of amk's fused patterns") || !strings.Contains(out, `"recipe"`) {
		t.Errorf("exit %d, stderr %q, recipe kept %v", code, errOut, strings.Contains(out, `"recipe"`))
	}
}

// AMK's own validator (its schedule/ir.py, run on CPython) accepts amk's
// fused small program exported with recipes.
func TestFusedSmallValidatesWithAMKValidator(t *testing.T) {
	python := amkReference(t)
	dir := t.TempDir()
	orig := lowerTo(t, dir, "small.json", "small", `{"tiling": {"gemv": {"N_tile": 65536}}, "fusion_grouping": `+allFusions+`}`)
	exported := filepath.Join(dir, "small.recipes.json")
	if code, errOut := writeStdout(t, exported, "ir", "recipes", orig); code != 0 {
		t.Fatalf("ir recipes: exit %d: %s", code, errOut)
	}
	const check = `import sys, json
from schedule.ir import MegakernelProgram, validate
path = sys.argv[1]
fused = [t for t in json.load(open(path))["tasks"] if t["op"] == "FUSED"]
r = validate(MegakernelProgram.load(path))
print("ok" if r.ok else "rejected", len(fused), "fused")
for e in r.errors[:10]:
    print("ERROR:", e)`
	for _, c := range []struct {
		path, want string
	}{
		{exported, "ok 29 fused"},
		{orig, "rejected 29 fused"}, // without recipes AMK requires params.recipe
	} {
		got, err := python("-c", check, c.path)
		if err != nil {
			t.Fatalf("AMK's validator: %v\n%s", err, got)
		}
		if first, _, _ := strings.Cut(got, "\n"); first != c.want {
			t.Errorf("%s: AMK's validator says %q, want %q:\n%s", filepath.Base(c.path), first, c.want, got)
		}
	}
}
