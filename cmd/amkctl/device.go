package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/amk-dev/amk/control"
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

// evaluateOnce evaluates one spec, on a GPU under the watchdog (its
// warnings go to stderr).
func evaluateOnce(ctx context.Context, dev schedule.Device, spec trial.Spec, opts trial.Options, stderr io.Writer) trial.Outcome {
	eval, _ := control.DeviceEvaluator(dev, opts, warnLog(stderr))
	return eval(ctx, spec)
}

// warnLog writes the warnings and errors of a package's logger (the GPU
// watchdog's) to stderr.
func warnLog(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
