package deploytest

import (
	"fmt"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"
)

// Job names of deploy/prometheus.yml that the dashboards and alert rules
// rely on.
const (
	JobScheduler = "scheduler"
	JobWorker    = "gpuworker"
)

// TestTargets are what a test Prometheus scrapes and how often.
type TestTargets struct {
	Scheduler string   // host:port of the scheduler's /metrics
	Workers   []string // host:port of each worker's /metrics
	Profile   string   // the workers' profile label (deploy/prometheus.yml: gpu or cpu)
	Rules     string   // absolute path of a rule file to load; empty for none
	Interval  time.Duration
}

// ScrapeConfig derives a test configuration from deploy/prometheus.yml
// (deploy): its scheduler and gpuworker jobs with the test's addresses and
// the same profile label, other jobs dropped, scrapes and rule evaluations
// every Interval.
func ScrapeConfig(deploy []byte, t TestTargets) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(deploy, &cfg); err != nil {
		return nil, err
	}
	iv := t.Interval.String()
	cfg["global"] = map[string]any{"scrape_interval": iv, "evaluation_interval": iv, "scrape_timeout": iv}
	delete(cfg, "rule_files")
	if t.Rules != "" {
		cfg["rule_files"] = []string{t.Rules}
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	var kept []any
	var found []string
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("scrape_configs entry %v is not a mapping", j)
		}
		name, _ := job["job_name"].(string)
		switch name {
		case JobScheduler:
			job["static_configs"] = []any{map[string]any{"targets": []string{t.Scheduler}}}
		case JobWorker:
			if !hasTargetLabel(job, "profile") {
				return nil, fmt.Errorf("job %s of the deploy configuration labels no target with profile", name)
			}
			job["static_configs"] = []any{map[string]any{"targets": t.Workers,
				"labels": map[string]any{"profile": t.Profile}}}
		default:
			continue
		}
		delete(job, "scrape_interval")
		delete(job, "scrape_timeout")
		found = append(found, name)
		kept = append(kept, job)
	}
	for _, want := range []string{JobScheduler, JobWorker} {
		if !slices.Contains(found, want) {
			return nil, fmt.Errorf("the deploy configuration has no %s job", want)
		}
	}
	cfg["scrape_configs"] = kept
	return yaml.Marshal(cfg)
}

// hasTargetLabel reports whether every static config of job sets label.
func hasTargetLabel(job map[string]any, label string) bool {
	statics, _ := job["static_configs"].([]any)
	for _, s := range statics {
		sc, _ := s.(map[string]any)
		labels, _ := sc["labels"].(map[string]any)
		if _, ok := labels[label]; !ok {
			return false
		}
	}
	return len(statics) > 0
}
