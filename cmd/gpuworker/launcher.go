package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/amk-dev/amk/kernels/gpu"
	"github.com/amk-dev/amk/trial"
)

// deviceInfo describes the evaluating device for logs, metrics and outcomes.
type deviceInfo struct {
	Name    string // e.g. "NVIDIA H200" or the CPU model
	Driver  string // driver version, where known
	Toolkit string // CUDA toolkit version, where known
}

// cudaLauncher opens the CUDA launcher for a device ordinal and returns it,
// the device's description and a function releasing it. It is nil unless a
// file built with -tags cuda (shipped with the CUDA launcher) sets it from
// its init function; this package imports no CUDA code itself.
var cudaLauncher func(ordinal int) (trial.Launcher, deviceInfo, func() error, error)

// errNoCUDA is the startup error for --device N in a build without CUDA.
var errNoCUDA = errors.New("CUDA launcher not available in this build (rebuild gpuworker with -tags cuda, or use --device cpu or emu)")

// openLauncher returns the launcher for the configured device: nil (the CPU
// cost model) for cpu, the launcher of the CPU emulator standing in for the
// target when emulate names it (--device emu), the CUDA launcher for an
// ordinal.
func openLauncher(ordinal int, cpu bool, emulate string) (trial.Launcher, deviceInfo, func() error, error) {
	if cpu {
		return nil, deviceInfo{Name: cpuModel()}, func() error { return nil }, nil
	}
	if emulate != "" {
		l, err := gpu.OpenLocal(context.Background(), 0, emulate, os.Stderr)
		if err != nil {
			return nil, deviceInfo{}, nil, fmt.Errorf("--device emu: %w", err)
		}
		return l, deviceInfo{Name: l.Device().Name + " on " + cpuModel()}, l.Close, nil
	}
	if cudaLauncher == nil {
		return nil, deviceInfo{}, nil, errNoCUDA
	}
	l, info, release, err := cudaLauncher(ordinal)
	if err != nil {
		return nil, deviceInfo{}, nil, fmt.Errorf("CUDA device %d: %w", ordinal, err)
	}
	return l, info, release, nil
}
