package schedule

import (
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// EditSurfaceHint is the instruction that comes with every edit surface.
const EditSurfaceHint = "Edit the ScheduleConfig object only (effective knobs change what eval lowers, " +
	"predicts or builds on this target and device; inert ones are recorded and normalised to their defaults; " +
	"choices are what a search draws, range what eval accepts). Evaluate with: " +
	"amkctl eval MODEL --gpu G --schedule cfg.json (or the eval tool of amkctl mcp)"

// Surface is docs/spec/loop.md's "propose" answer, the edit surface of one model on
// one target: the incumbent config and its id, the canonical default's id,
// and the search space of device ("cpu" or "cuda": kernel-build knobs the
// cost model does not model are levers only on cuda), each knob with its
// choices, its range (null for a knob that is not an integer) and whether
// eval applies it here, with the JSON Schema of a config (ConfigSchema) as
// schedule_config_schema. modelName is the model's name as the verdicts give
// it; incumbent is the config presented as the one to edit.
func Surface(modelName string, target *ir.GpuTarget, device Device, incumbent Point) pyjson.Value {
	return SurfaceFor(modelName, target, device, false, incumbent)
}

// SurfaceFor is Surface for a model with quantized weights (quant) or not:
// its search space is SpaceFor's.
func SurfaceFor(modelName string, target *ir.GpuTarget, device Device, quant bool, incumbent Point) pyjson.Value {
	space := make([]pyjson.Value, 0)
	for _, k := range SpaceFor(target, device, quant) {
		rng := pyjson.NullValue()
		if k.Range != nil {
			rng = pyjson.ObjectValue(pyjson.M("min", intV(k.Range.Min)), pyjson.M("max", intV(k.Range.Max)))
		}
		space = append(space, pyjson.ObjectValue(
			pyjson.M("path", pyjson.StringValue(k.Path)),
			pyjson.M("choices", pyjson.ArrayValue(k.Choices...)),
			pyjson.M("range", rng),
			pyjson.M("default", k.Default),
			pyjson.M("effective", pyjson.BoolValue(k.Effective)),
			pyjson.M("scope", pyjson.StringValue(k.Scope)),
			pyjson.M("note", pyjson.StringValue(k.Note)),
		))
	}
	return pyjson.ObjectValue(
		pyjson.M("model", pyjson.StringValue(modelName)),
		pyjson.M("gpu", pyjson.StringValue(target.Name)),
		pyjson.M("device", pyjson.StringValue(string(device))),
		pyjson.M("schedule_config", incumbent.Value()),
		pyjson.M("schedule_id", pyjson.StringValue(incumbent.ID())),
		pyjson.M("default_schedule_id", pyjson.StringValue(Default().ID())),
		pyjson.M("search_space", pyjson.ArrayValue(space...)),
		pyjson.M("edit_surface", pyjson.StringValue(EditSurfaceHint)),
		pyjson.M("schedule_config_schema", ConfigSchemaFor(target, device, quant)),
	)
}
