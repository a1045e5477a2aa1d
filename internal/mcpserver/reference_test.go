package mcpserver

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// compile compiles a JSON Schema document (a 2020-12 one when it names
// no dialect) with an implementation independent of the MCP SDK's.
func compile(t *testing.T, doc any) *jsonschema.Schema {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := parsed.(map[string]any); ok {
		if _, ok := m["$schema"]; !ok {
			m["$schema"] = schedule.SchemaDialect
		}
		// A subschema copied out of a tool's input schema has no id.
		delete(m, "$id")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", parsed); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("does not compile: %v", err)
	}
	return sch
}

func check(t *testing.T, sch *jsonschema.Schema, config any) error {
	t.Helper()
	data, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// TestScheduleSchemaServed: the schedule config's schema is what propose
// publishes, the resource serves and eval (under both names) takes as its
// schedule argument; every preset's proposed config and drawn points pass
// it, and configs it refuses are valid=false verdicts from eval.
func TestScheduleSchemaServed(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()

	read, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: schedule.SchemaID})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || read.Contents[0].MIMEType != "application/schema+json" {
		t.Fatalf("resource %s: %+v", schedule.SchemaID, read.Contents)
	}
	var resource map[string]any
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &resource); err != nil {
		t.Fatal(err)
	}
	if resource["$schema"] != schedule.SchemaDialect {
		t.Fatalf("resource dialect %v", resource["$schema"])
	}
	schemas := map[string]*jsonschema.Schema{"resource": compile(t, resource)}

	tools, err := h.client.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "eval" && tool.Name != "amk_eval" {
			continue
		}
		data, _ := json.Marshal(tool.InputSchema)
		var in struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		var sched, config any
		if json.Unmarshal(in.Properties["schedule"], &sched) != nil || json.Unmarshal(in.Properties["config"], &config) != nil {
			t.Fatalf("%s: no schedule/config schema: %s", tool.Name, data)
		}
		schemas[tool.Name+".schedule"] = compile(t, sched)
		schemas[tool.Name+".config"] = compile(t, config)
	}
	if len(schemas) != 5 {
		t.Fatalf("schemas found: %d, want the resource and eval's and amk_eval's schedule and config", len(schemas))
	}

	// Every preset's proposed config, on every device, passes the schema
	// propose publishes with it and the served ones.
	for _, preset := range model.PresetNames() {
		for _, device := range []string{"cpu", "cuda"} {
			var surf struct {
				Config map[string]any `json:"schedule_config"`
				Schema map[string]any `json:"schedule_config_schema"`
			}
			h.ok("propose", map[string]any{"model": preset, "gpu": "h100", "device": device}, &surf)
			if surf.Schema["$schema"] != schedule.SchemaDialect {
				t.Fatalf("propose %s: no schedule_config_schema", preset)
			}
			if err := check(t, compile(t, surf.Schema), surf.Config); err != nil {
				t.Errorf("propose %s %s: its config fails its schema: %v", preset, device, err)
			}
			for name, sch := range schemas {
				if err := check(t, sch, surf.Config); err != nil {
					t.Errorf("propose %s %s: its config fails %s: %v", preset, device, name, err)
				}
			}
		}
	}
	// Points drawn from every target's space.
	rng := rand.New(rand.NewPCG(29, 3))
	for _, name := range ir.TargetNames() {
		target, _ := ir.Target(name)
		var cfg map[string]any
		if err := json.Unmarshal(pyjson.Indent(schedule.Random(rng, target, schedule.DeviceCUDA).Value()), &cfg); err != nil {
			t.Fatal(err)
		}
		for schemaName, sch := range schemas {
			if err := check(t, sch, cfg); err != nil {
				t.Errorf("%s: a drawn point fails %s: %v", name, schemaName, err)
			}
		}
	}
	// Configs the schema refuses: eval, under either name, answers a
	// valid=false verdict (not an error) whose reason names the knob.
	for _, c := range []struct {
		config map[string]any
		knob   string
	}{
		{map[string]any{"pipelining_depth": "deep"}, "pipelining_depth"},
		{map[string]any{"tiling": map[string]any{"gemv": map[string]any{"N_tile": -64}}}, "N_tile"},
		{map[string]any{"sm_assignment": "fastest"}, "sm_assignment"},
		{map[string]any{"kernel_knobs": map[string]any{"lb_maxthreads": 256}}, "lb_maxthreads"},
	} {
		for name, sch := range schemas {
			if err := check(t, sch, c.config); err == nil {
				t.Errorf("%s accepts %v", name, c.config)
			}
		}
		for _, args := range []map[string]any{
			{"model": "toy", "gpu": "h100", "schedule": c.config},
			{"model": "toy", "gpu": "h100", "config": c.config},
		} {
			for _, tool := range []string{"eval", "amk_eval"} {
				var v EvalAnswer
				h.ok(tool, args, &v)
				if v.OK || v.Valid || v.RejectedReason == nil || !strings.Contains(*v.RejectedReason, c.knob) || v.LatencyUS != nil {
					t.Errorf("%s %v: %+v", tool, args, v)
				}
			}
		}
	}
}

// TestReferenceNames drives seed 001's loop through the reference's tool
// and argument names: amk_propose, amk_eval (config as an object and as
// JSON text, device auto), amk_loop, amk_orchestrate_record (pct_roofline,
// config), amk_orchestrate_status|next|report, amk_doctor.
func TestReferenceNames(t *testing.T) {
	h := newHarness(t)
	var surf surface
	h.ok("amk_propose", map[string]any{"model": "toy", "gpu": "h100"}, &surf)
	if surf.ScheduleID == "" || len(surf.ScheduleConfig) == 0 {
		t.Fatalf("amk_propose: %+v", surf)
	}
	var base EvalAnswer
	h.ok("amk_eval", map[string]any{"model": "toy", "gpu": "h100", "config": surf.ScheduleConfig, "device": "auto"}, &base)
	if !base.OK || base.Device != "cpu" || *base.LatencyKind != "predicted" || base.ScheduleID != surf.ScheduleID {
		t.Fatalf("amk_eval with device auto: %+v", base)
	}
	if !slices.ContainsFunc(base.Notes, func(n string) bool { return strings.Contains(n, "device auto: cpu") }) {
		t.Errorf("device auto does not say which device it picked: %v", base.Notes)
	}
	edited := map[string]any{}
	maps.Copy(edited, surf.ScheduleConfig)
	edited["pipelining_depth"] = 0
	text, _ := json.Marshal(edited)
	var cand, short EvalAnswer
	h.ok("amk_eval", map[string]any{"model": "toy", "gpu": "h100", "config": string(text)}, &cand)
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": edited}, &short)
	if !cand.OK || cand.ScheduleID != short.ScheduleID || *cand.LatencyUS != *short.LatencyUS {
		t.Fatalf("amk_eval with config as JSON text %+v, eval %+v", cand, short)
	}
	if msg := h.toolError("amk_eval", map[string]any{"model": "toy", "gpu": "h100", "config": edited, "schedule": edited}); !strings.Contains(msg, "not both") {
		t.Errorf("config and schedule both: %q", msg)
	}

	var loop RunAnswer
	h.ok("amk_loop", map[string]any{"model": "toy", "gpu": "h100", "budget": 2, "device": "auto", "cold": true}, &loop)
	if loop.Campaign == "" || loop.Run == nil || loop.Status.ExperimentsRun != 2 || loop.Status.LatencyKind != "predicted" {
		t.Fatalf("amk_loop: %+v", loop)
	}
	var rec control.RecordResponse
	h.ok("amk_orchestrate_record", map[string]any{"status": "revert", "latency_us": *cand.LatencyUS, "pct_roofline": *cand.PctOfRoofline,
		"kind": "predicted", "config": edited, "description": "agent: pipelining_depth 0"}, &rec)
	if len(rec.Rows) != 1 || rec.Rows[0].ScheduleID != cand.ScheduleID || rec.Campaign.ExperimentsRun != 3 {
		t.Fatalf("amk_orchestrate_record: %+v", rec)
	}
	if row, _ := json.Marshal(rec.Rows[0]); !strings.Contains(string(row), "pct") {
		t.Errorf("the recorded row has no roofline figure: %s", row)
	}
	var st StatusAnswer
	h.ok("amk_orchestrate_status", map[string]any{}, &st)
	if st.ID != loop.Campaign || st.ExperimentsRun != 3 {
		t.Fatalf("amk_orchestrate_status: %+v", st)
	}
	var next NextAnswer
	h.ok("amk_orchestrate_next", map[string]any{}, &next)
	if next.Decision == "" {
		t.Fatalf("amk_orchestrate_next: %+v", next)
	}
	var rep ReportAnswer
	h.ok("amk_orchestrate_report", map[string]any{}, &rep)
	if rep.Report.BestUS == nil || len(rep.Files.Files) == 0 {
		t.Fatalf("amk_orchestrate_report: %+v", rep)
	}
	var doc map[string]any
	h.ok("amk_doctor", map[string]any{}, &doc)
	if _, ok := doc["ready"]; !ok {
		t.Fatalf("amk_doctor: %v", doc)
	}
}

// TestEvalRefusesUnknownConfigKeys: eval (under both names, the config as
// an object or its JSON text) and propose's incumbent read a schedule
// config as amkctl reads a --schedule file: a key amk does not know is a
// tool error naming the key probably meant and the opt-out, and with
// ignore_unknown_keys the config is evaluated with the verdict naming the
// key read past; propose's whole answer stands for its schedule_config.
func TestEvalRefusesUnknownConfigKeys(t *testing.T) {
	h := newHarness(t)
	misspelt := map[string]any{"pipelining_depth": 0, "tilling": map[string]any{"gemv": map[string]any{"N_tile": 64}}}
	text, _ := json.Marshal(misspelt)
	for _, args := range []map[string]any{
		{"schedule": misspelt},
		{"config": misspelt},
		{"config": string(text)},
	} {
		args["model"], args["gpu"] = "toy", "h100"
		for _, tool := range []string{"eval", "amk_eval"} {
			msg := h.toolError(tool, args)
			if !strings.Contains(msg, `'tilling' (did you mean "tiling"?)`) || !strings.Contains(msg, "ignore_unknown_keys") {
				t.Errorf("%s %v: error %q does not name the key meant and the opt-out", tool, args, msg)
			}
		}
		args["ignore_unknown_keys"] = true
		var v EvalAnswer
		h.ok("amk_eval", args, &v)
		if !v.OK || !slices.ContainsFunc(v.Notes, func(n string) bool {
			return strings.HasPrefix(n, trial.IgnoredKeysPrefix) && strings.Contains(n, "'tilling'")
		}) {
			t.Errorf("ignore_unknown_keys %v: %+v", args, v)
		}
	}
	if msg := h.toolError("eval", map[string]any{"model": "toy", "gpu": "h100", "config": "{not json"}); !strings.Contains(msg, "argument config") {
		t.Errorf("config text that is not JSON: %q", msg)
	}
	if msg := h.toolError("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": map[string]any{}}); !strings.Contains(msg, "sets no schedule setting") {
		t.Errorf("an empty schedule: %q", msg)
	}

	// propose's whole answer is read as its schedule_config.
	var surf map[string]any
	h.ok("propose", map[string]any{"model": "toy", "gpu": "h100", "incumbent": map[string]any{"pipelining_depth": 0}}, &surf)
	var whole, direct EvalAnswer
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": surf}, &whole)
	h.ok("eval", map[string]any{"model": "toy", "gpu": "h100", "schedule": surf["schedule_config"]}, &direct)
	if !whole.OK || whole.ScheduleID != direct.ScheduleID || !slices.ContainsFunc(whole.Notes, func(n string) bool { return strings.Contains(n, "propose's answer") }) {
		t.Errorf("propose's answer as the schedule: %+v, its schedule_config: %+v", whole, direct)
	}

	// propose's incumbent is read the same way.
	if msg := h.toolError("amk_propose", map[string]any{"model": "toy", "gpu": "h100", "incumbent": misspelt}); !strings.Contains(msg, `(did you mean "tiling"?)`) {
		t.Errorf("propose with a misspelt incumbent: %q", msg)
	}
	h.ok("amk_propose", map[string]any{"model": "toy", "gpu": "h100", "incumbent": misspelt, "ignore_unknown_keys": true}, &surf)
}
