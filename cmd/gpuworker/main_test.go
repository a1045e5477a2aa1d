package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/daemon"
	"github.com/amk-dev/amk/internal/proctest"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// TestMain lets a test re-execute this binary as the real gpuworker.
func TestMain(m *testing.M) {
	if os.Getenv("AMK_GPUWORKER_EXEC") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// syncBuffer collects a daemon's log.
type syncBuffer = proctest.LogBuffer

var namespaces atomic.Int64

// workerDaemon is one in-process gpuworker.
type workerDaemon struct {
	metrics string
	logs    *syncBuffer
	stop    context.CancelFunc
	code    chan int
}

// startDaemon runs the worker with eval until the test ends or stop.
func startDaemon(t *testing.T, srv *redistest.Server, ns string, eval func(context.Context, trial.Spec, trial.Options) trial.Outcome, extra ...string) *workerDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &workerDaemon{logs: &syncBuffer{}, stop: cancel, code: make(chan int, 1)}
	ready := make(chan string, 1)
	args := append([]string{"--redis", srv.Addr, "--namespace", ns, "--target", "h200", "--device", "cpu",
		"--metrics-listen", "127.0.0.1:0", "--shutdown-grace", "200ms"}, extra...)
	go func() {
		d.code <- run(ctx, args, d.logs, deps{evaluate: eval, stopGrace: 300 * time.Millisecond,
			ready: func(addr string) { ready <- addr }})
	}()
	select {
	case d.metrics = <-ready:
	case c := <-d.code:
		t.Fatalf("gpuworker exited with %d before serving:\n%s", c, d.logs)
	case <-time.After(15 * time.Second):
		t.Fatalf("gpuworker did not start:\n%s", d.logs)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.code:
		case <-time.After(15 * time.Second):
			t.Errorf("gpuworker did not stop")
		}
	})
	return d
}

// exit stops the daemon and returns its exit status.
func (d *workerDaemon) exit(t *testing.T) int {
	t.Helper()
	d.stop()
	select {
	case c := <-d.code:
		d.code <- c // for cleanup
		return c
	case <-time.After(15 * time.Second):
		t.Fatal("gpuworker did not stop")
	}
	return -1
}

func (d *workerDaemon) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + d.metrics + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func dispatcher(t *testing.T, srv *redistest.Server, ns string) *redisq.Dispatcher {
	t.Helper()
	d, err := redisq.NewDispatcher(context.Background(), redisq.DispatcherOptions{Conn: redisq.Conn{Addr: srv.Addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func await(t *testing.T, d *redisq.Dispatcher) trial.Outcome {
	t.Helper()
	select {
	case o := <-d.Outcomes():
		return o
	case <-time.After(15 * time.Second):
		t.Fatal("no outcome")
	}
	return trial.Outcome{}
}

func verdict(ctx context.Context, spec trial.Spec, _ trial.Options) trial.Outcome {
	ok, lat := true, 42.0
	return trial.Outcome{Verdict: &trial.Verdict{Valid: true, Correct: &ok, LatencyUS: &lat}}
}

// hangs until cancelled (a well-behaved evaluation that is too slow).
func hangs(ctx context.Context, spec trial.Spec, _ trial.Options) trial.Outcome {
	<-ctx.Done()
	return trial.Outcome{Failure: &trial.Failure{Class: trial.FailCrash, Message: ctx.Err().Error()}}
}

func ns() string { return fmt.Sprintf("gw%d", namespaces.Add(1)) }

func TestServesTrialsMetricsAndHealth(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	w := startDaemon(t, srv, n, verdict)
	d := dispatcher(t, srv, n)
	for i := range 3 {
		if err := d.Submit(context.Background(), dispatchtest.Spec("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		o := await(t, d)
		if o.Verdict == nil || !strings.Contains(o.Worker, "target=h200 device=cpu") || !strings.Contains(o.Worker, "go=go1.") {
			t.Fatalf("outcome %+v: want a verdict stamped with the worker fingerprint", o)
		}
	}
	if code, body := w.get(t, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	_, body := w.get(t, "/metrics")
	for _, want := range []string{
		`amk_worker_trials_total{device="cpu",outcome="ok",target="h200"} 3`,
		`amk_worker_trials_total{device="cpu",outcome="timeout",target="h200"} 0`,
		`amk_worker_busy{device="cpu",target="h200"} 0`,
		`amk_worker_trial_duration_seconds_count{device="cpu",target="h200"} 3`,
		`amk_worker_stage_duration_seconds_count{device="cpu",stage="lower",target="h200"} `,
		`amk_worker_watchdog_kills_total{device="cpu",target="h200"} 0`,
		`amk_worker_infra_errors_total{device="cpu",target="h200"} 0`,
		`amk_worker_info{device="cpu",device_name=`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code := w.exit(t); code != 0 {
		t.Fatalf("exit status %d after shutdown, want 0:\n%s", code, w.logs)
	}
	if !strings.Contains(w.logs.String(), "fingerprint=") {
		t.Fatalf("startup log lacks the fingerprint:\n%s", w.logs)
	}
}

func TestWatchdogTimesOutAndWorkerMovesOn(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	w := startDaemon(t, srv, n, func(ctx context.Context, spec trial.Spec, o trial.Options) trial.Outcome {
		if spec.TrialID == 1 {
			return hangs(ctx, spec, o)
		}
		return verdict(ctx, spec, o)
	}, "--trial-timeout", "300ms")
	d := dispatcher(t, srv, n)
	slow := dispatchtest.Spec("wd", 1)
	if err := d.Submit(context.Background(), slow); err != nil {
		t.Fatal(err)
	}
	o := await(t, d)
	if o.Failure == nil || o.Failure.Class != trial.FailTimeout || o.Failure.Phase != "watchdog" {
		t.Fatalf("got %+v, want a watchdog timeout", o)
	}
	if err := d.Submit(context.Background(), dispatchtest.Spec("wd", 2)); err != nil {
		t.Fatal(err)
	}
	if o := await(t, d); o.Verdict == nil || o.TrialID != 2 {
		t.Fatalf("got %+v, want trial 2's verdict", o)
	}
	_, body := w.get(t, "/metrics")
	for _, want := range []string{`amk_worker_watchdog_kills_total{device="cpu",target="h200"} 1`, `amk_worker_trials_total{device="cpu",outcome="timeout",target="h200"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestSpecTimeoutOverridesDefault(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	startDaemon(t, srv, n, hangs) // default trial timeout: 10 minutes
	d := dispatcher(t, srv, n)
	spec := dispatchtest.Spec("st", 1)
	spec.TimeoutSeconds = 0.2
	if err := d.Submit(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if o := await(t, d); o.Failure == nil || o.Failure.Class != trial.FailTimeout || !strings.Contains(o.Failure.Message, "200ms") {
		t.Fatalf("got %+v, want a 200ms timeout", o)
	}
}

// An evaluation that ignores cancellation wedges the device: the trial is
// still reported as a timeout, /healthz fails and the worker exits 1.
func TestWedgedDeviceExitsWithFailure(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	stuck := make(chan struct{})
	defer close(stuck)
	w := startDaemon(t, srv, n, func(ctx context.Context, spec trial.Spec, o trial.Options) trial.Outcome {
		<-stuck
		return verdict(ctx, spec, o)
	}, "--trial-timeout", "200ms")
	d := dispatcher(t, srv, n)
	if err := d.Submit(context.Background(), dispatchtest.Spec("wedge", 1)); err != nil {
		t.Fatal(err)
	}
	if o := await(t, d); o.Failure == nil || o.Failure.Class != trial.FailTimeout {
		t.Fatalf("got %+v, want a timeout", o)
	}
	select {
	case code := <-w.code:
		w.code <- code
		if code != 1 {
			t.Fatalf("exit status %d, want 1", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a wedged worker kept running")
	}
	if !strings.Contains(w.logs.String(), "device wedged") {
		t.Fatalf("logs do not say the device is wedged:\n%s", w.logs)
	}
}

// SIGTERM mid-trial: the trial is handed back after the grace period and
// another worker finishes it.
func TestShutdownHandsBackTheTrial(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	started := make(chan struct{}, 1)
	first := startDaemon(t, srv, n, func(ctx context.Context, spec trial.Spec, o trial.Options) trial.Outcome {
		started <- struct{}{}
		return hangs(ctx, spec, o)
	})
	d := dispatcher(t, srv, n)
	if err := d.Submit(context.Background(), dispatchtest.Spec("term", 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("trial never started")
	}
	if code := first.exit(t); code != 0 {
		t.Fatalf("exit status %d, want 0:\n%s", code, first.logs)
	}
	startDaemon(t, srv, n, verdict)
	if o := await(t, d); o.Verdict == nil || o.TrialID != 1 {
		t.Fatalf("got %+v, want the second worker's verdict", o)
	}
}

func TestStartupErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--redis", "127.0.0.1:1", "--target", "h100", "--device", "0", "--metrics-listen", "127.0.0.1:0"}, 1, "CUDA launcher not available in this build"},
		{[]string{"--redis", "127.0.0.1:1", "--target", "h900"}, 2, "target"},
		{[]string{"--target", "h100"}, 2, "redis.addr"},
		{[]string{"--redis", "127.0.0.1:1", "--target", "h100", "--metrics-listen", "127.0.0.1:0"}, 1, "redis"},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"-h"}, 0, "usage: gpuworker"},
	}
	for _, c := range cases {
		var stderr syncBuffer
		code := run(context.Background(), c.args, &stderr, deps{evaluate: verdict})
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("gpuworker %v: exit %d, want %d with %q in:\n%s", c.args, code, c.code, c.want, stderr.String())
		}
	}
}

// The real binary stops cleanly on SIGTERM.
func TestSigtermExitsZero(t *testing.T) {
	srv := redistest.Start(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AMK_GPUWORKER_EXEC=1", "AMK_REDIS_ADDR="+srv.Addr, "AMK_TARGET=h200",
		"AMK_LISTEN=127.0.0.1:0", "AMK_REDIS_NAMESPACE="+ns())
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := proctest.Start(t, cmd); err != nil {
		t.Fatal(err)
	}
	waitfor.Check(t, 15*time.Second, func() error {
		if !strings.Contains(logs.String(), "gpuworker serving") {
			return fmt.Errorf("never served:\n%s", logs.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "gpuworker stopped") {
		t.Fatalf("no clean-stop log line:\n%s", logs.String())
	}
}

// The real pipeline on the CPU device: a predicted-latency verdict.
func TestRealPipelineOnCPU(t *testing.T) {
	srv := redistest.Start(t)
	n := ns()
	startDaemon(t, srv, n, trial.Evaluate)
	d := dispatcher(t, srv, n)
	if err := d.Submit(context.Background(), dispatchtest.Spec("real", 1)); err != nil {
		t.Fatal(err)
	}
	o := await(t, d)
	if o.Verdict == nil || !o.Verdict.Valid || o.Verdict.LatencyKind == nil || *o.Verdict.LatencyKind != trial.KindPredicted {
		t.Fatalf("got %+v (failure %+v), want a valid verdict with a predicted latency", o, o.Failure)
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
