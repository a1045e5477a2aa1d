package deploytest

import (
	"image"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{186, 410, []float64{150, 200, 250, 300, 350, 400, 450}},
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{100, 220, []float64{100, 125, 150, 175, 200, 225}},
	} {
		got, _ := niceTicks(c.lo, c.hi, 5)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%g, %g) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%g, %g) = %v, want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
}

func TestTickLabel(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		unit    string
		want    string
	}{
		{250, 50, "µs", "250µs"},
		{0.4, 0.2, "", "0.4"},
		{1.25, 0.25, "×", "1.25×"},
		{30000, 10000, "%", "30k%"},
		{0, 10000, "", "0"},
		{1e-17, 0.2, "s", "0s"},
	} {
		if got := tickLabel(c.v, c.step, c.unit); got != c.want {
			t.Errorf("tickLabel(%g, %g, %q) = %q, want %q", c.v, c.step, c.unit, got, c.want)
		}
	}
}

func countColour(img *image.RGBA, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if img.RGBAAt(x, y) == c {
				n++
			}
		}
	}
	return n
}

// TestRenderDrawsLines: a solid line, a dashed one (fewer pixels for the
// same path) and a line broken by a missing value.
func TestRenderDrawsLines(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var solid, dashed, broken []Point
	for i := range 60 {
		ts := t0.Add(time.Duration(i) * time.Second)
		solid = append(solid, Point{T: ts, V: 10})
		dashed = append(dashed, Point{T: ts, V: 5})
		v := float64(i)
		if i == 30 {
			v = math.NaN()
		}
		broken = append(broken, Point{T: ts, V: v})
	}
	green, red, blue := Palette[0], Red, Palette[2]
	img := Render("title", "subtitle", []Chart{
		{Title: "a", Lines: []Line{{Name: "solid", Points: solid, Color: green}, {Name: "dashed", Points: dashed, Color: red, Dashed: true}}},
		{Title: "b", Step: true, Lines: []Line{{Name: "broken", Points: broken, Color: blue}}},
	}, 2, 400, 300)
	if got := img.Bounds().Dx(); got != 800 {
		t.Errorf("width %d, want 800", got)
	}
	s, d := countColour(img, green), countColour(img, red)
	if s < 300 {
		t.Errorf("solid line: %d pixels", s)
	}
	if d == 0 || d > s*3/4 {
		t.Errorf("dashed line: %d pixels against %d solid", d, s)
	}
	if countColour(img, blue) < 300 {
		t.Error("the broken line is missing")
	}
	empty := Render("t", "s", []Chart{{Title: "none"}}, 1, 300, 200)
	if countColour(empty, green) != 0 {
		t.Error("a chart without lines drew one")
	}
}

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
