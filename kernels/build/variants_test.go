package build

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/amk-dev/amk/kernels"
)

func TestVariantSets(t *testing.T) {
	names := func(vs []kernels.Variant) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			if _, err := v.Normalize(); err != nil {
				t.Fatalf("invalid variant %s: %v", v, err)
			}
			if m[v.String()] {
				t.Fatalf("variant %s twice", v)
			}
			m[v.String()] = true
		}
		return m
	}
	def := kernels.DefaultVariant().String()
	spot := names(SpotVariants())
	if !spot[def] || SpotVariants()[0].String() != def {
		t.Fatal("the default variant does not lead the spot set")
	}
	want := 1
	for _, k := range kernels.KnobSpace() {
		if k.Scope != kernels.ScopeFixed {
			want += len(k.Choices) - 1
		}
	}
	if len(spot) != want {
		t.Fatalf("spot set has %d variants, want %d", len(spot), want)
	}
	ext := names(ExtremeVariants())
	if !ext[def] || len(ext) < 3 {
		t.Fatalf("extreme set %v", ext)
	}
}

// Every point a GPU visit measures (scripts/gpu/points/*.json) runs a kernel
// variant of VisitVariants, which `make gpu-bin` carries prebuilt.
func TestVisitVariantsCoverTheVisitPoints(t *testing.T) {
	visit := map[string]bool{}
	for _, v := range VisitVariants() {
		visit[v.String()] = true
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "scripts", "gpu", "points", "*.json"))
	if len(files) == 0 {
		t.Fatal("no visit points found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Knobs map[string]int64 `json:"kernel_knobs"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		v := kernels.DefaultVariant()
		maps.Copy(v, p.Knobs)
		if !visit[v.String()] {
			t.Errorf("%s runs kernel variant %s, which VisitVariants lacks", f, v)
		}
	}
}
