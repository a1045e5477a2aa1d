//go:build cuda

package main

import (
	"context"
	"os"

	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/gpu"
	"github.com/amk-dev/amk/trial"
)

// The cuda build of the gpuworker: --device N evaluates trials through a
// supervised launcher child (this binary's hidden launcher-child
// subcommand), so a hung or crashed kernel kills the child, not the worker.
// The toolchain and the build cache come from AMK_NVCC, AMK_NVCC_HOST_ARGS
// and AMK_KERNEL_CACHE.
func init() {
	cudaLauncher = openSupervisedLauncher
}

func openSupervisedLauncher(ordinal int) (trial.Launcher, deviceInfo, func() error, error) {
	l, err := gpu.OpenLocal(context.Background(), ordinal, "", os.Stderr)
	if err != nil {
		return nil, deviceInfo{}, nil, err
	}
	info := l.Device()
	return l, deviceInfo{Name: info.Name, Driver: gpu.DriverRelease(info.DriverVersion),
		Toolkit: build.ToolkitRelease(context.Background(), build.ToolchainFromEnv())}, l.Close, nil
}
