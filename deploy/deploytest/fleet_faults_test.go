package deploytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/waitfor"
)

// TestFleetSurvivesAWorkerKillAndARedisRestart runs the real binaries — a
// scheduler and two CPU gpuworkers on a real redis-server with its
// append-only file — through a campaign to its budget while one worker is
// SIGKILLed in the middle of a trial and Redis is restarted. It then checks
// that no verdict was lost and none recorded twice, and that the ledger,
// results.tsv and the scheduler's view agree.
//
// The killed worker's trial is re-offered once its heartbeat has been silent
// for a few seconds (recovery times: docs/results/fleet-faults.md).
func TestFleetSurvivesAWorkerKillAndARedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet fault test with real binaries")
	}
	const budget = 8
	redis := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	bins := BuildCommands(t, "scheduler", "gpuworker")
	ws := t.TempDir()
	schedAddr := FreeAddr(t)
	sched := StartProc(t, "scheduler", []string{"AMK_TOKEN=" + testToken}, bins["scheduler"],
		"--redis", redis.Addr, "--workspace", ws, "--listen", schedAddr, "--log-level", "warn")
	if err := WaitHTTP("http://"+schedAddr+"/healthz", readyWait, sched); err != nil {
		t.Fatalf("scheduler: %v\n%s", err, sched.Output())
	}
	var workers []*Proc
	var metrics []string
	for i := range 2 {
		addr := FreeAddr(t)
		w := StartProc(t, fmt.Sprintf("gpuworker-%d", i), nil, bins["gpuworker"],
			"--redis", redis.Addr, "--target", "h100", "--device", "cpu", "--metrics-listen", addr, "--log-level", "warn")
		if err := WaitHTTP("http://"+addr+"/healthz", readyWait, w); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, w.Output())
		}
		workers, metrics = append(workers, w), append(metrics, addr)
	}
	client, err := api.NewClient("http://"+schedAddr, testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// `small` takes seconds to load on a worker's first trial: a wide window
	// in which to kill it mid-trial.
	created, err := client.Create(ctx, control.CreateRequest{Model: "small", GPU: "h100", Device: "cpu", Cold: true,
		Overnight: true, Workers: 2, Budget: &campaign.Budget{Iterations: budget}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID

	victim := -1
	for deadline := time.Now().Add(readyWait); victim < 0; {
		for i, addr := range metrics {
			if busy(addr) {
				victim = i
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker became busy\n%s", sched.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	workers[victim].Kill()
	t.Logf("SIGKILLed gpuworker-%d in the middle of a trial", victim)
	redis.Restart(t)
	t.Log("restarted redis-server (append-only file kept)")

	var status campaign.StatusReport
	waitfor.Check(t, 4*time.Minute, func() error {
		if status, err = client.Status(ctx, id); err != nil || !controltest.Finished(status) {
			return fmt.Errorf("campaign did not finish: %+v (err %v)\n%s\n%s", status, err, sched.Output(), workers[1-victim].Output())
		}
		return nil
	})

	rows, err := flywheel.ReadRows(filepath.Join(ws, "campaigns", id, "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != budget || status.ExperimentsRun != budget {
		t.Fatalf("%d rows, %d experiments in the scheduler's view, want %d", len(rows), status.ExperimentsRun, budget)
	}
	seen := map[string]bool{}
	for i, r := range rows {
		// The killed worker's trial is re-delivered and evaluated: every
		// trial ends as a verdict, none as a crash.
		if r.Correctness != flywheel.CorrectPass {
			t.Fatalf("row %d is %s/%s: a trial was lost instead of re-delivered", i, r.Tag, r.Correctness)
		}
		if r.Experiment != i+1 || seen[r.ScheduleID] {
			t.Fatalf("row %d: experiment %d, schedule %s (repeated: %v)", i, r.Experiment, r.ScheduleID, seen[r.ScheduleID])
		}
		seen[r.ScheduleID] = true
	}
	sched.Stop() // release the workspace so the ledger can be read as the truth
	wsv, err := runner.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	c, err := wsv.View(id)
	if err != nil {
		t.Fatal(err)
	}
	trials := map[int]bool{}
	for _, p := range c.State().Trajectory {
		if trials[p.Trial] {
			t.Fatalf("trial %d recorded twice", p.Trial)
		}
		trials[p.Trial] = true
	}
	if got := c.State().ExperimentsRun; got != budget || len(trials) != budget {
		t.Fatalf("ledger: %d experiments, %d distinct trials; want %d", got, len(trials), budget)
	}
	if l := c.State(); (l.Best == nil) != (status.BestUS == nil) || (l.Best != nil && l.Best.LatencyUS != *status.BestUS) {
		t.Fatalf("ledger best %+v and scheduler view %v disagree", l.Best, status.BestUS)
	}
}

// busy reports whether a worker's metrics say it is evaluating a trial.
func busy(addr string) bool {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "amk_worker_busy{") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}
