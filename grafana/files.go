package grafana

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

//go:embed dashboards/*.json
var committed embed.FS

// Dir is the directory of the committed dashboards, relative to this package.
const Dir = "dashboards"

// Definitions maps each dashboard's file name (under Dir) to its Go
// definition.
func Definitions() map[string]Dashboard {
	return map[string]Dashboard{
		"campaign-roofline-progress.json": CampaignRoofline(),
		"fleet.json":                      Fleet(),
	}
}

// Render is the committed JSON form of d (two-space indent, trailing
// newline, no HTML escaping).
func Render(d Dashboard) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Load parses the committed dashboards, by file name.
func Load() (map[string]Dashboard, error) {
	entries, err := committed.ReadDir(Dir)
	if err != nil {
		return nil, err
	}
	out := map[string]Dashboard{}
	for _, e := range entries {
		data, err := committed.ReadFile(Dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out[e.Name()] = d
	}
	return out, nil
}

// Committed returns the bytes of a committed dashboard file.
func Committed(name string) ([]byte, error) { return committed.ReadFile(Dir + "/" + name) }

// Query is one PromQL expression of a dashboard panel.
type Query struct {
	Panel   string
	RefID   string
	Expr    string
	Instant bool
}

func (q Query) String() string { return fmt.Sprintf("%q/%s: %s", q.Panel, q.RefID, q.Expr) }

// Queries lists every panel query of d.
func Queries(d Dashboard) []Query {
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr, Instant: t.Instant && !t.Range})
		}
	}
	return out
}

// variableRef matches $name, ${name}, ${name:format} and [[name]].
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// Expand substitutes the variables in expr from values (keys without the
// dollar sign, e.g. "campaign", "__rate_interval"). A variable without a
// value is an error.
func Expand(expr string, values map[string]string) (string, error) {
	var missing []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for variable(s) %s in %q", strings.Join(missing, ", "), expr)
	}
	return out, nil
}

// labelValues matches label_values(selector, label) and label_values(label).
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*$`)

// LabelValues splits a label_values variable query into its series
// selector (empty when it has none) and label.
func LabelValues(query string) (selector, label string, err error) {
	m := labelValues.FindStringSubmatch(query)
	if m == nil {
		return "", "", fmt.Errorf("not a label_values(selector, label) query: %q", query)
	}
	return m[1], m[2], nil
}

// amkMetric matches an amk metric name.
var amkMetric = regexp.MustCompile(`\bamk_[a-z0-9_]+`)

// MetricNames lists the amk metric names an expression uses, with the
// _bucket, _sum and _count suffixes of histogram series removed.
func MetricNames(expr string) []string {
	var out []string
	for _, n := range amkMetric.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && strings.HasSuffix(base, "_seconds") {
				n = base
			}
		}
		out = append(out, n)
	}
	return out
}
