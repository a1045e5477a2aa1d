package fib

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Axis kinds.
const (
	AxisConst = "const"
	AxisVar   = "var"
)

// QuantOnlyDTypes are effective dtypes a quantization:* tag may name that
// are no tensor dtype of the format: int4 weights travel packed, two per
// int8 byte.
var QuantOnlyDTypes = []string{"int4"}

// DTypes is the fixed list of tensor dtypes the format allows.
var DTypes = []string{"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
	"int64", "int32", "int16", "int8", "bool"}

// OpTypes are the compute categories the format lists. Others occur in the
// public dataset and in the format's own examples (grouped_gemm, gqa), so an
// unlisted op_type is a warning, not a broken rule.
var OpTypes = []string{"gqa_ragged", "gqa_paged", "mla_ragged", "mla_paged", "gemm", "rmsnorm", "fused_add_rmsnorm"}

// Axis is one symbolic dimension: const (with its value) or var (bound by a
// workload).
type Axis struct {
	Type        string `json:"type"`
	Value       *int64 `json:"value,omitempty"`
	Description string `json:"description,omitempty"`
}

// TensorSpec is one input or output. A nil Shape is a scalar (JSON null);
// an empty, non-nil Shape is a 0-D tensor (JSON []).
type TensorSpec struct {
	Shape       []string `json:"shape"`
	DType       string   `json:"dtype"`
	Description string   `json:"description,omitempty"`
}

// Scalar reports whether the spec is a Python scalar (shape null).
func (t TensorSpec) Scalar() bool { return t.Shape == nil }

// Definition is a seed-003 kernel Definition.
type Definition struct {
	Name        string              `json:"name"`
	OpType      string              `json:"op_type"`
	Description string              `json:"description,omitempty"`
	Tags        []string            `json:"tags,omitempty"`
	Axes        Ordered[Axis]       `json:"axes"`
	Constraints []string            `json:"constraints,omitempty"`
	Inputs      Ordered[TensorSpec] `json:"inputs"`
	Outputs     Ordered[TensorSpec] `json:"outputs"`
	Reference   string              `json:"reference"`
}

// ConstAxes maps each const axis to its value.
func (d *Definition) ConstAxes() map[string]int64 {
	out := map[string]int64{}
	for _, a := range d.Axes {
		if a.Value.Type == AxisConst && a.Value.Value != nil {
			out[a.Name] = *a.Value.Value
		}
	}
	return out
}

// VarAxes lists the var axes in order.
func (d *Definition) VarAxes() []string {
	var out []string
	for _, a := range d.Axes {
		if a.Value.Type == AxisVar {
			out = append(out, a.Name)
		}
	}
	return out
}

// HasTag reports whether tag is among the Definition's tags.
func (d *Definition) HasTag(tag string) bool { return slices.Contains(d.Tags, tag) }

// MaxFileBytes bounds every JSON file and JSONL line this package reads.
const MaxFileBytes = 16 << 20

// ErrNotDefinition is wrapped by ParseDefinition for input that is not JSON
// or not a Definition (amkctl fib validate exits 2 on it).
var ErrNotDefinition = errors.New("not a Definition")

// ParseDefinition decodes one Definition. The error (wrapping
// ErrNotDefinition) is for bytes that are not JSON, not an object, or an
// object with none of a Definition's structural fields; everything else
// that is wrong is a Problem, so that one pass reports every broken rule.
// The returned Definition holds whatever could be read.
func ParseDefinition(data []byte) (*Definition, []Problem, error) {
	if len(data) > MaxFileBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrNotDefinition, len(data), MaxFileBytes)
	}
	if err := checkJSON(data); err != nil {
		return nil, nil, fmt.Errorf("%w: not JSON: %v", ErrNotDefinition, err)
	}
	top, err := rawObject(data)
	if err != nil || top == nil {
		return nil, nil, fmt.Errorf("%w: the top level is not a JSON object", ErrNotDefinition)
	}
	_, hasAxes := top.Get("axes")
	_, hasInputs := top.Get("inputs")
	_, hasRef := top.Get("reference")
	if !hasAxes && !hasInputs && !hasRef {
		return nil, nil, fmt.Errorf("%w: an object with none of axes, inputs, reference", ErrNotDefinition)
	}
	d := &Definition{}
	var ps problems
	for _, key := range []string{"name", "op_type", "axes", "inputs", "outputs", "reference"} {
		if _, ok := top.Get(key); !ok {
			reason := "required field missing"
			if key == "op_type" {
				if _, ok := top.Get("type"); ok {
					reason += ` (the file has "type": the field is "op_type")`
				}
			}
			ps.add(key, reason)
		}
	}
	for _, e := range top {
		v := e.Value
		switch e.Name {
		case "name":
			d.Name = ps.str(e.Name, v, true)
		case "op_type":
			d.OpType = ps.str(e.Name, v, true)
		case "description":
			d.Description = ps.str(e.Name, v, false)
		case "reference":
			d.Reference = ps.str(e.Name, v, true)
		case "tags":
			d.Tags = ps.strList(e.Name, v)
		case "constraints":
			d.Constraints = ps.strList(e.Name, v)
		case "axes":
			d.Axes = parseAxes(&ps, v)
		case "inputs", "outputs":
			specs := parseSpecs(&ps, e.Name, v)
			if e.Name == "inputs" {
				d.Inputs = specs
			} else {
				d.Outputs = specs
			}
		case "type":
			ps.add("type", `not a Definition field: the compute category is "op_type"`)
		default:
			ps.warn(e.Name, "not a Definition field (ignored)")
		}
	}
	return d, ps.list, nil
}

// checkJSON reports a syntax error with its line and column.
func checkJSON(data []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := dec.Decode(&v)
	if err == nil {
		if _, tail := dec.Token(); tail == nil {
			return errors.New("more than one JSON value")
		}
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		hint := ""
		switch msg := se.Error(); {
		case strings.Contains(msg, "after object key:value pair"), strings.Contains(msg, "after array element"):
			hint = " (a missing comma?)"
		case strings.Contains(msg, "looking for beginning of object key string"),
			strings.Contains(msg, "looking for beginning of value") && strings.HasSuffix(string(bytes.TrimRight(data[:min(se.Offset, int64(len(data)))], " \t\r\n}]")), ","):
			hint = " (a trailing comma?)"
		}
		return fmt.Errorf("line %d, column %d: %v%s", line, col, se, hint)
	}
	return err
}

// position converts a byte offset to a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, max(col, 1)
}

func parseAxes(ps *problems, v json.RawMessage) Ordered[Axis] {
	raw, err := rawObject(v)
	if err != nil {
		ps.add("axes", "must be an object mapping axis names to {type, value}")
		return nil
	}
	var out Ordered[Axis]
	for _, e := range raw {
		field := "axes." + e.Name
		obj, err := rawObject(e.Value)
		if err != nil || obj == nil {
			ps.add(field, "must be an object {\"type\": \"const\"|\"var\", ...}")
			out = append(out, Named[Axis]{e.Name, Axis{}})
			continue
		}
		var a Axis
		for _, f := range obj {
			switch f.Name {
			case "type":
				a.Type = ps.str(field+".type", f.Value, true)
			case "value":
				var n json.Number
				dec := json.NewDecoder(bytes.NewReader(f.Value))
				dec.UseNumber()
				if dec.Decode(&n) != nil {
					ps.add(field+".value", "must be an integer")
					continue
				}
				i, err := n.Int64()
				if err != nil {
					ps.add(field+".value", fmt.Sprintf("must be an integer, got %s", n))
					continue
				}
				a.Value = &i
			case "description":
				a.Description = ps.str(field+".description", f.Value, false)
			default:
				ps.warn(field+"."+f.Name, "not an axis field (ignored)")
			}
		}
		if _, ok := obj.Get("type"); !ok {
			ps.add(field+".type", "required field missing")
		}
		out = append(out, Named[Axis]{e.Name, a})
	}
	return out
}

func parseSpecs(ps *problems, kind string, v json.RawMessage) Ordered[TensorSpec] {
	raw, err := rawObject(v)
	if err != nil {
		ps.add(kind, "must be an object mapping tensor names to {shape, dtype}")
		return nil
	}
	var out Ordered[TensorSpec]
	for _, e := range raw {
		field := kind + "." + e.Name
		obj, err := rawObject(e.Value)
		if err != nil || obj == nil {
			ps.add(field, "must be an object {\"shape\": [...]|null, \"dtype\": ...}")
			out = append(out, Named[TensorSpec]{e.Name, TensorSpec{}})
			continue
		}
		var t TensorSpec
		for _, f := range obj {
			switch f.Name {
			case "shape":
				if string(bytes.TrimSpace(f.Value)) == "null" {
					continue // a scalar
				}
				var names []string
				if json.Unmarshal(f.Value, &names) != nil {
					ps.add(field+".shape", "must be a list of axis names, or null for a scalar")
					t.Shape = []string{}
					continue
				}
				t.Shape = append([]string{}, names...)
			case "dtype":
				t.DType = ps.str(field+".dtype", f.Value, true)
			case "description":
				t.Description = ps.str(field+".description", f.Value, false)
			default:
				ps.warn(field+"."+f.Name, "not a tensor field (ignored)")
			}
		}
		for _, req := range []string{"shape", "dtype"} {
			if _, ok := obj.Get(req); !ok {
				ps.add(field+"."+req, "required field missing")
			}
		}
		out = append(out, Named[TensorSpec]{e.Name, t})
	}
	return out
}

// Encode writes a Definition as indented JSON with a final newline.
func (d *Definition) Encode() ([]byte, error) { return encodeIndented(d) }

func encodeIndented(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// quoteList renders names for messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
