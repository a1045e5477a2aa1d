package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
)

// openTuneDevice opens the Loop-1 device of a CUDA ordinal and returns it
// with its release function. A cuda-tagged file sets it; without it
// tune-instruction is refused.
var openTuneDevice func(ordinal int) (tune.Device, func() error, error)

func init() { addVerb(newTuneInstructionCmd) }

func newTuneInstructionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tune-instruction OP --gpu G --budget N [--dtype fp32|fp16|bf16] [--results FILE] [--device cuda|cuda:N]",
		Short: "Loop 1: tune one micro-kernel's -D knobs on the local GPU (JSON on stdout; exit 0 iff every built variant is correct)",
	}
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "GPU target record of the roofline (amkctl targets lists them)")
	budget := fs.Int("budget", 6, "variants to try (variant 0 is the built-in defaults)")
	dtype := fs.String("dtype", "fp32", "dtype of the case: fp32, fp16 or bf16")
	results := fs.String("results", filepath.Join("workspace", "results.tsv"), "results.tsv to append one loop=instruction row per variant to; empty: none")
	device := fs.String("device", "cuda", "CUDA device: cuda (ordinal 0) or cuda:N")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		return tuneInstruction(pos, *gpu, *budget, *dtype, *results, *device, stdout, stderr)
	})
	return cmd
}

func tuneInstruction(pos []string, gpuName string, budget int, dtype, results, device string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl tune-instruction: "+format+"\n", a...)
		return code
	}
	if len(pos) != 1 {
		return fail(exitBadInput, "exactly one OP is required (e.g. gemv_tile, rmsnorm, attention_tile)")
	}
	op, err := tune.ParseOp(pos[0])
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	dt, err := tune.ParseDType(dtype)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	target, err := ir.Target(gpuName)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if budget < 1 {
		return fail(exitBadInput, "--budget must be >= 1")
	}
	ordinal, err := cudaOrdinal(device)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if openTuneDevice == nil {
		return fail(exitBadInput, "built without CUDA support (rebuild amkctl with -tags cuda on a machine with the CUDA driver): Loop 1 builds and times real kernels")
	}
	dev, release, err := openTuneDevice(ordinal)
	if err != nil {
		return fail(exitBadInput, "CUDA device %d: %v", ordinal, err)
	}
	defer func() {
		if err := release(); err != nil {
			fmt.Fprintln(stderr, "amkctl tune-instruction: releasing the device:", err)
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, tuneErr := tune.Tune(ctx, dev, tune.Options{Op: op, DType: dt, Target: target, Budget: budget, Results: results, Log: stderr})
	if tuneErr != nil {
		fmt.Fprintln(stderr, "amkctl tune-instruction:", tuneErr)
		if sum == nil {
			return exitRejected
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(sum); err != nil {
		return fail(exitInternal, "%v", err)
	}
	if tuneErr == nil && sum.OK() {
		return exitOK
	}
	return exitRejected
}

// cudaOrdinal parses cuda, cuda:N or N.
func cudaOrdinal(s string) (int, error) { return tune.ParseCUDADevice(s) }
