package trial

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/vm"
)

var testModels = NewModelCache(0)

func evalToy(t *testing.T, point string, opts Options) Outcome {
	t.Helper()
	if opts.Models == nil {
		opts.Models = testModels
	}
	spec := Spec{Model: "toy", GPU: "h200", Device: "cpu", Point: json.RawMessage(point), Token: DefaultToken}
	return Evaluate(context.Background(), spec, opts)
}

func TestDefaultToyIsValidCorrectAndPredicted(t *testing.T) {
	out := evalToy(t, `{}`, Options{})
	v := out.Verdict
	if out.Failure != nil || v == nil {
		t.Fatalf("failure %+v", out.Failure)
	}
	if !v.Valid || v.Correct == nil || !*v.Correct {
		t.Fatalf("default toy not valid+correct: %+v", v)
	}
	if v.LatencyUS == nil || v.LatencyKind == nil || *v.LatencyKind != KindPredicted {
		t.Fatalf("want a predicted latency, got %+v", v)
	}
	if v.BoundUS == nil || *v.LatencyUS < *v.BoundUS {
		t.Fatalf("latency %v below bound %v", *v.LatencyUS, v.BoundUS)
	}
	// toy's untied embedding table is gathered one row per step: the
	// streamed-bytes floor sits below the seed's all-weights figure.
	if v.AllWeightsBoundUS == nil || *v.BoundUS >= *v.AllWeightsBoundUS || v.StreamedMB >= v.WeightMB {
		t.Fatalf("streamed floor %v (%.4f MB) not below the all-weights floor %v (%.4f MB)", *v.BoundUS, v.StreamedMB, v.AllWeightsBoundUS, v.WeightMB)
	}
	wantPct := *v.LatencyUS / *v.BoundUS * 100
	if math.Abs(*v.PctOfRoofline-wantPct)/wantPct > 1e-3 {
		t.Fatalf("pct_of_roofline %v, want latency/bound*100 = %v", *v.PctOfRoofline, wantPct)
	}
	if v.ScheduleID != "sch_c3af28020e" || v.Tasks != 27 || v.NBuffers != 37 || v.NCounters != 22 {
		t.Fatalf("unexpected identity/size fields: %+v", v)
	}
}

// Every malformed-config case of docs/spec/loop.md is a clean valid=false with a
// reason and no latency.
func TestMalformedConfigsAreCleanRejections(t *testing.T) {
	cases := map[string]string{
		"depth not an int":    `{"pipelining_depth": "deep"}`,
		"negative N_tile":     `{"tiling": {"gemv": {"N_tile": -16}}}`,
		"tiling not object":   `{"tiling": "not-a-dict"}`,
		"over-cap smem":       `{"smem_bytes_per_block": 1000000000}`,
		"bad block size":      `{"threads_per_block": 7}`,
		"unsupported tpb":     `{"threads_per_block": 512}`,
		"zero block size":     `{"threads_per_block": 0}`,
		"explicit sm map":     `{"sm_assignment": {"99999": 9999}}`,
		"not json":            `{"tiling": `,
		"array instead":       `[1, 2]`,
		"unknown kernel knob": `{"kernel_knobs": {"warp_magic": 3}}`,
	}
	for name, point := range cases {
		t.Run(name, func(t *testing.T) {
			out := evalToy(t, point, Options{})
			v := out.Verdict
			if out.Failure != nil || v == nil {
				t.Fatalf("want a verdict, got failure %+v", out.Failure)
			}
			if v.Valid || v.RejectedReason == nil || *v.RejectedReason == "" {
				t.Fatalf("want valid=false with a reason, got %+v", v)
			}
			if v.LatencyUS != nil || v.LatencyKind != nil || v.PctOfRoofline != nil || v.BoundUS != nil || v.MaxAbsErr != nil {
				t.Fatalf("a rejected config carries a latency, floor or error figure: %+v", v)
			}
			if v.Correct == nil || *v.Correct {
				t.Fatalf("a rejected verdict must say correct=false (seed 001), got %v", v.Correct)
			}
			if len(v.Notes) == 0 || !strings.Contains(strings.Join(v.Notes, " "), "rejected") && !strings.Contains(strings.Join(v.Notes, " "), "REJECTED") {
				t.Fatalf("the notes do not explain the rejection: %q", v.Notes)
			}
			if n := strings.Count(*v.RejectedReason, "malformed ScheduleConfig"); n > 1 {
				t.Fatalf("the prefix is repeated: %q", *v.RejectedReason)
			}
		})
	}
}

func TestUnknownTargetAndModelAreRejected(t *testing.T) {
	for _, spec := range []Spec{
		{Model: "toy", GPU: "h999", Point: json.RawMessage(`{}`)},
		{Model: "no-such-model", GPU: "h100", Point: json.RawMessage(`{}`)},
		{Model: "toy", GPU: "h100", Point: json.RawMessage(`{}`), Pos: 100000},
	} {
		out := Evaluate(context.Background(), spec, Options{Models: testModels})
		if out.Verdict == nil || out.Verdict.Valid || out.Verdict.RejectedReason == nil {
			t.Errorf("%+v: want a rejection, got %+v / %+v", spec, out.Verdict, out.Failure)
		}
	}
}

type fixedLauncher struct{ us float64 }

func (fixedLauncher) Name() string { return "fake" }
func (f fixedLauncher) Time(ctx context.Context, req TimeRequest) (Timing, error) {
	return Timing{LatencyUS: f.us, Kind: KindMeasuredGPU}, nil
}

func TestLatencyBelowFloorIsWithheld(t *testing.T) {
	out := evalToy(t, `{}`, Options{Launcher: fixedLauncher{us: 1e-6}})
	v := out.Verdict
	if v == nil || !v.Valid || v.Correct == nil || !*v.Correct {
		t.Fatalf("want a valid correct verdict, got %+v", v)
	}
	if v.LatencyUS != nil || v.LatencyKind != nil || v.PctOfRoofline != nil {
		t.Fatalf("a sub-floor latency was reported: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Notes, " "), "below the streamed-bytes floor") {
		t.Fatalf("no note explains the withheld latency: %v", v.Notes)
	}
	above := evalToy(t, `{}`, Options{Launcher: fixedLauncher{us: 50}}).Verdict
	if above.LatencyUS == nil || *above.LatencyUS != 50 || *above.LatencyKind != KindMeasuredGPU {
		t.Fatalf("a measured latency above the floor was not reported: %+v", above)
	}
}

func TestIncorrectProgramGetsNoLatency(t *testing.T) {
	models := NewModelCache(0)
	lm, err := models.Get("toy", "")
	if err != nil {
		t.Fatal(err)
	}
	wrong := make([]float32, lm.Check.Vocab)
	for i := range wrong {
		wrong[i] = float32(i % 7)
	}
	lm.oracle[oracleKey{token: DefaultToken}] = wrong
	out := evalToy(t, `{}`, Options{Models: models})
	v := out.Verdict
	if v == nil || !v.Valid || v.Correct == nil || *v.Correct {
		t.Fatalf("want valid and incorrect, got %+v", v)
	}
	if v.LatencyUS != nil || v.LatencyKind != nil {
		t.Fatalf("an incorrect program got a latency: %+v", v)
	}
}

func TestBigModelIsCheckedOnATruncation(t *testing.T) {
	models := NewModelCache(300_000) // bytes: too small for toy-2L's float32 weights
	spec := Spec{Model: "toy-2L", GPU: "h100", Point: json.RawMessage(`{}`), Token: 3}
	v := Evaluate(context.Background(), spec, Options{Models: models}).Verdict
	if v == nil || v.Correct == nil || !*v.Correct {
		t.Fatalf("truncated check failed: %+v", v)
	}
	if !strings.Contains(strings.Join(v.Notes, " "), "first 1 of 2 layers") {
		t.Fatalf("the truncation is not disclosed: %v", v.Notes)
	}
}

func TestLaterPositionIsChecked(t *testing.T) {
	spec := Spec{Model: "toy-2L", GPU: "h100", Point: json.RawMessage(`{"tiling": {"gemv": {"N_tile": 32}}}`), Token: 5, Pos: 4}
	v := Evaluate(context.Background(), spec, Options{Models: testModels}).Verdict
	if v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
		t.Fatalf("position 4 check failed: %+v", v)
	}
}

func TestExpiredContextIsATimeout(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	out := Evaluate(ctx, Spec{Model: "toy", GPU: "h100", Point: json.RawMessage(`{}`)}, Options{Models: testModels})
	if out.Failure == nil || out.Failure.Class != FailTimeout {
		t.Fatalf("want a timeout failure, got %+v / %+v", out.Failure, out.Verdict)
	}
}

func FuzzEvaluateConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"pipelining_depth": "deep"}`, `{"tiling": {"gemv": {"N_tile": 7}}}`,
		`{"sm_assignment": {"0": 1}}`, `{"tiling": {"attention": {"n_partitions": 4}}}`, `null`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, point string) {
		out := Evaluate(context.Background(), Spec{Model: "toy", GPU: "h100", Point: json.RawMessage(point), Token: 1},
			Options{Models: testModels})
		if out.Failure != nil {
			t.Fatalf("evaluate failed instead of returning a verdict: %+v", out.Failure)
		}
		v := out.Verdict
		if v.LatencyUS != nil && (v.Correct == nil || !*v.Correct) {
			t.Fatalf("latency without correctness: %+v", v)
		}
		if !v.Valid && (v.LatencyUS != nil || v.RejectedReason == nil) {
			t.Fatalf("rejected verdict inconsistent: %+v", v)
		}
	})
}

// Split-KV attention (pinned shards plus ATTENTION_COMBINE) is checked
// against the eager pass's whole-window attention at a position where the
// window really is split.
func TestSplitKVMatchesWholeWindow(t *testing.T) {
	spec := Spec{Model: "toy-2L", GPU: "h100", Token: 9, Pos: 40,
		Point: json.RawMessage(`{"tiling": {"gemv": {"N_tile": 64}, "attention": {"n_partitions": 4}}}`)}
	out := Evaluate(context.Background(), spec, Options{Models: testModels})
	v := out.Verdict
	if v == nil || !v.Valid || v.Correct == nil || !*v.Correct {
		t.Fatalf("split-KV program not correct: %+v %+v", v, out.Failure)
	}
	whole := Evaluate(context.Background(), Spec{Model: "toy-2L", GPU: "h100", Token: 9, Pos: 40, Point: json.RawMessage(`{}`)},
		Options{Models: testModels}).Verdict
	if v.Tasks <= whole.Tasks {
		t.Fatalf("split-KV program has %d tasks, whole-window %d: the split did not happen", v.Tasks, whole.Tasks)
	}
}

// TestRejectedVerdictsMatchSeed001: each rejecting stage names itself in the
// notes; a launch-config rejection has no floor.
func TestRejectedVerdictsMatchSeed001(t *testing.T) {
	for point, note := range map[string]string{
		`{"threads_per_block": 7}`:           NoteLaunch,
		`{"pipelining_depth": "deep"}`:       NoteMalformedConfig,
		`{"sm_assignment": {"99999": 9999}}`: NoteLowering,
	} {
		v := evalToy(t, point, Options{}).Verdict
		if v == nil || v.Valid || !slices.Contains(v.Notes, note) {
			t.Errorf("%s: want a rejection noted %q, got %+v", point, note, v)
			continue
		}
		out, _ := json.Marshal(v)
		if !strings.Contains(string(out), `"correct":false`) || !strings.Contains(string(out), `"bound_us":null`) {
			t.Errorf("%s: verdict JSON %s lacks correct=false or bound_us=null", point, out)
		}
	}
}

// TestIgnoredConfigKeysAreNamed: a misspelt key is not an error (docs/spec/ir.md)
// but the verdict names it.
func TestIgnoredConfigKeysAreNamed(t *testing.T) {
	v := evalToy(t, `{"tilling": {"gemv": {"N_tile": 512}}, "pipelining_depth": 2}`, Options{}).Verdict
	if v == nil || !v.Valid {
		t.Fatalf("want a valid verdict, got %+v", v)
	}
	if !slices.Contains(v.Notes, IgnoredKeysNote([]string{"'tilling'"})) {
		t.Errorf("notes %q do not name the ignored key 'tilling'", v.Notes)
	}
	if v := evalToy(t, `{"pipelining_depth": 1, "pipelining_depth": 3}`, Options{}).Verdict; v == nil || v.Valid ||
		!strings.Contains(*v.RejectedReason, "duplicate key") {
		t.Errorf("a repeated key was not rejected: %+v", v)
	}
}

// TestEnvironmentFingerprint: every verdict and outcome says what produced
// it; a caller's own fingerprint (a fleet worker's) wins.
func TestEnvironmentFingerprint(t *testing.T) {
	out := evalToy(t, `{}`, Options{})
	if out.Verdict == nil || !strings.HasPrefix(out.Verdict.Environment, "host=") ||
		!strings.Contains(out.Verdict.Environment, `device="cpu"`) || !strings.Contains(out.Verdict.Environment, " go=go") {
		t.Fatalf("verdict environment %q", out.Verdict.Environment)
	}
	if out.Worker != out.Verdict.Environment {
		t.Errorf("outcome worker %q != verdict environment %q", out.Worker, out.Verdict.Environment)
	}
	js, _ := json.Marshal(out)
	if !strings.Contains(string(js), `"environment":"host=`) {
		t.Errorf("the trial record lacks the environment: %s", js)
	}
	fp := "host=w1 target=h200 device=cuda device_name=\"H200\""
	if out := evalToy(t, `{"threads_per_block": 7}`, Options{Environment: fp}); out.Worker != fp || out.Verdict.Environment != fp {
		t.Errorf("a given fingerprint was not used: %q / %+v", out.Worker, out.Verdict)
	}
}

// TestBatchedLoweringIsCheckedEndToEnd: B > 1 lowers GEMM tiles and every
// sequence of the batch is checked against its own eager decode (history
// included), before any latency.
func TestBatchedLoweringIsCheckedEndToEnd(t *testing.T) {
	for _, pos := range []int{0, 5} {
		spec := Spec{Model: "toy-2L", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: 11, Pos: pos, Batch: 3}
		out := Evaluate(context.Background(), spec, Options{Models: testModels})
		v := out.Verdict
		if v == nil || !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
			t.Fatalf("pos %d: batched toy-2L not valid+correct with a latency: %+v %+v", pos, v, out.Failure)
		}
		if *v.Top1Agreement != 1 || *v.MaxAbsErr > 1e-4 || !strings.Contains(strings.Join(v.Notes, " "), "batch B=3") {
			t.Errorf("pos %d: top1 %v max_abs_err %v notes %q", pos, *v.Top1Agreement, *v.MaxAbsErr, v.Notes)
		}
		single := Evaluate(context.Background(), Spec{Model: "toy-2L", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: 11, Pos: pos},
			Options{Models: testModels}).Verdict
		if v.Tasks == single.Tasks && *v.LatencyUS == *single.LatencyUS {
			t.Errorf("pos %d: the batch did not change the program or its prediction", pos)
		}
	}
	lm, err := testModels.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	// The check is sensitive to which sequence is which: rows decoded in the
	// wrong order fail it.
	tg, _ := ir.Target("h100")
	prog, err := schedule.Lower(lm.Config, tg, schedule.Default(), schedule.LowerOptions{Pos: 0, B: 2})
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := RunBatchStep(prog, lm.Weights, []int32{int32(RowToken(11, 1, lm.Config.Vocab)), 11}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lm.eagerLogits(context.Background(), 11, 0)
	if c := vm.Compare(swapped.Logits[:lm.Config.Vocab], want, lm.Config.Vocab, lm.Config.DType); c.Pass {
		t.Error("row 0 decoded from the wrong token passed the eager comparison")
	}
	for _, bad := range []Spec{
		{Model: "toy", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Batch: -1},
		{Model: "toy", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Batch: schedule.MaxBatch + 1},
	} {
		opts := Options{Models: testModels}
		if bad.Device == schedule.DeviceCUDA {
			opts.Launcher = &fakeGPU{} // a cuda trial is evaluated where there is a GPU
		}
		v := Evaluate(context.Background(), bad, opts).Verdict
		if v == nil || v.Valid || !slices.Contains(v.Notes, NoteBatch) {
			t.Errorf("batch %d on %s: want a rejection, got %+v", bad.Batch, bad.Device, v)
		}
	}
}

// A spec whose token the model cannot embed (as a crafted queue payload
// may carry) is refused before launch, as a position outside the context
// is: a rejection saying why, not a correctness FAIL against the schedule.
func TestATokenOutsideTheVocabularyIsARejection(t *testing.T) {
	for _, tok := range []int{-1, 256, 1 << 40} {
		for _, workload := range []*Workload{nil, {PromptLens: []int{4}, GenLen: 2}} {
			spec := Spec{Model: "toy", GPU: "h100", Device: "cpu", Point: json.RawMessage(`{}`), Token: tok, Pos: 2, Workload: workload}
			out := Evaluate(context.Background(), spec, Options{Models: testModels})
			v := out.Verdict
			if v == nil || v.Valid || v.RejectedReason == nil || !strings.Contains(*v.RejectedReason, "vocabulary") || !slices.Contains(v.Notes, NoteToken) {
				t.Errorf("token %d (workload %v): want a rejection naming the vocabulary, got %+v %+v", tok, workload != nil, v, out.Failure)
			}
		}
	}
}
