package ir

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// roundTrip is decode -> encode.
func roundTrip(t *testing.T, data []byte) []byte {
	t.Helper()
	p, err := Decode(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return Encode(p)
}

// TestSeedExample: the docs/spec/ir.md §6 example (target completed) decodes, and
// encodes to exactly what the reference's to_json writes for it (the
// canonical file was produced by the Python reference); the canonical form
// round-trips byte for byte.
func TestSeedExample(t *testing.T) {
	canonical := readFile(t, "testdata/seed_example.canonical.json")
	if got := roundTrip(t, readFile(t, "testdata/seed_example.json")); !bytes.Equal(got, canonical) {
		t.Fatalf("encoding of the seed example differs from the reference's:\n%s", got)
	}
	if got := roundTrip(t, canonical); !bytes.Equal(got, canonical) {
		t.Fatal("canonical seed example does not round-trip byte for byte")
	}
	p, _ := Decode(canonical)
	if len(p.Tasks) != 2 || p.Tasks[1].Waits[0] != (Wait{Counter: 0, Threshold: 1}) || p.Pages.BufferToPage[1] != (PageBinding{Buffer: 4, Page: 0}) ||
		p.Pages.Pages[0].Space != SMEM || p.Config.PipeliningDepth != 2 || p.Target.NumSMs != 82 || *p.Buffers[1].Source != "proj.weight" {
		t.Fatalf("decoded fields wrong: %+v", p)
	}
}

// TestRoundTripReferenceFiles: programs written by the reference's
// lowering (validate/testdata/good/ref_*.json) re-encode byte for byte, and
// decode -> encode -> decode -> encode is stable.
func TestRoundTripReferenceFiles(t *testing.T) {
	files, _ := filepath.Glob("../validate/testdata/good/ref_*.json")
	files = append(files, "testdata/seed_example.canonical.json")
	if len(files) < 2 {
		t.Fatal("no reference files found")
	}
	for _, f := range files {
		data := readFile(t, f)
		once := roundTrip(t, data)
		if !bytes.Equal(once, data) {
			t.Errorf("%s: re-encoding differs from the reference's bytes", f)
		}
		if twice := roundTrip(t, once); !bytes.Equal(once, twice) {
			t.Errorf("%s: encode is not stable", f)
		}
	}
}

func TestVersionMismatch(t *testing.T) {
	base := string(readFile(t, "testdata/seed_example.canonical.json"))
	for _, tc := range []struct{ old, new, want string }{
		{`"ir_version": "0.2.0"`, `"ir_version": "1.0.0"`, "IR major version mismatch: file 1.0.0 vs runtime 0.2.0"},
		{`"abi_version": "0.2"`, `"abi_version": "3.1"`, "ABI major version mismatch: file 3.1 vs runtime 0.2"},
	} {
		_, err := Decode([]byte(strings.Replace(base, tc.old, tc.new, 1)))
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v", tc.new, err)
		}
	}
	// A minor bump is compatible and preserved.
	doc := strings.Replace(base, `"ir_version": "0.2.0"`, `"ir_version": "0.9.7"`, 1)
	p, err := Decode([]byte(doc))
	if err != nil || p.IRVersion != "0.9.7" || !bytes.Equal(Encode(p), []byte(doc)) {
		t.Fatalf("minor version: %v %q", err, p.IRVersion)
	}
}

func TestUnknownKeysDropped(t *testing.T) {
	base := readFile(t, "testdata/seed_example.canonical.json")
	v, err := pyjson.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Obj {
		switch v.Obj[i].Key {
		case "target":
			v.Obj[i].Val.Set("future_tensor_mem_kb", pyjson.IntValue(999))
		case "config":
			v.Obj[i].Val.Set("made_up_search_dim", pyjson.IntValue(7))
		}
	}
	if got := roundTrip(t, pyjson.Indent(v)); !bytes.Equal(got, base) {
		t.Fatalf("unknown keys were not dropped:\n%s", got)
	}
}

// TestUnknownKeysRefusedElsewhere: docs/spec/ir.md drops unknown keys in target and
// config only; anywhere else an unknown key is an error naming its path (a
// typo must not silently lose a field).
func TestUnknownKeysRefusedElsewhere(t *testing.T) {
	base := readFile(t, "testdata/seed_example.canonical.json")
	for _, tc := range []struct{ where, key, path string }{
		{"", "tasks_v2", "tasks_v2"},
		{"tasks", "future_task_field", "tasks[0].future_task_field"},
		{"buffers", "future_buffer_field", "buffers[0].future_buffer_field"},
		{"counters", "future_counter_field", "counters[0].future_counter_field"},
		{"waits", "thresold", "tasks[1].waits[0].thresold"},
		{"pages", "future_pages_field", "pages.future_pages_field"},
	} {
		v, err := pyjson.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.Obj {
			switch m := &v.Obj[i]; {
			case tc.where == "" && i == 0:
				v.Obj = append(v.Obj, pyjson.M(tc.key, pyjson.IntValue(1)))
			case m.Key == tc.where && m.Val.Kind == pyjson.Array:
				m.Val.Arr[0].Set(tc.key, pyjson.IntValue(1))
			case m.Key == tc.where:
				m.Val.Set(tc.key, pyjson.IntValue(1))
			case m.Key == "tasks" && tc.where == "waits":
				m.Val.Arr[1].Obj[5].Val.Arr[0].Set(tc.key, pyjson.IntValue(1))
			}
		}
		_, err = Decode(pyjson.Indent(v))
		var de *DecodeError
		if !errors.As(err, &de) || de.Path != tc.path || !strings.Contains(de.Msg, "unknown key") {
			t.Errorf("%s: got %v, want an unknown-key error at %s", tc.key, err, tc.path)
		}
	}
	// meta is free-form.
	if _, err := Decode([]byte(strings.Replace(string(base), `"meta": {`, `"meta": {"anything": [1],`, 1))); err != nil {
		t.Errorf("a free meta key was refused: %v", err)
	}
}

// TestForeignDocumentsAreNotPrograms: a JSON document without the program's
// required keys is malformed, never an empty valid program; a repeated key,
// a non-finite target figure or a major version mismatch is refused.
func TestForeignDocumentsAreNotPrograms(t *testing.T) {
	base := string(readFile(t, "testdata/seed_example.canonical.json"))
	for _, tc := range []struct{ name, doc, want string }{
		{"empty object", `{}`, `required key "ir_version" is missing`},
		{"foreign object", `{"foo": 1}`, `required key "ir_version" is missing`},
		{"no tasks", `{"ir_version": "0.2.0"}`, `required key "tasks" is missing`},
		{"versions only", `{"ir_version": "0.2.0", "abi_version": "0.2"}`, `required key "tasks" is missing`},
		{"a list", `[]`, "expected a JSON object"},
		{"repeated key", strings.Replace(base, `"meta": {`, `"tasks": [], "meta": {`, 1), `duplicate key "tasks"`},
		{"repeated nested key", strings.Replace(base, `"op": "RMSNORM",`, `"op": "RMSNORM", "op": "NOP",`, 1), `duplicate key "op" in tasks[0]`},
		{"NaN bandwidth", strings.Replace(base, `"hbm_bandwidth_gbs": 896.0`, `"hbm_bandwidth_gbs": NaN`, 1), "target.hbm_bandwidth_gbs: expected a finite number"},
		{"infinite tflops", strings.Replace(base, `"fp16_tflops": 210.0`, `"fp16_tflops": -Infinity`, 1), "target.fp16_tflops: expected a finite number"},
		{"major 999", strings.Replace(base, `"ir_version": "0.2.0"`, `"ir_version": "999"`, 1), "major version mismatch"},
		{"major 1", strings.Replace(base, `"ir_version": "0.2.0"`, `"ir_version": "1.0.0"`, 1), "major version mismatch"},
		{"abi major", strings.Replace(base, `"abi_version": "0.2"`, `"abi_version": "3.0"`, 1), "major version mismatch"},
	} {
		if tc.doc == base {
			t.Fatalf("%s: the fixture edit did not apply", tc.name)
		}
		_, err := Decode([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// A newer minor version is compatible.
	if _, err := Decode([]byte(strings.Replace(base, `"ir_version": "0.2.0"`, `"ir_version": "0.9.1"`, 1))); err != nil {
		t.Errorf("minor version refused: %v", err)
	}
}

// TestDecodeLimits: the size and item bounds are clear errors.
func TestDecodeLimits(t *testing.T) {
	base := readFile(t, "testdata/seed_example.canonical.json")
	if _, err := DecodeLimited(base, Limits{MaxBytes: int64(len(base) - 1)}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("over the byte limit: %v", err)
	}
	if _, err := DecodeLimited(base, Limits{MaxItems: 1}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "buffers has") {
		t.Errorf("over the item limit: %v", err)
	}
	if _, err := DecodeLimited(base, Limits{MaxBytes: int64(len(base)), MaxItems: 64}); err != nil {
		t.Errorf("within the limits: %v", err)
	}
}

// TestDecodeErrors: malformed files are errors that name their JSON path,
// never a panic.
func TestDecodeErrors(t *testing.T) {
	base := string(readFile(t, "testdata/seed_example.canonical.json"))
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, tc := range []struct {
		name, doc, path, msg string
	}{
		{"unknown op", edit(`"op": "GEMV_TILE"`, `"op": "FOO"`), "tasks[1].op", `unknown opcode "FOO"`},
		{"unknown dtype", edit(`"dtype": "F16"`, `"dtype": "F12"`), "buffers[0].dtype", "unknown dtype"},
		{"string dim", edit("\"shape\": [\n        1,", "\"shape\": [\n        \"one\","), "buffers[0].shape[0]", "expected an integer"},
		{"negative dim", edit("\"shape\": [\n        1,", "\"shape\": [\n        -1,"), "buffers[0].shape[0]", "negative dimension"},
		{"missing name", edit(`"name": "x",`, ``), "buffers[0].name", "required key is missing"},
		{"bool threshold", edit(`"threshold": 1`, `"threshold": true`), "tasks[1].waits[0].threshold", "not a positive static int"},
		{"float threshold", edit(`"threshold": 1`, `"threshold": 1.5`), "tasks[1].waits[0].threshold", "expected an integer"},
		{"page key", edit(`"3": 0`, `"three": 0`), "pages.buffer_to_page", "not an integer buffer id"},
		{"sm assignment", edit(`"sm_assignment": "load_balance"`, `"sm_assignment": 5`), "config.sm_assignment", "expected a policy name"},
		{"tasks not a list", edit(`"tasks": [`, `"tasks": {"x": [`) + "}", "", ""},
		{"target type", edit(`"num_sms": 82`, `"num_sms": "many"`), "target.num_sms", "expected an integer"},
		{"huge int", edit(`"est_bytes": 0`, `"est_bytes": 123456789012345678901234567890`), "tasks[0].est_bytes", "out of range"},
		{"top-level array", `[1, 2]`, "", "expected a JSON object"},
	} {
		_, err := Decode([]byte(tc.doc))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		var de *DecodeError
		var se *pyjson.SyntaxError
		switch {
		case errors.As(err, &de):
			if tc.path != "" && de.Path != tc.path || !strings.Contains(de.Msg, tc.msg) {
				t.Errorf("%s: %v (want path %q, message with %q)", tc.name, err, tc.path, tc.msg)
			}
		case errors.As(err, &se):
			if tc.path != "" {
				t.Errorf("%s: syntax error %v, want a path error", tc.name, err)
			}
		default:
			t.Errorf("%s: unexpected error type %T: %v", tc.name, err, err)
		}
	}
	for _, doc := range []string{``, `{`, `{"tasks": [`, base[:len(base)/2], strings.Repeat("[", 5000), `{"a": 1} x`, "\xff\xfe", `{"meta": NaN}`} {
		if _, err := Decode([]byte(doc)); err == nil {
			t.Errorf("%.20q: decoded without error", doc)
		}
	}
}

// TestPythonFloatRepr: floats are written as Python's repr writes them.
func TestPythonFloatRepr(t *testing.T) {
	tenth := 0.1 // not a constant: 0.1+0.2 must be computed in float64
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1e-06, "1e-06"}, {0.25, "0.25"}, {10000.0, "10000.0"}, {1e16, "1e+16"}, {1e-05, "1e-05"},
		{0.0001, "0.0001"}, {1e15, "1000000000000000.0"}, {123456789012345680.0, "1.2345678901234568e+17"},
		{tenth + 0.2, "0.30000000000000004"}, {math.Copysign(0, -1), "-0.0"}, {0, "0.0"}, {896, "896.0"}, {1.597, "1.597"},
		{5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {0.08838834764831845, "0.08838834764831845"},
	} {
		if got := pyjson.FormatFloat(tc.f); got != tc.want {
			t.Errorf("FormatFloat(%v) = %s, want %s", tc.f, got, tc.want)
		}
	}
	// Through the codec: a param written as 1e-6 comes back as Python writes it.
	p := NewProgram()
	p.AddTask(Task{Op: OpRMSNORM, Params: Params{FloatParam("eps", 1e-6), FloatParam("theta", 10000), IntParam("hidden", 8)}})
	if out := string(Encode(p)); !strings.Contains(out, `"eps": 1e-06,`) || !strings.Contains(out, `"theta": 10000.0,`) {
		t.Fatalf("params encoded as:\n%s", out)
	}
	p2, err := Decode([]byte(strings.Replace(string(Encode(p)), `"eps": 1e-06`, `"eps": 0.000001000`, 1)))
	if err != nil || !bytes.Equal(Encode(p2), Encode(p)) {
		t.Fatalf("float literal not normalised: %v", err)
	}
}
