package trial

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

// sameBits reports whether two weight sets hold the same tensors bit for bit.
func sameBits(t *testing.T, got, want model.Weights) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if g == nil || g.DType != w.DType || g.FloatCount() != w.FloatCount() {
			t.Fatalf("tensor %s differs in dtype or size", k)
		}
		gf, wf := g.Floats(), w.Floats()
		for i := range wf {
			if math.Float32bits(gf[i]) != math.Float32bits(wf[i]) {
				t.Fatalf("tensor %s element %d: %v, want %v", k, i, gf[i], wf[i])
			}
		}
	}
}

func TestWeightsDirGeneratesOnceThenMaps(t *testing.T) {
	dir := t.TempDir()
	want, err := NewModelCache(0).Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	first := NewModelCache(0)
	first.UseWeightsDir(dir)
	a, err := first.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.WeightsNote, "generated, stored in ") || a.Source != "seeded init" {
		t.Fatalf("first load: note %q, source %q", a.WeightsNote, a.Source)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) != 1 {
		t.Fatalf("weights dir holds %v, want one safetensors file", files)
	}
	second := NewModelCache(0)
	second.UseWeightsDir(dir)
	b, err := second.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	if b.WeightsNote != "mapped from "+files[0] {
		t.Fatalf("second load: note %q", b.WeightsNote)
	}
	sameBits(t, a.Weights, want.Weights)
	sameBits(t, b.Weights, want.Weights)

	// A damaged file is not trusted: the weights are generated again and
	// the file replaced.
	if err := os.WriteFile(files[0], []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := NewModelCache(0)
	third.UseWeightsDir(dir)
	c, err := third.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.WeightsNote, "generated, stored in ") {
		t.Fatalf("after damage: note %q", c.WeightsNote)
	}
	sameBits(t, c.Weights, want.Weights)

	// Another model gets its own file.
	other := NewModelCache(0)
	other.UseWeightsDir(dir)
	if _, err := other.Get("toy", ""); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(files) != 2 {
		t.Fatalf("weights dir holds %v, want two files", files)
	}
}

func TestWeightsDirUnwritableStillEvaluates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := NewModelCache(0)
	c.UseWeightsDir(dir) // a file, not a directory: nothing can be stored
	m, err := c.Get("toy", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.WeightsNote, "generated, not stored: ") {
		t.Fatalf("note %q", m.WeightsNote)
	}
}

// BenchmarkFirstTrialMapped is the first trial of a campaign on a host
// whose weights directory already holds the model's weights: a fresh model
// cache (a new evaluator process) maps them and evaluates the canonical
// default, reference VM and eager oracle included.
func BenchmarkFirstTrialMapped(b *testing.B) {
	for _, name := range []string{"toy", "small"} {
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			warm := NewModelCache(0)
			warm.UseWeightsDir(dir)
			if _, err := warm.Get(name, ""); err != nil {
				b.Fatal(err)
			}
			spec := Spec{Model: name, GPU: "h200", Device: "cpu", Point: json.RawMessage(pyjson.Compact(schedule.Default().Value(), false)), Token: DefaultToken}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := NewModelCache(0)
				c.UseWeightsDir(dir)
				out := Evaluate(context.Background(), spec, Options{Models: c})
				if out.Verdict == nil || out.Verdict.Correct == nil || !*out.Verdict.Correct {
					b.Fatalf("first trial not correct: %+v", out)
				}
			}
		})
	}
}
