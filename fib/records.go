package fib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Input descriptor types of a workload.
const (
	InputRandom      = "random"
	InputScalar      = "scalar"
	InputSafetensors = "safetensors"
)

// InputSpec says where one input's data comes from.
type InputSpec struct {
	Type string `json:"type"`
	// Value is a scalar input's value (int, float or bool).
	Value any `json:"value,omitempty"`
	// Path and TensorKey locate a safetensors input (path relative to the
	// dataset root).
	Path      string `json:"path,omitempty"`
	TensorKey string `json:"tensor_key,omitempty"`
}

// Workload binds a Definition's var axes and names its inputs' data.
type Workload struct {
	UUID   string             `json:"uuid"`
	Axes   Ordered[int64]     `json:"axes"`
	Inputs Ordered[InputSpec] `json:"inputs"`
}

// Evaluation statuses.
const (
	StatusPassed             = "PASSED"
	StatusIncorrectShape     = "INCORRECT_SHAPE"
	StatusIncorrectNumerical = "INCORRECT_NUMERICAL"
	StatusIncorrectDType     = "INCORRECT_DTYPE"
	StatusRuntimeError       = "RUNTIME_ERROR"
	StatusCompileError       = "COMPILE_ERROR"
	StatusTimeout            = "TIMEOUT"
)

// Statuses lists every evaluation status.
var Statuses = []string{StatusPassed, StatusIncorrectShape, StatusIncorrectNumerical, StatusIncorrectDType,
	StatusRuntimeError, StatusCompileError, StatusTimeout}

// Correctness is the error summary of an evaluation.
type Correctness struct {
	MaxRelativeError Float          `json:"max_relative_error"`
	MaxAbsoluteError Float          `json:"max_absolute_error"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// Float is a float64 that writes NaN and the infinities as the strings
// "NaN", "Infinity" and "-Infinity" (how flashinfer-bench serialises them)
// and reads them back.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return json.Marshal(v)
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "NaN":
			*f = Float(math.NaN())
		case "Infinity":
			*f = Float(math.Inf(1))
		case "-Infinity":
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("%q is not a number", s)
		}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// Performance is the timing summary of an evaluation.
type Performance struct {
	LatencyMS          float64 `json:"latency_ms"`
	ReferenceLatencyMS float64 `json:"reference_latency_ms"`
	SpeedupFactor      float64 `json:"speedup_factor"`
}

// Environment is the hardware and software an evaluation ran on.
type Environment struct {
	Hardware string            `json:"hardware"`
	Libs     map[string]string `json:"libs"`
}

// Evaluation is one benchmark result.
type Evaluation struct {
	Status      string       `json:"status"`
	Log         string       `json:"log"`
	Correctness *Correctness `json:"correctness"`
	Performance *Performance `json:"performance"`
	Environment Environment  `json:"environment"`
	Timestamp   string       `json:"timestamp"`
}

// Trace links a Definition (by name), a workload, and optionally a
// Solution (by name) with its Evaluation. Without solution and evaluation
// it is a workload entry of the dataset.
type Trace struct {
	Definition string      `json:"definition"`
	Workload   Workload    `json:"workload"`
	Solution   *string     `json:"solution"`
	Evaluation *Evaluation `json:"evaluation"`
}

// WorkloadOnly reports whether the Trace is a dataset workload entry.
func (t *Trace) WorkloadOnly() bool { return t.Solution == nil && t.Evaluation == nil }

// SourceFile is one file of a Solution.
type SourceFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// BuildSpec is how a Solution is built and called.
type BuildSpec struct {
	Language                string   `json:"language"`
	TargetHardware          []string `json:"target_hardware"`
	EntryPoint              string   `json:"entry_point"`
	Dependencies            []string `json:"dependencies,omitempty"`
	DestinationPassingStyle *bool    `json:"destination_passing_style,omitempty"`
	Binding                 string   `json:"binding,omitempty"`
}

// Solution is one implementation of a Definition.
type Solution struct {
	Name        string       `json:"name"`
	Definition  string       `json:"definition"`
	Description string       `json:"description,omitempty"`
	Author      string       `json:"author"`
	Spec        BuildSpec    `json:"spec"`
	Sources     []SourceFile `json:"sources"`
}

// ParseTrace decodes one Trace (a JSONL line). Unknown fields are errors:
// a Trace is machine-written.
func ParseTrace(data []byte) (*Trace, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("trace of %d bytes, more than the %d allowed", len(data), MaxFileBytes)
	}
	var t Trace
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("not a Trace: %w", err)
	}
	return &t, nil
}

// ParseSolution decodes one Solution.
func ParseSolution(data []byte) (*Solution, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("solution of %d bytes, more than the %d allowed", len(data), MaxFileBytes)
	}
	var s Solution
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("not a Solution: %w", err)
	}
	return &s, nil
}

// ValidateWorkload checks a workload against its Definition: every var
// axis bound to a positive value and nothing else, inputs exactly the
// Definition's with a descriptor of the right kind (scalar inputs take a
// scalar value of their dtype's kind; tensors, 0-D ones included, take
// random or safetensors data), and the constraints that axes decide hold.
func ValidateWorkload(d *Definition, w *Workload) []Problem {
	var ps problems
	if w.UUID == "" {
		ps.add("workload.uuid", "required, must not be empty")
	}
	vars := map[string]int64{}
	for _, a := range w.Axes {
		field := "workload.axes." + a.Name
		ax, ok := d.Axes.Get(a.Name)
		switch {
		case !ok:
			ps.addf(field, "%s has no axis %q", d.Name, a.Name)
		case ax.Type != AxisVar:
			ps.addf(field, "%q is a const axis of %s; a workload binds only var axes", a.Name, d.Name)
		case a.Value <= 0:
			ps.addf(field, "must be > 0, got %d", a.Value)
		default:
			vars[a.Name] = a.Value
		}
	}
	for _, v := range d.VarAxes() {
		if _, ok := w.Axes.Get(v); !ok {
			ps.addf("workload.axes", "var axis %q of %s is not bound", v, d.Name)
		}
	}
	for _, in := range w.Inputs {
		field := "workload.inputs." + in.Name
		spec, ok := d.Inputs.Get(in.Name)
		if !ok {
			ps.addf(field, "%s has no input %q", d.Name, in.Name)
			continue
		}
		checkInputSpec(&ps, field, spec, in.Value)
	}
	for _, in := range d.Inputs {
		if _, ok := w.Inputs.Get(in.Name); !ok {
			ps.addf("workload.inputs", "input %q of %s has no data descriptor", in.Name, d.Name)
		}
	}
	if len(ps.list) == 0 {
		broken, _ := d.CheckConstraints(vars)
		for _, p := range broken {
			p.Field = "workload (" + p.Field + ")"
			ps.list = append(ps.list, p)
		}
	}
	return ps.list
}

func checkInputSpec(ps *problems, field string, spec TensorSpec, in InputSpec) {
	switch in.Type {
	case InputScalar:
		if !spec.Scalar() {
			ps.addf(field+".type", "a scalar descriptor for a tensor input (shape %s); use random or safetensors", shapeText(spec.Shape))
			return
		}
		checkScalarValue(ps, field+".value", spec.DType, in.Value)
	case InputRandom, InputSafetensors:
		if spec.Scalar() {
			ps.addf(field+".type", "%q for a scalar input (shape null): a scalar takes {\"type\": \"scalar\", \"value\": ...}", in.Type)
			return
		}
		if in.Type == InputSafetensors {
			if in.Path == "" || in.TensorKey == "" {
				ps.add(field, "a safetensors input needs path and tensor_key")
			} else if strings.HasPrefix(in.Path, "/") || slices.Contains(strings.Split(in.Path, "/"), "..") {
				ps.addf(field+".path", "%q must be relative to the dataset root, without ..", in.Path)
			}
		}
	case "":
		ps.add(field+".type", "required field missing")
	default:
		ps.addf(field+".type", "must be random, scalar or safetensors, got %q", in.Type)
	}
}

func checkScalarValue(ps *problems, field, dtype string, v any) {
	if v == nil {
		ps.add(field, "a scalar input needs a value")
		return
	}
	switch x := v.(type) {
	case bool:
		if dtype != "bool" {
			ps.addf(field, "a bool for a %s scalar", dtype)
		}
	case float64:
		if dtype == "bool" {
			ps.addf(field, "a number for a bool scalar")
		} else if strings.HasPrefix(dtype, "int") && x != math.Trunc(x) {
			ps.addf(field, "%v is not an integer, the scalar is %s", x, dtype)
		}
	case json.Number, int, int64:
		if dtype == "bool" {
			ps.addf(field, "a number for a bool scalar")
		}
	default:
		ps.addf(field, "must be a number or a bool")
	}
}

func shapeText(s []string) string {
	if s == nil {
		return "null"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// ValidateTrace checks a Trace: its workload against the Definition (when
// given), and the evaluation's status and which of correctness and
// performance it must carry (PASSED both, INCORRECT_NUMERICAL correctness
// only, every other status neither).
func ValidateTrace(d *Definition, t *Trace) []Problem {
	var ps problems
	if t.Definition == "" {
		ps.add("definition", "required, must not be empty")
	}
	if d != nil {
		if t.Definition != d.Name {
			ps.addf("definition", "%q, but the Definition is %q", t.Definition, d.Name)
		}
		ps.list = append(ps.list, ValidateWorkload(d, &t.Workload)...)
	}
	if (t.Solution == nil) != (t.Evaluation == nil) {
		ps.add("solution", "a Trace has both solution and evaluation, or neither (a workload entry)")
	}
	if t.Solution != nil && *t.Solution == "" {
		ps.add("solution", "must not be empty")
	}
	e := t.Evaluation
	if e == nil {
		return ps.list
	}
	if !slices.Contains(Statuses, e.Status) {
		ps.addf("evaluation.status", "%q is not one of %s", e.Status, strings.Join(Statuses, ", "))
	}
	if e.Environment.Hardware == "" {
		ps.add("evaluation.environment.hardware", "required, must not be empty")
	}
	if e.Timestamp == "" {
		ps.add("evaluation.timestamp", "required, must not be empty")
	}
	needCorrect := e.Status == StatusPassed || e.Status == StatusIncorrectNumerical
	needPerf := e.Status == StatusPassed
	switch {
	case needCorrect && e.Correctness == nil:
		ps.addf("evaluation.correctness", "required when status is %s", e.Status)
	case !needCorrect && e.Correctness != nil:
		ps.addf("evaluation.correctness", "must be null when status is %s", e.Status)
	}
	switch {
	case needPerf && e.Performance == nil:
		ps.addf("evaluation.performance", "required when status is %s", e.Status)
	case !needPerf && e.Performance != nil:
		ps.addf("evaluation.performance", "must be null when status is %s (no latency without a correctness pass)", e.Status)
	}
	if p := e.Performance; p != nil && (p.LatencyMS < 0 || p.ReferenceLatencyMS < 0 || p.SpeedupFactor < 0) {
		ps.add("evaluation.performance", "latencies and speedup must be >= 0")
	}
	if c := e.Correctness; c != nil && (c.MaxAbsoluteError < 0 || c.MaxRelativeError < 0) {
		ps.add("evaluation.correctness", "errors must be >= 0")
	}
	return ps.list
}
