package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/fib/loop1"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pipeline"
)

// openTuneDevice opens the Loop-1 device of a CUDA ordinal and returns it
// with its release function. A cuda-tagged file sets it; without it
// tune-instruction is refused.
var openTuneDevice func(ordinal int) (tune.Device, func() error, error)

func init() { addVerb(groupGPU, newTuneInstructionCmd) }

func newTuneInstructionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tune-instruction OP --gpu G --budget N [--dtype fp32|fp16|bf16] [--results FILE] [--device cuda|cuda:N] | tune-instruction --fib DIR [--definition NAME] [--device cpu|cuda|cuda:N] [--dump DIR]",
		Short: "Loop 1: tune one micro-kernel's -D knobs on the local GPU (JSON on stdout; exit 0 iff every built variant is correct)",
		Long: `tune-instruction OP tunes the fixed Loop-1 case of one micro-kernel on the GPU.

tune-instruction --fib DIR runs Loop 1 on the workloads of a FlashInfer-Bench
dataset that map onto amk micro-kernels (amkctl fib import DIR lists them): each
workload's case is first checked, reference VM against the Definition's semantics;
then on a GPU (--device cuda) its -D variants are tuned and timed (measured-gpu), and
on the CPU (--device cpu, or any build without CUDA when --device is not given) the
cost model predicts its latency (latency_kind predicted; no kernel runs, no variants,
no results.tsv rows). --dump DIR writes each case's inputs and amk's outputs for
scripts/gpu/fib_check.py. Exit 0 iff every case is correct (and on a GPU every tune
run OK).

OP gemm_pipeline is the FP8 GEMM micro-kernel whose knob is its pipeline
schedule (docs/spec/formats.md §3): every variant of a small space (MMA order, cross-stage
rotation, prologue form, ordering) is proved by the hazard checker and the
safe ones are ranked by predicted MMA utilisation on --gpu (an AMD part:
mi300x, mi325x, mi355x). Nothing is built or run, no GPU is needed, and the
JSON says latency_kind "predicted"; --budget is the number of ranked
variants reported. Exit 0 when some variant is safe.`,
	}
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "GPU target record of the roofline (amkctl targets lists them)")
	budget := fs.Int("budget", 6, "variants to try (variant 0 is the built-in defaults)")
	dtype := fs.String("dtype", "fp32", "dtype of the case: fp32, fp16 or bf16")
	quantize := fs.String("quantize", "", "gemv_tile only: tune the quantised GEMV (w8a16, w4a16, w4a16-g64, ...; its knobs: threads and qc)")
	results := fs.String("results", filepath.Join("workspace", "results.tsv"), "results.tsv to append one loop=instruction row per variant to; empty: none")
	device := fs.String("device", "cuda", "CUDA device: cuda (ordinal 0) or cuda:N; with --fib also cpu (predicted)")
	fibDir := fs.String("fib", "", "FlashInfer-Bench dataset whose mapped workloads Loop 1 runs on (instead of OP)")
	fibDef := fs.String("definition", "", "with --fib: only this Definition")
	fibDump := fs.String("dump", "", "with --fib: write each case's inputs and amk's outputs here (for scripts/gpu/fib_check.py)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if *fibDir != "" {
			if len(pos) != 0 {
				fmt.Fprintln(stderr, "amkctl tune-instruction: --fib takes no OP (the dataset's Definitions choose the micro-kernels)")
				return exitBadInput
			}
			dev := *device
			if !cmd.Flags().Changed("device") && openTuneDevice == nil {
				dev = "cpu"
			}
			return tuneFib(*fibDir, *fibDef, *fibDump, *gpu, *budget, *results, dev, stdout, stderr)
		}
		q, err := model.ParseQuantization(*quantize)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl tune-instruction: --quantize:", err)
			return exitBadInput
		}
		return tuneInstruction(pos, *gpu, *budget, *dtype, q, *results, *device, stdout, stderr)
	})
	return cmd
}

func tuneInstruction(pos []string, gpuName string, budget int, dtype string, quant model.Quantization, results, device string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl tune-instruction: "+format+"\n", a...)
		return code
	}
	if len(pos) != 1 {
		return fail(exitBadInput, "exactly one OP is required (e.g. gemv_tile, rmsnorm, attention_tile, gemm_pipeline)")
	}
	if pos[0] == pipeline.TuneOp {
		return tunePipeline(gpuName, budget, stdout, stderr)
	}
	op, err := tune.ParseOp(pos[0])
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	dt, err := tune.ParseDType(dtype)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if quant.On() && op != ir.OpGEMVTile {
		return fail(exitBadInput, "--quantize tunes the quantised gemv_tile only, not %s", pos[0])
	}
	target, err := ir.Target(gpuName)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if target.IsAMD() {
		return fail(exitBadInput, "%s is an AMD target: the CUDA micro-kernels do not build for it (the AMD Loop-1 op is %s, predicted)",
			target.Name, pipeline.TuneOp)
	}
	if budget < 1 {
		return fail(exitBadInput, "--budget must be >= 1")
	}
	dev, release, err := openLoop1Device(device, "",
		" (rebuild amkctl with -tags cuda on a machine with the CUDA driver): Loop 1 builds and times real kernels", stderr)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	defer release()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, tuneErr := tune.Tune(ctx, dev, tune.Options{Op: op, DType: dt, Quant: quant, Target: target, Budget: budget, Results: results, Log: stderr})
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

// tuneFib runs Loop 1 on a FlashInfer-Bench dataset's mapped workloads
// (package fib/loop1): on the CPU predicted, on a GPU measured.
func tuneFib(dir, definition, dump, gpuName string, budget int, results, device string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl tune-instruction: "+format+"\n", a...)
		return code
	}
	target, err := ir.Target(gpuName)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if budget < 1 {
		return fail(exitBadInput, "--budget must be >= 1")
	}
	opts := loop1.Options{Target: target, Budget: budget, Definition: definition, Dump: dump, Log: stderr}
	if strings.TrimSpace(strings.ToLower(device)) != "cpu" {
		dev, release, err := openLoop1Device(device, " (or cpu for predicted latencies)",
			": use --device cpu (predicted) or rebuild amkctl with -tags cuda", stderr)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		defer release()
		opts.Device, opts.Results = dev, results
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loop1.Run(ctx, dir, opts)
	switch {
	case errors.Is(err, loop1.ErrNothingToRun):
		fmt.Fprintln(stderr, "amkctl tune-instruction:", err)
	case err != nil && rep == nil:
		return fail(exitBadInput, "%v", err)
	case err != nil:
		fmt.Fprintln(stderr, "amkctl tune-instruction:", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fail(exitInternal, "%v", err)
	}
	if err == nil && rep.OK {
		return exitOK
	}
	return exitRejected
}

// cudaOrdinal parses cuda, cuda:N or N.
func cudaOrdinal(s string) (int, error) { return tune.ParseCUDADevice(s) }

// openLoop1Device opens the CUDA device that --device names for Loop 1 and
// returns it with the function that releases it (a failure to release is
// reported on stderr). ordinalHint follows an unreadable --device value and
// noCUDAHint follows "built without CUDA support" in the errors.
func openLoop1Device(device, ordinalHint, noCUDAHint string, stderr io.Writer) (tune.Device, func(), error) {
	ordinal, err := cudaOrdinal(device)
	if err != nil {
		return nil, nil, fmt.Errorf("%v%s", err, ordinalHint)
	}
	if openTuneDevice == nil {
		return nil, nil, errors.New("built without CUDA support" + noCUDAHint)
	}
	dev, release, err := openTuneDevice(ordinal)
	if err != nil {
		return nil, nil, fmt.Errorf("CUDA device %d: %v", ordinal, err)
	}
	return dev, func() {
		if err := release(); err != nil {
			fmt.Fprintln(stderr, "amkctl tune-instruction: releasing the device:", err)
		}
	}, nil
}
