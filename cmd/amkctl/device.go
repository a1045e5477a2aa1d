package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/kernels/gpu"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// openCUDALauncher is set by a cuda-tagged file when the binary is built with
// GPU support; without it, --device cuda is refused with a clear error.
var openCUDALauncher func(ordinal int) (trial.Launcher, error)

// The supervised launcher process behind --device emu (every build) and
// --device cuda (a -tags cuda build).
func init() {
	addVerb(groupGPU, func() *cobra.Command {
		return &cobra.Command{
			Use:                gpu.ChildCommand,
			Short:              "(internal) the supervised launcher process behind --device emu and --device cuda",
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: runVerb(func(args []string, stdout, stderr io.Writer) int {
				return gpu.ChildMain(context.Background(), args, os.Stdin, stdout, stderr)
			}),
		}
	})
}

// launcherFor maps a --device value (cpu, emu, cuda or auto) to a latency
// source; target is the GPU target record (--gpu) the CPU emulator stands
// in for with --device emu. With auto, it says on stderr which device it
// picked and why.
func launcherFor(arg, target string, stderr io.Writer) (trial.Launcher, schedule.Device, error) {
	var openCUDA func() (trial.Launcher, error)
	if openCUDALauncher != nil {
		openCUDA = func() (trial.Launcher, error) { return openCUDALauncher(0) }
	}
	openEmu := func() (trial.Launcher, error) { return gpu.OpenLocal(context.Background(), 0, target, os.Stderr) }
	l, device, picked, err := control.OpenDevice(arg, openCUDA, openEmu)
	if err != nil {
		return nil, "", fmt.Errorf("--device %s", err)
	}
	if picked != "" {
		fmt.Fprintln(stderr, "amkctl: --"+picked)
	}
	return l, device, nil
}

// closeLauncher stops the launcher child a GPU or emulator launcher owns.
func closeLauncher(l trial.Launcher) {
	if c, ok := l.(interface{ Close() error }); ok {
		_ = c.Close()
	}
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
