package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/trial"
)

// openCUDALauncher is set by a cuda-tagged file when the binary is built with
// GPU support; without it, --device cuda is refused with a clear error.
var openCUDALauncher func(ordinal int) (trial.Launcher, error)

// launcherFor maps a --device value to a latency source.
func launcherFor(device string) (trial.Launcher, string, error) {
	switch device {
	case "", "cpu":
		return trial.CPULauncher{}, "cpu", nil
	case "cuda":
		if openCUDALauncher == nil {
			return nil, "", fmt.Errorf("--device cuda: this amkctl was built without CUDA support (rebuild with -tags cuda on a machine with the CUDA driver)")
		}
		l, err := openCUDALauncher(0)
		return l, "cuda", err
	default:
		return nil, "", fmt.Errorf("--device must be cpu or cuda, got %q", device)
	}
}

// guardDevice puts evaluations on a GPU under the watchdog the gpuworker
// uses (one at a time, a wall-clock limit per trial, a wedged device
// detected); CPU evaluations run as they are. When the device wedges before
// ctx ends, onWedge is called once.
func guardDevice(ctx context.Context, dev string, eval dispatch.Evaluator, stderr io.Writer, onWedge func()) dispatch.Evaluator {
	if dev != "cuda" {
		return eval
	}
	dog := dispatch.NewWatchdog(eval, dispatch.WatchdogOptions{Limit: config.DefaultTrialTimeout,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	go func() {
		select {
		case <-dog.Wedged():
			if onWedge != nil {
				onWedge()
			}
		case <-ctx.Done():
		}
	}()
	return dog.Evaluate
}

// evaluateOnce evaluates one spec, on a GPU under the watchdog.
func evaluateOnce(ctx context.Context, dev string, spec trial.Spec, opts trial.Options, stderr io.Writer) trial.Outcome {
	eval := func(ctx context.Context, spec trial.Spec) trial.Outcome { return trial.Evaluate(ctx, spec, opts) }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return guardDevice(ctx, dev, eval, stderr, nil)(ctx, spec)
}
