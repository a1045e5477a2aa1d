package schedule

import (
	"fmt"
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// SchemaDialect is the JSON Schema dialect ConfigSchema writes.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// SchemaID names the schedule-config schema (the MCP resource of amkctl mcp
// serves it under this URI).
const SchemaID = "amk://schema/schedule_config.json"

// ConfigSchema is the JSON Schema (2020-12) of a schedule config: what
// ParsePoint accepts, with each knob of Space(t, device) described by its
// note, its choices (as examples) and its default. It is generated from the
// tables ParsePoint and Space read (the policies, the fusion names, the
// kernel knobs' ranges, the depth limit), so it cannot drift from them.
//
// A config the schema accepts parses; one it refuses does not, with three
// exceptions a JSON Schema cannot express: a number written with a fraction
// or an exponent (1.0 is an integer to JSON Schema, not to ParsePoint), a
// repeated key (JSON Schema sees one), and two sm_assignment keys naming one
// task (" 5" and "5"). Unknown top-level keys are allowed: ParsePoint drops
// them (IgnoredKeys names them). Feasibility is not the schema's business:
// a config that parses can still be a valid=false verdict (threads per
// block over what the target runs, SMEM over its cap, a deadlocking pin).
//
// t and device pick the knobs' notes, choices and defaults (nil: no target,
// so SMEM choices are [0]); the constraints are the same for every target.
func ConfigSchema(t *ir.GpuTarget, device Device) pyjson.Value {
	return ConfigSchemaFor(t, device, false)
}

// ConfigSchemaFor is ConfigSchema for a model with quantized weights
// (quant) or not: the knobs are described as SpaceFor presents them.
func ConfigSchemaFor(t *ir.GpuTarget, device Device, quant bool) pyjson.Value {
	knobs := map[string]Knob{}
	for _, k := range SpaceFor(t, device, quant) {
		knobs[k.Path] = k
	}
	where := "any target and device"
	if t != nil {
		where = fmt.Sprintf("%s, device %s", t.Name, device)
	}
	described := func(path string, base []pyjson.Member) pyjson.Value {
		k, ok := knobs[path]
		if !ok {
			return pyjson.ObjectValue(base...)
		}
		desc := k.Note
		if !k.Effective {
			desc += " (not a lever on " + where + ": recorded, normalised to its default)"
		}
		base = append(base, pyjson.M("description", pyjson.StringValue(desc)))
		if k.Default.Kind != pyjson.Null {
			base = append(base, pyjson.M("default", k.Default))
		}
		if len(k.Choices) > 0 {
			base = append(base, pyjson.M("examples", pyjson.ArrayValue(k.Choices...)))
		}
		return pyjson.ObjectValue(base...)
	}
	positive := func(path string) pyjson.Value { return described(path, intRange(1, math.MaxInt32)) }

	tiling := pyjson.ObjectValue(
		pyjson.M("type", pyjson.StringValue("object")),
		pyjson.M("description", pyjson.StringValue("tile sizes by op archetype; every size is a positive int "+
			"(entries no lowering consumes are kept in the record and change nothing)")),
		pyjson.M("properties", pyjson.ObjectValue(
			pyjson.M("gemv", tileObject(
				pyjson.M("N_tile", positive(PathNTile)),
				pyjson.M("base_width", described("", intRange(1, math.MaxInt32))),
				pyjson.M("tiles_per_sm", positive(PathTilesPerSM)))),
			pyjson.M("attention", tileObject(
				pyjson.M("kv_block", positive(PathKVBlock)),
				pyjson.M("n_partitions", positive(PathNPartitions)),
				pyjson.M("kv_head_split", positive(PathKVHeadSplit)),
				pyjson.M("head_counters", positive(PathHeadCounters)))),
		)),
		pyjson.M("additionalProperties", tileObject()),
	)

	fusion := described(PathFusion, []pyjson.Member{
		pyjson.M("type", pyjson.StringValue("array")),
		pyjson.M("items", pyjson.ObjectValue(
			pyjson.M("type", pyjson.StringValue("array")),
			pyjson.M("items", pyjson.ObjectValue(pyjson.M("enum", pyjson.ArrayValue(strs(fusionNames...)...)))),
		)),
	})

	smPins := pyjson.ObjectValue(
		pyjson.M("type", pyjson.StringValue("object")),
		pyjson.M("description", pyjson.StringValue("explicit {task_id: sm} pins (task ids as decimal strings)")),
		// strconv.Atoi after trimming spaces: an optional +, or -0.
		pyjson.M("propertyNames", pyjson.ObjectValue(pyjson.M("pattern",
			pyjson.StringValue(`^\s*(\+?[0-9]{1,18}|-0{1,18})\s*$`)))),
		pyjson.M("additionalProperties", pyjson.ObjectValue(intRange(0, math.MaxInt32)...)),
	)
	sm := described(PathSMAssignment, []pyjson.Member{
		pyjson.M("anyOf", pyjson.ArrayValue(
			pyjson.ObjectValue(pyjson.M("enum", pyjson.ArrayValue(strs(PolicyRoundRobin, PolicyLoadBalance)...))),
			smPins,
		)),
	})

	knobProps := make([]pyjson.Member, 0, len(kernelKnobs))
	for _, k := range kernelKnobs {
		base := intRange(k.min, k.max)
		if _, ok := knobs[knobPrefix+k.name]; !ok {
			base = append(base, pyjson.M("default", intV(k.def)),
				pyjson.M("description", pyjson.StringValue("kernel build knob (nvcc -D); not searched on "+where)))
			knobProps = append(knobProps, pyjson.M(k.name, pyjson.ObjectValue(base...)))
			continue
		}
		knobProps = append(knobProps, pyjson.M(k.name, described(knobPrefix+k.name, base)))
	}
	kernel := pyjson.ObjectValue(
		pyjson.M("type", pyjson.StringValue("object")),
		pyjson.M("description", pyjson.StringValue("kernel build knobs (nvcc -D of the CUDA kernels); "+
			"missing ones take their defaults; lb_maxthreads and lb_minblocks are both > 0 or both 0")),
		pyjson.M("properties", pyjson.ObjectValue(knobProps...)),
		pyjson.M("additionalProperties", pyjson.BoolValue(false)),
		pyjson.M("allOf", pyjson.ArrayValue(bothOrNeither("lb_maxthreads", "lb_minblocks"),
			bothOrNeither("lb_minblocks", "lb_maxthreads"))),
	)

	return pyjson.ObjectValue(
		pyjson.M("$schema", pyjson.StringValue(SchemaDialect)),
		pyjson.M("$id", pyjson.StringValue(SchemaID)),
		pyjson.M("title", pyjson.StringValue("amk ScheduleConfig")),
		pyjson.M("description", pyjson.StringValue("The schedule edit surface (for "+where+"): the object "+
			"propose answers as schedule_config and eval takes. Missing keys take the canonical defaults; "+
			"unknown top-level keys are dropped. A config this schema accepts still has to lower, validate "+
			"and pass launch feasibility: an infeasible one is a valid=false verdict with a rejected_reason.")),
		pyjson.M("type", pyjson.StringValue("object")),
		pyjson.M("properties", pyjson.ObjectValue(
			pyjson.M("tiling", tiling),
			pyjson.M(PathFusion, fusion),
			pyjson.M(PathSMAssignment, sm),
			pyjson.M(PathDepth, described(PathDepth, intRange(0, maxPipeliningDepth))),
			pyjson.M(PathPages, described(PathPages, []pyjson.Member{
				pyjson.M("enum", pyjson.ArrayValue(strs(pagePolicies...)...))})),
			pyjson.M(PathTPB, described(PathTPB, intRange(math.MinInt32, math.MaxInt32))),
			pyjson.M(PathSmem, described(PathSmem, intRange(math.MinInt32, math.MaxInt32))),
			pyjson.M("kernel_knobs", kernel),
		)),
	)
}

// intRange is an integer in [lo, hi].
func intRange(lo, hi int) []pyjson.Member {
	return []pyjson.Member{
		pyjson.M("type", pyjson.StringValue("integer")),
		pyjson.M("minimum", intV(lo)),
		pyjson.M("maximum", intV(hi)),
	}
}

// tileObject is one archetype's tile sizes: the named ones, and any other
// positive int.
func tileObject(named ...pyjson.Member) pyjson.Value {
	members := []pyjson.Member{pyjson.M("type", pyjson.StringValue("object"))}
	if len(named) > 0 {
		members = append(members, pyjson.M("properties", pyjson.ObjectValue(named...)))
	}
	return pyjson.ObjectValue(append(members,
		pyjson.M("additionalProperties", pyjson.ObjectValue(intRange(1, math.MaxInt32)...)))...)
}

// bothOrNeither: when a is > 0, b must be given and > 0 (b's default is 0).
func bothOrNeither(a, b string) pyjson.Value {
	return pyjson.ObjectValue(
		pyjson.M("if", pyjson.ObjectValue(
			pyjson.M("properties", pyjson.ObjectValue(pyjson.M(a, pyjson.ObjectValue(pyjson.M("minimum", intV(1)))))),
			pyjson.M("required", pyjson.ArrayValue(pyjson.StringValue(a))))),
		pyjson.M("then", pyjson.ObjectValue(
			pyjson.M("properties", pyjson.ObjectValue(pyjson.M(b, pyjson.ObjectValue(pyjson.M("minimum", intV(1)))))),
			pyjson.M("required", pyjson.ArrayValue(pyjson.StringValue(b))))),
	)
}

// SchemaJSON is a schema as indented JSON text.
func SchemaJSON(schema pyjson.Value) string {
	return strings.TrimSpace(string(pyjson.Indent(schema)))
}
