package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupFormats, newVerifyCmd) }

func newVerifyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify [PROGRAM.json...] [--model M] [--token-id T] [--weights F] [--device cpu|emu|cuda]",
		Short: "check programs (or, with no file, the built-in proofs) against the reference numerics",
		Long: `verify runs each program file ("-" reads standard input) on the CPU reference
VM with the model's weights and compares every sequence's logits with the
eager oracle (earlier positions are decoded with the default schedule to
fill the KV caches). The model is --model, or the preset whose name the
program's meta.model holds. With no file, verify runs the built-in proofs:
the toy presets under schedules that exercise every lowering path.
With --device emu (or cuda) each program also runs on the CUDA kernels —
on the CPU emulator standing in for the program's target, or on the GPU —
from the KV caches the reference VM's history left, and its logits must
match the reference VM's.
A micro-kernel is checked against the reference on a GPU by kernel tuning:
amkctl tune-instruction OP --budget 1 builds the incumbent and compares it.
Exit status: 0 all correct, 1 some program rejected or incorrect, 2 bad input.`,
	}
	fs := cmd.Flags()
	modelName := fs.String("model", "", "model preset or config.json (default: the preset named by the program's meta.model)")
	token := fs.Int("token-id", trial.DefaultToken, "token id the checked step decodes")
	weights := fs.String("weights", "", "optional .safetensors file with real weights")
	jsonOut := addJSONFlags(cmd, "print the results as JSON")
	lim := addProgramLimitFlags(cmd)
	device := addDeviceFlag(cmd, "cpu (the reference VM only), emu (also the CUDA kernels on the CPU emulator) or cuda (also on the GPU)")
	cmd.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		models := trial.NewModelCache(0)
		ctx := context.Background()
		dev, err := schedule.ParseDevice(*device)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl verify: --device:", err)
			return exitBadInput
		}
		// one launcher per target the programs name, opened on first use
		launchers := map[string]trial.ProgramDevice{}
		defer func() {
			for _, l := range launchers {
				closeLauncher(l.(trial.Launcher))
			}
		}()
		on := func(target string) (trial.ProgramDevice, error) {
			if !dev.RunsKernels() {
				return nil, nil
			}
			if l, ok := launchers[target]; ok {
				return l, nil
			}
			l, _, err := launcherFor(string(dev), target, stderr)
			if err != nil {
				return nil, err
			}
			pd, ok := l.(trial.ProgramDevice)
			if !ok {
				closeLauncher(l)
				return nil, fmt.Errorf("--device %s: this launcher cannot run a program file", dev)
			}
			launchers[target] = pd
			return pd, nil
		}
		if len(files) == 0 {
			var suiteDev func(string) (trial.ProgramDevice, error)
			if dev.RunsKernels() {
				suiteDev = on
			}
			cases := trial.VerifySuiteOn(ctx, models, suiteDev)
			status := exitOK
			for _, c := range cases {
				if !c.OK() {
					status = exitRejected
				}
			}
			if *jsonOut {
				if err := printJSON(stdout, cases); err != nil {
					return exitInternal
				}
				return status
			}
			for _, c := range cases {
				fmt.Fprintf(stdout, "%-4s %s%s\n", verdictWord(c.Result, c.Error), c.Name, detail(c.Result, c.Error))
			}
			return status
		}
		type fileResult struct {
			File   string              `json:"file"`
			Result *trial.ProgramCheck `json:"result,omitempty"`
			Error  string              `json:"error,omitempty"`
		}
		var results []fileResult
		status := exitOK
		for _, f := range files {
			r := fileResult{File: f}
			prog, err := loadProgram(f, *lim)
			if err != nil {
				fmt.Fprintf(stderr, "amkctl verify: %s: %v\n", f, err)
				return exitBadInput
			}
			name := *modelName
			if name == "" {
				if name = presetOf(prog); name == "" {
					fmt.Fprintf(stderr, "amkctl verify: %s: meta.model names no preset; give --model\n", f)
					return exitBadInput
				}
			}
			lm, err := models.Get(name, *weights)
			if err != nil {
				fmt.Fprintf(stderr, "amkctl verify: %s: %v\n", f, err)
				return exitBadInput
			}
			// A token the model cannot embed is bad input, not a failed check.
			if *token < 0 || *token >= lm.Check.Vocab {
				fmt.Fprintf(stderr, "amkctl verify: --token-id %d is outside the vocabulary of %s [0, %d)\n", *token, name, lm.Check.Vocab)
				return exitBadInput
			}
			var pd trial.ProgramDevice
			if dev.RunsKernels() {
				if prog.Target == nil {
					fmt.Fprintf(stderr, "amkctl verify: %s: the program names no target for --device %s\n", f, dev)
					return exitBadInput
				}
				if pd, err = on(prog.Target.Name); err != nil {
					fmt.Fprintf(stderr, "amkctl verify: %v\n", err)
					return exitBadInput
				}
			}
			res, err := trial.VerifyProgramOn(ctx, prog, lm, *token, pd)
			if err != nil {
				r.Error = err.Error()
			}
			r.Result = res
			if r.Error != "" || !res.Valid || !res.Correct {
				status = exitRejected
			}
			results = append(results, r)
		}
		if *jsonOut {
			if err := printJSON(stdout, results); err != nil {
				return exitInternal
			}
			return status
		}
		for _, r := range results {
			fmt.Fprintf(stdout, "%-4s %s%s\n", verdictWord(r.Result, r.Error), r.File, detail(r.Result, r.Error))
		}
		return status
	})
	return cmd
}

// presetOf names the preset whose model name the program's meta.model
// holds ("" when none does).
func presetOf(p *ir.Program) string {
	name, ok := p.MetaString("model")
	if !ok {
		return ""
	}
	for _, preset := range model.PresetNames() {
		if c, err := model.Preset(preset); err == nil && (c.Name == name || preset == name) {
			return preset
		}
	}
	return ""
}

func verdictWord(r *trial.ProgramCheck, errText string) string {
	switch {
	case errText != "" || r == nil:
		return "ERR"
	case !r.Valid:
		return "REJ"
	case !r.Correct:
		return "FAIL"
	}
	return "PASS"
}

func detail(r *trial.ProgramCheck, errText string) string {
	switch {
	case errText != "" || r == nil:
		return ": " + errText
	case !r.Valid:
		return ": rejected: " + r.Report
	}
	s := fmt.Sprintf(" (pos %d, batch %d", r.Pos, r.Batch)
	if r.MaxAbsErr != nil {
		s += fmt.Sprintf(", max_abs_err %.3g", *r.MaxAbsErr)
	}
	if r.Top1Agreement != nil {
		s += fmt.Sprintf(", top1 %.3f", *r.Top1Agreement)
	}
	if r.Device != "" && r.DeviceMaxAbsErr != nil {
		s += fmt.Sprintf("; on %s: max_abs_err %.3g vs the VM", r.Device, *r.DeviceMaxAbsErr)
	}
	s += ")"
	if !r.Correct && r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}
