package deploytest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestLegendName(t *testing.T) {
	labels := map[string]string{"campaign": "c1", "outcome": "kept"}
	if got := legendName("{{campaign}} best", labels); got != "c1 best" {
		t.Errorf("got %q", got)
	}
	if got := legendName("{{ outcome }}/{{missing}}", labels); got != "kept/" {
		t.Errorf("got %q", got)
	}
	if got := legendName("", labels); got != "value" {
		t.Errorf("got %q", got)
	}
}

func TestRegexValue(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"toy-h100-cpu"}, "toy-h100-cpu"},
		{[]string{"a.b", "c"}, `(a\\.b|c)`},
	} {
		if got, err := RegexValue(c.in); err != nil || got != c.want {
			t.Errorf("RegexValue(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := RegexValue(nil); err == nil {
		t.Error("want an error without values")
	}
}

// TestScrapeConfig: the test configuration keeps the deploy jobs and the
// profile label, with the test's addresses and interval.
func TestScrapeConfig(t *testing.T) {
	deploy := []byte(`
global: {scrape_interval: 15s}
rule_files: [alerts.yml]
scrape_configs:
  - job_name: scheduler
    static_configs: [{targets: ["scheduler:8080"]}]
  - job_name: gpuworker
    scrape_interval: 30s
    static_configs:
      - targets: ["gpuworker-0:9101"]
        labels: {profile: gpu}
  - job_name: prometheus
    static_configs: [{targets: ["localhost:9090"]}]
`)
	out, err := ScrapeConfig(deploy, TestTargets{Scheduler: "127.0.0.1:1", Workers: []string{"127.0.0.1:2", "127.0.0.1:3"},
		Profile: "cpu", Rules: "/abs/alerts.yml", Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			ScrapeInterval string `yaml:"scrape_interval"`
			StaticConfigs  []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Global["scrape_interval"] != "1s" || cfg.Global["evaluation_interval"] != "1s" {
		t.Errorf("global %v", cfg.Global)
	}
	if !slices.Equal(cfg.RuleFiles, []string{"/abs/alerts.yml"}) {
		t.Errorf("rule_files %v", cfg.RuleFiles)
	}
	if len(cfg.ScrapeConfigs) != 2 {
		t.Fatalf("want the scheduler and gpuworker jobs only, got %+v", cfg.ScrapeConfigs)
	}
	w := cfg.ScrapeConfigs[1]
	if w.JobName != JobWorker || w.ScrapeInterval != "" || len(w.StaticConfigs) != 1 ||
		!slices.Equal(w.StaticConfigs[0].Targets, []string{"127.0.0.1:2", "127.0.0.1:3"}) || w.StaticConfigs[0].Labels["profile"] != "cpu" {
		t.Errorf("worker job %+v", w)
	}
	if _, err := ScrapeConfig([]byte("scrape_configs: [{job_name: scheduler}]"), TestTargets{}); err == nil || !strings.Contains(err.Error(), "gpuworker") {
		t.Errorf("want an error for a missing gpuworker job, got %v", err)
	}
}
