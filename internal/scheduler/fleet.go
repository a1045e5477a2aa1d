package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/metrics"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Defaults.
const (
	DefaultWorkers      = 2
	DefaultRescanEvery  = 10 * time.Second
	DefaultRestartDelay = time.Second
	maxRestartDelay     = 30 * time.Second
)

// Options configures a Fleet.
type Options struct {
	Workspace *runner.Workspace
	// Transport carries every campaign's trials; the Fleet shares it
	// through a dispatch.Mux and closes it on Close.
	Transport dispatch.Dispatcher
	// Workers, Queues and Health describe the transport; nil Workers or
	// Queues answer control.ErrUnsupported, nil Health is always healthy.
	Workers func(context.Context) ([]control.Worker, error)
	Queues  func(context.Context) ([]control.Queue, error)
	Health  func(context.Context) error
	// Targets are the GPU targets new campaigns may use (empty: all).
	Targets []string
	// AdoptAll drives every campaign of the workspace. Otherwise the fleet
	// drives the campaigns started through it (Create; they carry its
	// settings file), and leaves the others as they are until one is
	// started through it. A campaign not started through it is driven only
	// for what is left of the limits of the run that last opened it
	// (amkctl autoresearch --iters/--minutes; campaign.LeftOfLastRun), and
	// left as it is once that run's allowance is used up.
	AdoptAll bool
	// DefaultWorkers is a campaign's trials in flight unless its creator
	// chose (DefaultWorkers when zero).
	DefaultWorkers int
	Logger         *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// TickEvery is the drivers' time-criteria check (runner's default when
	// zero); ReportEvery how often drivers rewrite report files.
	TickEvery   time.Duration
	ReportEvery int
	// RescanEvery is how often the workspace is scanned for campaigns no
	// one drives (created or released by another process); negative
	// disables it.
	RescanEvery time.Duration
	// RestartDelay is the first wait before a failed driver runs again
	// (doubling up to 30 s).
	RestartDelay time.Duration
	// Version is stamped into new campaigns' environment.
	Version string
	// Recorded, when set, is called by every campaign's driver with each
	// outcome it recorded durably (runner.Driver.Recorded); it must not
	// block.
	Recorded func(trial.Outcome)
	// Rejected, when set, counts outcomes a campaign refused because they
	// do not answer the spec issued for their trial (reason
	// RejectNotIssued; the metric amk_fleet_outcomes_rejected_total).
	Rejected func(reason string)
	// Unheld, when set, counts outcomes the fleet stopped holding for
	// campaigns it does not drive (MuxOptions bounds them; the metric
	// amk_scheduler_outcomes_unheld_total).
	Unheld func(n int)
	// HoldOutcomes bounds what is held for campaigns not driven here
	// (dispatch's defaults when zero); its Dropped is the fleet's own.
	HoldOutcomes dispatch.MuxOptions
}

// Fleet runs one driver per campaign of a workspace, in daemon mode, over
// one shared transport. It is a control.Backend (Campaigns serves it to the
// HTTP API and the web view) and a control.Fleet.
type Fleet struct {
	opts Options
	log  *slog.Logger
	mux  *dispatch.Mux
	// local is the workspace and the runs the fleet drives: its runs are
	// made by control's one create-and-run path (StartRun, OpenRun), and
	// it reads the campaigns. Its corpus follower parses the corpus once
	// and then what drivers append: a new warm campaign costs what was
	// appended since the last one, not the whole corpus.
	local *control.Local

	floorsMu sync.Mutex
	floors   map[string]floor // campaign id -> its floors and latency kind

	// The warning about outcomes no longer held is rate-limited; unheldMu
	// guards its counts.
	unheldMu     sync.Mutex
	unheldSince  int // outcomes dropped since the last warning
	unheldLogged time.Time
	unheldTotal  int

	// alerted are the alerts logged last (logHealth).
	healthMu sync.Mutex
	alerted  map[string][]campaign.Alert

	aloneMu sync.Mutex
	alone   map[string]bool // campaigns not the fleet's, left alone (logged once)

	// lastOutage is when a health probe of the transport last failed
	// (probeHealth); zero when none has.
	outageMu   sync.Mutex
	lastOutage time.Time

	// mu serialises opening campaigns (adopt, Create) and guards what
	// follows.
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	broken map[string]string // id -> why its ledger could not be opened
	// lifts are the campaigns driven for what is left of another run's
	// limits (--adopt): closing one's channel lifts them (liftLimits).
	lifts  map[string]chan struct{}
	wg     sync.WaitGroup
	closed bool
}

var (
	_ control.Backend = (*Fleet)(nil)
	_ control.Fleet   = (*Fleet)(nil)
	_ control.Drivers = (*Fleet)(nil)
)

// New prepares a fleet; Start loads the campaigns and runs them.
func New(opts Options) (*Fleet, error) {
	if opts.Workspace == nil || opts.Transport == nil {
		return nil, errors.New("scheduler: a workspace and a transport are required")
	}
	if opts.DefaultWorkers <= 0 {
		opts.DefaultWorkers = DefaultWorkers
	}
	if opts.RescanEvery == 0 {
		opts.RescanEvery = DefaultRescanEvery
	}
	if opts.RestartDelay <= 0 {
		opts.RestartDelay = DefaultRestartDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Fleet{opts: opts, log: log, floors: map[string]floor{}, broken: map[string]string{}, alone: map[string]bool{},
		lifts: map[string]chan struct{}{},
		local: &control.Local{Workspace: opts.Workspace, Now: opts.Now,
			Env: flywheel.Env{DeviceName: "fleet", AMKVersion: opts.Version}}}
	hold := opts.HoldOutcomes
	hold.Dropped = f.unheld
	f.mux = dispatch.NewMuxWith(newRecomputing(opts.Transport, f.floorOf), hold)
	return f, nil
}

// Campaigns serves the fleet's campaigns: every campaign operation, over
// the fleet.
func (f *Fleet) Campaigns() *control.Campaigns {
	c := control.New(f)
	c.Now = f.opts.Now
	return c
}

// Start loads every campaign of the workspace and starts its driver; ctx
// ending stops the drivers (as Close does). Campaigns that another process
// holds are skipped now and adopted by a later scan once released.
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	if f.ctx != nil {
		f.mu.Unlock()
		return errors.New("scheduler: already started")
	}
	f.ctx, f.cancel = context.WithCancel(ctx)
	f.mu.Unlock()
	if err := f.scan(); err != nil {
		return err
	}
	if f.opts.RescanEvery > 0 {
		f.every(f.opts.RescanEvery, f.rescan)
	}
	if f.opts.Health != nil {
		// The transport is probed while the fleet runs, and its last
		// failure remembered: a driver can fail only after the transport is
		// back (a Redis client reports its remembered dial error until its
		// own re-dial succeeds, up to a second later), when no restart wait
		// was probing during the outage; the remembered outage lets that
		// driver restart at once (waitRestart).
		f.every(healthProbeEvery, func() { f.probeHealth() })
	}
	return nil
}

// every runs fn every period until the fleet stops.
func (f *Fleet) every(period time.Duration, fn func()) {
	f.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-f.ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	})
}

// probeHealth asks the transport whether it answers and records a failure
// as an outage (outageSince).
func (f *Fleet) probeHealth() bool {
	ctx, cancel := context.WithTimeout(f.ctx, healthProbeEvery)
	err := f.opts.Health(ctx)
	cancel()
	if err != nil && f.ctx.Err() == nil {
		f.outageMu.Lock()
		f.lastOutage = time.Now()
		f.outageMu.Unlock()
	}
	return err == nil
}

// outageSince says whether a probe failed after t.
func (f *Fleet) outageSince(t time.Time) bool {
	f.outageMu.Lock()
	defer f.outageMu.Unlock()
	return f.lastOutage.After(t)
}

// rescan adopts what a scan finds and logs the campaigns' health.
func (f *Fleet) rescan() {
	if err := f.scan(); err != nil {
		f.log.Warn("scanning the workspace failed", "err", err)
	}
	f.logHealth()
}

// scan adopts every campaign of the workspace that no one drives and that
// is the fleet's (Options.AdoptAll: every one).
func (f *Fleet) scan() error {
	ids, err := f.opts.Workspace.IDs()
	if err != nil {
		return fmt.Errorf("listing campaigns: %w", err)
	}
	for _, id := range ids {
		if f.local.Run(id) != nil {
			continue
		}
		// A campaign started through the fleet is driven without limit; one
		// only --adopt brings here, for what its last run was allowed.
		bounded := !hasSettings(f.local.Dir(id))
		if !f.opts.AdoptAll && bounded {
			f.leftAlone(id, notStartedHere)
			continue
		}
		if bounded {
			if why := f.allowanceUsed(id); why != "" {
				f.leftAlone(id, why)
				continue
			}
		}
		if err := f.adopt(id, bounded); err != nil && !errors.Is(err, runner.ErrLocked) {
			f.log.Error("cannot open campaign; skipping it", "campaign", id, "err", err)
		}
	}
	return nil
}

// allowanceUsed says why a campaign whose last run had limits (amkctl
// autoresearch --iters/--minutes) is not driven: that run's allowance is
// used up. It is "" when something is left, or the run had no limits.
func (f *Fleet) allowanceUsed(id string) string {
	var spent bool
	var lim campaign.RunLimits
	var inflight int
	err := f.local.Read(id, func(c *campaign.Campaign) {
		_, spent = c.LeftOfLastRun(f.opts.Now())
		if r := c.State().LastRun; r != nil {
			lim = r.RunLimits
		}
		inflight = len(c.State().InFlight)
	})
	if err != nil || !spent {
		return "" // adopt reports a campaign it cannot open
	}
	return fmt.Sprintf("campaign not started through this scheduler, whose last run (%d iterations, %g minutes; 0 = no limit) used its allowance; left as it is with %d trial(s) in flight (run it again with amkctl autoresearch, or start it through the scheduler to drive it without that limit)",
		lim.Iterations, lim.Minutes, inflight)
}

// notStartedHere is why the fleet leaves a campaign it was not asked to
// drive.
const notStartedHere = "campaign not started through this scheduler; left as it is (start it through the scheduler to drive it, or run the scheduler with --adopt)"

// adopt opens a campaign's ledger and starts its driver. A bounded
// campaign is driven for what is left of its last run's limits
// (supervise).
func (f *Fleet) adopt(id string, bounded bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.local.Run(id) != nil {
		return nil
	}
	workers := readSettings(f.local.Dir(id)).Workers
	if workers <= 0 {
		workers = f.opts.DefaultWorkers
	}
	run, err := f.local.OpenRun(id, f.runOptions(id, workers))
	if err != nil {
		if !errors.Is(err, runner.ErrLocked) {
			f.broken[id] = err.Error()
		}
		return err
	}
	delete(f.broken, id)
	f.aloneMu.Lock()
	delete(f.alone, id)
	f.aloneMu.Unlock()
	f.launch(run, bounded)
	var inflight int
	var status campaign.Status
	run.Ledger.Read(func(c *campaign.Campaign) { inflight, status = len(c.State().InFlight), c.Status() })
	f.log.Info("campaign loaded", "campaign", id, "status", status, "in_flight", inflight, "workers", workers)
	return nil
}

// claim makes a campaign the fleet's: its settings file says so (and how
// many trials it keeps in flight), so a restarted scheduler drives it again.
func (f *Fleet) claim(id string, workers int) {
	if hasSettings(f.local.Dir(id)) {
		return
	}
	if err := writeSettings(f.local.Dir(id), fleetSettings{Workers: workers}); err != nil {
		f.log.Warn("saving the campaign's scheduler settings failed", "campaign", id, "err", err)
	}
	f.aloneMu.Lock()
	delete(f.alone, id)
	f.aloneMu.Unlock()
}

// leftAlone logs, once per campaign until it is adopted, why the fleet
// does not drive it.
func (f *Fleet) leftAlone(id, why string) {
	f.aloneMu.Lock()
	seen := f.alone[id]
	f.alone[id] = true
	f.aloneMu.Unlock()
	if !seen {
		f.log.Info(why, "campaign", id)
	}
}

// Driver says who drives a campaign of the workspace (control.Drivers).
func (f *Fleet) Driver(id string) (control.Driver, error) { return f.local.Driver(id) }

// Drives says whether the fleet drives the campaign.
func (f *Fleet) Drives(id string) bool { return f.local.Run(id) != nil }

// runOptions are the settings of a campaign's run in the fleet: its view
// of the shared transport, the driver's clock, reports and callbacks.
func (f *Fleet) runOptions(id string, workers int) control.RunOptions {
	return control.RunOptions{Dispatcher: f.mux.For, Workers: workers,
		Progress:  runner.NewProgress(&logWriter{log: f.log.With("campaign", id)}, 0),
		TickEvery: f.opts.TickEvery, ReportEvery: f.opts.ReportEvery, Recorded: f.recorded, Refused: f.forget,
		Unbound: f.unbound}
}

// RejectNotIssued is the reason Options.Rejected is given for an outcome a
// campaign refused because it does not answer the spec issued for its
// trial (trial.CheckBound).
const RejectNotIssued = "not_issued"

// unbound is every driver's Unbound: an outcome the campaign refused as
// not answering its trial's spec. A transport that remembers deliveries
// forgets this one, so that the driver's resubmission fetches the trial's
// own outcome (or runs it again); the refusal is counted.
func (f *Fleet) unbound(o trial.Outcome) {
	if t, ok := f.opts.Transport.(undeliverer); ok {
		t.Undeliver(o)
	}
	if f.opts.Rejected != nil {
		f.opts.Rejected(RejectNotIssued)
	}
}

// launch starts a campaign's supervised driver; f.mu is held. A bounded
// run gets the channel that lifts its limits (liftLimits).
func (f *Fleet) launch(run *control.Run, bounded bool) {
	var lift chan struct{}
	if bounded {
		lift = make(chan struct{})
		f.lifts[run.ID()] = lift
	}
	f.wg.Add(1)
	go f.supervise(run, lift)
}

// liftLimits makes a campaign the fleet drives for what is left of another
// run's limits the fleet's own: its driver goes on without them. Nothing
// happens to a campaign driven without limits; f.mu is held.
func (f *Fleet) liftLimits(id string) {
	if lift, ok := f.lifts[id]; ok {
		close(lift)
		delete(f.lifts, id)
		f.log.Info("campaign started through the scheduler: driven on without the limits of its last run", "campaign", id)
	}
}

// forgetLift drops a finished supervisor's lift channel, unless a later
// adoption of the campaign has replaced it.
func (f *Fleet) forgetLift(id string, lift chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lifts[id] == lift {
		delete(f.lifts, id)
	}
}

// forgetter is a transport that keeps state for trials until told they are
// recorded (redisq.Dispatcher.Forget).
type forgetter interface{ Forget(trial.Outcome) }

// recorded is every driver's Recorded: the outcome is durable in its ledger,
// so the transport may drop what it kept to recover it.
func (f *Fleet) recorded(o trial.Outcome) {
	f.forget(o)
	if f.opts.Recorded != nil {
		f.opts.Recorded(o)
	}
}

// forget tells the transport that nothing of o's trial is needed any more:
// its campaign recorded it, or refused it (every driver's Refused: a late
// copy of a recorded trial, a trial it never had in flight), or it belongs
// to no campaign of the workspace.
func (f *Fleet) forget(o trial.Outcome) {
	if t, ok := f.opts.Transport.(forgetter); ok {
		t.Forget(o)
	}
}

// undeliverer is a transport that can deliver an outcome again when the
// trial is resubmitted (redisq.Dispatcher.Undeliver).
type undeliverer interface{ Undeliver(trial.Outcome) }

// unheld is the Mux's Dropped: outcomes held too long (or too many) for
// campaigns that have no driver here. For a campaign of the workspace (held
// by another process, or not adopted yet) the transport is told to forget
// the delivery, so that the campaign, once opened, gets them again when its
// driver resubmits its trials in flight. An outcome of a campaign the
// workspace does not have is not needed by anyone here: the transport
// forgets the trial (a campaign created later under that id gets none of
// its stale outcomes).
func (f *Fleet) unheld(gone []trial.Outcome) {
	t, recoverable := f.opts.Transport.(undeliverer)
	exists := map[string]bool{}
	for _, o := range gone {
		known, seen := exists[o.CampaignID]
		if !seen {
			known = f.opts.Workspace.Exists(o.CampaignID)
			exists[o.CampaignID] = known
		}
		switch {
		case !known:
			f.forget(o)
		case recoverable:
			t.Undeliver(o)
		}
	}
	if f.opts.Unheld != nil {
		f.opts.Unheld(len(gone))
	}
	f.unheldMu.Lock()
	defer f.unheldMu.Unlock()
	f.unheldSince += len(gone)
	f.unheldTotal += len(gone)
	if now := time.Now(); now.Sub(f.unheldLogged) >= unheldLogEvery {
		f.log.Warn("stopped holding outcomes for campaigns not driven here", "outcomes", f.unheldSince,
			"total", f.unheldTotal, "example_campaign", gone[0].CampaignID, "redelivered_on_resubmit", recoverable)
		f.unheldSince, f.unheldLogged = 0, now
	}
}

// unheldLogEvery is the least time between two warnings about outcomes no
// longer held (the metric counts every one).
const unheldLogEvery = time.Minute

// supervise runs a driver until the fleet stops, restarting it with
// backoff when it fails (e.g. the transport is unreachable); a restarted
// driver re-sends the trials its ledger has in flight. A bounded run's
// driver proposes only what is left of the limits of the run that last
// opened the campaign (it records them again, reduced, so that a restart
// or a later scheduler goes on from there) and stops when they are used:
// the campaign is then released and left as it is. One that stops short
// of them (its campaign paused, done, or with nothing left to propose) is
// served from then on as any other, proposing no more than what is left.
// A bounded run has a lift channel (nil otherwise): once it is closed
// (amkctl start, Create), the campaign is driven without limits.
func (f *Fleet) supervise(run *control.Run, lift chan struct{}) {
	defer f.wg.Done()
	id := run.ID()
	bounded := lift != nil
	if bounded {
		defer f.forgetLift(id, lift)
	}
	delay := f.opts.RestartDelay
	serve := !bounded
	for {
		if bounded {
			select {
			case <-lift:
				bounded = false
			default:
			}
		}
		lim := runner.Limits{Daemon: true}
		if bounded {
			var left campaign.RunLimits
			var spent bool
			run.Ledger.Read(func(c *campaign.Campaign) { left, spent = c.LeftOfLastRun(f.opts.Now()) })
			if spent {
				f.log.Info("the allowance of the campaign's last run is used up; released and left as it is", "campaign", id)
				run.Close()
				return
			}
			lim = runner.Limits{Iterations: left.Iterations, Minutes: left.Minutes, Daemon: serve || left.Unlimited(), Lift: lift}
			if !left.Unlimited() {
				f.log.Info("driving what is left of the campaign's last run", "campaign", id, "iterations", left.Iterations, "minutes", left.Minutes)
			}
		}
		began := time.Now()
		_, err := run.Drive(f.ctx, lim)
		if f.ctx.Err() != nil {
			return
		}
		if err == nil && !lim.Daemon {
			serve = true // the next round releases a spent campaign, or serves it
			continue
		}
		if time.Since(began) > time.Minute {
			delay = f.opts.RestartDelay
		}
		if err == nil {
			err = errors.New("driver returned")
		}
		f.log.Error("campaign driver stopped; restarting it", "campaign", id, "err", err, "in", delay)
		ok, recovered := f.waitRestart(delay, began)
		if !ok {
			return
		}
		delay = min(2*delay, maxRestartDelay)
		if recovered {
			// The transport is back: start the backoff over, so that a
			// failure while its connections come up costs a second, not
			// the backed-off delay.
			delay = f.opts.RestartDelay
		}
	}
}

// waitRestart waits delay before a failed driver runs again, but no longer
// than until the transport answers again after an outage seen since the
// driver began (or shortly before: its failure may come from a client still
// recovering from an outage that had ended). After a Redis outage the
// campaign goes on at once instead of after the backed-off delay, also when
// the driver's submission failed only once Redis was back. ok is false when
// the fleet stops; recovered says the wait ended because the transport came
// back.
func (f *Fleet) waitRestart(delay time.Duration, began time.Time) (ok, recovered bool) {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	probe := time.NewTicker(healthProbeEvery)
	defer probe.Stop()
	since := began.Add(-outageGrace)
	for {
		select {
		case <-f.ctx.Done():
			return false, false
		case <-timer.C:
			return true, false
		case <-probe.C:
			if f.opts.Health == nil {
				continue
			}
			if f.probeHealth() && f.outageSince(since) {
				return true, true
			}
		}
	}
}

// outageGrace is how long before a driver began an outage still explains
// its failure: a Redis client goes on reporting its last dial error until
// its re-dial probe, once a second, succeeds.
const outageGrace = 2 * time.Second

// healthProbeEvery is how often a waiting driver restart checks the
// transport.
const healthProbeEvery = 250 * time.Millisecond

// Close stops every driver (trials in flight stay in the ledgers), closes
// the transport and releases the campaigns' locks.
func (f *Fleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
	err := f.mux.Close()
	for _, id := range f.local.Runs() {
		if run := f.local.Run(id); run != nil {
			run.Close()
		}
	}
	return err
}

// Where names the fleet for messages its API answers with (not its
// directory: the API's reads are open).
func (f *Fleet) Where() string { return "on this scheduler" }

// Dir is a campaign's directory.
func (f *Fleet) Dir(id string) string { return f.local.Dir(id) }

// IDs lists the workspace's campaigns, driven here or not.
func (f *Fleet) IDs() ([]string, error) { return f.local.IDs() }

// Read runs fn on a campaign: the live state of a driven campaign, or a
// snapshot of one another process drives.
func (f *Fleet) Read(id string, fn func(c *campaign.Campaign)) error { return f.local.Read(id, fn) }

// Do applies an event through the campaign's driver.
func (f *Fleet) Do(ctx context.Context, id string, ev campaign.Event) (campaign.Decision, error) {
	f.mu.Lock()
	closed, fctx := f.closed, f.ctx
	f.mu.Unlock()
	if closed || fctx == nil {
		return campaign.Decision{}, control.Errorf(control.ErrUnavailable, "the scheduler is not running")
	}
	run := f.local.Run(id)
	if run == nil {
		return campaign.Decision{}, f.notDriven(id)
	}
	// The request ends with the caller or with the fleet.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(fctx, cancel)()
	dec, err := run.Do(ctx, ev)
	if err != nil && ctx.Err() != nil {
		return dec, control.Errorf(control.ErrUnavailable, "campaign %s did not answer: %w", id, ctx.Err())
	}
	return dec, err
}

// Settle leaves the time to the campaigns' drivers: the fleet's tick every
// TickEvery, a campaign another process holds is ticked there (and a read,
// which the API serves without a token, never writes to a ledger).
func (f *Fleet) Settle(context.Context, string, time.Time) error { return nil }

// notDriven explains why a campaign cannot take events here.
func (f *Fleet) notDriven(id string) error {
	if campaign.ValidID(id) != nil || !f.opts.Workspace.Exists(id) {
		return control.Errorf(control.ErrNotFound, "no campaign %s", id)
	}
	f.mu.Lock()
	why := f.broken[id]
	f.mu.Unlock()
	if why != "" {
		return fmt.Errorf("campaign %s cannot be opened: %s", id, why)
	}
	if !f.opts.AdoptAll && !hasSettings(f.local.Dir(id)) {
		return control.Errorf(control.ErrConflict, "campaign %s was not started through this scheduler, which leaves it as it is: start it through the scheduler to drive it (amkctl start MODEL --gpu G --server URL, or POST /v1/campaigns), or run the scheduler with --adopt", id)
	}
	return control.Errorf(control.ErrConflict, "campaign %s is driven by another process (e.g. amkctl autoresearch); this scheduler adopts it once that process ends", id)
}

// Create starts a checked request's campaign and its driver, or finds the
// existing one.
func (f *Fleet) Create(ctx context.Context, req control.CreateRequest) (string, bool, int, error) {
	if len(f.opts.Targets) > 0 && !slices.Contains(f.opts.Targets, req.GPU) {
		return "", false, 0, control.Errorf(control.ErrBadValue, "gpu %q is not one of this scheduler's targets (%v)", req.GPU, f.opts.Targets)
	}
	id := req.ID()
	if run := f.local.Run(id); run != nil {
		// Starting a campaign the fleet drives for what is left of
		// another run's limits (--adopt) makes it the fleet's: its
		// settings file says so, and its driver goes on without them.
		f.claim(id, run.Workers)
		f.mu.Lock()
		f.liftLimits(id)
		f.mu.Unlock()
		return id, false, run.Workers, nil
	}
	f.mu.Lock()
	closed := f.closed || f.ctx == nil
	f.mu.Unlock()
	if closed {
		return "", false, 0, control.Errorf(control.ErrUnavailable, "the scheduler is not running")
	}
	if f.opts.Workspace.Exists(id) {
		// Starting an existing campaign through the fleet is the request
		// to drive it: from now on it is the fleet's.
		if err := f.adopt(id, false); err != nil {
			return "", false, 0, f.notDriven(id)
		}
		if run := f.local.Run(id); run != nil {
			f.claim(id, run.Workers)
			f.mu.Lock()
			f.liftLimits(id) // a scan may have adopted it, bounded, first
			f.mu.Unlock()
			return id, false, run.Workers, nil
		}
		return "", false, 0, control.Errorf(control.ErrUnavailable, "the scheduler is shutting down")
	}
	if err := f.checkWorkers(ctx, req); err != nil {
		return "", false, 0, err
	}
	// Hashing the weights files takes a while for a large checkpoint: not
	// under f.mu, and not past the request.
	if err := req.IdentifyWeights(ctx); err != nil {
		return "", false, 0, err
	}
	workers := req.Workers
	if workers <= 0 {
		workers = f.opts.DefaultWorkers
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if run := f.local.Run(id); run != nil { // created meanwhile
		return id, false, run.Workers, nil
	}
	if f.closed {
		return "", false, 0, control.Errorf(control.ErrUnavailable, "the scheduler is shutting down")
	}
	run, err := f.local.StartRun(req, f.runOptions(id, workers))
	if err != nil {
		return "", false, 0, err
	}
	if run.CorpusSkipped > 0 {
		f.log.Warn("corpus: skipped malformed lines", "lines", run.CorpusSkipped)
	}
	if run.Created {
		f.claim(id, workers)
	}
	f.launch(run, false)
	var budget campaign.Budget
	run.Ledger.Read(func(c *campaign.Campaign) { budget = c.State().Settings.Budget })
	f.log.Info("campaign created", "campaign", id, "model", req.Model, "gpu", req.GPU, "device", req.Device,
		"workers", workers, "budget_iterations", budget.Iterations, "budget_minutes", budget.Minutes)
	return id, run.Created, workers, nil
}

// checkWorkers refuses a campaign the live workers of its target cannot
// serve: a device cuda campaign when every one of them evaluates on the
// CPU (its latencies would be predictions where measurements are promised:
// the workers refuse such trials), and a model none of them could hold
// (trial.EstimateMemory against the memory each worker announced). With no
// live worker of the target, or none announcing its memory, it cannot tell,
// and lets the campaign start: its trials wait for a worker, and each
// worker still refuses a trial it cannot take before allocating anything.
func (f *Fleet) checkWorkers(ctx context.Context, req control.CreateRequest) error {
	target := req.GPU
	if f.opts.Workers == nil {
		return nil
	}
	workers, err := f.opts.Workers(ctx)
	if err != nil {
		f.log.Warn("cannot list workers to check they can serve the campaign", "err", err)
		return nil
	}
	var largest int64
	served, gpus, cpus := 0, 0, 0
	for _, w := range workers {
		if w.Target != target {
			continue
		}
		served++
		switch {
		case w.Device == "cpu":
			cpus++
		case w.Device != "":
			gpus++
		}
		largest = max(largest, w.MemoryBytes)
	}
	if req.Device == schedule.DeviceCUDA && served > 0 && gpus == 0 && cpus == served {
		return control.Errorf(control.ErrBadValue, "device cuda: the %d live worker(s) serving %s evaluate on the CPU, so this campaign's latencies could not be measured on a GPU; create it with device cpu (predicted latencies), or start a gpuworker --device N --target %s first",
			served, target, target)
	}
	if largest <= 0 {
		return nil
	}
	cfg, err := model.Load(req.Model)
	if err != nil {
		return control.Errorf(control.ErrBadValue, "%v", err)
	}
	need := trial.EstimateMemory(cfg, false, trial.DefaultCheckBytes)
	if need.Host > largest {
		return control.Errorf(control.ErrBadValue, "model %s needs about %d MiB of host memory per evaluator (its check runs %d of %d layers), but the largest live worker serving %s has %d MiB; add a worker with more memory (or raise its max_memory_mb)",
			cfg.Name, need.Host>>20, need.CheckLayers, cfg.NLayers, target, largest>>20)
	}
	return nil
}

// Workers lists the transport's live workers.
func (f *Fleet) Workers(ctx context.Context) ([]control.Worker, error) {
	if f.opts.Workers == nil {
		return nil, control.Errorf(control.ErrUnsupported, "the transport has no worker registry")
	}
	return f.opts.Workers(ctx)
}

// Queues reports the transport's queues.
func (f *Fleet) Queues(ctx context.Context) ([]control.Queue, error) {
	if f.opts.Queues == nil {
		return nil, control.Errorf(control.ErrUnsupported, "the transport has no queues to report")
	}
	return f.opts.Queues(ctx)
}

// Health is nil while the fleet runs and its transport answers.
func (f *Fleet) Health(ctx context.Context) error {
	f.mu.Lock()
	closed := f.closed || f.ctx == nil
	f.mu.Unlock()
	if closed {
		return errors.New("scheduler is not running")
	}
	if f.opts.Health != nil {
		if err := f.opts.Health(ctx); err != nil {
			return err
		}
	}
	return f.stalled()
}

// stalled names the driven campaigns whose ledgers a failed write stopped
// (control.Run.Stalled): "stalled: <error>" until their drivers load them
// again.
func (f *Fleet) stalled() error {
	var errs []error
	for _, id := range f.local.Runs() {
		if run := f.local.Run(id); run != nil {
			if err := run.Stalled(); err != nil {
				errs = append(errs, fmt.Errorf("campaign %s stalled: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Samples reads, for the metrics collector, every driven campaign and
// every other one that has an alert (one nothing drives), each with its
// alerts.
func (f *Fleet) Samples() []metrics.Campaign {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	alerts := f.alerts(ctx)
	ids, _ := f.IDs()
	out := make([]metrics.Campaign, 0, len(ids))
	for _, id := range ids {
		if f.local.Run(id) == nil && len(alerts[id]) == 0 {
			continue
		}
		_ = f.local.Read(id, func(c *campaign.Campaign) {
			m := metrics.CampaignOf(c)
			for _, a := range alerts[id] {
				m.Alerts = append(m.Alerts, a.Kind)
			}
			out = append(out, m)
		})
	}
	return out
}

// healthTimeout bounds a look at the campaigns' health (the workers'
// registry is in Redis).
const healthTimeout = 5 * time.Second

// alerts are the alerts of the workspace's campaigns, by campaign (control
// judges them: the one place health is decided).
func (f *Fleet) alerts(ctx context.Context) map[string][]campaign.Alert {
	reps, _ := f.Campaigns().List(ctx)
	out := map[string][]campaign.Alert{}
	for _, r := range reps {
		if len(r.Alerts) > 0 {
			out[r.ID] = r.Alerts
		}
	}
	return out
}

// logHealth logs each alert when it appears, with what to do, and when it
// clears.
func (f *Fleet) logHealth() {
	ctx, cancel := context.WithTimeout(f.ctx, healthTimeout)
	defer cancel()
	now := f.alerts(ctx)
	f.healthMu.Lock()
	defer f.healthMu.Unlock()
	for id, alerts := range now {
		for _, a := range alerts {
			if !slices.ContainsFunc(f.alerted[id], func(b campaign.Alert) bool { return b.Kind == a.Kind }) {
				f.log.Warn("campaign alert: "+a.Message, "campaign", id, "alert", a.Kind, "what_to_do", a.Fix)
			}
		}
	}
	for id, alerts := range f.alerted {
		for _, a := range alerts {
			if !slices.ContainsFunc(now[id], func(b campaign.Alert) bool { return b.Kind == a.Kind }) {
				f.log.Info("campaign alert cleared", "campaign", id, "alert", a.Kind)
			}
		}
	}
	f.alerted = now
}
