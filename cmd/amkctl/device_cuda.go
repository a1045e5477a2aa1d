//go:build cuda

package main

import (
	"context"
	"os"

	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/gpu"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/trial"
)

// The cuda build of amkctl: --device cuda runs trials through a supervised
// launcher child (this binary's hidden launcher-child verb, device.go), and
// tune-instruction opens the device in-process. The toolchain and the build
// cache come from AMK_NVCC, AMK_NVCC_HOST_ARGS and AMK_KERNEL_CACHE.
func init() {
	openCUDALauncher = openSupervisedLauncher
	openTuneDevice = openLaunchDevice
}

func openSupervisedLauncher(ordinal int) (trial.Launcher, error) {
	return gpu.OpenLocal(context.Background(), ordinal, "", os.Stderr)
}

func openLaunchDevice(ordinal int) (tune.Device, func() error, error) {
	cache, err := build.CacheDirFromEnv()
	if err != nil {
		return nil, nil, err
	}
	dev, err := launch.Open(ordinal)
	if err != nil {
		return nil, nil, err
	}
	ld, err := tune.NewLaunchDevice(dev, launch.BuilderModules{Builder: &build.Builder{Toolchain: build.ToolchainFromEnv(), Dir: cache, Prebuilt: build.PrebuiltFromEnv()}})
	if err != nil {
		_ = dev.Close()
		return nil, nil, err
	}
	return ld, ld.Close, nil
}
