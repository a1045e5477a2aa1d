package trial

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// liveMappings counts this process's memory maps of files in dir (Linux's
// /proc/self/maps); the test is skipped where that file is missing.
func liveMappings(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	n := 0
	for line := range strings.SplitSeq(string(maps), "\n") {
		if strings.Contains(line, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// smallModels writes n small Llama config.json files, each with a different
// number of layers (so different weights), and returns their paths.
func smallModels(t *testing.T, n int) []string {
	t.Helper()
	var paths []string
	for layers := 1; layers <= n; layers++ {
		p := filepath.Join(t.TempDir(), "config.json")
		cfg := fmt.Sprintf(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": %d, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": 256, "max_position_embeddings": 64, "rms_norm_eps": 1e-06, "hidden_act": "silu"}`, layers)
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// sameSizeModels writes n small Llama config.json files of nearly one
// size (the vocabulary differs by a row, so each has its own weights file),
// smallest first, and returns their paths.
func sameSizeModels(t *testing.T, n int) []string {
	t.Helper()
	base, err := os.ReadFile(smallModels(t, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range n {
		p := filepath.Join(t.TempDir(), "config.json")
		cfg := bytes.Replace(base, []byte(`"vocab_size": 256`), fmt.Appendf(nil, `"vocab_size": %d`, 256+i), 1)
		if err := os.WriteFile(p, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// storeAll generates and stores the weights of every model in dir, so that
// a cache using dir maps them.
func storeAll(t *testing.T, dir string, paths []string) {
	t.Helper()
	c := NewModelCache(0)
	c.UseWeightsDir(dir)
	for _, p := range paths {
		if _, err := c.Get(p, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// A worker that evaluates trials of one model after another keeps only the
// weight mappings its keep budget allows: with none, a model's mapping is
// released when its trial ends; with room for everything, every mapping
// stays (which shows the count sees them).
func TestModelCacheReleasesMappingsNoTrialUses(t *testing.T) {
	ctx := context.Background()
	paths := smallModels(t, 4)
	dir := t.TempDir()
	storeAll(t, dir, paths)
	for _, tc := range []struct {
		keep      int64
		wantAfter int // mappings left after cycling through every model
	}{{keep: 0, wantAfter: 0}, {keep: 1 << 40, wantAfter: len(paths)}} {
		cache := NewModelCache(0).KeepUnused(tc.keep)
		cache.UseWeightsDir(dir)
		for round := range 3 {
			for _, p := range paths {
				m, release, err := cache.acquire(ctx, p, "")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(m.WeightsNote, "mapped from ") {
					t.Fatalf("weights %q, want them mapped from the weights dir", m.WeightsNote)
				}
				if n := liveMappings(t, dir); tc.keep == 0 && n != 1 {
					t.Fatalf("round %d: %d weight files mapped while one trial runs, want 1", round, n)
				}
				release()
				if n := liveMappings(t, dir); tc.keep == 0 && n != 0 {
					t.Fatalf("round %d: %d weight files still mapped after the trial, want 0", round, n)
				}
			}
		}
		if n := liveMappings(t, dir); n != tc.wantAfter {
			t.Fatalf("keep %d bytes: %d weight files mapped after cycling, want %d", tc.keep, n, tc.wantAfter)
		}
		cache.KeepUnused(0)
		if _, release, err := cache.acquire(ctx, paths[0], ""); err == nil {
			release() // lets everything go
		}
		if n := liveMappings(t, dir); n != 0 {
			t.Fatalf("%d weight files mapped after the budget went to zero, want 0", n)
		}
	}
}

// The budget keeps the most recently used models: with room for two of
// three equal-sized idle models, cycling leaves the last two mapped, and a
// model a trial still uses is never released.
func TestModelCacheKeepsTheMostRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	paths := sameSizeModels(t, 4) // the budget fits the two largest
	dir := t.TempDir()
	storeAll(t, dir, paths)
	largest, err := NewModelCache(0).Get(paths[3], "")
	if err != nil {
		t.Fatal(err)
	}
	cache := NewModelCache(0).KeepUnused(2 * largest.Weights.Bytes())
	cache.UseWeightsDir(dir)
	_, releaseHeld, err := cache.acquire(ctx, paths[0], "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths[1:] {
		_, release, err := cache.acquire(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if n := liveMappings(t, dir); n != 3 {
		t.Fatalf("%d weight files mapped, want 3: the model in use and the 2 most recently used", n)
	}
	cache.mu.Lock()
	_, oldest := cache.models[paths[1]+"\x00"]
	_, held := cache.models[paths[0]+"\x00"]
	cache.mu.Unlock()
	if oldest || !held {
		t.Fatalf("kept the least recently used model (%v) or let the one in use go (%v)", oldest, !held)
	}
	releaseHeld()
}

// Evaluate releases its model when the trial ends.
func TestEvaluateReleasesItsModel(t *testing.T) {
	dir := t.TempDir()
	cache := NewModelCache(0).KeepUnused(0)
	cache.UseWeightsDir(dir)
	spec := Spec{Model: "toy-2L", GPU: "h200", Device: "cpu", Point: json.RawMessage(`{}`), Token: DefaultToken}
	for range 2 { // generated, then mapped
		out := Evaluate(context.Background(), spec, Options{Models: cache})
		if v := out.Verdict; v == nil || v.Correct == nil || !*v.Correct {
			t.Fatalf("toy-2L trial: %+v / %+v", out.Verdict, out.Failure)
		}
	}
	if n := liveMappings(t, dir); n != 0 {
		t.Fatalf("%d weight files mapped after the trials, want 0", n)
	}
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if len(cache.models) != 0 {
		t.Fatalf("the cache keeps %d models with a zero keep budget", len(cache.models))
	}
}

// A model refused for lack of host memory first makes room: the cache
// releases the models no trial uses, least recently used first, probing
// again after each, and loads the new one once it fits, keeping the rest.
// When nothing idle is left and it still does not fit, it is refused and the
// model a trial holds stays. The probe's figure falls by one model's need
// for every weights file mapped now (read from /proc/self/maps).
func TestModelCacheReleasesIdleModelsToFitANewOne(t *testing.T) {
	ctx := context.Background()
	paths := sameSizeModels(t, 4)
	dir := t.TempDir()
	storeAll(t, dir, paths)
	var need int64
	for _, p := range paths {
		cfg, err := model.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		need = max(need, EstimateMemory(cfg, false, DefaultCheckBytes).Host)
	}
	for _, tc := range []struct {
		name       string
		room       int64 // models' worth of memory
		hold       bool  // paths[0] stays in use by a trial
		wantErr    bool
		wantKept   []int // of paths[:3], still cached afterwards
		wantMapped int   // weight files mapped afterwards (the new model's included)
	}{
		{name: "room for two", room: 2, wantKept: []int{2}, wantMapped: 2},
		{name: "room for one, one held", room: 1, hold: true, wantErr: true, wantKept: []int{0}, wantMapped: 1},
	} {
		probed, room := 0, int64(len(paths)) // room for everything while the first three load
		cache := NewModelCache(0).KeepUnused(1 << 40).WithMemoryProbe(func() (int64, string, error) {
			probed++
			return room*need - int64(liveMappings(t, dir))*need, "test probe", nil
		})
		cache.UseWeightsDir(dir)
		var releaseHeld func()
		for i, p := range paths[:3] {
			_, release, err := cache.acquire(ctx, p, "")
			if err != nil {
				t.Fatalf("%s: loading model %d: %v", tc.name, i, err)
			}
			if i == 0 && tc.hold {
				releaseHeld = release
				continue
			}
			release()
		}
		probed, room = 0, tc.room
		_, release, err := cache.acquire(ctx, paths[3], "")
		if gotErr := errors.As(err, new(*MemoryError)); gotErr != tc.wantErr {
			t.Fatalf("%s: loading the fourth model: %v, want a MemoryError: %v", tc.name, err, tc.wantErr)
		}
		release()
		if probed != 3 {
			t.Errorf("%s: %d probes, want 3 (one, and one after each of two releases)", tc.name, probed)
		}
		cache.mu.Lock()
		var kept []int
		for i, p := range paths[:3] {
			if _, ok := cache.models[p+"\x00"]; ok {
				kept = append(kept, i)
			}
		}
		cache.mu.Unlock()
		if !slices.Equal(kept, tc.wantKept) {
			t.Errorf("%s: models %v still cached, want %v (the least recently used released first)", tc.name, kept, tc.wantKept)
		}
		if n := liveMappings(t, dir); n != tc.wantMapped {
			t.Errorf("%s: %d weight files mapped, want %d", tc.name, n, tc.wantMapped)
		}
		if releaseHeld != nil {
			releaseHeld()
		}
		cache.KeepUnused(0)
		if _, release, err := cache.acquire(ctx, paths[0], ""); err == nil {
			release() // lets everything go
		}
	}
}

// mapFile maps a file, and reads one it cannot map (here an empty file,
// which filemap.Map refuses) instead of failing.
func TestMapFileFallsBackToReading(t *testing.T) {
	dir := t.TempDir()
	for _, want := range [][]byte{nil, bytes.Repeat([]byte("amk weights "), 1000)} {
		path := filepath.Join(dir, fmt.Sprintf("w%d.bin", len(want)))
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, unmap, err := mapFile(f, int64(len(want)))
		f.Close()
		if err != nil || unmap == nil {
			t.Fatalf("%d bytes: err %v, unmap %v", len(want), err, unmap != nil)
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%d bytes: got %d bytes that differ", len(want), len(data))
		}
		if n := liveMappings(t, dir); len(want) > 0 && n != 1 {
			t.Errorf("%d bytes: %d mappings of the file, want 1", len(want), n)
		}
		unmap()
		if n := liveMappings(t, dir); n != 0 {
			t.Errorf("%d bytes: %d mappings after unmap, want 0", len(want), n)
		}
	}
}
