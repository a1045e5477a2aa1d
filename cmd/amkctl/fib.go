package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/fib"
)

func init() { addVerb(groupFormats, newFibCmd) }

// newFibCmd is "amkctl fib": FlashInfer-Bench Definitions in, Definitions
// and Traces out (package fib).
func newFibCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fib validate|export|import",
		Short: "FlashInfer-Bench: validate Definitions, export a model's Definitions and Traces, import a dataset for kernel tuning",
	}
	subcommandsOnly(cmd)
	cmd.AddCommand(newFibValidateCmd(), newFibExportCmd(), newFibImportCmd())
	return cmd
}

func newFibValidateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "check Definitions (and a dataset's workloads, traces, solutions) against every rule of the FlashInfer-Bench format",
		Long: `validate reads each FILE, or every .json/.jsonl under each DIR: *.json files are
Definitions (Solutions under a solutions/ directory), *.jsonl files under workloads/
hold workload entries and elsewhere Traces, checked against the Definitions found.
It prints one line per broken rule ("path: error: field: reason") and per warning,
then a summary. Exit status: 0 every record holds, 1 one breaks a rule, 2 a file is
not JSON or not a record of its kind (or nothing was found).`,
	}
	cmd.RunE = runVerb(func(paths []string, stdout, stderr io.Writer) int {
		if len(paths) == 0 {
			fmt.Fprintln(stderr, "amkctl fib validate: at least one FILE or DIR is required")
			return exitBadInput
		}
		status := exitOK
		for _, p := range paths {
			ds, err := fib.ReadDataset(p)
			if err != nil {
				fmt.Fprintf(stderr, "amkctl fib validate: %v\n", err)
				status = exitBadInput
				continue
			}
			status = worseStatus(status, fibStatus(fib.WriteValidation(stdout, ds)))
		}
		return status
	})
	return cmd
}

// fibStatus maps package fib's verdict codes onto amkctl's.
func fibStatus(code int) int {
	switch code {
	case fib.ExitOK:
		return exitOK
	case fib.ExitRejected:
		return exitRejected
	}
	return exitBadInput
}

// worseStatus keeps the more serious of two exit codes (bad input over
// rejected over ok).
func worseStatus(a, b int) int {
	rank := map[int]int{exitOK: 0, exitRejected: 1, exitBadInput: 2, exitInternal: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func newFibExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export MODEL --gpu G -o DIR [--campaign ID [--workspace DIR]] [--results FILE] [--json]",
		Short: "write the Definitions and workloads of a model's decode step (and a campaign's or kernel tuning's verdicts as Traces)",
		Long: `export writes, in the FlashInfer-Bench dataset layout under DIR, one Definition
per op of MODEL's decode step (embedding, RMSNorm, each projection shape, RoPE, KV
append, GQA decode attention, split-KV combine, SwiGLU, residual add) plus the whole
step as one fused Definition: the model's constants as const axes, batch and KV
length as var axes, model: and stage:decode tags, a plain-PyTorch reference written
for amk; and their workloads. --campaign adds the campaign's verdicts as Traces of
the decode-step Definition (traces/amk/...), --results the kernel-tuning rows of a
results.tsv as Traces of the op Definitions (MODEL must be small, the preset kernel tuning
cuts its cases from). A Trace's environment says measured-gpu or predicted; a
verdict without a correctness PASS carries no latency.`,
		ValidArgsFunction: completeModels,
	}
	fs := cmd.Flags()
	gpu := addGPUFlag(cmd, "h100", "GPU target record of the Traces (amkctl targets lists them)")
	out := fs.StringP("out", "o", "", "dataset directory to write (created)")
	campaign := fs.String("campaign", "", "campaign id whose verdicts become Traces")
	workspace := fs.String("workspace", "workspace", "workspace directory holding the campaign")
	results := fs.String("results", "", "results.tsv whose kernel-tuning (loop=instruction) rows become Traces")
	asJSON := addJSONFlags(cmd, "print the summary as JSON")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 1 || *out == "" {
			fmt.Fprintln(stderr, "amkctl fib export: exactly one MODEL and -o DIR are required")
			return exitBadInput
		}
		sum, err := fib.RunExport(fib.ExportRequest{Model: args[0], GPU: *gpu, Out: *out, Workspace: *workspace,
			Campaign: *campaign, Results: *results})
		if err != nil {
			fmt.Fprintln(stderr, "amkctl fib export:", err)
			if errors.Is(err, fib.ErrBadRequest) || errors.Is(err, os.ErrNotExist) {
				return exitBadInput
			}
			return exitRejected
		}
		if *asJSON {
			if err := fib.WriteJSON(stdout, sum); err != nil {
				fmt.Fprintln(stderr, "amkctl fib export:", err)
				return exitInternal
			}
			return exitOK
		}
		fmt.Fprintf(stdout, "%s: %d Definitions, %d workloads, %d Traces, %d Solutions (%d files) under %s\n",
			sum.Model, sum.Definitions, sum.Workloads, sum.Traces, sum.Solutions, sum.Files, *out)
		for _, n := range sum.Notes {
			fmt.Fprintln(stdout, "  "+n)
		}
		return exitOK
	})
	return cmd
}

func newFibImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import DIR",
		Short: "map a dataset's Definitions onto amk micro-kernels: which become kernel-tuning cases on their workloads, which cannot, and why",
		Long: `import reads a FlashInfer-Bench dataset directory, prints which Definitions map
onto an amk micro-kernel (by op_type, dtypes and axes: a table, see package fib) with
one kernel-tuning case per workload, and which do not, with why. Tune on the imported
workloads with: amkctl tune-instruction --fib DIR. Exit status: 0 when at least one
workload maps, 1 when none does, 2 when DIR cannot be read.`,
	}
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 1 {
			fmt.Fprintln(stderr, "amkctl fib import: exactly one DIR is required")
			return exitBadInput
		}
		ds, err := fib.ReadDataset(args[0])
		if err != nil {
			fmt.Fprintln(stderr, "amkctl fib import:", err)
			return exitBadInput
		}
		for _, r := range ds.Reports {
			if r.Err != nil {
				fmt.Fprintf(stderr, "amkctl fib import: %s: %v (skipped)\n", r.Where(), r.Err)
			}
		}
		ms := fib.Map(ds)
		fib.WriteMappings(stdout, ms)
		for _, m := range ms {
			if m.Mapped() {
				return exitOK
			}
		}
		return exitRejected
	})
	return cmd
}
