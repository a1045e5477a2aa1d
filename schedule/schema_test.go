package schedule

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// compileSchema compiles ConfigSchema with an independent JSON Schema
// implementation (not the one the MCP SDK validates arguments with), which
// also checks the schema against the 2020-12 meta-schema.
func compileSchema(t *testing.T, target *ir.GpuTarget, device Device) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(SchemaJSON(ConfigSchema(target, device))))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the schema does not compile as 2020-12: %v", err)
	}
	return sch
}

func validates(t *testing.T, sch *jsonschema.Schema, config string) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(config))
	if err != nil {
		t.Fatalf("%s: %v", config, err)
	}
	return sch.Validate(doc)
}

// TestSchemaAcceptsDefaultsAndDrawnPoints: the default config and points
// drawn from every target's space (and mutated one knob at a time) are
// accepted by the schema, on every device.
func TestSchemaAcceptsDefaultsAndDrawnPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	for _, name := range ir.TargetNames() {
		target, err := ir.Target(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, device := range []Device{DeviceCPU, DeviceCUDA} {
			sch := compileSchema(t, target, device)
			if err := validates(t, sch, string(pyjson.Indent(Default().Value()))); err != nil {
				t.Errorf("%s/%s: the default config is refused: %v", name, device, err)
			}
			for range 20 {
				p := Random(rng, target, device)
				p = Mutate(p, rng, target, device)
				text := string(pyjson.Indent(p.Value()))
				if err := validates(t, sch, text); err != nil {
					t.Errorf("%s/%s: a drawn point is refused: %v\n%s", name, device, err, text)
				}
			}
		}
	}
}

// TestSchemaRefusesWhatTheParserRefuses: configs ParsePoint refuses are
// refused by the schema, and each is named.
func TestSchemaRefusesWhatTheParserRefuses(t *testing.T) {
	sch := compileSchema(t, nil, DeviceCUDA)
	bad := []string{
		`[]`,
		`{"pipelining_depth": "deep"}`,
		`{"pipelining_depth": -1}`,
		`{"pipelining_depth": 9}`,
		`{"tiling": []}`,
		`{"tiling": {"gemv": {"N_tile": -64}}}`,
		`{"tiling": {"gemv": {"N_tile": 0}}}`,
		`{"tiling": {"gemv": 128}}`,
		`{"tiling": {"mlp": {"width": "wide"}}}`,
		`{"tiling": {"gemv": {"N_tile": 4294967296}}}`,
		`{"fusion_grouping": "gate"}`,
		`{"fusion_grouping": [["gate", "nonsense"]]}`,
		`{"fusion_grouping": [[1]]}`,
		`{"sm_assignment": "fastest"}`,
		`{"sm_assignment": {"five": 1}}`,
		`{"sm_assignment": {"-3": 1}}`,
		`{"sm_assignment": {"3": -1}}`,
		`{"sm_assignment": null}`,
		`{"page_allocation": "buddy"}`,
		`{"threads_per_block": "256"}`,
		`{"threads_per_block": true}`,
		`{"smem_bytes_per_block": 1e12}`,
		`{"kernel_knobs": {"cols_per_warp": 0}}`,
		`{"kernel_knobs": {"warp_magic": 1}}`,
		`{"kernel_knobs": {"lb_maxthreads": 256}}`,
		`{"kernel_knobs": {"lb_minblocks": 2, "lb_maxthreads": 0}}`,
		`{"kernel_knobs": []}`,
	}
	for _, config := range bad {
		if _, err := ParsePoint([]byte(config)); err == nil {
			t.Errorf("%s: ParsePoint accepts it (the case is wrong)", config)
			continue
		}
		if err := validates(t, sch, config); err == nil {
			t.Errorf("%s: the schema accepts what ParsePoint refuses", config)
		}
	}
	good := []string{
		`{}`,
		`{"future_knob": 1}`,
		`{"tiling": {"mlp": {"width": 8}}}`,
		`{"sm_assignment": {"0": 3, " 7 ": 1, "+2": 0}}`,
		`{"threads_per_block": 512, "smem_bytes_per_block": 9999999}`,
		`{"kernel_knobs": {"lb_maxthreads": 256, "lb_minblocks": 2}}`,
	}
	for _, config := range good {
		if _, err := ParsePoint([]byte(config)); err != nil {
			t.Errorf("%s: ParsePoint refuses it (the case is wrong): %v", config, err)
			continue
		}
		if err := validates(t, sch, config); err != nil {
			t.Errorf("%s: the schema refuses what ParsePoint accepts: %v", config, err)
		}
	}
}

// TestSchemaAgreesWithTheParser replaces one knob of drawn points with
// values of every kind, in and out of range: the schema accepts exactly the
// configs ParsePoint accepts.
func TestSchemaAgreesWithTheParser(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	h100, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	sch := compileSchema(t, h100, DeviceCUDA)
	values := []any{nil, true, -1, 0, 1, 2, 8, 9, 64, 100, 512, 70000, int64(1) << 40, "load_balance", "round_robin",
		"linear", "x", []any{}, []any{[]any{"gate", "up"}}, []any{[]any{"bogus"}}, []any{"gate"},
		map[string]any{}, map[string]any{"3": 1}, map[string]any{"gemv": map[string]any{"N_tile": 32}},
		map[string]any{"gemv": map[string]any{"N_tile": -2}}, map[string]any{"cpa_stages": 3},
		map[string]any{"cpa_stages": 99}, map[string]any{"x": 1}}
	paths := [][]string{{"tiling"}, {"tiling", "gemv"}, {"tiling", "gemv", "N_tile"}, {"tiling", "attention", "n_partitions"},
		{"fusion_grouping"}, {"sm_assignment"}, {"pipelining_depth"}, {"page_allocation"}, {"threads_per_block"},
		{"smem_bytes_per_block"}, {"kernel_knobs"}, {"kernel_knobs", "cols_per_warp"}, {"kernel_knobs", "lb_minblocks"}}
	checked := 0
	for range 40 {
		base := string(pyjson.Indent(Random(rng, h100, DeviceCUDA).Value()))
		for _, path := range paths {
			for _, val := range values {
				var doc map[string]any
				if err := json.Unmarshal([]byte(base), &doc); err != nil {
					t.Fatal(err)
				}
				if !setDocPath(doc, path, val) {
					continue
				}
				data, _ := json.Marshal(doc)
				_, parseErr := ParsePoint(data)
				schemaErr := validates(t, sch, string(data))
				if (parseErr == nil) != (schemaErr == nil) {
					t.Errorf("%s = %v: ParsePoint error %v, schema error %v\n%s", strings.Join(path, "."), fmt.Sprint(val), parseErr, schemaErr, data)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d configs checked", checked)
	}
}

// setDocPath sets doc[path...] = val when every parent on the path is an
// object (creating the last parent when missing).
func setDocPath(doc map[string]any, path []string, val any) bool {
	m := doc
	for _, key := range path[:len(path)-1] {
		next, ok := m[key]
		if !ok {
			next = map[string]any{}
			m[key] = next
		}
		nm, ok := next.(map[string]any)
		if !ok {
			return false
		}
		m = nm
	}
	m[path[len(path)-1]] = val
	return true
}
