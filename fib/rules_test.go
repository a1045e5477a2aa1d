package fib

import (
	"encoding/json"
	"strings"
	"testing"
)

const baseDefinition = `{
  "name": "gqa_contiguous_decode_h32_kv8_d128",
  "op_type": "gqa_contiguous",
  "tags": ["stage:decode", "model:llama-8b", "status:draft"],
  "axes": {
    "batch_size": {"type": "var"},
    "kv_len": {"type": "var"},
    "num_qo_heads": {"type": "const", "value": 32},
    "num_kv_heads": {"type": "const", "value": 8},
    "head_dim": {"type": "const", "value": 128}
  },
  "constraints": ["num_qo_heads % num_kv_heads == 0"],
  "inputs": {
    "q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
    "k_cache": {"shape": ["batch_size", "kv_len", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
    "v_cache": {"shape": ["batch_size", "kv_len", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
    "sm_scale": {"shape": null, "dtype": "float32"},
    "zero_d": {"shape": [], "dtype": "float32"}
  },
  "outputs": {"output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
  "reference": "import torch\n\n@torch.no_grad()\ndef run(q, k_cache, v_cache, sm_scale, zero_d):\n    return q\n"
}`

// edit applies a change to the base Definition's JSON object.
func edit(t *testing.T, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(baseDefinition), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sub(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// Every seed-003 rule, broken once: the finding names the field and says why.
func TestEveryRule(t *testing.T) {
	if _, ps, err := CheckDefinition([]byte(baseDefinition)); err != nil || len(Errors(ps)) > 0 {
		t.Fatalf("the base Definition must hold: %v %v", err, ps)
	}
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"required name", func(m map[string]any) { delete(m, "name") }, "error: name: required field missing"},
		{"required reference", func(m map[string]any) { delete(m, "reference") }, "error: reference: required field missing"},
		{"required outputs", func(m map[string]any) { delete(m, "outputs") }, "error: outputs: required field missing"},
		{"empty op_type", func(m map[string]any) { m["op_type"] = "" }, "error: op_type: must not be empty"},
		{"axis kind", func(m map[string]any) { sub(m, "axes", "kv_len")["type"] = "dynamic" }, `error: axes.kv_len.type: must be "const" or "var", got "dynamic"`},
		{"axis type missing", func(m map[string]any) { delete(sub(m, "axes", "kv_len"), "type") }, "error: axes.kv_len.type: required field missing"},
		{"value only on const", func(m map[string]any) { sub(m, "axes", "kv_len")["value"] = 4 }, "error: axes.kv_len.value: only const axes have a value"},
		{"const needs value", func(m map[string]any) { delete(sub(m, "axes", "head_dim"), "value") }, "error: axes.head_dim.value: required on a const axis"},
		{"integer value", func(m map[string]any) { sub(m, "axes", "head_dim")["value"] = 1.5 }, "error: axes.head_dim.value: must be an integer"},
		{"shape bound to an axis", func(m map[string]any) { sub(m, "inputs", "q")["shape"] = []string{"batch_size", "heads", "head_dim"} }, `error: inputs.q.shape[1]: axis "heads" is not defined in axes`},
		{"dtype list", func(m map[string]any) { sub(m, "outputs", "output")["dtype"] = "float64" }, `error: outputs.output.dtype: "float64" is not an allowed dtype`},
		{"shape kind", func(m map[string]any) { sub(m, "inputs", "q")["shape"] = "batch_size" }, "error: inputs.q.shape: must be a list of axis names, or null for a scalar"},
		{"shape required", func(m map[string]any) { delete(sub(m, "inputs", "sm_scale"), "shape") }, "error: inputs.sm_scale.shape: required field missing"},
		{"var axis bound by an input", func(m map[string]any) { sub(m, "axes")["extra"] = map[string]any{"type": "var"} }, "error: axes.extra: var axis appears in no input shape"},
		{"names disjoint", func(m map[string]any) { sub(m, "outputs")["q"] = sub(m, "inputs", "q") }, "error: outputs.q: is also an input"},
		{"run present", func(m map[string]any) { m["reference"] = "def _ref(q):\n    return q\n" }, "error: reference: has no top-level function run"},
		{"run at top level", func(m map[string]any) { m["reference"] = "class K:\n    def run(self):\n        pass\n" }, "error: reference: has no top-level function run"},
		{"constraint parses", func(m map[string]any) { m["constraints"] = []string{"num_qo_heads == "} }, `error: constraints[0]: "num_qo_heads == " does not parse`},
		{"constraint names", func(m map[string]any) { m["constraints"] = []string{"heads > 0"} }, `reads "heads", which is neither an axis nor an input`},
		{"constraint holds on consts", func(m map[string]any) { m["constraints"] = []string{"num_qo_heads == 3 * num_kv_heads"} }, "does not hold for the const axes (num_qo_heads=32, num_kv_heads=8)"},
		{"tag namespace value", func(m map[string]any) { m["tags"] = []string{"stage:"} }, `error: tags[0]: "stage:": a namespaced tag is <namespace>:<value>`},
		{"tag value charset", func(m map[string]any) { m["tags"] = []string{"model:llama 3"} }, `error: tags[0]: "model:llama 3": the value of a model: tag has no spaces`},
		{"tag flag", func(m map[string]any) { m["tags"] = []string{"fused", "hot path"} }, `error: tags[1]: "hot path": a flag has no spaces`},
		{"stage value", func(m map[string]any) { m["tags"] = []string{"stage:train"} }, `warning: tags[0]: stage "train" is neither of the format's stages`},
		{"quantization value", func(m map[string]any) { m["tags"] = []string{"quantization:int3"} }, `warning: tags[0]: quantization "int3" is not a dtype`},
		{"naming: op_type in name", func(m map[string]any) { m["name"] = "attention_h32_kv8_d128" }, `warning: name: "attention_h32_kv8_d128" does not follow {op_type}_{props}_{constants}`},
		{"naming: charset", func(m map[string]any) { m["name"] = "gqa-contiguous h32" }, "error: name: \"gqa-contiguous h32\": a name is letters, digits and underscores"},
		{"naming: constants", func(m map[string]any) { m["name"] = "gqa_contiguous_decode_h32_kv8" }, "warning: name: the const axis head_dim = 128 does not appear in the name"},
		{"type for op_type", func(m map[string]any) { m["type"] = m["op_type"]; delete(m, "op_type") }, `error: op_type: required field missing (the file has "type": the field is "op_type")`},
	} {
		_, ps, err := CheckDefinition(edit(t, c.change))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var lines []string
		for _, p := range ps {
			lines = append(lines, p.String())
		}
		if got := strings.Join(lines, "\n"); !strings.Contains(got, c.want) {
			t.Errorf("%s: want %q in\n%s", c.name, c.want, got)
		}
	}
}

func TestNotADefinition(t *testing.T) {
	for _, in := range []string{`[1, 2]`, `"gemm"`, `{"definition": "x", "workload": {}}`, `{"name": "x"`, `{} {}`, ``} {
		if _, _, err := CheckDefinition([]byte(in)); err == nil {
			t.Errorf("%q accepted as a Definition", in)
		}
	}
}

// Workloads: var axes bound, > 0, nothing else; inputs exactly the
// Definition's with descriptors of the right kind; constraints hold.
func TestWorkloadRules(t *testing.T) {
	d, _, err := ParseDefinition([]byte(baseDefinition))
	if err != nil {
		t.Fatal(err)
	}
	d.Constraints = append(d.Constraints, "kv_len <= 4096", "batch_size * kv_len <= 65536")
	good := `{"uuid": "u", "axes": {"batch_size": 2, "kv_len": 128},
	  "inputs": {"q": {"type": "random"}, "k_cache": {"type": "random"}, "v_cache": {"type": "safetensors", "path": "blob/v.safetensors", "tensor_key": "v"},
	             "sm_scale": {"type": "scalar", "value": 0.088}, "zero_d": {"type": "random"}}}`
	for _, c := range []struct {
		from, to, want string
	}{
		{"", "", ""},
		{`"kv_len": 128`, `"kv_len": 8192`, `"kv_len <= 4096" does not hold (kv_len=8192)`},
		{`"batch_size": 2, `, ``, `var axis "batch_size" of gqa_contiguous_decode_h32_kv8_d128 is not bound`},
		{`"kv_len": 128`, `"kv_len": 0`, "workload.axes.kv_len: must be > 0"},
		{`"kv_len": 128`, `"kv_len": 128, "head_dim": 128`, `"head_dim" is a const axis`},
		{`"sm_scale": {"type": "scalar", "value": 0.088}`, `"sm_scale": {"type": "random"}`, `"random" for a scalar input (shape null)`},
		{`"zero_d": {"type": "random"}`, `"zero_d": {"type": "scalar", "value": 1}`, "a scalar descriptor for a tensor input (shape [])"},
		{`"q": {"type": "random"}, `, ``, `input "q" of gqa_contiguous_decode_h32_kv8_d128 has no data descriptor`},
		{`"path": "blob/v.safetensors"`, `"path": "../v.safetensors"`, "must be relative to the dataset root"},
		{`"sm_scale": {"type": "scalar", "value": 0.088}`, `"sm_scale": {"type": "scalar", "value": true}`, "a bool for a float32 scalar"},
	} {
		var w Workload
		if err := json.Unmarshal([]byte(strings.Replace(good, c.from, c.to, 1)), &w); err != nil {
			t.Fatalf("%q: %v", c.to, err)
		}
		var lines []string
		for _, p := range ValidateWorkload(d, &w) {
			lines = append(lines, p.String())
		}
		got := strings.Join(lines, "\n")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%q: want %q, got\n%s", c.to, c.want, got)
		}
	}
}
