package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/amk-dev/amk/baseline"
	"github.com/amk-dev/amk/model"
)

func init() {
	register(command{name: "export-weights", summary: "write a model's weights (amk's seeded init by default) as a HuggingFace Llama directory", run: runExportWeights})
}

func runExportWeights(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("export-weights", "export-weights MODEL --out DIR [--weights F] [--config-only]", stderr)
	out := fs.String("out", "", "directory to write config.json and model.safetensors into (required)")
	weights := fs.String("weights", "", "optional .safetensors file to re-export (default: the seeded weights every amk evaluator uses)")
	configOnly := fs.Bool("config-only", false, "write config.json only")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 || *out == "" {
		fmt.Fprintln(stderr, "amkctl export-weights: one MODEL and --out DIR are required")
		fs.Usage()
		return 2
	}
	if *configOnly {
		cfg, err := model.Load(pos[0])
		if err != nil {
			fmt.Fprintln(stderr, "amkctl export-weights:", err)
			return 2
		}
		data, err := model.HFConfigJSON(cfg)
		if err == nil {
			if err = os.MkdirAll(*out, 0o755); err == nil {
				err = writeFileAtomic(filepath.Join(*out, baseline.ConfigFile), data)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "amkctl export-weights:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(*out, baseline.ConfigFile))
		return 0
	}
	m, err := baseline.LoadModel(pos[0], *weights)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl export-weights:", err)
		return 2
	}
	if err := baseline.ExportHF(*out, m.Config, m.Weights); err != nil {
		fmt.Fprintln(stderr, "amkctl export-weights:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s and %s: %s, %s weights (%s), %.1f MB\n", filepath.Join(*out, baseline.ConfigFile),
		baseline.WeightsFile, m.Config.Name, m.Config.DType, m.Source, float64(m.Config.WeightBytes())/1e6)
	return 0
}
