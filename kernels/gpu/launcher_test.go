package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

var toyModels = trial.NewModelCache(0)

func newTestLauncher(t *testing.T, mode string, opts Options) (*Launcher, *serverClient) {
	t.Helper()
	c := newServerClient(mode)
	opts.Generation = func() int { return c.gen }
	l, err := New(context.Background(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

func evalOn(t *testing.T, l trial.Launcher, models *trial.ModelCache, spec trial.Spec) trial.Outcome {
	t.Helper()
	if spec.Model == "" {
		spec.Model = "toy"
	}
	if spec.GPU == "" {
		spec.GPU = "h200"
	}
	if spec.Point == nil {
		spec.Point = json.RawMessage(`{}`)
	}
	spec.Device = schedule.DeviceCUDA
	if e, ok := l.(trial.EmulatorLauncher); ok && e.Emulates() {
		spec.Device = schedule.DeviceEmu
	}
	if models == nil {
		models = toyModels
	}
	return trial.Evaluate(context.Background(), spec, trial.Options{Launcher: l, Models: models})
}

func joined(notes []string) string { return strings.Join(notes, "\n") }

func TestLauncherMeasuresACorrectProgram(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	if l.Name() != "cuda:0 NVIDIA H200" || l.Target().Name != "h200" {
		t.Fatalf("name %q target %s", l.Name(), l.Target().Name)
	}
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken})
	v := out.Verdict
	if out.Failure != nil || v == nil {
		t.Fatalf("failure %+v", out.Failure)
	}
	if !v.Valid || v.Correct == nil || !*v.Correct {
		t.Fatalf("want valid and correct: %+v", v)
	}
	if v.LatencyUS == nil || *v.LatencyKind != trial.KindMeasuredGPU || *v.LatencyUS != 102 {
		t.Fatalf("want the fake median 102 us measured-gpu, got %+v", v)
	}
	if v.Device != "cuda:0 NVIDIA H200" {
		t.Fatalf("device label %q", v.Device)
	}
	notes := joined(v.Notes)
	for _, want := range []string{"GPU logits match the reference VM at pos 0", "measured-gpu on cuda:0 NVIDIA H200: median 102.000 us over 20 samples", "check launch: grid",
		"the logits left by the 25 timed launches equal the checked launch's bit for bit"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if out.IncumbentUS != nil || out.Ratio != nil {
		t.Fatalf("no incumbent was asked for: %+v", out)
	}
	if len(c.dev.loads) != 1 || c.dev.runs != 1 || c.dev.resident() != 0 {
		t.Fatalf("want one load, one run and nothing left resident: loads %v runs %d resident %d", c.dev.loads, c.dev.runs, c.dev.resident())
	}
}

func TestLauncherRacyTimedLaunchesAreIncorrect(t *testing.T) {
	l, _ := newTestLauncher(t, "racy", Options{})
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Pos: 2})
	v := out.Verdict
	if out.Failure != nil || v == nil || !v.Valid || v.Correct == nil || *v.Correct {
		t.Fatalf("want valid, correct=false: %+v %+v", out.Failure, v)
	}
	if v.LatencyUS != nil || v.LatencyKind != nil {
		t.Fatalf("a racy program got a latency: %+v", v)
	}
	notes := joined(v.Notes)
	if !strings.Contains(notes, "the logits left by the 25 timed launches differ from the checked launch's in 1 of 256 values (first at index 255)") ||
		!strings.Contains(notes, "races") {
		t.Fatalf("notes: %s", notes)
	}
}

func TestLauncherWalksTheHistoryWithUpdates(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	out := evalOn(t, l, nil, trial.Spec{Token: 11, Pos: 3})
	if v := out.Verdict; out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
		t.Fatalf("want a correct measured verdict at pos 3: %+v %+v", out.Failure, out.Verdict)
	}
	// Whole-window attention keeps the layout: one load, three in-place updates.
	if len(c.dev.loads) != 1 || c.dev.updates != 3 || c.dev.runs != 4 {
		t.Fatalf("loads %v updates %d runs %d", c.dev.loads, c.dev.updates, c.dev.runs)
	}
}

// A workload trial is checked on the device as the reference VM checked
// it: one step at each evaluated position, from the same seeded KV caches
// (past toy's max_seq of 256: the preset's context grows), each position
// timed; the device computing otherwise is a mismatch.
func TestLauncherChecksAWorkloadFromTheSeededCache(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	w := trial.Workload{PromptLens: []int{300}, GenLen: 9}
	point := json.RawMessage(`{"tiling": {"attention": {"n_partitions": 4}}}`)
	out := evalOn(t, l, nil, trial.Spec{Token: 5, Point: point, Workload: &w})
	v := out.Verdict
	if out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil || len(v.Positions) != 3 {
		t.Fatalf("want a correct measured workload verdict: %+v %+v", out.Failure, v)
	}
	for _, p := range v.Positions {
		if p.LatencyUS == nil || !strings.Contains(joined(v.Notes), fmt.Sprintf("pos %d: GPU logits match the reference VM at pos %d", p.Pos, p.Pos)) {
			t.Errorf("position %d: %+v\n%s", p.Pos, p, joined(v.Notes))
		}
	}
	// One checked step per position (each then timed and rechecked), not
	// the 300 steps before it.
	if c.dev.runs > 3*30 {
		t.Errorf("%d device runs for three positions: the history was walked", c.dev.runs)
	}
	bad, _ := newTestLauncher(t, "corrupt", Options{})
	if v := evalOn(t, bad, nil, trial.Spec{Token: 5, Point: point, Workload: &w}).Verdict; v == nil || v.Correct == nil || *v.Correct || v.LatencyUS != nil {
		t.Fatalf("a corrupt device passed a workload trial: %+v", v)
	}
}

// The launcher binds a batch: B sequences per step on the device, each
// row's logits checked against the reference VM's (one step at pos 3 after
// the history, and a workload from the seeded caches); a device computing
// otherwise fails it.
func TestLauncherBindsABatch(t *testing.T) {
	l, _ := newTestLauncher(t, "", Options{})
	point := json.RawMessage(`{"tiling": {"attention": {"kv_head_split": 1}}}`)
	for _, spec := range []trial.Spec{{Token: 9, Pos: 3, Batch: 3, Point: point},
		{Token: 9, Point: point, Workload: &trial.Workload{PromptLens: []int{40}, GenLen: 5, Batch: 4}}} {
		out := evalOn(t, l, nil, spec)
		v := out.Verdict
		if out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
			t.Fatalf("batch %d: want a correct measured verdict: %+v %+v", spec.Batch, out.Failure, v)
		}
		if !strings.Contains(joined(v.Notes), "GPU logits match the reference VM") {
			t.Errorf("no device check in the notes:\n%s", joined(v.Notes))
		}
	}
	bad, _ := newTestLauncher(t, "corrupt", Options{})
	if v := evalOn(t, bad, nil, trial.Spec{Token: 9, Pos: 3, Batch: 3, Point: point}).Verdict; v == nil || v.Correct == nil || *v.Correct {
		t.Fatalf("a corrupt device passed a batch: %+v", v)
	}
}

func TestLauncherReloadsWithKVWhenTheLayoutChanges(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	// Split-KV attention: the shard count grows with kv_len, so positions
	// change the task list and the caches are carried by read-back.
	point := json.RawMessage(`{"tiling": {"attention": {"n_partitions": 4}}}`)
	out := evalOn(t, l, nil, trial.Spec{Token: 5, Pos: 20, Point: point})
	if v := out.Verdict; out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct {
		t.Fatalf("want a correct verdict: %+v %+v", out.Failure, out.Verdict)
	}
	if len(c.dev.loads) < 2 || c.dev.runs != 21 {
		t.Fatalf("want reloads across layouts and 21 runs: loads %v updates %d runs %d", c.dev.loads, c.dev.updates, c.dev.runs)
	}
}

func TestLauncherMismatchIsIncorrectAndUntimed(t *testing.T) {
	l, _ := newTestLauncher(t, "corrupt", Options{})
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken})
	v := out.Verdict
	if out.Failure != nil || v == nil || !v.Valid || v.Correct == nil || *v.Correct {
		t.Fatalf("want valid, correct=false: %+v %+v", out.Failure, v)
	}
	if v.LatencyUS != nil || v.LatencyKind != nil {
		t.Fatalf("a mismatching GPU run got a latency: %+v", v)
	}
	if !strings.Contains(joined(v.Notes), "differs from the reference VM") {
		t.Fatalf("notes: %v", v.Notes)
	}
}

func TestLauncherFailureClasses(t *testing.T) {
	for mode, class := range map[string]trial.FailClass{"watchdog": trial.FailTimeout, "poison": trial.FailCrash} {
		l, _ := newTestLauncher(t, mode, Options{})
		out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken})
		if out.Verdict != nil || out.Failure == nil || out.Failure.Class != class {
			t.Errorf("%s: want failure class %s, got %+v / %+v", mode, class, out.Failure, out.Verdict)
		}
	}
}

func TestLauncherRejectsKnobsTheKernelsRefuse(t *testing.T) {
	l, _ := newTestLauncher(t, "", Options{})
	out := evalOn(t, l, nil, trial.Spec{Token: 1, Point: json.RawMessage(`{"kernel_knobs": {"kunroll": 32}}`)})
	v := out.Verdict
	if out.Failure != nil || v == nil || v.Valid || v.RejectedReason == nil || !strings.Contains(*v.RejectedReason, "kunroll") {
		t.Fatalf("want valid=false naming kunroll: %+v %+v", out.Failure, v)
	}
	if v.Correct == nil || *v.Correct || v.LatencyUS != nil || v.BoundUS != nil {
		t.Fatalf("a refused program must say correct=false (seed 001) with no latency or floor: %+v", v)
	}
}

func TestLauncherTimesTheIncumbentSideBySideAndKeepsItResident(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	inc := json.RawMessage(`{"pipelining_depth": 0}`)
	for i := range 2 {
		out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Incumbent: inc})
		if out.Failure != nil || out.Verdict == nil || out.Verdict.LatencyUS == nil {
			t.Fatalf("trial %d: %+v %+v", i, out.Failure, out.Verdict)
		}
		if out.IncumbentUS == nil || *out.IncumbentUS != 122 || out.Ratio == nil || *out.Ratio != 102.0/122.0 {
			t.Fatalf("trial %d: incumbent %v ratio %v", i, out.IncumbentUS, out.Ratio)
		}
	}
	// Candidate loaded twice, incumbent once; only the incumbent stays resident.
	if len(c.dev.loads) != 3 || len(c.dev.times) != 2 || c.dev.resident() != 1 {
		t.Fatalf("loads %v timed %v resident %d", c.dev.loads, c.dev.times, c.dev.resident())
	}
	// A new child generation reloads it.
	c.gen++
	if out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Incumbent: inc}); out.IncumbentUS == nil {
		t.Fatalf("no incumbent after a restart: %+v", out)
	}
	if len(c.dev.loads) != 5 {
		t.Fatalf("the incumbent was not reloaded after a restart: loads %v", c.dev.loads)
	}
}

func TestLauncherTruncatedCheckUsesTheCheckModel(t *testing.T) {
	l, c := newTestLauncher(t, "", Options{})
	models := trial.NewModelCache(1) // one byte: toy-2L is checked on its first layer
	out := evalOn(t, l, models, trial.Spec{Model: "toy-2L", Token: 3, Pos: 1})
	v := out.Verdict
	if out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
		t.Fatalf("want a correct measured verdict: %+v %+v", out.Failure, v)
	}
	if !strings.Contains(joined(v.Notes), "first 1 of 2 layers") {
		t.Fatalf("notes: %v", v.Notes)
	}
	// check program (1 layer), then the full candidate (2 layers).
	if len(c.dev.loads) != 2 || c.dev.loads[0] >= c.dev.loads[1] {
		t.Fatalf("want the 1-layer check then the 2-layer candidate, got task counts %v", c.dev.loads)
	}
	// pos 0 and 1 of the check, then one untimed candidate launch whose
	// logits the timed launches must leave again.
	if c.dev.runs != 3 {
		t.Fatalf("runs %d", c.dev.runs)
	}
}

func TestLauncherNotesAnotherTarget(t *testing.T) {
	l, _ := newTestLauncher(t, "", Options{Target: "h100"})
	if !strings.Contains(joined(l.notes), "labelled as target h100") {
		t.Fatalf("notes %v", l.notes)
	}
	out := evalOn(t, l, nil, trial.Spec{GPU: "h100", Token: 2})
	if out.Verdict == nil || !strings.Contains(joined(out.Verdict.Notes), "for target h100") {
		t.Fatalf("no mismatch note: %+v %+v", out.Failure, out.Verdict)
	}
}

func TestLauncherRefusesAGPUWithoutARecord(t *testing.T) {
	_, err := New(context.Background(), newServerClient("unknown"), Options{})
	if err == nil || !strings.Contains(err.Error(), "no target record") {
		t.Fatalf("want a refusal, got %v", err)
	}
}

func TestSupervisedChildEndToEnd(t *testing.T) {
	sup := launch.NewSupervisor(launch.SupervisorConfig{Command: fakeChild("")})
	defer sup.Close()
	l, err := New(context.Background(), launch.Client{S: sup}, Options{Generation: sup.Generation})
	if err != nil {
		t.Fatal(err)
	}
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Pos: 1})
	if out.Failure != nil || out.Verdict == nil || out.Verdict.Correct == nil || !*out.Verdict.Correct || out.Verdict.LatencyUS == nil {
		t.Fatalf("%+v %+v", out.Failure, out.Verdict)
	}
}

func TestSupervisedHangIsATimeoutAndTheNextTrialRuns(t *testing.T) {
	mode := "hang"
	sup := launch.NewSupervisor(launch.SupervisorConfig{Command: func() *exec.Cmd { return fakeChild(mode)() }})
	defer sup.Close()
	l, err := New(context.Background(), launch.Client{S: sup}, Options{Generation: sup.Generation, RunTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken})
	if out.Failure == nil || out.Failure.Class != trial.FailTimeout {
		t.Fatalf("want a timeout failure, got %+v %+v", out.Failure, out.Verdict)
	}
	mode = "" // the next child is healthy
	out = evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken})
	if out.Failure != nil || out.Verdict == nil || out.Verdict.LatencyUS == nil {
		t.Fatalf("the trial after the hang: %+v %+v", out.Failure, out.Verdict)
	}
	if sup.Generation() != 2 {
		t.Fatalf("want a second child, generation %d", sup.Generation())
	}
}

// eagerGreedy is the oracle's greedy decode.
func eagerGreedy(t *testing.T, lm *trial.LoadedModel, prompt []int32, n int) []int32 {
	t.Helper()
	e, err := model.NewEager(lm.Config, lm.Weights)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	var logits []float32
	for pos := 0; pos < len(prompt)+n-1; pos++ {
		tok := int32(0)
		if pos < len(prompt) {
			tok = prompt[pos]
		} else {
			tok = out[len(out)-1]
		}
		if logits, err = e.Step(tok, pos); err != nil {
			t.Fatal(err)
		}
		if pos >= len(prompt)-1 {
			out = append(out, argmax(logits))
		}
	}
	return out
}

func TestGreedyDecodeMatchesTheEagerOracle(t *testing.T) {
	lm, err := toyModels.Get("toy-2L", "")
	if err != nil {
		t.Fatal(err)
	}
	target, _ := ir.Target("h200")
	prompt := []int32{1, 2, 3}
	want := eagerGreedy(t, lm, prompt, 6)
	for name, point := range map[string]schedule.Point{"whole-window": schedule.Default(), "split-kv": splitKV()} {
		l, c := newTestLauncher(t, "", Options{})
		got, steps, err := l.Greedy(context.Background(), lm, target, point, prompt, 6)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) || len(steps) != len(prompt)+6-1 {
			t.Fatalf("%s: device greedy %v (%d steps), eager %v", name, got, len(steps), want)
		}
		if c.dev.resident() != 0 {
			t.Fatalf("%s: %d programs left loaded", name, c.dev.resident())
		}
	}
	l, _ := newTestLauncher(t, "", Options{})
	if _, _, err := l.Greedy(context.Background(), lm, target, schedule.Default(), nil, 3); err == nil {
		t.Fatal("an empty prompt was accepted")
	}
}

func splitKV() schedule.Point {
	p := schedule.Default()
	p.Config.SetTile("attention", "n_partitions", 4)
	return p
}

func TestLauncherFreesWhatAFailedTrialLeftLoaded(t *testing.T) {
	l, c := newTestLauncher(t, "watchdog", Options{})
	if out := evalOn(t, l, nil, trial.Spec{Token: 4}); out.Failure == nil || out.Failure.Class != trial.FailTimeout {
		t.Fatalf("want a timeout: %+v", out.Failure)
	}
	if c.dev.resident() != 1 {
		t.Fatalf("the failed trial's check program is not resident: %d", c.dev.resident())
	}
	c.dev.mode = ""
	if out := evalOn(t, l, nil, trial.Spec{Token: 4}); out.Verdict == nil || out.Verdict.LatencyUS == nil {
		t.Fatalf("the next trial: %+v %+v", out.Failure, out.Verdict)
	}
	if c.dev.resident() != 0 {
		t.Fatalf("%d programs left loaded after a clean trial", c.dev.resident())
	}
}

// On the CPU emulator the Launcher checks as on a GPU, relaunches the
// checked step once, and times nothing: the verdict's latency is the cost
// model's, labelled predicted, and the emulator is the verdict's device.
func TestEmulatedLauncherChecksAndPredicts(t *testing.T) {
	l, c := newTestLauncher(t, "emu", Options{})
	if l.Name() != "emu CPU emulator of h200" {
		t.Fatalf("name %q", l.Name())
	}
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Pos: 2, Incumbent: json.RawMessage(`{"pipelining_depth": 0}`)})
	v := out.Verdict
	if out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyKind == nil || *v.LatencyKind != trial.KindPredicted {
		t.Fatalf("want a correct, predicted verdict: %+v %+v", out.Failure, v)
	}
	if v.Device != "emu CPU emulator of h200" || out.IncumbentUS == nil {
		t.Errorf("device %q, incumbent %v: want the emulator, and the incumbent predicted beside", v.Device, out.IncumbentUS)
	}
	notes := joined(v.Notes)
	for _, want := range []string{"emulator logits match the reference VM at pos 2", "a second emulated launch of the step",
		"latency predicted by the cost model"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "measured-gpu") || len(c.dev.times) != 0 {
		t.Errorf("the emulator was timed: %v\n%s", c.dev.times, notes)
	}
	if c.dev.runs != 4 || c.dev.resident() != 0 { // positions 0, 1, 2 and the second launch of 2
		t.Errorf("%d launches, %d programs left loaded", c.dev.runs, c.dev.resident())
	}
}

// A second emulated launch that leaves other logits makes the trial
// incorrect, without a latency.
func TestEmulatedLauncherSecondLaunchMustAgree(t *testing.T) {
	l, _ := newTestLauncher(t, "emu-racy", Options{})
	out := evalOn(t, l, nil, trial.Spec{Token: trial.DefaultToken, Pos: 0})
	v := out.Verdict
	if out.Failure != nil || v == nil || v.Correct == nil || *v.Correct || v.LatencyUS != nil {
		t.Fatalf("want correct=false without a latency: %+v %+v", out.Failure, v)
	}
	if notes := joined(v.Notes); !strings.Contains(notes, "a second emulated launch of the step, under another thread schedule, left logits that differ") ||
		!strings.Contains(notes, "the kernels race") {
		t.Errorf("notes: %s", notes)
	}
}
