package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pipeline"
)

func init() { addVerb(groupGPU, newPipelineCmd) }

// newPipelineCmd is "pipeline", the instruction-level schedule tools:
// check and simulate.
func newPipelineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline check|simulate FILE",
		Short: "instruction-level pipeline schedules (AMD's 4-wave matmul style): prove one hazard-free, predict its MMA utilisation",
	}
	subcommandsOnly(cmd)
	check := &cobra.Command{
		Use:   "check FILE [--json] [--listing]",
		Short: "prove a pipeline schedule free of hazards, or list them one per line",
		Long: `check reads a pipeline schedule ("-" reads standard input; format
amk-pipeline/1, see the pipeline package) and proves it: every fragment load
reads a stage whose global load completed, no LDS stage is refilled while a
fragment load reads it, no register quadrant is overwritten before its MMA
read it, the prologue leaves exactly what the first iteration reads, the
reorder puts no wrong-stage fragment before a same-partition MMA, and the
edge rules derive every wait needed. Each hazard is one line naming the half,
mini-iter, op and LDS stage; advisories start with "note:". --listing first
prints the prologue and a steady-state iteration with the derived waits as
s_waitcnt vmcnt(N)/lgkmcnt(N).
Exit status: 0 safe, 1 hazards found, 2 not a schedule (unreadable or malformed).`,
	}
	checkJSON := addJSONFlags(check, "print the findings as JSON")
	listing := check.Flags().Bool("listing", false, "first print the issue stream the checker proves, with the derived counter waits")
	check.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		s, code := loadPipelineSchedule("check", args, stderr)
		if s == nil {
			return code
		}
		r := pipeline.Check(s)
		if *listing && !*checkJSON {
			for _, l := range pipeline.Listing(s) {
				fmt.Fprintln(stdout, l)
			}
		}
		if *checkJSON {
			out, _ := json.MarshalIndent(map[string]any{"schedule": s.Name, "report": r}, "", "  ")
			fmt.Fprintf(stdout, "%s\n", out)
		} else {
			for _, l := range r.Lines() {
				fmt.Fprintln(stdout, l)
			}
			if r.Safe() {
				fmt.Fprintf(stdout, "[SAFE] %s: no hazards\n", s.Name)
			} else {
				fmt.Fprintf(stdout, "[HAZARDS] %s: %d hazards\n", s.Name, len(r.Hazards()))
			}
		}
		if !r.Safe() {
			return exitRejected
		}
		return exitOK
	})
	simulate := &cobra.Command{
		Use:   "simulate FILE --gpu G [--json]",
		Short: "predict a safe pipeline schedule's MMA utilisation on a target (predicted, never measured)",
		Long: `simulate proves the schedule first (a schedule with hazards is refused,
exit 1), then runs it for one wave on the target's pipeline timing data
(latency, unit busy and issue cycles per op class: amkctl targets lists the
parts that have it) and prints the steady-state MMA utilisation, where the
cycles go and every latency used. Predictions only: no AMD device is attached.
Exit status: 0 predicted, 1 hazards, 2 bad input (file, unknown target or
a target without pipeline timing).`,
	}
	gpu := addGPUFlag(simulate, "mi355x", "GPU target record with pipeline timing (the AMD parts)")
	simJSON := addJSONFlags(simulate, "print the prediction as JSON")
	simulate.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		s, code := loadPipelineSchedule("simulate", args, stderr)
		if s == nil {
			return code
		}
		t, err := ir.Target(*gpu)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl pipeline simulate:", err)
			return exitBadInput
		}
		if t.Pipeline == nil {
			fmt.Fprintf(stderr, "amkctl pipeline simulate: target %s has no pipeline timing data (the AMD parts have it)\n", t.Name)
			return exitBadInput
		}
		if r := pipeline.Check(s); !r.Safe() {
			for _, h := range r.Hazards() {
				fmt.Fprintln(stderr, h)
			}
			fmt.Fprintf(stderr, "amkctl pipeline simulate: %s has %d hazards: no prediction for an unsafe schedule\n", s.Name, len(r.Hazards()))
			return exitRejected
		}
		tm, err := pipeline.Simulate(s, t)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl pipeline simulate:", err)
			return exitInternal
		}
		if *simJSON {
			out, _ := json.MarshalIndent(tm, "", "  ")
			fmt.Fprintf(stdout, "%s\n", out)
		} else {
			fmt.Fprint(stdout, tm.Text())
		}
		return exitOK
	})
	cmd.AddCommand(check, simulate)
	return cmd
}

// loadPipelineSchedule reads and decodes the one FILE argument of a
// pipeline subcommand; nil and the exit code on failure.
func loadPipelineSchedule(verb string, args []string, stderr io.Writer) (*pipeline.Schedule, int) {
	if len(args) != 1 {
		fmt.Fprintf(stderr, "amkctl pipeline %s: exactly one FILE is required (\"-\" reads standard input)\n", verb)
		return nil, exitBadInput
	}
	data, err := inputfile.Read(args[0], pipeline.MaxFileBytes)
	if err == nil {
		var s *pipeline.Schedule
		if s, err = pipeline.Decode(data); err == nil {
			return s, exitOK
		}
	}
	fmt.Fprintf(stderr, "amkctl pipeline %s: %s: %v\n", verb, args[0], err)
	return nil, exitBadInput
}
