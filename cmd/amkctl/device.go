package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// openCUDALauncher is set by a cuda-tagged file when the binary is built with
// GPU support; without it, --device cuda is refused with a clear error.
var openCUDALauncher func(ordinal int) (trial.Launcher, error)

// launcherFor maps a --device value to a latency source.
func launcherFor(arg string) (trial.Launcher, schedule.Device, error) {
	device, err := schedule.ParseDevice(arg)
	if err != nil {
		return nil, "", fmt.Errorf("--device: %w", err)
	}
	if device == schedule.DeviceCPU {
		return trial.CPULauncher{}, device, nil
	}
	if openCUDALauncher == nil {
		return nil, "", fmt.Errorf("--device cuda: this amkctl was built without CUDA support (rebuild with -tags cuda on a machine with the CUDA driver)")
	}
	l, err := openCUDALauncher(0)
	return l, device, err
}

// guardDevice puts evaluations on a GPU under the watchdog the gpuworker
// uses (one at a time, a wall-clock limit per trial, a wedged device
// detected); CPU evaluations run as they are. When the device wedges before
// ctx ends, onWedge is called once.
func guardDevice(ctx context.Context, dev schedule.Device, eval dispatch.Evaluator, stderr io.Writer, onWedge func()) dispatch.Evaluator {
	if dev != schedule.DeviceCUDA {
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
func evaluateOnce(ctx context.Context, dev schedule.Device, spec trial.Spec, opts trial.Options, stderr io.Writer) trial.Outcome {
	eval := func(ctx context.Context, spec trial.Spec) trial.Outcome { return trial.Evaluate(ctx, spec, opts) }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return guardDevice(ctx, dev, eval, stderr, nil)(ctx, spec)
}
