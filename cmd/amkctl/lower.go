package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

func init() { addVerb(groupFormats, newLowerCmd) }

// loadPoint reads a config file, or returns the canonical default for "".
func loadPoint(path string) (schedule.Point, error) {
	if path == "" {
		return schedule.Default(), nil
	}
	data, err := inputfile.Read(path, 1<<20)
	if err != nil {
		return schedule.Point{}, err
	}
	return schedule.ParsePoint(data)
}

func newLowerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "lower MODEL --gpu G [--schedule cfg.json] [--pos P] [--out prog.json] [--format amk|mpk]",
		Short:             "lower a model + config into a validated program JSON",
		ValidArgsFunction: completeModels,
	}
	gpu := addGPUFlag(cmd, "h100", "")
	cfgPath := addScheduleFlag(cmd, "schedule config JSON file, or - for stdin; empty: the canonical default config")
	pos := cmd.Flags().Int("pos", 0, "decode position")
	outPath := cmd.Flags().StringP("out", "o", "-", "output file, - for stdout")
	format := cmd.Flags().String("format", "amk", "amk (a program file) or mpk (an MPK task_graph.json)")
	quantize := addQuantizeFlag(cmd)
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		if len(pos0) == 1 {
			var err error
			if pos0[0], err = quantizedModel(pos0[0], *quantize); err != nil {
				fmt.Fprintln(stderr, "amkctl lower:", err)
				return exitBadInput
			}
		}
		return lower(pos0, *gpu, *cfgPath, *pos, *outPath, *format, stdout, stderr)
	})
	return cmd
}

func lower(pos0 []string, gpu, cfgPath string, pos int, outPath, format string, stdout, stderr io.Writer) int {
	if format != "amk" && format != "mpk" {
		fmt.Fprintf(stderr, "amkctl lower: --format %q: amk or mpk\n", format)
		return exitBadInput
	}
	if len(pos0) != 1 {
		fmt.Fprintln(stderr, "amkctl lower: exactly one MODEL is required")
		return exitBadInput
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return exitBadInput
	}
	target, err := ir.Target(gpu)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return exitBadInput
	}
	point, err := loadPoint(cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower: config:", err)
		return exitBadInput
	}
	prog, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: pos})
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return exitRejected
	}
	if rep := validate.Validate(prog); !rep.OK {
		fmt.Fprintln(stderr, "amkctl lower: the lowered program was rejected; nothing written")
		fmt.Fprintln(stderr, rep.String())
		return exitRejected
	}
	data := ir.Encode(prog)
	if format == "mpk" {
		g, err := mpk.ToGraph(prog, mpk.ExportOptions{})
		if err != nil {
			fmt.Fprintln(stderr, "amkctl lower: --format mpk:", err)
			return exitRejected
		}
		data = mpk.Encode(g)
	}
	if outPath == "-" {
		fmt.Fprintln(stdout, string(data))
		return exitOK
	}
	if err := writeFileAtomic(outPath, data); err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return exitBadInput
	}
	if format == "mpk" {
		outPath += " (MPK task graph)"
	}
	fmt.Fprintf(stderr, "wrote %s: %d tasks, %d buffers, %d counters, schedule %s\n", outPath, len(prog.Tasks), len(prog.Buffers), len(prog.Counters), point.ID())
	return exitOK
}
