package deploytest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of the compose specification deploy/compose.yaml
// uses.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   any               `yaml:"depends_on"`
	Deploy      struct {
		Resources struct {
			Reservations struct {
				Devices []struct {
					Driver       string   `yaml:"driver"`
					DeviceIDs    []string `yaml:"device_ids"`
					Capabilities []string `yaml:"capabilities"`
				} `yaml:"devices"`
			} `yaml:"reservations"`
		} `yaml:"resources"`
	} `yaml:"deploy"`
}

// mount is one entry of a service's volumes.
type mount struct{ source, target string }

func (s composeService) mounts() []mount {
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		out = append(out, mount{source: parts[0], target: parts[1]})
	}
	return out
}

func (s composeService) mountOf(target string) (string, bool) {
	for _, m := range s.mounts() {
		if m.target == target {
			return m.source, true
		}
	}
	return "", false
}

func loadCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	dir := deployDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c, dir
}

// workerServices lists the worker services of a profile, sorted.
func workerServices(c composeFile, profile string) []string {
	var names []string
	for name, s := range c.Services {
		if slices.Contains(s.Profiles, profile) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestComposeServices: the stack's services exist with the right images,
// build contexts, profiles and Redis persistence.
func TestComposeServices(t *testing.T) {
	c, dir := loadCompose(t)
	for _, want := range []string{"redis", "scheduler", "prometheus", "grafana"} {
		s, ok := c.Services[want]
		if !ok {
			t.Fatalf("compose.yaml has no %s service", want)
		}
		if len(s.Profiles) != 0 {
			t.Errorf("%s must run in every profile, has profiles %v", want, s.Profiles)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		if s.Build != nil {
			ctx := filepath.Join(dir, s.Build.Context)
			if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
				t.Errorf("service %s: build context %s is not the module root", name, s.Build.Context)
			}
			checkDockerfile(t, name, ctx, s.Build.Dockerfile)
		} else if tag := s.Image[strings.LastIndex(s.Image, ":")+1:]; !strings.Contains(s.Image, ":") || tag == "latest" {
			t.Errorf("service %s: image %s must be pinned to a version", name, s.Image)
		}
	}
	redis := c.Services["redis"]
	if i := slices.Index(redis.Command, "--appendonly"); i < 0 || i+1 >= len(redis.Command) || redis.Command[i+1] != "yes" {
		t.Errorf("redis must run with --appendonly yes, command %v", redis.Command)
	}
	if src, ok := redis.mountOf("/data"); !ok || c.Volumes == nil || !hasKey(c.Volumes, src) {
		t.Errorf("redis /data must be a named volume, mounts %v", redis.Volumes)
	}
	if src, ok := c.Services["scheduler"].mountOf("/var/lib/amk"); !ok || !hasKey(c.Volumes, src) {
		t.Errorf("the scheduler's workspace must be on a named volume, mounts %v", c.Services["scheduler"].Volumes)
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// goBuildPackage finds the package a Dockerfile builds.
var goBuildPackage = regexp.MustCompile(`go build .*?(\./cmd/[a-z]+)`)

// checkDockerfile: the Dockerfile exists, copies files that exist and builds
// a command of the module.
func checkDockerfile(t *testing.T, service, ctx, dockerfile string) {
	t.Helper()
	path := filepath.Join(ctx, dockerfile)
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("service %s: %v", service, err)
		return
	}
	defer f.Close()
	built := ""
	var text strings.Builder
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		text.WriteString(strings.TrimSuffix(line, `\`) + " ")
		if !strings.HasSuffix(line, `\`) {
			text.WriteString("\n")
		}
		fields := strings.Fields(line)
		if len(fields) > 2 && fields[0] == "COPY" && !strings.HasPrefix(fields[1], "--from") {
			for _, src := range fields[1 : len(fields)-1] {
				if src == "." || strings.HasPrefix(src, "--") {
					continue
				}
				if _, err := os.Stat(filepath.Join(ctx, src)); err != nil {
					t.Errorf("%s copies %s, which is not in the repository", dockerfile, src)
				}
			}
		}
	}
	if m := goBuildPackage.FindStringSubmatch(text.String()); m != nil {
		built = m[1]
	}
	if built == "" {
		t.Errorf("%s builds no ./cmd package", dockerfile)
		return
	}
	if _, err := os.Stat(filepath.Join(ctx, built, "main.go")); err != nil {
		t.Errorf("%s builds %s, which does not exist", dockerfile, built)
	}
	if strings.Contains(dockerfile, "cuda") != strings.Contains(text.String(), "-tags cuda") {
		t.Errorf("%s: only the CUDA variant builds with -tags cuda", dockerfile)
	}
}

// TestComposeWorkers: one GPU worker service per reserved GPU (profile gpu,
// the CUDA image), CPU workers in profile cpu, all on port 9101.
func TestComposeWorkers(t *testing.T) {
	c, _ := loadCompose(t)
	gpu, cpu := workerServices(c, "gpu"), workerServices(c, "cpu")
	if len(gpu) == 0 || len(cpu) < 2 {
		t.Fatalf("want GPU workers in profile gpu and at least two CPU workers in profile cpu, got %v and %v", gpu, cpu)
	}
	devices := map[string]string{}
	for _, name := range gpu {
		s := c.Services[name]
		devs := s.Deploy.Resources.Reservations.Devices
		if len(devs) != 1 || devs[0].Driver != "nvidia" || len(devs[0].DeviceIDs) != 1 || !slices.Contains(devs[0].Capabilities, "gpu") {
			t.Errorf("%s must reserve exactly one GPU (driver nvidia, one device id, capability gpu): %+v", name, devs)
			continue
		}
		id := devs[0].DeviceIDs[0]
		if other, dup := devices[id]; dup {
			t.Errorf("%s and %s reserve the same GPU %s", other, name, id)
		}
		devices[id] = name
		if s.Environment["AMK_DEVICE"] != "0" {
			t.Errorf("%s: the container sees its one GPU as device 0; AMK_DEVICE is %q", name, s.Environment["AMK_DEVICE"])
		}
		if s.Build == nil || !strings.Contains(s.Build.Dockerfile, "cuda") {
			t.Errorf("%s must build the CUDA worker image", name)
		}
	}
	for _, name := range cpu {
		s := c.Services[name]
		if s.Environment["AMK_DEVICE"] != "cpu" || len(s.Deploy.Resources.Reservations.Devices) != 0 {
			t.Errorf("%s must evaluate on the CPU without reserving a GPU", name)
		}
		if s.Build == nil || strings.Contains(s.Build.Dockerfile, "cuda") {
			t.Errorf("%s must build the CPU worker image", name)
		}
	}
	for _, name := range append(gpu, cpu...) {
		s := c.Services[name]
		if s.Environment["AMK_REDIS_ADDR"] != "redis:6379" || s.Environment["AMK_TARGET"] == "" {
			t.Errorf("%s: needs AMK_REDIS_ADDR=redis:6379 and a target, env %v", name, s.Environment)
		}
		if port(s.Environment["AMK_LISTEN"]) != "9101" {
			t.Errorf("%s: metrics must listen on :9101 (prometheus.yml scrapes it), AMK_LISTEN=%q", name, s.Environment["AMK_LISTEN"])
		}
	}
}

func port(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return p
}

// TestComposePortsAndMounts: published ports are bound to loopback and match
// what the service listens on; bind mounts name files of the repository;
// named volumes are declared.
func TestComposePortsAndMounts(t *testing.T) {
	c, dir := loadCompose(t)
	listens := map[string]string{"scheduler": port(c.Services["scheduler"].Environment["AMK_LISTEN"]),
		"prometheus": "9090", "grafana": "3000"}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s publishes %q; bind published ports to 127.0.0.1", name, p)
				continue
			}
			if want := listens[name]; want == "" || parts[2] != want {
				t.Errorf("%s publishes container port %s, but listens on %q", name, parts[2], want)
			}
		}
		for _, m := range s.mounts() {
			switch {
			case strings.HasPrefix(m.source, "."):
				if _, err := os.Stat(filepath.Join(dir, m.source)); err != nil {
					t.Errorf("%s mounts %s, which is not in the repository", name, m.source)
				}
			case !hasKey(c.Volumes, m.source):
				t.Errorf("%s mounts volume %s, which is not declared", name, m.source)
			}
		}
	}
	if listens["scheduler"] != "8080" {
		t.Errorf("the scheduler must listen on :8080 (prometheus.yml scrapes it), AMK_LISTEN=%q", c.Services["scheduler"].Environment["AMK_LISTEN"])
	}
}

// TestComposeMatchesPrometheusAndGrafana: prometheus.yml scrapes the
// scheduler and exactly the worker services, labelled with their profile;
// Prometheus gets its config and rules; Grafana gets the provisioning and
// the dashboards where the provider looks.
func TestComposeMatchesPrometheusAndGrafana(t *testing.T) {
	c, dir := loadCompose(t)
	data, err := os.ReadFile(filepath.Join(dir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]string{} // target -> job/profile
	for _, j := range prom.ScrapeConfigs {
		for _, sc := range j.StaticConfigs {
			for _, tg := range sc.Targets {
				scraped[tg] = j.JobName + "/" + sc.Labels["profile"]
			}
		}
	}
	if scraped["scheduler:8080"] != JobScheduler+"/" {
		t.Errorf("prometheus.yml must scrape scheduler:8080 in job %s; targets %v", JobScheduler, scraped)
	}
	workers := 0
	for _, profile := range []string{"gpu", "cpu"} {
		for _, name := range workerServices(c, profile) {
			workers++
			if got := scraped[name+":9101"]; got != JobWorker+"/"+profile {
				t.Errorf("prometheus.yml must scrape %s:9101 in job %s with profile %s, has %q", name, JobWorker, profile, got)
			}
		}
	}
	n := 0
	for _, v := range scraped {
		if strings.HasPrefix(v, JobWorker+"/") {
			n++
		}
	}
	if n != workers {
		t.Errorf("prometheus.yml scrapes %d worker targets, compose.yaml has %d worker services", n, workers)
	}

	p := c.Services["prometheus"]
	if src, _ := p.mountOf("/etc/prometheus/prometheus.yml"); src != "./prometheus.yml" {
		t.Errorf("prometheus must mount ./prometheus.yml at /etc/prometheus/prometheus.yml, mounts %v", p.Volumes)
	}
	for _, rf := range prom.RuleFiles {
		if src, _ := p.mountOf(filepath.Join("/etc/prometheus", rf)); src != "./"+rf {
			t.Errorf("prometheus must mount ./%s next to its config, mounts %v", rf, p.Volumes)
		}
	}

	g := c.Services["grafana"]
	if src, _ := g.mountOf("/etc/grafana/provisioning"); src != "../grafana/provisioning" {
		t.Errorf("grafana must mount ../grafana/provisioning at /etc/grafana/provisioning, mounts %v", g.Volumes)
	}
	data, err = os.ReadFile(filepath.Join(dir, "..", "grafana", "provisioning", "dashboards", "amk.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	if err := yaml.Unmarshal(data, &prov); err != nil || len(prov.Providers) != 1 {
		t.Fatalf("grafana dashboard provider: %v", err)
	}
	if src, _ := g.mountOf(prov.Providers[0].Options.Path); src != "../grafana/dashboards" {
		t.Errorf("grafana must mount ../grafana/dashboards at the provider's path %s, mounts %v", prov.Providers[0].Options.Path, g.Volumes)
	}
	data, err = os.ReadFile(filepath.Join(dir, "..", "grafana", "provisioning", "datasources", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "url: http://prometheus:9090") {
		t.Error("the Grafana datasource must point at http://prometheus:9090")
	}
}

// TestComposeConfig runs `docker compose config` when a compose tool is
// installed (CI machines have docker without compose or engine; the tests
// above check the file without it).
func TestComposeConfig(t *testing.T) {
	if exec.Command("docker", "compose", "version").Run() != nil {
		t.Skip("docker compose is not available; the YAML checks above cover compose.yaml")
	}
	dir := deployDir(t)
	for _, profile := range []string{"gpu", "cpu"} {
		cmd := exec.Command("docker", "compose", "-f", filepath.Join(dir, "compose.yaml"), "--profile", profile, "config", "--quiet")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker compose --profile %s config: %v\n%s", profile, err, out)
		}
	}
}
