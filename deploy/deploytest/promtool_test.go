package deploytest

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/amk-dev/amk/grafana"
)

// deployDir is the absolute path of deploy/.
func deployDir(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy")
}

// promtool runs promtool with args in dir and fails the test on a non-zero
// exit. It skips when promtool is not installed.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed; run `make deps` (scripts/ensure-deps.sh; Debian's prometheus package ships it)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckConfig(t *testing.T) {
	for _, file := range []string{"prometheus.yml", "prometheus-hosts.yml"} {
		out := promtool(t, deployDir(t), "check", "config", file)
		if !strings.Contains(out, "SUCCESS") {
			t.Errorf("promtool check config %s did not report success:\n%s", file, out)
		}
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	out := promtool(t, deployDir(t), "check", "rules", "alerts.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules did not report success:\n%s", out)
	}
}

// TestPromtoolTestRules runs the alert rules' unit tests, and checks that
// every alert has at least one test that expects it to fire.
func TestPromtoolTestRules(t *testing.T) {
	dir := deployDir(t)
	promtool(t, dir, "test", "rules", "alerts_test.yml")

	alerts := alertNames(t, filepath.Join(dir, "alerts.yml"))
	data, err := os.ReadFile(filepath.Join(dir, "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fired[a] {
			t.Errorf("alert %s has no unit test in which it fires", a)
		}
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rf
}

func alertNames(t *testing.T, path string) []string {
	var names []string
	for _, g := range readRules(t, path).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// staticValues substitute the dashboards' variables without a server.
var staticValues = map[string]string{
	"campaign": "toy-h100-cpu", "target": "h100", "latency_kind": "predicted",
	"__rate_interval": "1m", "__interval": "15s", "__range": "6h",
}

// TestDashboardExpressionsParse checks every dashboard expression (variables
// substituted) with promtool's PromQL parser, by writing them as recording
// rules; it needs no server.
func TestDashboardExpressionsParse(t *testing.T) {
	dashboards, err := grafana.Load()
	if err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, name := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[name]
		for _, v := range d.Templating.List {
			sel, _, err := grafana.LabelValues(v.Query)
			if err != nil {
				t.Fatalf("%s: variable %s: %v", name, v.Name, err)
			}
			if sel != "" {
				expr, err := grafana.Expand(sel, staticValues)
				if err != nil {
					t.Fatal(err)
				}
				rules = append(rules, rule{Record: recordName(d.UID, "var_"+v.Name), Expr: expr})
			}
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				expr, err := grafana.Expand(q.Expr, staticValues)
				if err != nil {
					t.Fatalf("%s: panel %q: %v", name, p.Title, err)
				}
				rules = append(rules, rule{Record: recordName(d.UID, fmt.Sprintf("panel%d_%s", p.ID, q.RefID)), Expr: expr})
			}
		}
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboards", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboards.rules.yml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, dir, "check", "rules", "dashboards.rules.yml")
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Errorf("want %q from promtool, got:\n%s", want, out)
	}
}

// recordName is a valid metric name for a dashboard expression.
func recordName(uid, what string) string {
	return "dash:" + strings.ReplaceAll(uid, "-", "_") + ":" + what
}
