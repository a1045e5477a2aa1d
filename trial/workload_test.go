package trial

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/vm"
)

func TestWorkloadPositionsAndWeights(t *testing.T) {
	w := DefaultWorkload()
	ps := w.Positions()
	want := []WorkloadPosition{{512, 63.0 / 254}, {575, 127.0 / 254}, {639, 64.0 / 254}}
	if len(ps) != len(want) {
		t.Fatalf("positions %v, want %v", ps, want)
	}
	for i := range want {
		if ps[i].Pos != want[i].Pos || math.Abs(ps[i].Weight-want[i].Weight) > 1e-12 {
			t.Fatalf("positions %v, want %v", ps, want)
		}
	}
	// A linear time per step t(p) = a + b p: the weighted sum is its mean
	// over the generated positions P..P+G-1, for any P, G (trapezoid rule).
	for _, c := range []Workload{{PromptLens: []int{0}, GenLen: 1}, {PromptLens: []int{7}, GenLen: 2},
		{PromptLens: []int{100}, GenLen: 9}, {PromptLens: []int{30, 2048}, GenLen: 128, Batch: 4}} {
		sum, got := 0.0, 0.0
		for _, p := range c.Positions() {
			sum += p.Weight
			got += p.Weight * (3 + 0.5*float64(p.Pos))
		}
		mean := 0.0
		for _, p := range c.PromptLens {
			for q := p; q < p+c.GenLen; q++ {
				mean += (3 + 0.5*float64(q)) / float64(c.GenLen) / float64(len(c.PromptLens))
			}
		}
		if math.Abs(sum-1) > 1e-12 || math.Abs(got-mean) > 1e-9 {
			t.Errorf("%s: weights sum to %v; weighted %v, mean %v", c, sum, got, mean)
		}
	}
	if s := (Workload{PromptLens: []int{30, 2048}, GenLen: 64, Batch: 4}).String(); s != "prompts of 30, 2048 tokens, 64 generated tokens, batch 4" {
		t.Errorf("String() = %q", s)
	}
	if n := (Workload{PromptLens: []int{2048}, GenLen: 128, Batch: 4}).Name(); n != "p2048-g128-b4" {
		t.Errorf("Name() = %q", n)
	}
}

func TestWorkloadChecksAndFiles(t *testing.T) {
	for _, bad := range []Workload{{}, {PromptLens: []int{1}}, {PromptLens: []int{-1}, GenLen: 1},
		{PromptLens: []int{1}, GenLen: 1, Batch: -1}, {PromptLens: []int{1}, GenLen: 1, Batch: schedule.MaxBatch + 1},
		{PromptLens: []int{MaxContext}, GenLen: 1}, {PromptLens: make([]int, MaxPromptLens+1), GenLen: 1}} {
		if bad.Check() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	good := map[string]Workload{
		`{"prompt_len": 2048, "gen_len": 64}`:                    {PromptLens: []int{2048}, GenLen: 64, Batch: 1},
		`{"prompt_lens": [128, 1024], "gen_len": 8, "batch": 4}`: {PromptLens: []int{128, 1024}, GenLen: 8, Batch: 4},
	}
	for in, want := range good {
		got, err := ReadWorkload(strings.NewReader(in))
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{``, `[]`, `{"gen_len": 8}`, `{"prompt_len": 8}`, `{"prompt_len": 8, "gen_len": 8, "extra": 1}`,
		`{"prompt_len": 8, "prompt_lens": [8], "gen_len": 8}`, `{"prompt_len": 8, "gen_len": 8, "gen_len": 9}`,
		`{"prompt_len": 8, "gen_len": 0}`, `{"prompt_len": 8, "gen_len": 8} {}`, `{"prompt_len": 8, "gen_len": 8, "batch": -2}`,
		`{"prompt_len": "8", "gen_len": 8}`, "{\"prompt_len\": 8, \"gen_len\": 8, \"pad\": \"" + strings.Repeat("x", MaxWorkloadFileBytes) + "\"}"} {
		if w, err := ReadWorkload(strings.NewReader(in)); err == nil {
			t.Errorf("%.80s: read as %+v, want an error", in, w)
		}
	}
}

func FuzzReadWorkload(f *testing.F) {
	f.Add([]byte(`{"prompt_len": 512, "gen_len": 128}`))
	f.Add([]byte(`{"prompt_lens": [1, 2, 3], "gen_len": 1, "batch": 8}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadWorkload(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if w.Check() != nil {
			t.Fatalf("read a workload Check refuses: %+v", w)
		}
		sum := 0.0
		for _, p := range w.Positions() {
			if p.Pos < 0 || p.Pos >= w.Context() || !(p.Weight > 0) {
				t.Fatalf("%+v: position %+v", w, p)
			}
			sum += p.Weight
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("%+v: weights sum to %v", w, sum)
		}
	})
}

func TestContextConfig(t *testing.T) {
	small, _ := model.Preset("small")
	w := Workload{PromptLens: []int{2048}, GenLen: 128}
	cfg, err := ContextConfig(small, "small", w)
	if err != nil || cfg.MaxSeq != 2176 {
		t.Fatalf("preset: max_seq %d, %v; want 2176", cfg.MaxSeq, err)
	}
	if cfg, _ := ContextConfig(small, "small", Workload{PromptLens: []int{8}, GenLen: 8}); cfg.MaxSeq != small.MaxSeq {
		t.Errorf("a workload within max_seq changed it to %d", cfg.MaxSeq)
	}
	if cfg, err := ContextConfig(small, "small:w4a16", w); err != nil || cfg.MaxSeq != 2176 {
		t.Errorf("a quantised preset: max_seq %d, %v; want 2176", cfg.MaxSeq, err)
	}
	if _, err := ContextConfig(small, "some/config.json", w); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("a config.json model's context was raised: %v", err)
	}
}

// evalWorkload evaluates point on toy-2L for h200 under w.
func evalWorkload(t *testing.T, point string, w Workload) *Verdict {
	t.Helper()
	spec := Spec{Model: "toy-2L", GPU: "h200", Device: "cpu", Point: json.RawMessage(point), Token: DefaultToken, Workload: &w}
	out := Evaluate(context.Background(), spec, Options{Models: testModels})
	if out.Failure != nil || out.Verdict == nil {
		t.Fatalf("failure %+v", out.Failure)
	}
	return out.Verdict
}

// A workload trial is checked at every position from the seeded KV cache,
// its latency is the weighted mean of the positions', its floor counts the
// KV rows each position reads, and the per-position figures are kept.
func TestWorkloadVerdict(t *testing.T) {
	w := Workload{PromptLens: []int{300}, GenLen: 64, Batch: 1} // past toy's max_seq of 256: the preset's context grows
	fused, _ := json.Marshal(schedule.FullyFused())
	for _, point := range []string{`{}`, `{"tiling": {"attention": {"n_partitions": 8}}}`, string(fused)} {
		v := evalWorkload(t, point, w)
		if !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyUS == nil || v.Pos != nil || v.Workload == nil {
			t.Fatalf("%s: verdict %+v, notes %v", point, v, v.Notes)
		}
		if len(v.Positions) != 3 || v.Positions[0].Pos != 300 || v.Positions[2].KVLen != 364 {
			t.Fatalf("%s: positions %+v", point, v.Positions)
		}
		lat, bound := 0.0, 0.0
		for i, p := range v.Positions {
			if p.Correct == nil || !*p.Correct || p.LatencyUS == nil || p.BoundUS == nil || p.PctOfRoofline == nil {
				t.Fatalf("%s: position %+v", point, p)
			}
			if i > 0 && !(*p.BoundUS > *v.Positions[i-1].BoundUS) {
				t.Errorf("%s: the floor at kv_len %d (%v us) is not above kv_len %d's (%v us): it must count the KV rows read",
					point, p.KVLen, *p.BoundUS, v.Positions[i-1].KVLen, *v.Positions[i-1].BoundUS)
			}
			lat += p.Weight * *p.LatencyUS
			bound += p.Weight * *p.BoundUS
		}
		if math.Abs(lat-*v.LatencyUS) > 1e-3 || math.Abs(bound-*v.BoundUS) > 1e-3 {
			t.Errorf("%s: latency %v / bound %v, weighted positions %v / %v", point, *v.LatencyUS, *v.BoundUS, lat, bound)
		}
	}
}

// A batch of 4 sequences passes at every position, each sequence checked
// against its own eager decode from its own seeded cache.
func TestWorkloadBatchIsCorrectAtEveryPosition(t *testing.T) {
	v := evalWorkload(t, `{"tiling": {"attention": {"n_partitions": 4, "kv_head_split": 1}}}`,
		Workload{PromptLens: []int{40, 200}, GenLen: 16, Batch: 4})
	if !v.Valid || v.Correct == nil || !*v.Correct || v.Batch != 4 || len(v.Positions) != 6 {
		t.Fatalf("verdict %+v, notes %v", v, v.Notes)
	}
	for _, p := range v.Positions {
		if p.Correct == nil || !*p.Correct {
			t.Fatalf("position %+v incorrect: %v", p, v.Notes)
		}
	}
}

// The seeded check is a check of the cache: the oracle started from the
// seeded cache and the one that decoded the history differ, and a program
// that reads one row short of the window fails against it.
func TestSeededCheckDependsOnTheCache(t *testing.T) {
	lm, err := testModels.Get("toy", "")
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := lm.seededEagerLogits(context.Background(), lm.Check, DefaultToken, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	history, err := lm.eagerLogits(context.Background(), DefaultToken, 50)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range seeded {
		same = same && seeded[i] == history[i]
	}
	if same {
		t.Fatal("the seeded cache changed nothing")
	}
	tg := mustTargetT(t, "h200")
	good, _ := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: 50})
	res, _, err := lm.checkSeeded(context.Background(), lm.Config, good, DefaultToken, 50, 1, tg, schedule.Default())
	if err != nil || !res.cmp.Pass {
		t.Fatalf("the default program at pos 50: %v %+v", err, res)
	}
	short, _ := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: 49})
	res, _, err = lm.checkSeeded(context.Background(), lm.Config, short, DefaultToken, 50, 1, tg, schedule.Default())
	if err == nil && res.cmp.Pass {
		t.Fatal("a program lowered for pos 49 passed the check at pos 50")
	}
}

func mustTargetT(t *testing.T, name string) *ir.GpuTarget {
	t.Helper()
	tg, err := ir.Target(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// A workload position checks the spec's token unless the oracle's top two
// logits there are within the dtype's tolerance (a near tie, which a
// correct schedule summing in another order may break either way): then
// the next token with a clear top. toy-2L's token 7 ties at pos 5.
func TestCheckTokenAvoidsNearTies(t *testing.T) {
	lm, err := testModels.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	check := lm.Check
	gap := func(token, pos int) (float64, float64) {
		logits, err := lm.seededEagerLogits(context.Background(), check, token, pos, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := append([]float32(nil), logits...)
		slices.Sort(s)
		top, second := float64(s[len(s)-1]), float64(s[len(s)-2])
		atol, rtol := vm.Tolerance(check.DType)
		return top - second, atol + rtol*math.Abs(top)
	}
	if g, tol := gap(DefaultToken, 5); g > tol {
		t.Fatalf("token %d at pos 5: gap %g over the tolerance %g; the test needs a tie", DefaultToken, g, tol)
	}
	got, err := lm.checkToken(context.Background(), check, DefaultToken, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if g, tol := gap(got, 5); got == DefaultToken || g <= tol {
		t.Errorf("check token %d at pos 5 (gap %g, tolerance %g), want another with a clear top", got, g, tol)
	}
	if got, _ := lm.checkToken(context.Background(), check, DefaultToken, 6, 1); got != DefaultToken {
		t.Errorf("pos 6 has a clear top for token %d, but %d was checked", DefaultToken, got)
	}
	v := evalWorkload(t, `{}`, Workload{PromptLens: []int{5}, GenLen: 1})
	if len(v.Positions) != 1 || v.Positions[0].Token == DefaultToken || !*v.Correct {
		t.Errorf("the verdict's position %+v", v.Positions)
	}
}

// WithBatch sets a batch the workload leaves open, keeps the one it names,
// refuses a different one and leaves the workload it came from alone.
func TestWorkloadWithBatch(t *testing.T) {
	open := Workload{PromptLens: []int{16, 32}, GenLen: 4}
	w, err := open.WithBatch(3)
	if err != nil || w.Batch != 3 || !slices.Equal(w.PromptLens, open.PromptLens) {
		t.Fatalf("batch 3 on an open workload: %+v %v", w, err)
	}
	w.PromptLens[0] = 99
	if open.PromptLens[0] != 16 {
		t.Errorf("WithBatch shares the prompt lengths of the workload it came from")
	}
	if w, err := open.WithBatch(0); err != nil || w.Batch != 1 {
		t.Errorf("no batch: %+v %v", w, err)
	}
	named := Workload{PromptLens: []int{16}, GenLen: 4, Batch: 2}
	if w, err := named.WithBatch(2); err != nil || w.Batch != 2 {
		t.Errorf("the batch it names: %+v %v", w, err)
	}
	if _, err := named.WithBatch(4); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("another batch: %v", err)
	}
	if _, err := (Workload{PromptLens: []int{16}}).WithBatch(1); err == nil {
		t.Errorf("a workload without generated tokens was accepted")
	}
}
