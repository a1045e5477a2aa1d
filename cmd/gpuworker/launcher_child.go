package main

import (
	"context"
	"os"

	"github.com/amk-dev/amk/kernels/gpu"
)

// runLauncherChild is the hidden `gpuworker launcher-child` subcommand: the
// supervised process that owns one CUDA device (kernels/gpu.ChildMain). It
// speaks the launch protocol on stdin/stdout; in a build without the cuda
// tag it exits 2 with "built without CUDA support".
func runLauncherChild(args []string) int {
	return gpu.ChildMain(context.Background(), args, os.Stdin, os.Stdout, os.Stderr)
}
