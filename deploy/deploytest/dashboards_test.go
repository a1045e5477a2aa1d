package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/chart"
	"github.com/amk-dev/amk/grafana"
	"github.com/amk-dev/amk/internal/redistest"
)

var (
	runFor   = flag.Duration("dashtest.run", 12*time.Second, "how long the campaign runs under Prometheus before the dashboard queries")
	model    = flag.String("dashtest.model", "toy", "model preset of the dashboard test's campaign")
	picture  = flag.String("dashtest.png", "", "also write the roofline-progress picture to this path")
	rateIntv = flag.Duration("dashtest.rate-interval", 10*time.Second, "the value of $__rate_interval")
)

const (
	scrapeEvery = time.Second
	testTarget  = "h100"
	testToken   = "dashtest-token"
	// readyWait bounds how long the daemons and the first data may take
	// beyond -dashtest.run.
	readyWait = 60 * time.Second
)

// stack is the scheduler and the workers under test.
type stack struct {
	scheduler string // host:port
	workers   []string
	procs     []*Proc
}

func (s stack) logs() string {
	var b strings.Builder
	for _, p := range s.procs {
		out := p.Output()
		if len(out) > 3000 {
			out = "..." + out[len(out)-3000:]
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", p.Name, out)
	}
	return b.String()
}

// startStack starts a scheduler and two CPU workers on redis.
func startStack(t *testing.T, bins map[string]string, redis string) stack {
	t.Helper()
	s := stack{scheduler: FreeAddr(t)}
	sched := StartProc(t, "scheduler", []string{"AMK_TOKEN=" + testToken}, bins["scheduler"],
		"--redis", redis, "--workspace", t.TempDir(), "--listen", s.scheduler, "--log-level", "warn")
	s.procs = append(s.procs, sched)
	if err := WaitHTTP("http://"+s.scheduler+"/healthz", readyWait, sched); err != nil {
		t.Fatalf("scheduler: %v\n%s", err, s.logs())
	}
	for i := range 2 {
		addr := FreeAddr(t)
		w := StartProc(t, fmt.Sprintf("gpuworker-%d", i), nil, bins["gpuworker"],
			"--redis", redis, "--target", testTarget, "--device", "cpu", "--metrics-listen", addr, "--log-level", "warn")
		s.workers = append(s.workers, addr)
		s.procs = append(s.procs, w)
		if err := WaitHTTP("http://"+addr+"/healthz", readyWait, w); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, s.logs())
		}
	}
	return s
}

// createCampaign starts a campaign that does not stop on a plateau and
// returns its id.
func createCampaign(t *testing.T, s stack) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": *model, "gpu": testTarget, "device": "cpu", "overnight": true,
		"workers": 2, "budget": map[string]any{"iterations": 1000000, "minutes": 0}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.scheduler+"/v1/campaigns", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("creating the campaign: %v", err)
	}
	defer resp.Body.Close()
	var created struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode/100 != 2 || created.ID == "" {
		t.Fatalf("creating the campaign: HTTP %d, %v\n%s", resp.StatusCode, err, s.logs())
	}
	return created.ID
}

// scraping is true once Prometheus scrapes the scheduler and both workers
// (its first scrape comes some seconds after it is ready).
var scraping = []string{
	`count(up{job="scheduler"} == 1) == 1`,
	`count(up{job="gpuworker"} == 1) == 2`,
}

// readiness is true once every panel can have data: a best latency and a
// speedup, stage timings, and rates over a few scrapes.
var readiness = []string{
	`amk_scheduler_best_latency_seconds`,
	`amk_scheduler_speedup_ratio`,
	`sum(amk_worker_stage_duration_seconds_count) > 0`,
	`sum(amk_worker_trial_duration_seconds_count) > 0`,
}

// waitFor waits until every expression returns a series and at least
// minRun has passed since start. Past the deadline it reports what is
// missing and returns, so that the panel queries name every gap.
func waitFor(t *testing.T, prom *Prometheus, s stack, exprs []string, start time.Time, minRun time.Duration) {
	t.Helper()
	deadline := time.Now().Add(minRun + readyWait)
	pending := slices.Clone(exprs)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var still []string
		for _, expr := range pending {
			if got, err := prom.Query(ctx, expr, time.Now()); err != nil || len(got) == 0 {
				still = append(still, expr)
			}
		}
		cancel()
		pending = still
		if len(pending) == 0 && time.Since(start) >= minRun {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("no data for %q after %s\n%s\n--- prometheus ---\n%s", pending, time.Since(start).Round(time.Second), s.logs(), prom.Output())
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// panelResult is what one panel's queries returned.
type panelResult struct {
	panel  grafana.Panel
	series map[string][]Series // by refId
}

// TestDashboardsAgainstRealPrometheus is the dashboard test (see the
// package documentation).
func TestDashboardsAgainstRealPrometheus(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus is not installed; run `make deps` (scripts/ensure-deps.sh) to install it")
	}
	dashboards, err := grafana.Load()
	if err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	deployCfg, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	redis := redistest.Start(t)
	bins := BuildCommands(t, "scheduler", "gpuworker")
	s := startStack(t, bins, redis.Addr)
	rules := filepath.Join(root, "deploy", "alerts.yml")
	cfg, err := ScrapeConfig(deployCfg, TestTargets{Scheduler: s.scheduler, Workers: s.workers, Profile: "cpu",
		Rules: rules, Interval: scrapeEvery})
	if err != nil {
		t.Fatal(err)
	}
	prom := StartPrometheus(t, cfg)
	waitFor(t, prom, s, scraping, time.Now(), 0)
	start := time.Now()
	id := createCampaign(t, s)
	waitFor(t, prom, s, readiness, start, *runFor)
	end := time.Now()
	t.Logf("campaign %s (%s on %s) ran %s under Prometheus", id, *model, testTarget, end.Sub(start).Round(time.Second))

	values := map[string]string{
		"__rate_interval": promDuration(*rateIntv),
		"__interval":      promDuration(2 * scrapeEvery),
		"__range":         promDuration(end.Sub(start).Round(time.Second) + time.Second),
	}
	results := map[string][]panelResult{}
	queries := 0
	for _, name := range slices.Sorted(maps.Keys(dashboards)) {
		d := dashboards[name]
		vals := resolveVariables(t, prom, d, maps.Clone(values), start, end)
		for _, p := range d.Panels {
			pr := panelResult{panel: p, series: map[string][]Series{}}
			for _, q := range p.Targets {
				queries++
				pr.series[q.RefID] = runQuery(t, prom, d.Title, p.Title, q, vals, start, end)
			}
			results[name] = append(results[name], pr)
		}
	}
	t.Logf("ran %d panel queries of %d dashboards", queries, len(dashboards))

	checkScrapedNames(t, prom, dashboards, rules, start, end)
	checkRules(t, prom)
	for _, name := range slices.Sorted(maps.Keys(results)) {
		logStats(t, results[name])
	}
	if c := results["campaign-roofline-progress.json"]; len(c) > 0 {
		renderPicture(t, c, id)
	}
}

// promDuration formats d as a PromQL duration in whole seconds.
func promDuration(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

// resolveVariables runs each template variable's label_values query, in
// order (later variables may use earlier ones), and returns the values to
// substitute: every value found, as Grafana writes a multi-valued selection
// into a regex matcher.
func resolveVariables(t *testing.T, prom *Prometheus, d grafana.Dashboard, vals map[string]string, start, end time.Time) map[string]string {
	t.Helper()
	for _, v := range d.Templating.List {
		sel, label, err := grafana.LabelValues(v.Query)
		if err != nil {
			t.Fatalf("%s: variable %s: %v", d.Title, v.Name, err)
		}
		if sel, err = grafana.Expand(sel, vals); err != nil {
			t.Fatalf("%s: variable %s: %v", d.Title, v.Name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := prom.LabelValues(ctx, label, sel, start, end)
		cancel()
		if err != nil || len(got) == 0 {
			t.Errorf("%s: variable $%s (%s) found no values: %v", d.Title, v.Name, v.Query, err)
			vals[v.Name] = ".*"
			continue
		}
		vals[v.Name], _ = RegexValue(got)
		t.Logf("%s: $%s = %s", d.Title, v.Name, vals[v.Name])
	}
	return vals
}

// runQuery runs one panel query the way Grafana does (a range query over
// the test's window, or an instant query at its end) and requires at least
// one series.
func runQuery(t *testing.T, prom *Prometheus, dashboard, panel string, q grafana.Target, vals map[string]string, start, end time.Time) []Series {
	t.Helper()
	expr, err := grafana.Expand(q.Expr, vals)
	if err != nil {
		t.Errorf("%s / %s / %s: %v", dashboard, panel, q.RefID, err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []Series
	if q.Instant {
		got, err = prom.Query(ctx, expr, end)
	} else {
		got, err = prom.QueryRange(ctx, expr, start, end, scrapeEvery)
	}
	switch {
	case err != nil:
		t.Errorf("%s / %s / %s: %v\n  query: %s", dashboard, panel, q.RefID, err, expr)
	case len(got) == 0:
		t.Errorf("%s / %s / %s returned no series\n  query: %s", dashboard, panel, q.RefID, expr)
	}
	return got
}

// selectorName matches a metric name in a selector: an identifier followed
// by a label matcher or a range.
var selectorName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]`)

// checkScrapedNames requires every metric a dashboard or an alert rule
// selects to have been scraped.
func checkScrapedNames(t *testing.T, prom *Prometheus, dashboards map[string]grafana.Dashboard, rulesPath string, start, end time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names, err := prom.LabelValues(ctx, "__name__", "", start, end)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string][]string{}
	for _, d := range dashboards {
		for _, q := range grafana.Queries(d) {
			for _, m := range selectorName.FindAllStringSubmatch(q.Expr, -1) {
				users[m[1]] = append(users[m[1]], d.Title+" / "+q.Panel)
			}
		}
	}
	for _, g := range readRules(t, rulesPath).Groups {
		for _, r := range g.Rules {
			for _, m := range selectorName.FindAllStringSubmatch(r.Expr, -1) {
				users[m[1]] = append(users[m[1]], "alert "+r.Alert)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(users)) {
		if !slices.Contains(names, n) {
			t.Errorf("metric %s was never scraped from the scheduler or the workers; used by %s", n, strings.Join(slices.Compact(users[n]), ", "))
		}
	}
	t.Logf("checked that the %d metric names the dashboards and alerts select were scraped", len(users))
}

// checkRules requires every alert rule to have evaluated without error on
// the real series.
func checkRules(t *testing.T, prom *Prometheus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rules, err := prom.Rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Error("Prometheus loaded no rules from deploy/alerts.yml")
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
		}
	}
}

// logStats logs what the stat panels show: the figures a user would see.
func logStats(t *testing.T, panels []panelResult) {
	t.Helper()
	for _, pr := range panels {
		if pr.panel.Type != "stat" {
			continue
		}
		var shown []string
		for _, q := range pr.panel.Targets {
			for _, s := range pr.series[q.RefID] {
				v := s.Points[len(s.Points)-1].V
				shown = append(shown, fmt.Sprintf("%s=%.4g", legendName(q.LegendFormat, s.Labels), v))
			}
		}
		t.Logf("stat %q: %s", pr.panel.Title, strings.Join(shown, ", "))
	}
}

// renderPicture draws the campaign dashboard's time-series panels from the
// query results (package chart, as PNG), checks the PNG, and writes it where
// -dashtest.png says.
func renderPicture(t *testing.T, panels []panelResult, campaign string) {
	t.Helper()
	t0, t1 := sampleSpan(panels)
	var charts []chart.Chart
	for _, pr := range panels {
		if pr.panel.Type == "timeseries" {
			c := chartOf(pr, t0)
			c.XMax = t1.Sub(t0).Minutes() // one time axis for all
			charts = append(charts, c)
		}
	}
	sub := fmt.Sprintf("campaign %s: %s on %s, 2 CPU workers (predicted latencies), Prometheus scraping every %s",
		campaign, *model, testTarget, scrapeEvery)
	data, err := chart.Grid("Campaign roofline progress", sub, charts, 3, chart.PNG, chart.Size{W: 620, H: 400})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Fatalf("the rendered PNG does not decode: %v", err)
	}
	path := filepath.Join(t.TempDir(), "roofline-progress.png")
	if *picture != "" {
		path = *picture
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rendered %d panels to %s (%d bytes)", len(charts), path, len(data))
}

// sampleSpan is the earliest and the latest sample time of the panels'
// results: the charts' x axis is minutes since the first.
func sampleSpan(panels []panelResult) (t0, t1 time.Time) {
	for _, pr := range panels {
		for _, series := range pr.series {
			for _, s := range series {
				for _, p := range s.Points {
					if t0.IsZero() || p.T.Before(t0) {
						t0 = p.T
					}
					if p.T.After(t1) {
						t1 = p.T
					}
				}
			}
		}
	}
	return t0, t1
}

// chartOf turns a time-series panel's results into a chart, with the
// panel's unit, step interpolation, legends and overrides.
func chartOf(pr panelResult, t0 time.Time) chart.Chart {
	p := pr.panel
	c := chart.Chart{Title: p.Title, Unit: unitSuffix(p.FieldConfig.Defaults.Unit), XLabel: "minutes"}
	c.Step = p.FieldConfig.Defaults.Custom["lineInterpolation"] == "stepAfter"
	if m, ok := p.FieldConfig.Defaults.Custom["axisSoftMin"].(float64); ok {
		c.SoftMin = &m
	}
	if p.FieldConfig.Defaults.Min != nil {
		c.SoftMin = p.FieldConfig.Defaults.Min
	}
	for _, q := range p.Targets {
		for _, s := range pr.series[q.RefID] {
			if allZero(s) && len(pr.series[q.RefID]) > 1 {
				continue // e.g. outcomes that never happened
			}
			l := chart.Line{Name: legendName(q.LegendFormat, s.Labels), Color: chart.Palette[len(c.Lines)%len(chart.Palette)]}
			for _, pt := range s.Points {
				l.Points = append(l.Points, chart.Point{X: pt.T.Sub(t0).Minutes(), Y: pt.V})
			}
			applyOverrides(&l, p.FieldConfig.Overrides)
			c.Lines = append(c.Lines, l)
		}
	}
	scaleSeconds(&c)
	return c
}

// scaleSeconds writes a chart of sub-millisecond seconds in µs, as Grafana
// picks a readable unit for "s".
func scaleSeconds(c *chart.Chart) {
	if c.Unit != "s" {
		return
	}
	peak := 0.0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) {
				peak = math.Max(peak, math.Abs(p.Y))
			}
		}
	}
	if peak == 0 || peak >= 1e-3 {
		return
	}
	c.Unit = "µs"
	for i := range c.Lines {
		for j := range c.Lines[i].Points {
			c.Lines[i].Points[j].Y *= 1e6
		}
	}
}

func unitSuffix(unit string) string {
	switch {
	case unit == "percent":
		return "%"
	case unit == "s" || unit == "µs":
		return unit
	case strings.HasPrefix(unit, "suffix:"):
		return strings.TrimPrefix(unit, "suffix:")
	}
	return ""
}

var legendRef = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legendName expands a Grafana legend format with a series' labels.
func legendName(format string, labels map[string]string) string {
	if format == "" {
		return "value"
	}
	return legendRef.ReplaceAllStringFunc(format, func(ref string) string {
		return labels[legendRef.FindStringSubmatch(ref)[1]]
	})
}

// applyOverrides applies the byRegexp overrides the dashboards use: a dashed
// line style and a fixed colour.
func applyOverrides(l *chart.Line, overrides []grafana.Override) {
	for _, o := range overrides {
		pattern, _ := o.Matcher.Options.(string)
		if o.Matcher.ID != "byRegexp" || !regexp.MustCompile("^(?:"+pattern+")$").MatchString(l.Name) {
			continue
		}
		for _, prop := range o.Properties {
			switch prop.ID {
			case "custom.lineStyle":
				l.Dashed = true
			case "color":
				if m, ok := prop.Value.(map[string]any); ok {
					switch m["fixedColor"] {
					case "red":
						l.Color = chart.Red
					case "text":
						l.Color = chart.Grey
					}
				}
			}
		}
	}
}

func allZero(s Series) bool {
	for _, p := range s.Points {
		if p.V != 0 && !math.IsNaN(p.V) {
			return false
		}
	}
	return true
}
