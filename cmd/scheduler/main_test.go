package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/control/controltest"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/daemon"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/internal/proctest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redisq/redisqtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// The test binary doubles as a scheduler process for the crash test: with
// childEnv set it runs the daemon with the arguments in argsEnv and prints
// "ready ADDR" once it serves.
const (
	childEnv = "AMK_SCHEDULER_TEST_CHILD"
	argsEnv  = "AMK_SCHEDULER_TEST_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &args); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad args:", err)
			os.Exit(2)
		}
		daemon.Main(func(ctx context.Context) int {
			return run(ctx, args, os.Stderr, deps{tickEvery: 50 * time.Millisecond,
				ready: func(addr string) { fmt.Printf("ready %s\n", addr) }})
		})
	}
	os.Exit(m.Run())
}

const testToken = "test-token"

var models = trial.NewModelCache(0)

// startWorkers runs n in-process CPU workers of target h200 on the real
// trial pipeline; delay slows each trial down. It returns the count of
// evaluations started.
func startWorkers(t *testing.T, redisAddr string, n int, delay time.Duration) *atomic.Int64 {
	t.Helper()
	evaluations := new(atomic.Int64)
	for i := range n {
		redisqtest.StartWorker(t, redisq.WorkerOptions{Conn: redisq.Conn{Addr: redisAddr}, Target: "h200", Device: "cpu",
			Identity: fmt.Sprintf("test-worker-%d", i), ShutdownGrace: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond,
			Evaluate: func(ctx context.Context, spec trial.Spec) trial.Outcome {
				evaluations.Add(1)
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return trial.Outcome{Failure: &trial.Failure{Class: trial.FailInfra, Message: "cancelled"}}
				}
				return trial.Evaluate(ctx, spec, trial.Options{Models: models})
			}})
	}
	return evaluations
}

// syncBuffer collects a daemon's log.
type syncBuffer = proctest.LogBuffer

// inProcess runs the scheduler in this process until the test ends; it
// returns the API address and a function that stops it and returns its exit
// code.
func inProcess(t *testing.T, args ...string) (string, func() int, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	code := make(chan int, 1)
	logs := &syncBuffer{}
	go func() {
		code <- run(ctx, args, logs, deps{tickEvery: 50 * time.Millisecond, ready: func(a string) { ready <- a }})
	}()
	var once sync.Once
	result := -1
	stop := func() int {
		once.Do(func() { cancel(); result = <-code })
		return result
	}
	t.Cleanup(func() { stop() })
	select {
	case addr := <-ready:
		return addr, stop, logs
	case c := <-code:
		t.Fatalf("scheduler exited with %d:\n%s", c, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("scheduler did not start:\n%s", logs)
	}
	return "", nil, nil
}

func client(t *testing.T, addr string) *api.Client {
	t.Helper()
	c, err := api.NewClient(addr, testToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitTrialsDrained waits until a target's trial queue has nothing pending,
// scheduled or running.
func waitTrialsDrained(t *testing.T, redisAddr, target string) {
	t.Helper()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: redisAddr})
	defer insp.Close()
	waitfor.Check(t, time.Minute, func() error {
		q, err := insp.GetQueueInfo(redisq.TrialQueue("", target))
		if err != nil || q.Pending != 0 || q.Active != 0 || q.Scheduled != 0 || q.Retry != 0 {
			return fmt.Errorf("the trials of %s did not drain: %+v %v", target, q, err)
		}
		return nil
	})
}

// waitDone polls the API until the campaign is done with nothing in flight.
func waitDone(t *testing.T, c *api.Client, id string) campaign.StatusReport {
	t.Helper()
	return controltest.WaitStatus(t, c, id, 90*time.Second, "the end", controltest.Finished)
}

// checkLedger asserts the ledger holds n experiments numbered 1..n in
// results.tsv, none of them a trial recorded twice, and that the API agreed.
func checkLedger(t *testing.T, wsDir, id string, n int, api campaign.StatusReport) {
	t.Helper()
	ws, err := runner.OpenWorkspace(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d rows in results.tsv, want %d", len(rows), n)
	}
	for i, r := range rows {
		if r.Experiment != i+1 {
			t.Fatalf("results.tsv row %d is experiment %d", i+1, r.Experiment)
		}
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	st := c.State()
	seen := map[int]bool{}
	for _, p := range st.Trajectory {
		if seen[p.Trial] {
			t.Fatalf("trial %d recorded twice", p.Trial)
		}
		seen[p.Trial] = true
	}
	if st.ExperimentsRun != n || len(seen) != n {
		t.Fatalf("ledger: %d experiments, %d distinct trials; want %d", st.ExperimentsRun, len(seen), n)
	}
	if api.ExperimentsRun != st.ExperimentsRun || api.ExperimentsKept != st.ExperimentsKept || api.Status != st.Status {
		t.Fatalf("the API (%d run, %d kept, %s) and the ledger (%d, %d, %s) disagree",
			api.ExperimentsRun, api.ExperimentsKept, api.Status, st.ExperimentsRun, st.ExperimentsKept, st.Status)
	}
	if (api.BestUS == nil) != (st.Best == nil) || (st.Best != nil && *api.BestUS != st.Best.LatencyUS) {
		t.Fatalf("best: API %v, ledger %+v", api.BestUS, st.Best)
	}
}

func toyCampaign(iters, workers int) control.CreateRequest {
	return control.CreateRequest{Model: "toy", GPU: "h200", Cold: true, Overnight: true,
		Budget: &campaign.Budget{Iterations: iters}, Workers: workers}
}

func TestCampaignWithTwoWorkersRunsToItsBudget(t *testing.T) {
	srv := redistest.Start(t)
	evaluations := startWorkers(t, srv.Addr, 2, 0)
	ws := t.TempDir()
	t.Setenv("AMK_TOKEN", testToken)
	addr, stop, logs := inProcess(t, "--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0", "--targets", "h200,h100")
	c := client(t, addr)
	ctx := context.Background()
	resp, err := c.Create(ctx, toyCampaign(12, 2))
	if err != nil || !resp.Created {
		t.Fatalf("create: %+v %v", resp, err)
	}
	st := waitDone(t, c, resp.ID)
	checkLedger(t, ws, resp.ID, 12, st)

	workers, err := c.Workers(ctx)
	if err != nil || len(workers) != 2 {
		t.Fatalf("workers: %+v %v", workers, err)
	}
	for _, w := range workers {
		if w.Target != "h200" || w.Queue != "trials:h200" {
			t.Fatalf("worker %+v", w)
		}
	}
	if n := evaluations.Load(); n != 12 {
		t.Fatalf("workers ran %d evaluations for 12 trials", n)
	}
	queues, err := c.Queues(ctx)
	if err != nil || len(queues) != 2 {
		t.Fatalf("queues: %+v %v", queues, err)
	}
	body := get(t, "http://"+addr+"/metrics")
	for _, name := range append(metrics.SchedulerNames(), metrics.QueueNames()...) {
		if !strings.Contains(body, "\n"+name+"{") && !strings.Contains(body, "\n"+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if want := `amk_scheduler_experiments_total{campaign="toy-h200-cpu",model="toy",target="h200"} 12`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if want := `amk_scheduler_campaign_status{campaign="toy-h200-cpu",model="toy",status="done",target="h200"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	// The web view and the queue monitor beside the API.
	page := get(t, "http://"+addr+"/ui/")
	for _, want := range []string{resp.ID, "done", "trials:h200", `href="/queues/"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the web view lacks %q", want)
		}
	}
	if body := get(t, "http://"+addr+"/queues/api/queues"); !strings.Contains(body, "trials:h200") {
		t.Errorf("the queue monitor does not list trials:h200: %.200s", body)
	}
	if code := stop(); code != daemon.ExitOK {
		t.Fatalf("scheduler exited %d", code)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Fatal("the API token was logged")
	}
	if !strings.Contains(logs.String(), "scheduler stopped") {
		t.Fatalf("no clean stop in the log:\n%s", logs)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, data)
	}
	return string(data)
}

// child is a scheduler in its own process.
type child struct {
	cmd  *exec.Cmd
	addr string
}

func startChild(t *testing.T, logPath string, args ...string) *child {
	t.Helper()
	enc, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", argsEnv+"="+string(enc))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proctest.Start(t, cmd); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- a
			}
		}
	}()
	select {
	case ch.addr = <-ready:
		return ch
	case <-time.After(30 * time.Second):
		logs, _ := os.ReadFile(logPath)
		t.Fatalf("scheduler child did not start:\n%s", logs)
	}
	return nil
}

func TestSchedulerKilledMidCampaignLosesNothing(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	startWorkers(t, srv.Addr, 2, 60*time.Millisecond)
	ws := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "scheduler.log")
	t.Setenv("AMK_TOKEN", testToken)
	args := []string{"--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0"}
	first := startChild(t, logPath, args...)
	c := client(t, first.addr)
	resp, err := c.Create(context.Background(), toyCampaign(18, 3))
	if err != nil {
		t.Fatal(err)
	}
	controltest.WaitStatus(t, c, resp.ID, time.Minute, "5 experiments and a trial in flight", func(st campaign.StatusReport) bool {
		return st.ExperimentsRun >= 5 && len(st.InFlight) > 0
	})
	checkNothingOpenForWriting(t, first.cmd.Process.Pid, ws)
	if err := first.cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown at all
		t.Fatal(err)
	}
	killed := time.Now()
	_ = first.cmd.Wait()
	wsv, _ := runner.OpenWorkspace(ws)
	view, err := wsv.View(resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	left, ranAtKill := len(view.State().InFlight), view.State().ExperimentsRun
	if left == 0 {
		t.Fatal("no trial was in flight when the scheduler died; the test proves nothing")
	}
	// The workers finish those trials while no scheduler runs; their
	// outcomes wait in Redis.
	waitTrialsDrained(t, srv.Addr, "h200")

	started := time.Now()
	second := startChild(t, logPath, args...)
	// The times the second scheduler takes are logged for
	// docs/results/fleet-faults.md, not asserted: adopting the campaign is
	// holding its ledger's lock, the next trial is the first experiment
	// recorded after those of the killed scheduler.
	secondHolder := fmt.Sprintf("pid %d", second.cmd.Process.Pid)
	waitfor.Cond(t, time.Minute, "the second scheduler to adopt the campaign", func() bool {
		holder, held, err := wsv.Driver(resp.ID)
		return err == nil && held && holder == secondHolder
	})
	adopted := time.Now()
	waitfor.Cond(t, time.Minute, "a trial recorded by the second scheduler", func() bool {
		v, err := wsv.View(resp.ID)
		return err == nil && v.State().ExperimentsRun > ranAtKill
	})
	recorded := time.Now()
	c2 := client(t, second.addr)
	st := waitDone(t, c2, resp.ID)
	checkLedger(t, ws, resp.ID, 18, st)
	checkNothingOpenForWriting(t, second.cmd.Process.Pid, ws)
	t.Logf("FIGURE scheduler-kill: %d trial(s) in flight; second scheduler started %.2fs after the kill (once the workers had finished them); "+
		"campaign adopted %.2fs after the kill (%.2fs after the start); next trial recorded %.2fs after the kill (%.2fs after the start)",
		left, started.Sub(killed).Seconds(), adopted.Sub(killed).Seconds(), adopted.Sub(started).Seconds(),
		recorded.Sub(killed).Seconds(), recorded.Sub(started).Seconds())
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.cmd.Wait(); err != nil {
		t.Fatalf("scheduler after SIGTERM: %v", err)
	}
	logs, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logs), "campaign loaded") {
		t.Fatalf("the restarted scheduler did not reload the campaign:\n%s", logs)
	}
	t.Logf("%d trial(s) were in flight when the scheduler was killed", left)
}

// checkNothingOpenForWriting fails the test unless the scheduler with pid,
// looked at a few times, is seen holding no file of its workspace open for
// writing: its ledgers open their files only for the moment of a write (so
// one look may catch a write in progress), which is what lets the
// workspace's disk be remounted read-only and back while it runs.
func checkNothingOpenForWriting(t *testing.T, pid int, ws string) {
	t.Helper()
	waitfor.Check(t, 5*time.Second, func() error {
		files, err := proctest.FilesOpenForWriting(pid, ws)
		if errors.Is(err, errors.ErrUnsupported) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(files) > 0 {
			return fmt.Errorf("the scheduler holds files of its workspace open for writing: %v", files)
		}
		return nil
	})
}

func TestOneSchedulerPerWorkspace(t *testing.T) {
	srv := redistest.Start(t)
	ws := t.TempDir()
	t.Setenv("AMK_TOKEN", testToken)
	inProcess(t, "--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0")
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0"}, &errOut, deps{})
	if code != daemon.ExitFailure || !strings.Contains(errOut.String(), "in use by another scheduler") {
		t.Fatalf("second scheduler: exit %d\n%s", code, errOut.String())
	}
}

func TestGeneratedTokenGuardsTheAPI(t *testing.T) {
	srv := redistest.Start(t)
	ws := t.TempDir()
	t.Setenv("AMK_TOKEN", "")
	addr, _, logs := inProcess(t, "--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0")
	path := filepath.Join(ws, tokenFileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated token file: %v %v", fi, err)
	}
	data, _ := os.ReadFile(path)
	tok := strings.TrimSpace(string(data))
	if strings.Contains(logs.String(), tok) {
		t.Fatal("the generated token was logged")
	}
	anon, _ := api.NewClient(addr, "", nil)
	if _, err := anon.Create(context.Background(), toyCampaign(1, 1)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("create without the token: %v", err)
	}
	authed, _ := api.NewClient(addr, tok, nil)
	if _, err := authed.Create(context.Background(), toyCampaign(1, 1)); err != nil {
		t.Fatalf("create with the generated token: %v", err)
	}
}

func TestUsageAndConfigErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, daemon.ExitOK, "usage: scheduler"},
		{[]string{"--workspace", "x"}, daemon.ExitUsage, "redis.addr"},
		{[]string{"--redis", "127.0.0.1:1"}, daemon.ExitUsage, "workspace"},
		{[]string{"--redis", "127.0.0.1:1", "--workspace", "x", "--listen", "nowhere"}, daemon.ExitUsage, "listen"},
		{[]string{"--redis", "127.0.0.1:1", "--workspace", "x", "extra"}, daemon.ExitUsage, "unexpected argument"},
		{[]string{"--redis", "127.0.0.1:1", "--workspace", "x", "--targets", "v100"}, daemon.ExitUsage, "unknown GPU target"},
	} {
		var errOut bytes.Buffer
		code := run(context.Background(), c.args, &errOut, deps{})
		if code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, errOut.String())
		}
	}
}

func TestRedisUnreachableAtStartFails(t *testing.T) {
	var errOut bytes.Buffer
	t.Setenv("AMK_TOKEN", testToken)
	code := run(context.Background(), []string{"--redis", "127.0.0.1:1", "--workspace", t.TempDir(), "--listen", "127.0.0.1:0"}, &errOut, deps{})
	if code != daemon.ExitFailure || !strings.Contains(errOut.String(), "redis") {
		t.Fatalf("exit %d:\n%s", code, errOut.String())
	}
}

// Redis restarting (with its append-only file) between trials: the
// scheduler, its drivers and the workers reconnect and the campaign goes on.
// (A trial that is active in Redis at the very moment of a restart can stay
// there until asynq's lease recovery requeues it, a minute or so later; that
// path is the transport's and is not timed here.)
func TestRedisRestartDuringACampaign(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	startWorkers(t, srv.Addr, 2, 20*time.Millisecond)
	ws := t.TempDir()
	t.Setenv("AMK_TOKEN", testToken)
	addr, stop, logs := inProcess(t, "--redis", srv.Addr, "--workspace", ws, "--listen", "127.0.0.1:0")
	c := client(t, addr)
	ctx := context.Background()
	resp, err := c.Create(ctx, toyCampaign(16, 2))
	if err != nil {
		t.Fatal(err)
	}
	controltest.WaitStatus(t, c, resp.ID, time.Minute, "4 experiments", controltest.Ran(4))
	if _, err := c.Command(ctx, resp.ID, campaign.OpPause, control.CommandRequest{}); err != nil {
		t.Fatal(err)
	}
	controltest.WaitStatus(t, c, resp.ID, time.Minute, "the paused campaign to drain", func(st campaign.StatusReport) bool { return len(st.InFlight) == 0 })
	srv.Restart(t) // graceful stop (AOF flushed) and a start on the same port
	waitfor.Check(t, time.Minute, func() error {
		if h, err := c.Healthz(ctx); err != nil || h.Status != "ok" {
			return fmt.Errorf("the scheduler did not report healthy after the restart: %+v %v", h, err)
		}
		return nil
	})
	if _, err := c.Command(ctx, resp.ID, campaign.OpResume, control.CommandRequest{}); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, c, resp.ID)
	checkLedger(t, ws, resp.ID, 16, st)
	if code := stop(); code != daemon.ExitOK {
		t.Fatalf("scheduler exit %d:\n%s", code, logs)
	}
}

// TestShortStoredTokenIsReplaced: a stored api-token shorter than 32
// characters is not reused; a long one is.
func TestShortStoredTokenIsReplaced(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, tokenFileName)
	if err := os.WriteFile(path, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, _, replaced, err := generatedToken(ws)
	if err != nil || len(tok) != 48 || !strings.Contains(replaced, "3 characters, fewer than 32") {
		t.Fatalf("short token: %q %q %v", tok, replaced, err)
	}
	if data, _ := os.ReadFile(path); strings.TrimSpace(string(data)) != tok {
		t.Fatalf("the file holds %q, not the new token", data)
	}
	again, _, replaced, err := generatedToken(ws)
	if err != nil || again != tok || replaced != "" {
		t.Fatalf("a generated token was not reused: %q %q %v", again, replaced, err)
	}
}

func TestVersionFlag(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stderr, deps{}); code != daemon.ExitOK || strings.TrimSpace(stderr.String()) == "" {
		t.Fatalf("--version: exit %d, %q", code, stderr.String())
	}
	if code := run(context.Background(), []string{"--no-such-flag"}, io.Discard, deps{}); code != daemon.ExitUsage {
		t.Fatalf("unknown flag: exit %d", code)
	}
}
