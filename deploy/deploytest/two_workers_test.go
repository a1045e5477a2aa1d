package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/waitfor"
)

// TestTwoWorkersWithDefaultFlagsOnOneHost starts two real gpuworker
// processes on one host without --metrics-listen (the normal one-worker-
// per-device setup): both must come up, serve /metrics on distinct
// addresses, announce them to the scheduler, and appear in its Prometheus
// service discovery. (Whatever holds 127.0.0.1:9101 on the test machine —
// the first worker or another program — the second one moves to a free
// port instead of exiting.)
func TestTwoWorkersWithDefaultFlagsOnOneHost(t *testing.T) {
	redis := redistest.Start(t)
	bins := BuildCommands(t, "scheduler", "gpuworker")
	schedAddr := FreeAddr(t)
	sched := StartProc(t, "scheduler", []string{"AMK_TOKEN=" + testToken}, bins["scheduler"],
		"--redis", redis.Addr, "--workspace", t.TempDir(), "--listen", schedAddr, "--log-level", "warn")
	if err := WaitHTTP("http://"+schedAddr+"/healthz", readyWait, sched); err != nil {
		t.Fatalf("scheduler: %v\n%s", err, sched.Output())
	}
	var procs []*Proc
	for i := range 2 {
		procs = append(procs, StartProc(t, fmt.Sprintf("gpuworker-%d", i), nil, bins["gpuworker"],
			"--redis", redis.Addr, "--target", "h100", "--device", "cpu"))
	}
	var workers []control.Worker
	waitfor.Check(t, readyWait, func() error {
		for i, p := range procs {
			if p.Exited() {
				t.Fatalf("gpuworker-%d exited:\n%s", i, p.Output())
			}
		}
		workers = nil
		getJSON(t, "http://"+schedAddr+"/v1/workers", &workers)
		if len(workers) < 2 {
			return fmt.Errorf("%d workers registered, want 2\n%s\n%s", len(workers), procs[0].Output(), procs[1].Output())
		}
		return nil
	})
	if workers[0].MetricsAddr == "" || workers[0].MetricsAddr == workers[1].MetricsAddr {
		t.Fatalf("metrics addresses %q and %q, want two distinct ones", workers[0].MetricsAddr, workers[1].MetricsAddr)
	}
	for _, w := range workers {
		resp, err := http.Get("http://" + w.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatalf("worker %s: %v", w.ID, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "amk_worker_busy{") {
			t.Fatalf("%s/metrics serves no worker metrics", w.MetricsAddr)
		}
	}
	var groups []api.SDGroup
	getJSON(t, "http://"+schedAddr+"/v1/sd/workers", &groups)
	listed := map[string]bool{}
	for _, g := range groups {
		if len(g.Targets) != 1 || g.Labels["profile"] != "cpu" || g.Labels["amk_target"] != "h100" {
			t.Fatalf("service discovery group %+v", g)
		}
		listed[g.Targets[0]] = true
	}
	for _, w := range workers {
		if !listed[w.MetricsAddr] {
			t.Fatalf("service discovery %+v lacks %s", groups, w.MetricsAddr)
		}
	}

	// A real Prometheus configured as deploy/prometheus-hosts.yml finds and
	// scrapes both workers through the scheduler.
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: %s
    http_sd_configs: [{url: "http://%s/v1/sd/workers", refresh_interval: 1s}]
`, JobWorker, schedAddr)
	prom := StartPrometheus(t, []byte(config))
	waitfor.Check(t, readyWait, func() error {
		up, err := prom.Query(context.Background(), `up{job="`+JobWorker+`",profile="cpu"} == 1`, time.Now())
		if err != nil || len(up) != 2 {
			return fmt.Errorf("Prometheus did not scrape both workers through service discovery: %v %v\n%s", up, err, prom.Output())
		}
		return nil
	})
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
