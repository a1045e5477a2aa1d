package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

func init() { addVerb(groupCampaign, newProposeCmd) }

func schedulePointJSON(p schedule.Point) string { return string(pyjson.Indent(p.Value())) }

func newProposeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "propose MODEL --gpu G [--device cpu|cuda] [--incumbent cfg.json]",
		Short:             "print the edit surface: the incumbent config, its id and the search space",
		ValidArgsFunction: completeModels,
	}
	gpu := addGPUFlag(cmd, "h100", "")
	device := addDeviceFlag(cmd, "cpu or cuda: kernel-build knobs are levers only on cuda")
	incPath := cmd.Flags().String("incumbent", "", "a schedule config JSON (or propose's answer) to present as the incumbent; empty: the canonical default")
	ignoreUnknown := addIgnoreUnknownKeysFlag(cmd)
	quantize := addQuantizeFlag(cmd)
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		if len(pos0) == 1 {
			var err error
			if pos0[0], err = quantizedModel(pos0[0], *quantize); err != nil {
				fmt.Fprintln(stderr, "amkctl propose:", err)
				return exitBadInput
			}
		}
		return propose(pos0, *gpu, *device, *incPath, *ignoreUnknown, stdout, stderr)
	})
	return cmd
}

func propose(pos0 []string, gpu, device, incPath string, ignoreUnknown bool, stdout, stderr io.Writer) int {
	if len(pos0) != 1 {
		fmt.Fprintln(stderr, "amkctl propose: exactly one MODEL is required")
		return exitBadInput
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose:", err)
		return exitBadInput
	}
	target, err := ir.Target(gpu)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose:", err)
		return exitBadInput
	}
	dev, err := schedule.ParseDevice(device)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose: --device:", err)
		return exitBadInput
	}
	inc, err := loadPoint(incPath, ignoreUnknown, "propose", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose: --incumbent:", err)
		return exitBadInput
	}
	doc := schedule.SurfaceFor(cfg.Name, target, dev, cfg.Quant.On(), inc)
	fmt.Fprintln(stdout, string(pyjson.Indent(doc)))
	return exitOK
}
