package schedule

import (
	"testing"

	"github.com/amk-dev/amk/validate"
)

// BenchmarkLowerLlama8B is lowering + validation of the llama-8b shape at
// the default point (the budget: 100 ms).
func BenchmarkLowerLlama8B(b *testing.B) {
	cfg := mustPreset(b, "llama-8b")
	tg := mustTarget(b, "h100")
	p := Default()
	b.ReportAllocs()
	for b.Loop() {
		prog := mustLower(b, cfg, tg, p, LowerOptions{Pos: 100})
		if rep := validate.Validate(prog); !rep.OK {
			b.Fatal(rep.Reason(3))
		}
	}
}

// BenchmarkLowerOnlyLlama8B is the lowering alone.
func BenchmarkLowerOnlyLlama8B(b *testing.B) {
	cfg := mustPreset(b, "llama-8b")
	tg := mustTarget(b, "h100")
	p := Default()
	b.ReportAllocs()
	for b.Loop() {
		mustLower(b, cfg, tg, p, LowerOptions{Pos: 100})
	}
}

// BenchmarkPredictSmall is one cost-model prediction for small on h100.
func BenchmarkPredictSmall(b *testing.B) {
	cfg := mustPreset(b, "small")
	tg := mustTarget(b, "h100")
	p := Default()
	prog := mustLower(b, cfg, tg, p, LowerOptions{})
	b.ReportAllocs()
	for b.Loop() {
		Predict(prog, tg, p)
	}
}

// BenchmarkPredictLlama8B is one prediction for the llama-8b shape.
func BenchmarkPredictLlama8B(b *testing.B) {
	cfg := mustPreset(b, "llama-8b")
	tg := mustTarget(b, "h100")
	p := Default()
	prog := mustLower(b, cfg, tg, p, LowerOptions{})
	b.ReportAllocs()
	for b.Loop() {
		Predict(prog, tg, p)
	}
}
