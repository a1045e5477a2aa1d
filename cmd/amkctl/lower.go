package main

import (
	"fmt"
	"io"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/validate"
)

func init() {
	register(command{name: "lower", summary: "lower a model + config into a validated program JSON", run: runLower})
}

// loadPoint reads a config file, or returns the canonical default for "".
func loadPoint(path string) (schedule.Point, error) {
	if path == "" {
		return schedule.Default(), nil
	}
	data, err := readInput(path, 1<<20)
	if err != nil {
		return schedule.Point{}, err
	}
	return schedule.ParsePoint(data)
}

func runLower(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lower", "lower MODEL --gpu G [--config cfg.json] [--pos P] [-o prog.json]", stderr)
	gpu := fs.String("gpu", "h100", "GPU target record")
	cfgPath := fs.String("config", "", "schedule config JSON (default: the canonical default)")
	pos := fs.Int("pos", 0, "decode position")
	outPath := fs.String("o", "-", "output file (- for stdout)")
	pos0, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos0) != 1 {
		fmt.Fprintln(stderr, "amkctl lower: exactly one MODEL is required")
		return 2
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return 2
	}
	target, err := ir.Target(*gpu)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return 2
	}
	point, err := loadPoint(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower: config:", err)
		return 2
	}
	prog, err := schedule.Lower(cfg, target, point, schedule.LowerOptions{Pos: *pos})
	if err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return 1
	}
	if rep := validate.Validate(prog); !rep.OK {
		fmt.Fprintln(stderr, "amkctl lower: the lowered program was rejected; nothing written")
		fmt.Fprintln(stderr, rep.String())
		return 1
	}
	data := ir.Encode(prog)
	if *outPath == "-" {
		fmt.Fprintln(stdout, string(data))
		return 0
	}
	if err := writeFileAtomic(*outPath, data); err != nil {
		fmt.Fprintln(stderr, "amkctl lower:", err)
		return 2
	}
	fmt.Fprintf(stderr, "wrote %s: %d tasks, %d buffers, %d counters, schedule %s\n", *outPath, len(prog.Tasks), len(prog.Buffers), len(prog.Counters), point.ID())
	return 0
}
