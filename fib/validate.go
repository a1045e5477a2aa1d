package fib

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Controlled tag namespaces and the values FlashInfer-Bench names for them
// (docs/spec/formats.md §2).
var (
	tagNamespaces   = []string{"stage", "model", "quantization", "status"}
	tagFlags        = []string{"fused"}
	stageValues     = []string{"prefill", "decode"}
	statusValues    = []string{"verified", "draft", "deprecated"}
	nameCharset     = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	opTypeCharset   = regexp.MustCompile(`^[a-z0-9_]+$`)
	identifier      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tagValueCharset = regexp.MustCompile(`^[A-Za-z0-9_.+\-/]+$`)
	numberInName    = regexp.MustCompile(`[0-9]+`)
	topLevelRun     = regexp.MustCompile(`(?m)^(async\s+)?def\s+run\s*\(`)
)

// Validate checks a Definition against every rule of docs/spec/formats.md §2 and returns
// the findings, broken rules (Error) first in field order, then warnings.
// A Definition holds when Errors(Validate(d)) is empty.
func Validate(d *Definition) []Problem {
	var ps problems
	validateNaming(&ps, d)
	validateTags(&ps, d.Tags)
	validateAxes(&ps, d)
	used := map[string]bool{}
	validateSpecs(&ps, d, "inputs", d.Inputs, used)
	validateSpecs(&ps, d, "outputs", d.Outputs, used)
	for _, in := range d.Inputs {
		if _, clash := d.Outputs.Get(in.Name); clash {
			ps.addf("outputs."+in.Name, "is also an input: input and output names must not overlap")
		}
	}
	if len(d.Outputs) == 0 {
		ps.warn("outputs", "no outputs")
	}
	for _, c := range d.Constraints {
		if e, err := ParseExpr(c); err == nil {
			for _, n := range e.Names() {
				used[n] = true
			}
		}
	}
	inputAxes := map[string]bool{}
	for _, in := range d.Inputs {
		for _, a := range in.Value.Shape {
			inputAxes[a] = true
		}
	}
	for _, a := range d.Axes {
		switch {
		case a.Value.Type == AxisVar && !inputAxes[a.Name]:
			ps.addf("axes."+a.Name, "var axis appears in no input shape, so no input can bind its value at run time")
		case a.Value.Type == AxisConst && !used[a.Name]:
			ps.warn("axes."+a.Name, "const axis used by no tensor shape and no constraint")
		}
	}
	validateReference(&ps, d.Reference)
	validateConstraints(&ps, d)
	return sortProblems(ps.list)
}

func validateNaming(ps *problems, d *Definition) {
	if d.OpType != "" && !opTypeCharset.MatchString(d.OpType) {
		ps.addf("op_type", "%q: use lower-case letters, digits and underscores", d.OpType)
	} else if d.OpType != "" && !slices.Contains(OpTypes, d.OpType) {
		ps.warn("op_type", fmt.Sprintf("%q is not in the format's list of op_types", d.OpType))
	}
	if d.Name == "" {
		return
	}
	if !nameCharset.MatchString(d.Name) {
		ps.addf("name", "%q: a name is letters, digits and underscores ({op_type}_{props}_{constants})", d.Name)
		return
	}
	if d.OpType != "" && !containsTokens(d.Name, d.OpType) {
		// The format says a name "should" follow the convention: a warning, so
		// that real datasets whose names group op types differently still load.
		ps.warn("name", fmt.Sprintf("%q does not follow {op_type}_{props}_{constants}: it does not contain the op_type %q", d.Name, d.OpType))
	}
	numbers := map[string]bool{}
	for _, n := range numberInName.FindAllString(d.Name, -1) {
		numbers[strings.TrimLeft(n, "0")] = true
	}
	for _, a := range d.Axes {
		if a.Value.Type == AxisConst && a.Value.Value != nil {
			v := strconv.FormatInt(*a.Value.Value, 10)
			if !numbers[strings.TrimLeft(v, "0")] {
				ps.warn("name", fmt.Sprintf("the const axis %s = %s does not appear in the name ({op_type}_{props}_{constants})", a.Name, v))
			}
		}
	}
}

// containsTokens reports whether sub occurs in name as whole
// underscore-separated words.
func containsTokens(name, sub string) bool {
	return name == sub || strings.HasPrefix(name, sub+"_") || strings.HasSuffix(name, "_"+sub) ||
		strings.Contains(name, "_"+sub+"_")
}

func validateTags(ps *problems, tags []string) {
	seen := map[string]bool{}
	for i, tag := range tags {
		field := fmt.Sprintf("tags[%d]", i)
		if tag == "" {
			continue // reported by the decoder
		}
		if seen[tag] {
			ps.warn(field, fmt.Sprintf("%q is repeated", tag))
		}
		seen[tag] = true
		ns, value, namespaced := strings.Cut(tag, ":")
		if !namespaced {
			if !slices.Contains(tagFlags, tag) {
				ps.warn(field, fmt.Sprintf("flag %q is not one the format defines (%s)", tag, strings.Join(tagFlags, ", ")))
			}
			if strings.ContainsAny(tag, " \t") {
				ps.addf(field, "%q: a flag has no spaces", tag)
			}
			continue
		}
		if ns == "" || value == "" {
			ps.addf(field, "%q: a namespaced tag is <namespace>:<value>, both non-empty", tag)
			continue
		}
		if !slices.Contains(tagNamespaces, ns) {
			continue // other namespaces (fi_api:, tp:) are free
		}
		if !tagValueCharset.MatchString(value) {
			ps.addf(field, "%q: the value of a %s: tag has no spaces or odd characters", tag, ns)
			continue
		}
		switch ns {
		case "stage":
			if !slices.Contains(stageValues, value) {
				ps.warn(field, fmt.Sprintf("stage %q is neither of the seed's stages (%s)", value, strings.Join(stageValues, ", ")))
			}
		case "status":
			if !slices.Contains(statusValues, value) {
				ps.warn(field, fmt.Sprintf("status %q is none of the seed's (%s)", value, strings.Join(statusValues, ", ")))
			}
		case "quantization":
			if !slices.Contains(DTypes, value) && !slices.Contains(QuantOnlyDTypes, value) {
				ps.warn(field, fmt.Sprintf("quantization %q is not a dtype of the allowed list", value))
			}
		}
	}
}

func validateAxes(ps *problems, d *Definition) {
	if len(d.Axes) == 0 {
		return // a missing axes object is reported by the decoder; {} is legal for scalars only
	}
	for _, a := range d.Axes {
		field := "axes." + a.Name
		if !identifier.MatchString(a.Name) {
			ps.addf(field, "axis name %q is not an identifier (constraints refer to axes by name)", a.Name)
		}
		switch a.Value.Type {
		case AxisConst:
			if a.Value.Value == nil {
				ps.add(field+".value", "required on a const axis")
			} else if *a.Value.Value < 0 {
				ps.addf(field+".value", "must be >= 0, got %d", *a.Value.Value)
			}
		case AxisVar:
			if a.Value.Value != nil {
				ps.add(field+".value", "only const axes have a value; a var axis is bound by each workload")
			}
		case "":
		default:
			ps.addf(field+".type", "must be \"const\" or \"var\", got %q", a.Value.Type)
		}
	}
}

func validateSpecs(ps *problems, d *Definition, kind string, specs Ordered[TensorSpec], used map[string]bool) {
	for _, s := range specs {
		field := kind + "." + s.Name
		if !identifier.MatchString(s.Name) {
			ps.addf(field, "tensor name %q is not an identifier (it is an argument of run)", s.Name)
		}
		if s.Value.DType != "" && !slices.Contains(DTypes, s.Value.DType) {
			ps.addf(field+".dtype", "%q is not an allowed dtype (%s)", s.Value.DType, strings.Join(DTypes, ", "))
		}
		for i, a := range s.Value.Shape {
			if _, ok := d.Axes.Get(a); !ok {
				ps.addf(fmt.Sprintf("%s.shape[%d]", field, i), "axis %q is not defined in axes", a)
			}
			used[a] = true
		}
	}
}

func validateReference(ps *problems, ref string) {
	if ref == "" {
		return // reported by the decoder
	}
	if !topLevelRun.MatchString(ref) {
		ps.add("reference", "has no top-level function run (the entry point: def run(...) at column 0)")
	}
	if strings.Contains(ref, "torch.nn.functional") {
		ps.warn("reference", "uses torch.nn.functional; the format asks for explicit step-by-step computations")
	}
}

func validateConstraints(ps *problems, d *Definition) {
	consts := d.ConstAxes()
	for i, c := range d.Constraints {
		field := fmt.Sprintf("constraints[%d]", i)
		e, err := ParseExpr(c)
		if err != nil {
			ps.addf(field, "%q does not parse as an expression: %v", c, err)
			continue
		}
		constOnly := true
		for _, n := range e.Names() {
			_, isAxis := d.Axes.Get(n)
			_, isInput := d.Inputs.Get(n)
			if !isAxis && !isInput {
				ps.addf(field, "%q reads %q, which is neither an axis nor an input", c, n)
				constOnly = false
				continue
			}
			if _, ok := consts[n]; !ok {
				constOnly = false
			}
		}
		if !constOnly {
			continue
		}
		v, err := e.Eval(consts)
		switch {
		case err != nil && !errors.Is(err, ErrNeedsData):
			ps.addf(field, "%q cannot be evaluated on the const axes: %v", c, err)
		case err == nil && !v.Truth():
			ps.addf(field, "%q does not hold for the const axes (%s)", c, describeEnv(e, consts))
		}
	}
}

// CheckConstraints evaluates every constraint with the const axes and a
// workload's var axes. Constraints that read tensor data are skipped and
// listed in needData.
func (d *Definition) CheckConstraints(vars map[string]int64) (broken []Problem, needData []string) {
	env := d.ConstAxes()
	maps.Copy(env, vars)
	var ps problems
	for i, c := range d.Constraints {
		e, err := ParseExpr(c)
		if err != nil {
			continue // a Definition problem, reported by Validate
		}
		v, err := e.Eval(env)
		switch {
		case errors.Is(err, ErrNeedsData):
			needData = append(needData, c)
		case err != nil:
			ps.addf(fmt.Sprintf("constraints[%d]", i), "%q cannot be evaluated: %v", c, err)
		case !v.Truth():
			ps.addf(fmt.Sprintf("constraints[%d]", i), "%q does not hold (%s)", c, describeEnv(e, env))
		}
	}
	return ps.list, needData
}

func describeEnv(e *Expr, env map[string]int64) string {
	var parts []string
	for _, n := range e.Names() {
		if v, ok := env[n]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

// sortProblems puts errors before warnings, keeping each group's order.
func sortProblems(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.Level == b.Level {
			return 0
		}
		if a.Level == Error {
			return -1
		}
		return 1
	})
	return ps
}

// CheckDefinition parses and validates one Definition file's bytes: the
// decoder's findings and the rules' findings together.
func CheckDefinition(data []byte) (*Definition, []Problem, error) {
	d, decodeProblems, err := ParseDefinition(data)
	if err != nil {
		return nil, nil, err
	}
	return d, sortProblems(append(decodeProblems, Validate(d)...)), nil
}
