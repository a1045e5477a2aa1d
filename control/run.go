package control

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// The one create-and-run path: a campaign is opened (or created) and its
// driver readied on a dispatch.Dispatcher. A run on this machine (amkctl
// autoresearch and loop, the MCP server's loop and autoresearch tools)
// leaves the dispatcher to StartRun, which evaluates in process; a
// scheduler's fleet passes its transport and supervises the run.

// Defaults of a run's length, shared by the command line and the MCP tools.
const (
	// DefaultIterations is the trials autoresearch runs when given neither
	// a trial count nor a wall-clock budget.
	DefaultIterations = 20
	// DefaultLoopBudget is the trials of docs/spec/loop.md's loop (the
	// reference's).
	DefaultLoopBudget = 8
)

// RunOptions is what a run needs besides its campaign.
type RunOptions struct {
	// Dispatcher makes the dispatcher that carries the run's trials once
	// the campaign is open under its lock (a fleet: its view of the shared
	// transport, which then receives the campaign's outcomes); nil:
	// in-process evaluators on this machine, described by the fields below.
	// The dispatcher is closed with the run.
	Dispatcher func(campaignID string) dispatch.Dispatcher
	// Workers is the number of trials kept in flight; 0: the create
	// request's, or runner.DefaultWorkers of the device.
	Workers int

	// The driver's settings (runner.Driver says what each does).
	Progress    *runner.Progress
	TickEvery   time.Duration
	ReportEvery int
	Recorded    func(trial.Outcome)
	Refused     func(trial.Outcome)
	Unbound     func(trial.Outcome)

	// Launcher is the latency source of in-process evaluators: a
	// trial.CPULauncher for predicted latencies, a GPU launcher for
	// measured ones. Its Name, with this host's, is the device name in the
	// campaign's corpus records unless the Local's Env names one.
	Launcher trial.Launcher
	// ReleaseLauncher, when set, is called once when the run closes, or
	// when starting it fails.
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

// Run is a campaign this process drives: it holds the campaign's ledger
// (and so its lock) until Close. While it is open, every event for the
// campaign from this process goes through it (Local.Do): through the
// driver while Drive runs, to the ledger directly between drives.
type Run struct {
	// Ledger is the campaign's ledger, locked for this run.
	Ledger *runner.Ledger
	// Driver drives the campaign; Drive runs it.
	Driver *runner.Driver
	// Created is true when the campaign was created, false when an
	// existing one was resumed.
	Created bool
	// Workers is the number of trials kept in flight.
	Workers int
	// CorpusSkipped counts the malformed lines of the flywheel corpus read
	// to warm-start a new campaign.
	CorpusSkipped int

	local     *Local // the workspace whose runs this run is one of
	mu        sync.Mutex
	driving   chan struct{} // closed when the current Drive ends; nil between drives
	closed    bool
	closeOnce sync.Once
	ended     chan struct{} // closed by Close
	free      func()
}

// errRunClosed: the run ended while an event waited for it.
var errRunClosed = errors.New("the campaign's run has ended")

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

// StartRun creates the campaign a request names, or opens it when it
// exists (resume: trials a killed run left in flight run again), under the
// campaign's lock, and readies its driver. The request is checked as
// Create checks it. A campaign that existed and is done is returned as it
// is (Done); the caller decides what to say. runner.ErrLocked (wrapped in
// ErrConflict) means another process drives the campaign.
func (l *Local) StartRun(req CreateRequest, opts RunOptions) (run *Run, err error) {
	defer opts.releaseOnError(&err)
	if err := req.Check(); err != nil {
		return nil, err
	}
	launcher := ""
	if opts.Dispatcher == nil && opts.Launcher != nil {
		launcher = opts.Launcher.Name()
	}
	start, skipped, err := l.startEvent(context.Background(), req, launcher)
	if err != nil {
		return nil, err
	}
	ledger, created, err := l.Workspace.Create(start)
	if err != nil {
		return nil, lockedConflict(err)
	}
	if err := req.sameWorkload(ledger.Campaign().State().Settings.Workload); !created && err != nil {
		_ = ledger.Close()
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = req.Workers
	}
	run, err = l.newRun(ledger, created, opts)
	if run != nil {
		run.CorpusSkipped = skipped
	}
	return run, err
}

// OpenRun opens an existing campaign under its lock and readies its driver
// (a fleet adopting a campaign of its workspace).
func (l *Local) OpenRun(id string, opts RunOptions) (run *Run, err error) {
	defer opts.releaseOnError(&err)
	ledger, err := l.Workspace.Open(id)
	if err != nil {
		return nil, lockedConflict(err)
	}
	return l.newRun(ledger, false, opts)
}

// releaseOnError releases the launcher the options hand over to a run
// when starting it failed.
func (o RunOptions) releaseOnError(err *error) {
	if *err != nil && o.ReleaseLauncher != nil {
		o.ReleaseLauncher()
	}
}

// lockedConflict wraps a campaign held by another process as a conflict
// (still runner.ErrLocked to errors.Is).
func lockedConflict(err error) error {
	if errors.Is(err, runner.ErrLocked) {
		return Errorf(ErrConflict, "%w", err)
	}
	return err
}

// newRun readies the driver of an opened ledger and registers the run; on
// failure the ledger and the dispatcher are closed.
func (l *Local) newRun(ledger *runner.Ledger, created bool, opts RunOptions) (*Run, error) {
	device := ledger.Campaign().State().Device
	workers := opts.Workers
	if workers <= 0 {
		workers = runner.DefaultWorkers(device)
	}
	var disp dispatch.Dispatcher
	var wedged <-chan struct{}
	if opts.Dispatcher != nil {
		disp = opts.Dispatcher(ledger.ID())
	} else {
		models := opts.Models
		if models == nil {
			models = l.NewModelCache()
		}
		var eval dispatch.Evaluator
		eval, wedged = DeviceEvaluator(device, trial.Options{Launcher: opts.Launcher, Models: models, Version: l.Env.AMKVersion}, opts.Log)
		disp = dispatch.NewLocal(workers, eval)
	}
	release := opts.ReleaseLauncher
	if release == nil {
		release = func() {}
	}
	run := &Run{Ledger: ledger, Created: created, Workers: workers, local: l, ended: make(chan struct{}),
		Driver: &runner.Driver{Ledger: ledger, Dispatcher: disp, Workers: workers, Now: l.Now, Progress: opts.Progress,
			TickEvery: opts.TickEvery, ReportEvery: opts.ReportEvery, Recorded: opts.Recorded, Refused: opts.Refused,
			Unbound: opts.Unbound}}
	id := ledger.ID()
	l.mu.Lock()
	if l.runs == nil {
		l.runs = map[string]*Run{}
	}
	if l.runs[id] != nil { // the lock makes this impossible; never two runs of one campaign
		l.mu.Unlock()
		_ = disp.Close()
		_ = ledger.Close()
		return nil, Errorf(ErrConflict, "campaign %s is already running in this process", id)
	}
	l.runs[id] = run
	l.mu.Unlock()
	run.free = func() {
		l.mu.Lock()
		delete(l.runs, id)
		l.mu.Unlock()
		_ = disp.Close()
		_ = ledger.Close()
		release()
	}
	if wedged != nil && opts.OnWedge != nil {
		go func() {
			select {
			case <-wedged:
				opts.OnWedge()
			case <-run.ended:
			}
		}()
	}
	return run, nil
}

// ID is the campaign's id.
func (r *Run) ID() string { return r.Ledger.ID() }

// Done is true when the run found its campaign existing and done: there is
// nothing to run until it is reopened.
func (r *Run) Done() bool {
	return !r.Created && r.Ledger.Campaign().Status() == campaign.StatusDone
}

// Reopen makes the run's done campaign live again, so that the next Drive
// adds experiments to it: the operator command reopen as every front sends
// it (Campaigns.Command, which the run's Local applies through the run),
// with note and with the campaign's budget and move-on criteria unchanged.
// The budget is the campaign's total, so a campaign whose budget is spent
// stays done: the refusal (ErrConflict) says what budget to give. A run
// whose campaign is not done is refused the same way.
func (r *Run) Reopen(ctx context.Context, note string) (CommandResponse, error) {
	cs := New(r.local)
	cs.Now = r.local.Now
	return cs.Command(ctx, r.ID(), campaign.OpReopen, CommandRequest{Note: note})
}

// Drive runs the driver (runner.Driver.Run) within lim until ctx ends;
// events from this process go through it meanwhile. Drives of one run
// follow each other (a fleet restarts a failed one); one at a time.
func (r *Run) Drive(ctx context.Context, lim runner.Limits) (runner.RunSummary, error) {
	r.mu.Lock()
	if r.closed || r.driving != nil {
		r.mu.Unlock()
		return runner.RunSummary{}, errors.New("the run is closed or already driving")
	}
	done := make(chan struct{})
	r.driving = done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.driving = nil
		close(done)
		r.mu.Unlock()
	}()
	if err := r.heal(); err != nil {
		return runner.RunSummary{}, err
	}
	return r.Driver.Run(ctx, lim)
}

// Stalled is why the campaign's ledger cannot be written (a full or
// read-only disk), nil while it can: its driver stops, and each later
// Drive or Do first tries to load the ledger again (runner.Ledger.Heal).
func (r *Run) Stalled() error { return r.Ledger.Broken() }

// heal makes a ledger a failed write stopped writable again, if the disk
// now allows (runner.Ledger.Heal); the error says the campaign is stalled.
func (r *Run) heal() error {
	if r.Ledger.Broken() == nil {
		return nil
	}
	if err := r.Ledger.Heal(); err != nil {
		return Errorf(ErrUnavailable, "campaign %s is stalled: its ledger cannot be written (%v); it resumes by itself once the disk allows", r.ID(), err)
	}
	return nil
}

// Do applies an event to the run's campaign: through the driver while it
// drives, to the ledger directly between drives. errRunClosed means the
// run ended first.
func (r *Run) Do(ctx context.Context, ev campaign.Event) (campaign.Decision, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return campaign.Decision{}, errRunClosed
		}
		done := r.driving
		if done == nil {
			// No drive can start meanwhile: it needs r.mu.
			if err := r.heal(); err != nil {
				r.mu.Unlock()
				return campaign.Decision{}, err
			}
			dec, err := r.Ledger.Apply(ev)
			r.mu.Unlock()
			return dec, err
		}
		r.mu.Unlock()
		dctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-done:
				cancel()
			case <-dctx.Done():
			}
		}()
		dec, err := r.Driver.Do(dctx, ev)
		ended := ctx.Err() == nil && dctx.Err() != nil // the drive ended, not the caller
		cancel()
		if err != nil && ended {
			continue // the drive ended before taking the event: apply it after it
		}
		return dec, err
	}
}

// Close stops the evaluators and releases the campaign's lock and the
// launcher; the campaign stays resumable. It may be called more than once.
func (r *Run) Close() {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.ended)
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
	dog := dispatch.NewWatchdog(eval, dispatch.WatchdogOptions{Limit: dispatch.DefaultTrialTimeout, Log: log})
	return dog.Evaluate, dog.Wedged()
}
