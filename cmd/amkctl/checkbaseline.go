package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/amk-dev/amk/baseline"
	"github.com/amk-dev/amk/model"
)

func init() {
	register(command{name: "check-baseline", summary: "check an outside implementation's decode (amk-baseline-v1 file) against amk's eager oracle: exit 0 iff the same model", run: runCheckBaseline})
}

func runCheckBaseline(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-baseline", "check-baseline MODEL --file baseline.json [--weights F] [--json]", stderr)
	file := fs.String("file", "", "the amk-baseline-v1 file (scripts/gpu/torch_baseline.py writes one) (required)")
	weights := fs.String("weights", "", "optional .safetensors file (default: the seeded weights export-weights wrote)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 || *file == "" {
		fmt.Fprintln(stderr, "amkctl check-baseline: one MODEL and --file are required")
		fs.Usage()
		return 2
	}
	f, err := os.Open(*file)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return 2
	}
	bf, err := baseline.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return 2
	}
	cfg, err := model.Load(pos[0])
	if err == nil {
		err = bf.Fits(cfg) // before loading any weights
	}
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return 2
	}
	m, err := baseline.LoadModel(pos[0], *weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return 2
	}
	if bf.Model != "" && bf.Model != pos[0] {
		fmt.Fprintf(stderr, "amkctl check-baseline: note: the file names model %q, checking against %q\n", bf.Model, pos[0])
	}
	rep, err := baseline.Check(bf, m.Config, m.Weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl check-baseline:", err)
		return 2
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "amkctl check-baseline:", err)
			return 3
		}
	} else {
		fmt.Fprintf(stdout, "%s vs amk eager (%s, %s weights)\n", rep.Implementation, m.Config.Name, m.Source)
		fmt.Fprintln(stdout, "POS  INPUT  THEIR_ARGMAX  OUR_ARGMAX  MAX_ABS_ERR  PASS")
		for _, s := range rep.Steps {
			fmt.Fprintf(stdout, "%-4d %-6d %-13d %-11d %-12.4g %v\n", s.Pos, s.Input, s.TheirArgmax, s.OurArgmax, s.MaxAbsErr, s.Pass)
		}
		verdict := "PASS: the same model"
		if !rep.Pass {
			verdict = "FAIL: " + rep.Reason
		}
		fmt.Fprintf(stdout, "%s (argmax agrees at %d of %d positions)\n", verdict, rep.ArgmaxAgree, len(rep.Steps))
	}
	if !rep.Pass {
		return 1
	}
	return 0
}
