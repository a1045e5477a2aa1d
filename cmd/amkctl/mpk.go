package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/schedule"
)

// mpkRuntime are the flags that describe the MPK launch a graph is checked for.
type mpkRuntime struct {
	workers, queueLen, gpus int
}

func (r mpkRuntime) options() mpk.CheckOptions {
	return mpk.CheckOptions{Workers: r.workers, QueueLen: r.queueLen, GPUs: r.gpus}
}

// readMPK reads and decodes a task-graph file.
func readMPK(path string) (*mpk.Graph, error) {
	data, err := readInput(path, mpk.MaxGraphBytes)
	if err != nil {
		return nil, err
	}
	return mpk.Decode(data)
}

// validateMPK checks an MPK task graph for validate: the report as text or
// JSON, and exitRejected when it is rejected.
func validateMPK(data []byte, opt mpk.CheckOptions) (rep mpk.Report, status int, err error) {
	g, err := mpk.Decode(data)
	if err != nil {
		return rep, exitBadInput, err
	}
	rep = mpk.Check(g, opt)
	if !rep.OK {
		return rep, exitRejected, nil
	}
	return rep, exitValid, nil
}

// mpkRanked is one graph's line in mpk rank.
type mpkRanked struct {
	Rank          int      `json:"rank"`
	File          string   `json:"file"`
	Valid         bool     `json:"valid"`
	LatencyUS     float64  `json:"latency_us"`
	LatencyKind   string   `json:"latency_kind"`
	BoundUS       float64  `json:"bound_us"`
	PctOfRoofline float64  `json:"pct_of_roofline"`
	Tasks         int      `json:"tasks"`
	Events        int      `json:"events"`
	GPU           string   `json:"gpu"`
	Notes         []string `json:"notes"`
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
	status := exitValid
	var ranked []mpkRanked
	for _, f := range files {
		g, err := readMPK(f)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		if rep := mpk.Check(g, rt.options()); !rep.OK {
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: no latency without a PASS:\n%s\n", f, rep)
			status = max(status, exitRejected)
			continue
		}
		p, err := mpk.ToProgram(g)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl mpk rank: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		cost := schedule.Predict(p, target, schedule.Default())
		r := mpkRanked{File: f, Valid: true, LatencyUS: ir.RoundTo(cost.PredictedUS, 3), LatencyKind: "predicted",
			BoundUS: ir.RoundTo(cost.BandwidthBoundUS, 3), Tasks: len(g.Tasks), Events: len(g.Events), GPU: target.Name,
			Notes: append([]string{"amk's cost model on the graph's translation; MPK's kernels are not run, so numerics are not checked"}, cost.Notes...)}
		if cost.BandwidthBoundUS > 0 && !math.IsNaN(cost.PredictedUS) {
			r.PctOfRoofline = ir.RoundTo(cost.PredictedUS/cost.BandwidthBoundUS*100, 1)
		}
		ranked = append(ranked, r)
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].LatencyUS < ranked[j].LatencyUS })
	for i := range ranked {
		ranked[i].Rank = i + 1
	}
	if asJSON {
		if ranked == nil {
			ranked = []mpkRanked{}
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
	g, err := readMPK(file)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk import: %s: %v\n", file, err)
		return exitBadInput
	}
	p, err := mpk.ToProgram(g)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk import: %s: %v\n", file, err)
		return exitRejected
	}
	return writeOut("mpk import", outPath, ir.Encode(p), stdout, stderr)
}

// exportMPK writes an amk program file as an MPK task graph.
func exportMPK(file, outPath string, gpuID int, stdout, stderr io.Writer) int {
	p, err := loadProgram(file)
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk export: %s: %v\n", file, err)
		return exitBadInput
	}
	g, err := mpk.ToGraph(p, mpk.ExportOptions{GPU: gpuID})
	if err != nil {
		fmt.Fprintf(stderr, "amkctl mpk export: %s: %v\n", file, err)
		return exitRejected
	}
	return writeOut("mpk export", outPath, mpk.Encode(g), stdout, stderr)
}

// writeOut writes a verb's document to stdout ("-") or atomically to a file.
func writeOut(verb, outPath string, data []byte, stdout, stderr io.Writer) int {
	if outPath == "-" {
		fmt.Fprintln(stdout, string(data))
		return exitValid
	}
	if err := writeFileAtomic(outPath, data); err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
		return exitBadInput
	}
	return exitValid
}
