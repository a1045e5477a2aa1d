package build

import (
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
