//go:build cuda

package gpu

// GPU checks of the CUDA trial.Launcher, through a real supervised child
// (this test binary re-executed as ChildMain). Run on the GPU machine:
//
//	AMK_NVCC=$(command -v nvcc) go test -tags cuda -timeout 30m -run CUDA -v ./kernels/gpu
//
// AMK_KERNEL_CACHE, when set, keeps compiled modules between runs.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func openCUDA(t *testing.T) *Launcher {
	t.Helper()
	if os.Getenv(build.EnvNVCC) == "" {
		t.Skip("AMK_NVCC not set")
	}
	cache := os.Getenv(build.EnvCache)
	if cache == "" {
		cache = t.TempDir()
	}
	t.Setenv("AMK_GPU_CUDA_CHILD", "1") // the child inherits it
	l, err := Open(context.Background(), ChildConfig{Executable: os.Args[0], Subcommand: []string{"-test.run=^$"},
		Toolchain: build.ToolchainFromEnv(), CacheDir: cache, Log: testLog{t}}, Options{})
	if err != nil {
		t.Fatalf("opening the CUDA launcher: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	t.Logf("device %+v, target %s, notes %v", l.Device(), l.Target().Name, l.notes)
	return l
}

func TestCUDAEvalMatchesTheReferenceVM(t *testing.T) {
	l := openCUDA(t)
	models := trial.NewModelCache(0)
	for _, m := range []string{"toy", "toy-2L", "small"} {
		for _, pos := range []int{0, 5} {
			spec := trial.Spec{Model: m, GPU: l.Target().Name, Device: "cuda", Point: json.RawMessage(`{}`), Token: trial.DefaultToken, Pos: pos,
				Incumbent: json.RawMessage(`{"pipelining_depth": 0}`)}
			out := trial.Evaluate(context.Background(), spec, trial.Options{Launcher: l, Models: models})
			v := out.Verdict
			if out.Failure != nil || v == nil || !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
				t.Errorf("%s pos %d: %+v %+v", m, pos, out.Failure, v)
				continue
			}
			gbs := v.WeightMB * 1e6 / *v.LatencyUS / 1e3
			t.Logf("%s pos %d: %.3f us (%s), bound %.3f us, pct_of_roofline %.1f, %.0f GB/s; incumbent %v ratio %v; notes %v",
				m, pos, *v.LatencyUS, *v.LatencyKind, *v.BoundUS, *v.PctOfRoofline, gbs, deref(out.IncumbentUS), deref(out.Ratio), v.Notes)
		}
	}
}

func TestCUDAGreedyDecodeMatchesEager(t *testing.T) {
	l := openCUDA(t)
	models := trial.NewModelCache(0)
	prompt := []int32{1, 2, 3}
	for _, m := range []string{"toy-2L", "small"} {
		lm, err := models.Get(m, "")
		if err != nil {
			t.Fatal(err)
		}
		want := eagerGreedy(t, lm, prompt, 16)
		for name, point := range map[string]schedule.Point{"default": schedule.Default(), "split-kv": splitKV()} {
			got, _, err := l.Greedy(context.Background(), lm, l.Target(), point, prompt, 16)
			if err != nil {
				t.Fatalf("%s %s: %v", m, name, err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: GPU greedy %v, eager %v", m, name, got, want)
			}
			t.Logf("%s %s: %v", m, name, got)
		}
	}
}

// TestCUDAWatchdogThroughTheChild is the watchdog demo end to end: a toy
// decode step whose last wait can never be met (threshold one past its
// producers) runs in the supervised child with a 50 ms budget, ends as a
// WATCHDOG status (class timeout) naming the task, and the same child — no
// restart — then serves a normal trial.
func TestCUDAWatchdogThroughTheChild(t *testing.T) {
	l := openCUDA(t)
	ctx := context.Background()
	gen := l.opts.Generation()
	cfg, err := model.Preset("toy")
	if err != nil {
		t.Fatal(err)
	}
	good, err := lowerChecked(cfg, l.Target(), schedule.Default(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ir.Decode(ir.Encode(good))
	if err != nil {
		t.Fatal(err)
	}
	task := -1
	for i := range bad.Tasks {
		if len(bad.Tasks[i].Waits) > 0 {
			task = i
		}
	}
	bad.Tasks[task].Waits[0].Threshold++
	ws := launch.WeightSource{Kind: SourceSeeded, Model: encodeModel(cfg), Seed: trial.WeightSeed}
	if _, err := l.c.Load(ctx, &launch.LoadRequest{Handle: "deadlock", Program: ir.Encode(bad), Weights: ws,
		WatchdogNS: 50_000_000, Unchecked: true}); err != nil {
		t.Fatal(err)
	}
	inputs, err := stepInputs([]int32{1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := l.c.Run(ctx, &launch.RunRequest{Handle: "deadlock", Inputs: inputs})
	if err != nil {
		t.Fatalf("the deadlocking launch did not come back as a status: %v", err)
	}
	serr := statusError(res, "run")
	var le *trial.LaunchError
	if res.Status != launch.StatusWatchdog || !errors.As(serr, &le) || le.Class != trial.FailTimeout || res.Diag == nil || res.Diag.Task != int32(task) {
		t.Fatalf("want a WATCHDOG status (class timeout) naming task %d: %+v (%v)", task, res, serr)
	}
	t.Logf("watchdog after %v: %s", time.Since(start), res.Message)
	_ = l.c.Unload(ctx, "deadlock")
	out := trial.Evaluate(ctx, trial.Spec{Model: "toy", GPU: l.Target().Name, Device: "cuda", Point: json.RawMessage(`{}`), Token: trial.DefaultToken},
		trial.Options{Launcher: l, Models: trial.NewModelCache(0)})
	if v := out.Verdict; out.Failure != nil || v == nil || v.Correct == nil || !*v.Correct || v.LatencyUS == nil {
		t.Fatalf("the next trial failed: %+v %+v", out.Failure, out.Verdict)
	}
	if g := l.opts.Generation(); g != gen {
		t.Fatalf("the child was restarted (generation %d -> %d)", gen, g)
	}
	t.Logf("the same child then measured toy at %.3f us", *out.Verdict.LatencyUS)
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
