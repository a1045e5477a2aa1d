package main

import (
	"fmt"

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
