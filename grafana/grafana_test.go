package grafana

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/amk-dev/amk/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite dashboards/*.json from the Go definitions")

// TestDashboardFiles keeps the committed JSON equal to the Go definitions.
func TestDashboardFiles(t *testing.T) {
	defs := Definitions()
	for name, d := range defs {
		want, err := Render(d)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(Dir, name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run: go test ./grafana -run TestDashboardFiles -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its Go definition; run: go test ./grafana -run TestDashboardFiles -update", path)
		}
	}
	entries, err := os.ReadDir(Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := defs[e.Name()]; !ok {
			t.Errorf("%s/%s has no Go definition", Dir, e.Name())
		}
	}
}

func loadAll(t *testing.T) map[string]Dashboard {
	t.Helper()
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("want 2 committed dashboards, got %d", len(ds))
	}
	return ds
}

func isPrometheus(ds *Datasource) bool {
	return ds != nil && ds.Type == "prometheus" && ds.UID == DatasourceUID
}

// TestEveryPanelNamesTheDatasource: panels, queries and variables all name
// the provisioned Prometheus by uid.
func TestEveryPanelNamesTheDatasource(t *testing.T) {
	for name, d := range loadAll(t) {
		if len(d.Panels) == 0 {
			t.Errorf("%s: no panels", name)
		}
		for _, p := range d.Panels {
			if !isPrometheus(p.Datasource) {
				t.Errorf("%s: panel %q datasource %+v, want prometheus uid %s", name, p.Title, p.Datasource, DatasourceUID)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", name, p.Title)
			}
			for _, q := range p.Targets {
				if !isPrometheus(q.Datasource) {
					t.Errorf("%s: panel %q query %s datasource %+v", name, p.Title, q.RefID, q.Datasource)
				}
				if strings.TrimSpace(q.Expr) == "" {
					t.Errorf("%s: panel %q query %s is empty", name, p.Title, q.RefID)
				}
				if q.Range == q.Instant {
					t.Errorf("%s: panel %q query %s must be either range or instant", name, p.Title, q.RefID)
				}
			}
		}
		for _, v := range d.Templating.List {
			if !isPrometheus(v.Datasource) {
				t.Errorf("%s: variable %s datasource %+v", name, v.Name, v.Datasource)
			}
		}
	}
}

// TestLayout: panels fit the 24-column grid without overlapping, ids unique.
func TestLayout(t *testing.T) {
	for name, d := range loadAll(t) {
		ids := map[int]bool{}
		for i, p := range d.Panels {
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q outside the grid: %+v", name, p.Title, g)
			}
			if ids[p.ID] {
				t.Errorf("%s: duplicate panel id %d", name, p.ID)
			}
			ids[p.ID] = true
			for _, o := range d.Panels[:i] {
				h := o.GridPos
				if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
					t.Errorf("%s: panels %q and %q overlap", name, o.Title, p.Title)
				}
			}
		}
	}
}

// builtins are Grafana's interval variables the dashboards may use.
var builtins = []string{"__rate_interval", "__interval", "__range"}

// TestVariables: every variable a query uses is defined or a Grafana
// built-in, every defined variable is used, and the interval variables are
// used where they belong.
func TestVariables(t *testing.T) {
	used := map[string]bool{}
	for name, d := range loadAll(t) {
		defined := map[string]bool{}
		for _, v := range d.Templating.List {
			if _, _, err := LabelValues(v.Query); err != nil {
				t.Errorf("%s: variable %s: %v", name, v.Name, err)
			}
			if v.Definition != v.Query {
				t.Errorf("%s: variable %s definition %q differs from its query %q", name, v.Name, v.Definition, v.Query)
			}
			defined[v.Name] = true
		}
		refs := map[string]bool{}
		exprs := []string{}
		for _, q := range Queries(d) {
			exprs = append(exprs, q.Expr)
		}
		for _, v := range d.Templating.List {
			exprs = append(exprs, v.Query)
		}
		for _, e := range exprs {
			for _, m := range variableRef.FindAllStringSubmatch(e, -1) {
				refs[m[1]+m[2]+m[3]] = true
			}
		}
		for r := range refs {
			used[r] = true
			if !defined[r] && !slices.Contains(builtins, r) {
				t.Errorf("%s: uses undefined variable $%s", name, r)
			}
		}
		for v := range defined {
			if !refs[v] {
				t.Errorf("%s: variable $%s is never used", name, v)
			}
		}
	}
	for _, b := range builtins {
		if !used[b] {
			t.Errorf("no dashboard uses $%s", b)
		}
	}
	for _, q := range allQueries(t) {
		if strings.Contains(q.Expr, "rate(") && !strings.Contains(q.Expr, "$__rate_interval") && !strings.Contains(q.Expr, "$__range") {
			t.Errorf("%s: rate/increase should use $__rate_interval (or $__range)", q)
		}
	}
}

func allQueries(t *testing.T) []Query {
	var qs []Query
	for _, d := range loadAll(t) {
		qs = append(qs, Queries(d)...)
	}
	return qs
}

// TestMetricNamesRegistered: every amk metric a dashboard uses is one the
// scheduler or the worker registers (internal/metrics), so a metric renamed
// in code fails here as well as in the end-to-end test.
func TestMetricNamesRegistered(t *testing.T) {
	known := slices.Concat(metrics.SchedulerNames(), metrics.QueueNames(), metrics.WorkerNames())
	seen := map[string]bool{}
	for _, q := range allQueries(t) {
		names := MetricNames(q.Expr)
		if len(names) == 0 && !strings.Contains(q.Expr, "up{") {
			t.Errorf("%s uses no amk metric", q)
		}
		for _, n := range names {
			seen[n] = true
			if !slices.Contains(known, n) {
				t.Errorf("%s uses %s, which internal/metrics does not define", q, n)
			}
		}
	}
	// The dashboards between them show every catalog metric except the ones
	// listed here (with the reason).
	unshown := map[string]string{
		metrics.QueueActive:         "the worker state panel shows who is busy",
		metrics.WorkerTrialDuration: "the stage histogram breaks the same time down",
	}
	for _, n := range known {
		if !seen[n] && unshown[n] == "" {
			t.Errorf("metric %s is on no dashboard", n)
		}
	}
}

// TestProvisioning: the provisioned datasource has the uid the panels name.
func TestProvisioning(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("provisioning", "datasources", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, Type, UID, URL string
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("want apiVersion 1 and one datasource, got %+v", ds)
	}
	if d := ds.Datasources[0]; d.Type != "prometheus" || d.UID != DatasourceUID || d.URL == "" {
		t.Errorf("datasource %+v, want type prometheus, uid %s and a url", d, DatasourceUID)
	}
	data, err = os.ReadFile(filepath.Join("provisioning", "dashboards", "amk.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Type    string
			Options struct{ Path string }
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(data, &prov); err != nil {
		t.Fatal(err)
	}
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options.Path == "" {
		t.Errorf("dashboard provider %+v, want one file provider with a path", prov)
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"campaign": "c1", "__rate_interval": "30s", "__range": "5m", "__interval": "15s"}
	got, err := Expand(`rate(x{campaign=~"$campaign"}[$__rate_interval]) + y[${__range}] + z[[[__interval]]]`, vals)
	if err != nil {
		t.Fatal(err)
	}
	if want := `rate(x{campaign=~"c1"}[30s]) + y[5m] + z[15s]`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := Expand(`x{a="$nope"}`, vals); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("want an error naming the missing variable, got %v", err)
	}
}

func TestLabelValues(t *testing.T) {
	for _, c := range []struct{ in, sel, label string }{
		{"label_values(amk_worker_info, target)", "amk_worker_info", "target"},
		{`label_values(m{campaign=~"$campaign", a="b"}, target)`, `m{campaign=~"$campaign", a="b"}`, "target"},
		{"label_values(job)", "", "job"},
	} {
		sel, label, err := LabelValues(c.in)
		if err != nil || sel != c.sel || label != c.label {
			t.Errorf("LabelValues(%q) = %q, %q, %v; want %q, %q", c.in, sel, label, err, c.sel, c.label)
		}
	}
	if _, _, err := LabelValues("query_result(up)"); err == nil {
		t.Error("want an error for a query_result variable")
	}
}

// TestLatencyPanelsNameTheKind: a fleet can mix CPU workers (predicted
// latencies) and CUDA workers (measured-gpu ones). Every query of a latency
// series keeps the latency_kind label, every legend shows it and every such
// panel says what the kinds mean, so the two are never one "best latency".
func TestLatencyPanelsNameTheKind(t *testing.T) {
	latency := []string{metrics.SchedulerBestLatency, metrics.SchedulerBestRoofline, metrics.SchedulerSpeedup}
	seen := 0
	for name, d := range loadAll(t) {
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if !slices.ContainsFunc(MetricNames(tg.Expr), func(m string) bool { return slices.Contains(latency, m) }) {
					continue
				}
				seen++
				if !strings.Contains(tg.Expr, "latency_kind)") || !strings.Contains(tg.Expr, `latency_kind=~"$latency_kind"`) {
					t.Errorf("%s: %q: %s drops the latency kind", name, p.Title, tg.Expr)
				}
				if !strings.Contains(tg.LegendFormat, "{{latency_kind}}") {
					t.Errorf("%s: %q: legend %q does not name the latency kind", name, p.Title, tg.LegendFormat)
				}
				if !strings.Contains(p.Description, "predicted") || !strings.Contains(p.Description, "measured-gpu") {
					t.Errorf("%s: %q: the description does not say what the kinds are", name, p.Title)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no dashboard shows a latency")
	}
}
