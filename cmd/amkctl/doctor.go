package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/internal/doctor"
)

func init() { addVerb(groupGPU, newDoctorCmd) }

func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor [--workspace DIR] [--json]",
		Short: "check this machine: runtime, memory, workspace, CUDA toolchain and device, reference numerics",
		Long: `doctor checks what amk needs here: the build and runtime, CPUs and available
memory, the workspace (writable, free space), nvcc (the one the kernel tests
use: AMK_NVCC, else the CUDA 12.4 compiler that make test installs into the
checkout's .cache/cuda-12.4, else PATH), whether this binary can open a GPU
(a cuda build opens the device), and that the reference VM matches the eager
oracle on the toy model.
Exit status: 0 ready (CPU-only included), 1 some check failed.`,
	}
	workspace := cmd.Flags().String("workspace", "workspace", "workspace directory to check")
	jsonOut := addJSONFlags(cmd, "print the report as JSON")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 0 {
			fmt.Fprintln(stderr, "amkctl doctor: takes no arguments")
			return exitBadInput
		}
		r := doctor.Run(context.Background(), doctor.Options{Workspace: *workspace, GPUProbe: gpuProbe()})
		if *jsonOut {
			if err := printJSON(stdout, r); err != nil {
				return exitInternal
			}
		} else {
			fmt.Fprint(stdout, r.Text())
		}
		if !r.Ready {
			return exitRejected
		}
		return exitOK
	})
	return cmd
}

// gpuProbe opens CUDA device 0 and names it, for doctor; nil when this
// binary was built without CUDA support.
func gpuProbe() func(context.Context) (string, error) {
	if openCUDALauncher == nil {
		return nil
	}
	return func(context.Context) (string, error) {
		l, err := openCUDALauncher(0)
		if err != nil {
			return "", err
		}
		if c, ok := l.(io.Closer); ok {
			defer c.Close()
		}
		return l.Name(), nil
	}
}
