package ir

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fused_toy.json is the toy model lowered with every fusion and one tile
// per projection (amkctl lower toy --gpu h100 with tiling.gemv.N_tile
// 65536 and all fusion groups): tasks of six fused patterns.
func loadFusedToy(t testing.TB) *Program {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "fused_toy.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every pattern task gets a recipe; the ones that read more than the
// pattern's inputs lose their pattern bits; reading back gives the program.
func TestWithRecipesAndBack(t *testing.T) {
	p := loadFusedToy(t)
	q, notes := WithRecipes(p)
	if len(notes) != 0 {
		t.Fatalf("notes: %+v", notes)
	}
	kept := 0
	for i, tk := range q.Tasks {
		if tk.Op != OpFUSED {
			continue
		}
		if !tk.Params.Has("recipe") {
			t.Errorf("task %s has no recipe", tk.Describe())
		}
		orig := &p.Tasks[i]
		switch {
		case len(tk.Inputs) == len(orig.Inputs) && TaskFusedPattern(&tk) == TaskFusedPattern(orig):
			kept++
		case len(tk.Inputs) > len(orig.Inputs) && TaskFusedPattern(&tk) == FusedNone:
		default:
			t.Errorf("task %s: inputs %v flags %d", tk.Describe(), tk.Inputs, tk.Params.IntOr("flags", 0))
		}
	}
	if kept == 0 {
		t.Error("no task kept its pattern (GEMV_ADD, NORM_GEMV, SILU_GEMV_ADD read only their inputs)")
	}
	back, notes := WithPatterns(q)
	if len(notes) != 0 || !bytes.Equal(Encode(back), Encode(p)) {
		t.Errorf("back from recipes: notes %+v, same program %v", notes, bytes.Equal(Encode(back), Encode(p)))
	}
	// The input program is not changed.
	if again := loadFusedToy(t); !bytes.Equal(Encode(p), Encode(again)) {
		t.Error("WithRecipes or WithPatterns changed their input")
	}
}

// A tile that does not cover its projection has no recipe for an
// epilogue pattern; the reason names the tile.
func TestPatternRecipeRefusesPartialEpilogueTile(t *testing.T) {
	p := loadFusedToy(t)
	for i := range p.Tasks {
		tk := &p.Tasks[i]
		if TaskFusedPattern(tk) != FusedGEMVAdd {
			continue
		}
		for j := range tk.Params {
			if tk.Params[j].Key == "N_tile" {
				tk.Params[j] = IntParam("N_tile", 16)
			}
		}
		_, _, reason := PatternRecipe(p, tk)
		if !strings.Contains(reason, "GEMV_ADD: tile [0, 16) of a") || !strings.Contains(reason, "ADD writes the whole output") {
			t.Errorf("reason %q", reason)
		}
		return
	}
	t.Fatal("no GEMV_ADD task")
}

// FuzzRecipes: the conversions never panic, what WithRecipes writes decodes
// again, and a program without recipes whose every fused task got one
// comes back from WithPatterns unchanged.
func FuzzRecipes(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		q, notes := WithRecipes(p)
		enc := Encode(q)
		if _, err := Decode(enc); err != nil {
			t.Fatalf("WithRecipes wrote what does not decode: %v", err)
		}
		back, _ := WithPatterns(q)
		hadRecipe := bytes.Contains(data, []byte("recipe"))
		if len(notes) == 0 && !hadRecipe && !bytes.Equal(Encode(back), Encode(p)) {
			t.Fatalf("recipes did not come back as the program")
		}
	})
}
