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

// launcherFor maps a --device value (cpu, cuda or auto) to a latency
// source; with auto, it says on stderr which device it picked and why.
func launcherFor(arg string, stderr io.Writer) (trial.Launcher, schedule.Device, error) {
	var openCUDA func() (trial.Launcher, error)
	if openCUDALauncher != nil {
		openCUDA = func() (trial.Launcher, error) { return openCUDALauncher(0) }
	}
	l, device, picked, err := control.OpenDevice(arg, openCUDA)
	if err != nil {
		return nil, "", fmt.Errorf("--device %s", err)
	}
	if picked != "" {
		fmt.Fprintln(stderr, "amkctl: --"+picked)
	}
	return l, device, nil
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
