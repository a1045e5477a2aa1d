package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pipeline"
)

// tunePipeline is Loop 1 for the FP8 GEMM micro-kernel whose knob is its
// pipeline schedule (tune-instruction gemm_pipeline): prove budget
// variants, rank the safe ones by predicted MMA utilisation on the target. Nothing is built or run, so no GPU is needed; the JSON says
// latency_kind "predicted". Exit 0 when some variant is safe.
func tunePipeline(gpuName string, budget int, stdout, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "amkctl tune-instruction %s: "+format+"\n", append([]any{pipeline.TuneOp}, a...)...)
		return code
	}
	t, err := ir.Target(gpuName)
	if err != nil {
		return fail(exitBadInput, "%v", err)
	}
	if t.Pipeline == nil {
		return fail(exitBadInput, "target %s has no pipeline timing data: pass --gpu mi300x, mi325x or mi355x", t.Name)
	}
	if budget < 1 {
		return fail(exitBadInput, "--budget must be >= 1 (the number of variants to prove and simulate; %d covers the whole space)", len(pipeline.Variants()))
	}
	cs, err := pipeline.Tune(t, budget)
	if err != nil {
		return fail(exitInternal, "%v", err)
	}
	sum := pipeline.Summarise(cs, t, pipeline.ReportedBest)
	out, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return fail(exitInternal, "%v", err)
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if sum.Safe == 0 {
		return exitRejected
	}
	return exitOK
}
