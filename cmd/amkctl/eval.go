package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() {
	register(command{name: "eval", summary: "evaluate one schedule config: one JSON verdict on stdout (exit 0 iff valid and correct)", run: runEval})
}

func runEval(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eval", "eval MODEL --gpu G [--config cfg.json|-] [--device cpu|cuda] [--token T] [--pos P] [--weights F]", stderr)
	gpu := fs.String("gpu", "h100", "GPU target record (amkctl targets lists them)")
	cfgPath := fs.String("config", "", "schedule config JSON file, or - for stdin (default: the canonical default config)")
	device := fs.String("device", "cpu", "latency source: cpu (cost model, labelled predicted) or cuda (measured)")
	token := fs.Int("token", trial.DefaultToken, "token id of the checked decode step")
	pos := fs.Int("pos", 0, "decode position of the checked step")
	weights := fs.String("weights", "", "optional .safetensors file with real weights (HF state-dict keys)")
	pos0, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos0) != 1 {
		fmt.Fprintln(stderr, "amkctl eval: exactly one MODEL (a preset name or a config.json path) is required")
		fs.Usage()
		return 2
	}
	var point []byte
	if *cfgPath != "" {
		if point, err = readInput(*cfgPath, 1<<20); err != nil {
			fmt.Fprintln(stderr, "amkctl eval:", err)
			return 2
		}
	} else {
		point = []byte(schedulePointJSON(schedule.Default()))
	}
	launcher, dev, err := launcherFor(*device)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl eval:", err)
		return 2
	}
	spec := trial.Spec{Model: pos0[0], Weights: *weights, GPU: *gpu, Device: dev, Point: point, Token: *token, Pos: *pos}
	out := trial.Evaluate(context.Background(), spec, trial.Options{Launcher: launcher})
	if out.Failure != nil {
		fmt.Fprintf(stderr, "amkctl eval: %s during %s: %s\n", out.Failure.Class, out.Failure.Phase, out.Failure.Message)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out.Verdict); err != nil {
		fmt.Fprintln(stderr, "amkctl eval:", err)
		return 2
	}
	if out.Verdict.Valid && out.Verdict.Correct != nil && *out.Verdict.Correct {
		return 0
	}
	return 1
}
