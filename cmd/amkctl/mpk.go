package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/ir/mpk/rank"
	"github.com/amk-dev/amk/programfile"
)

func init() { addVerb(groupFormats, newMPKCmd) }

// addMPKRuntimeFlags adds the flags of the MPK launch a graph is checked for.
func addMPKRuntimeFlags(cmd *cobra.Command) *mpkRuntime {
	rt := &mpkRuntime{}
	cmd.Flags().IntVar(&rt.workers, "workers", mpk.DefaultWorkers, "MPK worker thread blocks (num_workers)")
	cmd.Flags().IntVar(&rt.queueLen, "queue-len", mpk.DefaultQueueLen, "entries of each worker queue (per_worker_queue_len; Mirage today: 8192)")
	cmd.Flags().IntVar(&rt.gpus, "gpus", 1, "GPUs in the launch (event ids of other gpu ids are rejected)")
	return rt
}

// newMPKCmd is "mpk": Mirage persistent-kernel task graphs (task_graph.json).
func newMPKCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mpk check|rank|import|export",
		Short: "Mirage persistent-kernel task graphs: check, rank by predicted latency, translate both ways",
		Long: `mpk works on the task_graph.json files of Mirage's persistent kernel (MPK).
"amkctl validate FILE" recognises such a graph too and checks it for the
default launch; "amkctl lower ... --format mpk" writes a lowered schedule as one.`,
	}
	subcommandsOnly(cmd)

	check := &cobra.Command{
		Use:   "check FILE... [--workers N] [--queue-len N] [--gpus N] [--json]",
		Short: "prove task graphs safe for an MPK launch (deadlock, cycle, races, ranges, queues, iterations, gpu ids)",
		Long: `check is validate for MPK task graphs with the launch described by flags.
Exit status: 0 all valid, 1 some graph rejected, 2 some file unreadable or malformed.`,
	}
	checkRT := addMPKRuntimeFlags(check)
	checkJSON := addJSONFlags(check, "print each report as JSON instead of text")
	check.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) == 0 {
			fmt.Fprintln(stderr, "amkctl mpk check: at least one FILE is required")
			return exitBadInput
		}
		return validateFiles("mpk check", files, func(f string) (programfile.Checked, error) {
			return programfile.CheckMPK(f, checkRT.options())
		}, *checkJSON, stdout, stderr)
	})

	rank := &cobra.Command{
		Use:   "rank FILE... --gpu G [--workers N] [--queue-len N] [--json]",
		Short: "rank task graphs by amk's predicted latency (only graphs check accepts get one)",
		Long: `rank checks each graph, translates the valid ones into amk programs and ranks
them by amk's cost model on --gpu, fastest first. Every latency is labelled
predicted: MPK's kernels are not run. Exit status: 0 all ranked, 1 some graph
rejected (no latency), 2 some file unreadable or malformed.`,
	}
	gpu := addGPUFlag(rank, "h100", "")
	rankRT := addMPKRuntimeFlags(rank)
	rankJSON := addJSONFlags(rank, "print the ranking as a JSON array")
	rank.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) == 0 {
			fmt.Fprintln(stderr, "amkctl mpk rank: at least one FILE is required")
			return exitBadInput
		}
		return rankMPK(files, *gpu, *rankRT, *rankJSON, stdout, stderr)
	})

	imp := &cobra.Command{
		Use:   "import FILE [--out prog.json]",
		Short: "translate a task graph into an amk program (an amk export gives back its program byte for byte)",
	}
	impOut := imp.Flags().StringP("out", "o", "-", "output file, - for stdout")
	imp.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) != 1 {
			fmt.Fprintln(stderr, "amkctl mpk import: exactly one FILE is required")
			return exitBadInput
		}
		return importMPK(files[0], *impOut, stdout, stderr)
	})

	exp := &cobra.Command{
		Use:   "export PROGRAM [--out task_graph.json] [--gpu-id N]",
		Short: "write an amk program file as an MPK task graph",
	}
	expOut := exp.Flags().StringP("out", "o", "-", "output file, - for stdout")
	gpuID := exp.Flags().Int("gpu-id", 0, "gpu id written into every event id (MPK's my_gpu_id)")
	exp.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) != 1 {
			fmt.Fprintln(stderr, "amkctl mpk export: exactly one PROGRAM file is required")
			return exitBadInput
		}
		return exportMPK(files[0], *expOut, *gpuID, stdout, stderr)
	})
	cmd.AddCommand(check, rank, imp, exp)
	return cmd
}

// mpkRuntime are the flags that describe the MPK launch a graph is checked for.
type mpkRuntime struct {
	workers, queueLen, gpus int
}

func (r mpkRuntime) options() mpk.CheckOptions {
	return mpk.CheckOptions{Workers: r.workers, QueueLen: r.queueLen, GPUs: r.gpus}
}

// rankMPK checks each graph, predicts the latency of every valid one on a
// target with amk's cost model, and writes them fastest first. A rejected
// or unreadable graph gets no latency (its report goes to stderr).
func rankMPK(files []string, gpu string, rt mpkRuntime, asJSON bool, stdout, stderr io.Writer) int {
	target, err := ir.Target(gpu)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl mpk rank:", err)
		return exitBadInput
	}
	status := exitOK
	var ranked []rank.Entry
	for _, f := range files {
		g, err := programfile.ReadMPK(f)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		e, rep, err := rank.Predict(f, g, target, rt.options())
		switch {
		case errors.Is(err, rank.ErrRejected):
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: no latency without a PASS:\n%s\n", f, rep)
			status = max(status, exitRejected)
			continue
		case err != nil:
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		ranked = append(ranked, e)
	}
	rank.Order(ranked)
	if asJSON {
		if ranked == nil {
			ranked = []rank.Entry{}
		}
		out, _ := json.MarshalIndent(ranked, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
		return status
	}
	if len(ranked) > 0 {
		fmt.Fprintf(stdout, "%-4s  %12s  %10s  %8s  %6s  %s\n", "rank", "predicted_us", "floor_us", "%floor", "tasks", "file")
	}
	for _, r := range ranked {
		fmt.Fprintf(stdout, "%-4d  %12.3f  %10.3f  %8.1f  %6d  %s\n", r.Rank, r.LatencyUS, r.BoundUS, r.PctOfRoofline, r.Tasks, r.File)
	}
	return status
}

// importMPK translates a task graph into an amk program file.
func importMPK(file, outPath string, stdout, stderr io.Writer) int {
	g, err := programfile.ReadMPK(file)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk import: %s: %v\n", file, err)
		return exitBadInput
	}
	p, err := mpk.ToProgram(g)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk import: %s: %v\n", file, err)
		return exitRejected
	}
	return writeOut("mpk import", outPath, ir.Encode(p),
		fmt.Sprintf("an amk program: %d tasks, %d buffers, %d counters", len(p.Tasks), len(p.Buffers), len(p.Counters)), stdout, stderr)
}

// exportMPK writes an amk program file as an MPK task graph.
func exportMPK(file, outPath string, gpuID int, stdout, stderr io.Writer) int {
	p, err := loadProgram(file, ir.Limits{})
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk export: %s: %v\n", file, err)
		return exitBadInput
	}
	g, err := mpk.ToGraph(p, mpk.ExportOptions{GPU: gpuID})
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk export: %s: %v\n", file, err)
		return exitRejected
	}
	return writeOut("mpk export", outPath, mpk.Encode(g),
		fmt.Sprintf("an MPK task graph: %d tasks, %d events", len(g.Tasks), len(g.Events)), stdout, stderr)
}

// writeOut writes a verb's document to stdout ("-") or atomically to a
// file; a file written is confirmed on stderr with what, summary, it holds
// (as lower does), so that stdout only ever carries documents.
func writeOut(verb, outPath string, data []byte, summary string, stdout, stderr io.Writer) int {
	if outPath == "-" {
		fmt.Fprintln(stdout, string(data))
		return exitOK
	}
	if err := writeFileAtomic(outPath, data); err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
		return exitBadInput
	}
	fmt.Fprintf(stderr, "wrote %s: %s\n", outPath, summary)
	return exitOK
}
