package control

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/config"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// The runs of a campaign on this machine: amkctl autoresearch and loop, and
// the MCP server's loop and autoresearch tools, all start them here.

// Defaults of a run's length, shared by the command line and the MCP tools.
const (
	// DefaultIterations is the trials autoresearch runs when given neither
	// a trial count nor a wall-clock budget.
	DefaultIterations = 20
	// DefaultLoopBudget is the trials of seed 001's loop (the reference's).
	DefaultLoopBudget = 8
)

// RunOptions is what a run needs besides its campaign's create request.
type RunOptions struct {
	// Launcher is the latency source of the request's device: a
	// trial.CPULauncher for predicted latencies, a GPU launcher for
	// measured ones. Its Name, with this host's, is the device name in the
	// campaign's corpus records unless the Local's Env names one.
	Launcher trial.Launcher
	// ReleaseLauncher, when set, is called once when the run closes, or
	// when StartRun fails.
	ReleaseLauncher func()
	// Models caches models, weights and oracle logits; nil: a cache of the
	// run's own that keeps generated weights in the workspace (WeightsDir).
	Models *trial.ModelCache
	// Log receives the GPU watchdog's messages (kills, a wedged device);
	// nil discards them.
	Log *slog.Logger
	// OnWedge, when set, is called once if the GPU ignores a trial's
	// cancellation before the run closes; the caller then ends the run.
	OnWedge func()
}

// Run is a campaign ready to be driven on this machine: it holds the
// campaign's ledger (and so its lock) until Close.
type Run struct {
	// Ledger is the campaign's ledger, locked for this run.
	Ledger *runner.Ledger
	// Driver drives the campaign over in-process evaluators; set its
	// Progress before calling its Run.
	Driver *runner.Driver
	// Created is true when the campaign was created, false when an
	// existing one was resumed.
	Created bool
	// Workers is the number of trials evaluated at once.
	Workers int
	// CorpusSkipped counts the malformed lines of the flywheel corpus read
	// to warm-start a new campaign.
	CorpusSkipped int

	closeOnce sync.Once
	closed    chan struct{}
	free      func()
}

// WeightsDir is where the workspace keeps the seeded weights its runs
// generate, so that a model's weights are generated once per workspace and
// memory-mapped afterwards.
func (l *Local) WeightsDir() string { return filepath.Join(l.Workspace.Dir, "weights") }

// NewModelCache is a model cache that keeps generated weights in the
// workspace's WeightsDir.
func (l *Local) NewModelCache() *trial.ModelCache {
	models := trial.NewModelCache(0)
	models.UseWeightsDir(l.WeightsDir())
	return models
}

// StartRun creates the campaign req names in the workspace, or opens it
// when it exists (resume: trials a killed run left in flight run again),
// under the campaign's lock, and readies a driver on in-process evaluators:
// req.Workers of them (0: runner.DefaultWorkers of the device), each trial
// on a GPU under the watchdog (DeviceEvaluator). A campaign that existed and
// is done is returned as it is (Done); the caller decides what to say. An
// error of the workspace is returned as it is: runner.ErrLocked when
// another process drives the campaign.
func (l *Local) StartRun(req api.CreateRequest, opts RunOptions) (run *Run, err error) {
	release := opts.ReleaseLauncher
	if release == nil {
		release = func() {}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	start, skipped, err := l.startEvent(req, opts.Launcher.Name())
	if err != nil {
		return nil, err
	}
	ledger, created, err := l.Workspace.Create(start)
	if err != nil {
		return nil, err
	}
	if err := sameWorkload(req, ledger.Campaign().State().Settings.Workload); !created && err != nil {
		_ = ledger.Close()
		return nil, fmt.Errorf("campaign %s: %w", ledger.ID(), err)
	}
	workers := req.Workers
	if workers <= 0 {
		workers = runner.DefaultWorkers(start.Device)
	}
	models := opts.Models
	if models == nil {
		models = l.NewModelCache()
	}
	eval, wedged := DeviceEvaluator(start.Device, trial.Options{Launcher: opts.Launcher, Models: models}, opts.Log)
	disp := dispatch.NewLocal(workers, eval)
	run = &Run{Ledger: ledger, Driver: &runner.Driver{Ledger: ledger, Dispatcher: disp, Workers: workers},
		Created: created, Workers: workers, CorpusSkipped: skipped, closed: make(chan struct{}),
		free: func() {
			_ = disp.Close()
			_ = ledger.Close()
			release()
		}}
	if wedged != nil && opts.OnWedge != nil {
		go func() {
			select {
			case <-wedged:
				opts.OnWedge()
			case <-run.closed:
			}
		}()
	}
	return run, nil
}

// sameWorkload refuses to resume, for a request that names a workload (or
// a batch), a campaign tuned for another one.
func sameWorkload(req api.CreateRequest, has *trial.Workload) error {
	if req.Workload == nil && req.Batch == nil {
		return nil
	}
	want, err := req.ResolvedWorkload()
	if err != nil {
		return err
	}
	switch {
	case has == nil:
		return fmt.Errorf("it checks one decode step at a fixed position, not the workload %s: give another --name", want)
	case !has.Equal(want):
		return fmt.Errorf("it is tuned for %s, not %s: give another --name", has, want)
	}
	return nil
}

// Done is true when the run found its campaign existing and done: there is
// nothing to run until it is reopened.
func (r *Run) Done() bool {
	return !r.Created && r.Ledger.Campaign().Status() == campaign.StatusDone
}

// Close stops the evaluators and releases the campaign's lock and the
// launcher; the campaign stays resumable. It may be called more than once.
func (r *Run) Close() {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.free()
	})
}

// DeviceEvaluator is the trial pipeline on device with opts. On a GPU each
// trial runs under the watchdog the gpuworker uses: one at a time, a
// wall-clock limit per trial, a panic as a crash, and a device that ignores
// a cancellation reported wedged (wedged closes; it is nil on the CPU).
// log receives the watchdog's messages; nil discards them.
func DeviceEvaluator(device schedule.Device, opts trial.Options, log *slog.Logger) (eval dispatch.Evaluator, wedged <-chan struct{}) {
	eval = func(ctx context.Context, spec trial.Spec) trial.Outcome { return trial.Evaluate(ctx, spec, opts) }
	if device != schedule.DeviceCUDA {
		return eval, nil
	}
	dog := dispatch.NewWatchdog(eval, dispatch.WatchdogOptions{Limit: config.DefaultTrialTimeout, Log: log})
	return dog.Evaluate, dog.Wedged()
}

// hostName is this machine's name in device names ("" when unknown).
func hostName() string {
	host, _ := os.Hostname()
	return host
}
