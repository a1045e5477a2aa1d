//go:build unix

package scheduler

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/cputime"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
)

// The fleet scale benchmark: one scheduler (this process: a Fleet over the
// redisq dispatcher, wired as cmd/scheduler wires it) and one redis-server
// on loopback serve many concurrent campaigns and many workers with a no-op
// evaluator. The workers run in a second process (this test binary again,
// TestFleetScaleWorkerProcess), so that this process's CPU time is the
// scheduler's own. docs/results/fleet-scale.md has the figures and the
// commands.

// scaleEnv passes the worker process its settings: "addr namespace
// workers poll-interval".
const scaleEnv = "AMK_FLEET_SCALE_WORKERS"

// scalePollEnv, when set (a Go duration), is the workers' poll interval
// instead of redisq.DefaultPollInterval: what an idle fleet costs Redis
// follows it.
const scalePollEnv = "AMK_FLEET_SCALE_POLL"

// scaleModel is the model every benchmark campaign tunes; the no-op
// evaluator never loads it, the scheduler only reads its config.
const scaleModel, scaleGPU = "toy", "h200"

func BenchmarkFleetScale(b *testing.B) {
	for _, size := range []struct{ campaigns, workers, trials int }{
		// 20 trials a campaign with 20 and 100 campaigns: the scheduler's
		// cost per trial should not depend on how many campaigns it runs.
		{20, 64, 400},
		{100, 64, 2000},
		// 200 trials a campaign: costs that grow with a campaign's history.
		{100, 64, 20000},
	} {
		name := fmt.Sprintf("campaigns=%d/workers=%d/trials=%d", size.campaigns, size.workers, size.trials)
		b.Run(name, func(b *testing.B) {
			for range b.N {
				runFleetScale(b, size.campaigns, size.workers, size.trials)
			}
		})
	}
}

// scaleRun is what one run measured over its window: from the moment a
// tenth of the trials were recorded (campaigns created, connections warm)
// to the last.
type scaleRun struct {
	trials        int
	wall          time.Duration
	schedulerCPU  time.Duration
	redisCPU      time.Duration
	redisMemDelta int64
	latencies     []time.Duration
}

func runFleetScale(b *testing.B, campaigns, workers, trials int) {
	srv := redistest.Start(b)
	const ns = "scale"
	conn := redisq.Conn{Addr: srv.Addr}
	stopWorkers := startWorkerProcess(b, srv.Addr, ns, workers)
	defer stopWorkers()

	// The scheduler, wired as cmd/scheduler does (a discarding text logger
	// at info, so log formatting is part of the cost).
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	disp, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: conn, Namespace: ns, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	view, err := NewRedisView(disp, conn, ns)
	if err != nil {
		b.Fatal(err)
	}
	defer view.Close()
	timed := &timedTransport{Dispatcher: disp, submitted: map[string]time.Time{}}
	probe := newScaleProbe(trials)
	ws, err := runner.OpenWorkspace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	fleet, err := New(Options{Workspace: ws, Transport: timed, Workers: view.Workers, Queues: view.Queues,
		Health: view.Health, Logger: log, Recorded: func(o trial.Outcome) { probe.recorded(timed.since(o)) }})
	if err != nil {
		b.Fatal(err)
	}
	if err := fleet.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer fleet.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()

	// What the idle fleet costs Redis: the workers poll their empty queue.
	idleFrom := redisCPU(b, rdb)
	time.Sleep(3 * time.Second)
	b.ReportMetric(float64(redisCPU(b, rdb)-idleFrom)/float64(3*time.Second)*100, "idle-redis-cpu-%")

	perCampaign := 2 * (trials/campaigns + 1) // more than a campaign will run
	var wg sync.WaitGroup
	for i := range campaigns {
		wg.Go(func() {
			_, _, _, err := fleet.Create(context.Background(), control.CreateRequest{Model: scaleModel, GPU: scaleGPU,
				Device: "cpu", Name: fmt.Sprintf("scale%03d", i), Cold: true, Overnight: true,
				Budget: &campaign.Budget{Iterations: perCampaign}})
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}

	var run scaleRun
	select {
	case <-probe.tenth:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d trials recorded", probe.count(), trials)
	}
	memBefore, redisBefore := redisMemory(b, rdb), redisCPU(b, rdb)
	cpuBefore, wallBefore, countBefore := processCPU(), time.Now(), probe.count()
	select {
	case <-probe.all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d trials recorded", probe.count(), trials)
	}
	run.wall = time.Since(wallBefore)
	run.schedulerCPU = processCPU() - cpuBefore
	run.redisCPU = redisCPU(b, rdb) - redisBefore
	run.redisMemDelta = redisMemory(b, rdb) - memBefore
	run.trials = probe.count() - countBefore
	run.latencies = probe.window(countBefore)
	reportScale(b, run)
	if b.N == 1 {
		describeKeys(b, rdb, ns, probe.count())
	}
}

func reportScale(b *testing.B, r scaleRun) {
	slices.Sort(r.latencies)
	pct := func(p int) float64 {
		if len(r.latencies) == 0 {
			return 0
		}
		return ms(r.latencies[min(len(r.latencies)-1, len(r.latencies)*p/100)])
	}
	n := float64(r.trials)
	b.ReportMetric(n/r.wall.Seconds(), "trials/s")
	b.ReportMetric(float64(r.schedulerCPU.Microseconds())/n, "sched-cpu-us/trial")
	b.ReportMetric(float64(r.redisCPU.Microseconds())/n, "redis-cpu-us/trial")
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
	b.ReportMetric(float64(r.redisMemDelta)/n*10000/(1<<20), "redis-MiB/10k")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timedTransport notes when each trial was first submitted.
type timedTransport struct {
	*redisq.Dispatcher
	mu        sync.Mutex
	submitted map[string]time.Time
}

func (t *timedTransport) Submit(ctx context.Context, spec trial.Spec) error {
	key := dispatch.Key(spec)
	t.mu.Lock()
	if _, ok := t.submitted[key]; !ok {
		t.submitted[key] = time.Now()
	}
	t.mu.Unlock()
	return t.Dispatcher.Submit(ctx, spec)
}

// since is the time from the outcome's first submission until now.
func (t *timedTransport) since(o trial.Outcome) time.Duration {
	key := dispatch.Key(trial.Spec{CampaignID: o.CampaignID, TrialID: o.TrialID})
	t.mu.Lock()
	at, ok := t.submitted[key]
	delete(t.submitted, key)
	t.mu.Unlock()
	if !ok {
		return -1
	}
	return time.Since(at)
}

// scaleProbe collects enqueue→record latencies, in record order.
type scaleProbe struct {
	target     int
	mu         sync.Mutex
	lat        []time.Duration
	tenth, all chan struct{}
}

func newScaleProbe(target int) *scaleProbe {
	return &scaleProbe{target: target, tenth: make(chan struct{}), all: make(chan struct{})}
}

func (p *scaleProbe) recorded(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lat = append(p.lat, d)
	switch len(p.lat) {
	case max(1, p.target/10):
		close(p.tenth)
	case p.target:
		close(p.all)
	}
}

func (p *scaleProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lat)
}

// window is the latencies recorded after the first from, those of trials
// submitted in this run (-1 marks none).
func (p *scaleProbe) window(from int) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, d := range p.lat[from:] {
		if d >= 0 {
			out = append(out, d)
		}
	}
	return out
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	d, _ := cputime.Total()
	return d
}

func redisMemory(b *testing.B, rdb *redis.Client) int64 {
	n, err := redistest.InfoField(context.Background(), rdb, "memory", "used_memory")
	if err != nil {
		b.Fatal(err)
	}
	return int64(n)
}

func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	d, err := redistest.CPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// describeKeys logs what Redis holds after the run, by kind of key, per
// recorded trial.
func describeKeys(b *testing.B, rdb *redis.Client, ns string, recorded int) {
	ctx := context.Background()
	kinds := map[string]int{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch {
		case strings.Contains(k, ":t:"):
			kinds["asynq task hashes"]++
		case strings.Contains(k, ns+":amk:done:"):
			kinds["done markers"]++
		default:
			kinds["other"]++
		}
	}
	b.Logf("after %d recorded trials Redis holds %v keys", recorded, kinds)
	b.Logf("Redis commands by CPU time (whole run, per recorded trial):%s", commandStats(b, rdb, recorded))
}

// commandStats lists the eight Redis commands that took the most CPU,
// from INFO commandstats.
func commandStats(b *testing.B, rdb *redis.Client, recorded int) string {
	stats, err := redistest.CommandStats(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	slices.SortFunc(stats, func(x, y redistest.CommandStat) int { return cmp.Compare(y.Usec, x.Usec) })
	var out strings.Builder
	for _, st := range stats[:min(8, len(stats))] {
		fmt.Fprintf(&out, "\n  %-12s %7.1f calls %8.1f us", st.Name, st.Calls/float64(recorded), st.Usec/float64(recorded))
	}
	return out.String()
}

// startWorkerProcess runs n no-op workers in a child process and returns
// how to stop them.
func startWorkerProcess(b *testing.B, addr, ns string, n int) func() {
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetScaleWorkerProcess$", "-test.bench=^$")
	poll := redisq.DefaultPollInterval
	if v := os.Getenv(scalePollEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration", scalePollEnv, v)
		}
		poll = d
	}
	b.Logf("workers poll every %v", poll)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %s", scaleEnv, addr, ns, n, poll))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if sc.Text() == "workers ready" {
				ok = true
				break
			}
		}
		ready <- ok
		_, _ = io.Copy(io.Discard, stdout)
	}()
	if !<-ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatal("the worker process did not start its workers")
	}
	return func() {
		_ = stdin.Close() // the signal to shut down
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if st := cmd.ProcessState; st != nil {
			b.Logf("worker process: %v CPU", st.UserTime()+st.SystemTime())
		}
	}
}

// TestFleetScaleWorkerProcess is the worker side of BenchmarkFleetScale: it
// does nothing unless that benchmark started it.
func TestFleetScaleWorkerProcess(t *testing.T) {
	settings := os.Getenv(scaleEnv)
	if settings == "" {
		t.Skip("run by BenchmarkFleetScale")
	}
	var addr, ns, pollText string
	var n int
	if _, err := fmt.Sscan(settings, &addr, &ns, &n, &pollText); err != nil {
		t.Fatalf("%s=%q: %v", scaleEnv, settings, err)
	}
	poll, err := time.ParseDuration(pollText)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := noopEvaluator(scaleModel, scaleGPU)
	if err != nil {
		t.Fatal(err)
	}
	var started []*redisq.Worker
	defer func() {
		for _, w := range started {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = w.Shutdown(ctx)
			cancel()
		}
	}()
	for i := range n {
		// The gpuworker's path: the redisq worker over a watchdog.
		dog := dispatch.NewWatchdog(eval, dispatch.WatchdogOptions{Limit: time.Minute})
		w, err := redisq.NewWorker(redisq.WorkerOptions{Conn: redisq.Conn{Addr: addr}, Namespace: ns,
			Target: scaleGPU, Evaluate: dog.Evaluate, Device: "noop", Identity: fmt.Sprintf("noop-%d", i),
			MemoryBytes: 1 << 40, PollInterval: poll})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		started = append(started, w)
	}
	fmt.Println("workers ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes stdin
}

// noopEvaluator answers at once with a valid, correct verdict from the
// device "noop" that ran nothing: its latency, labelled predicted, is a
// number derived from the point, between two and three times the model's
// all-weights floor (every weight byte at spec bandwidth, never below the
// streamed-bytes floor the scheduler checks outcomes against, so that check
// passes) and distinct per point for the proposer.
func noopEvaluator(modelName, gpu string) (dispatch.Evaluator, error) {
	cfg, err := model.Load(modelName)
	if err != nil {
		return nil, err
	}
	target, err := ir.Target(gpu)
	if err != nil {
		return nil, err
	}
	floorUS := target.BandwidthBoundUS(cfg.WeightBytes())
	return func(ctx context.Context, spec trial.Spec) trial.Outcome {
		h := fnv.New32a()
		_, _ = h.Write(spec.Point)
		lat := floorUS * (2 + float64(h.Sum32()%1000)/1000)
		correct, kind := true, trial.KindPredicted
		return trial.Outcome{Verdict: &trial.Verdict{Valid: true, Correct: &correct, LatencyUS: &lat,
			LatencyKind: &kind, Device: "noop", Model: spec.Model, GPU: spec.GPU,
			Notes: []string{"no-op evaluator of the fleet scale benchmark: nothing was run"}}}
	}, nil
}
