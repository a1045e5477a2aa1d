package main

import (
	"fmt"
	"io"

	"github.com/amk-dev/amk/internal/pyjson"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
)

func init() {
	register(command{name: "propose", summary: "print the edit surface: the incumbent config, its id and the search space", run: runPropose})
}

func schedulePointJSON(p schedule.Point) string { return string(pyjson.Indent(p.Value())) }

func runPropose(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("propose", "propose MODEL --gpu G [--device cpu|cuda] [--incumbent cfg.json]", stderr)
	gpu := fs.String("gpu", "h100", "GPU target record")
	device := fs.String("device", "cpu", "cpu or cuda: kernel-build knobs are levers only on cuda")
	incPath := fs.String("incumbent", "", "a config JSON to present as the incumbent (default: the canonical default)")
	pos0, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos0) != 1 {
		fmt.Fprintln(stderr, "amkctl propose: exactly one MODEL is required")
		return 2
	}
	cfg, err := model.Load(pos0[0])
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose:", err)
		return 2
	}
	target, err := ir.Target(*gpu)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl propose:", err)
		return 2
	}
	if *device != "cpu" && *device != "cuda" {
		fmt.Fprintf(stderr, "amkctl propose: --device must be cpu or cuda, got %q\n", *device)
		return 2
	}
	inc := schedule.Default()
	if *incPath != "" {
		data, err := readInput(*incPath, 1<<20)
		if err == nil {
			inc, err = schedule.ParsePoint(data)
		}
		if err != nil {
			fmt.Fprintln(stderr, "amkctl propose: incumbent:", err)
			return 2
		}
	}
	space := make([]pyjson.Value, 0)
	for _, k := range schedule.Space(target, *device) {
		space = append(space, pyjson.ObjectValue(
			pyjson.M("path", pyjson.StringValue(k.Path)),
			pyjson.M("choices", pyjson.ArrayValue(k.Choices...)),
			pyjson.M("default", k.Default),
			pyjson.M("effective", pyjson.BoolValue(k.Effective)),
			pyjson.M("scope", pyjson.StringValue(k.Scope)),
			pyjson.M("note", pyjson.StringValue(k.Note)),
		))
	}
	doc := pyjson.ObjectValue(
		pyjson.M("model", pyjson.StringValue(cfg.Name)),
		pyjson.M("gpu", pyjson.StringValue(target.Name)),
		pyjson.M("device", pyjson.StringValue(*device)),
		pyjson.M("schedule_config", inc.Value()),
		pyjson.M("schedule_id", pyjson.StringValue(inc.ID())),
		pyjson.M("default_schedule_id", pyjson.StringValue(schedule.Default().ID())),
		pyjson.M("search_space", pyjson.ArrayValue(space...)),
		pyjson.M("edit_surface", pyjson.StringValue("Edit the ScheduleConfig object only (effective knobs move the schedule; reserved knobs are recorded and normalised to their defaults). Evaluate with: amkctl eval MODEL --gpu G --config cfg.json")),
	)
	fmt.Fprintln(stdout, string(pyjson.Indent(doc)))
	return 0
}
