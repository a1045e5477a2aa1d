package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupCampaign, newProposeCmd) }

func schedulePointJSON(p schedule.Point) string { return string(pyjson.Indent(p.Value())) }

func newProposeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "propose MODEL --gpu G [--device cpu|cuda|auto] [--incumbent cfg.json] [--schema]",
		Short:             "print the edit surface: the incumbent config, its id, the search space and the config's JSON Schema",
		ValidArgsFunction: completeModels,
	}
	gpu := addGPUFlag(cmd, "h100", "")
	device := addDeviceFlag(cmd, "cpu, cuda or auto: kernel-build knobs are levers only on cuda")
	incPath := cmd.Flags().String("incumbent", "", "a schedule config JSON (or propose's answer) to present as the incumbent; empty: the canonical default")
	ignoreUnknown := addIgnoreUnknownKeysFlag(cmd)
	schemaOnly := cmd.Flags().Bool("schema", false, "print only the JSON Schema (2020-12) of a schedule config for this target and device")
	quantize := addQuantizeFlag(cmd)
	cmd.RunE = runVerb(func(pos0 []string, stdout, stderr io.Writer) int {
		if len(pos0) == 1 {
			var err error
			if pos0[0], err = quantizedModel(pos0[0], *quantize); err != nil {
				fmt.Fprintln(stderr, "amkctl propose:", err)
				return exitBadInput
			}
		}
		return propose(pos0, *gpu, *device, *incPath, *ignoreUnknown, *schemaOnly, stdout, stderr)
	})
	return cmd
}

func propose(pos0 []string, gpu, device, incPath string, ignoreUnknown, schemaOnly bool, stdout, stderr io.Writer) int {
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
	if control.IsAutoDevice(device) {
		// propose opens no device for cpu, emu or cuda; auto asks one to answer.
		var launcher trial.Launcher
		if launcher, dev, err = launcherFor(device, target.Name, stderr); err == nil {
			closeLauncher(launcher)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose: --device:", err)
		return exitBadInput
	}
	inc, err := loadPoint(incPath, ignoreUnknown, "propose", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose: --incumbent:", err)
		return exitBadInput
	}
	if schemaOnly {
		fmt.Fprintln(stdout, schedule.SchemaJSON(schedule.ConfigSchemaFor(target, dev, cfg.Quant.On())))
		return exitOK
	}
	doc := schedule.SurfaceFor(cfg.Name, target, dev, cfg.Quant.On(), inc)
	fmt.Fprintln(stdout, string(pyjson.Indent(doc)))
	return exitOK
}
