package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/chart"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Limits bound one run of a driver (a campaign's own budget and move-on
// criteria bound the whole campaign). Zero means unbounded.
type Limits struct {
	// Iterations is the number of trials this run proposes.
	Iterations int
	// Minutes is this run's wall-clock budget.
	Minutes float64
	// Daemon keeps the driver serving (commands, late outcomes) when the
	// campaign is paused or done, or when Iterations or Minutes are
	// reached (it then proposes nothing more), until ctx is cancelled: the
	// scheduler's mode.
	Daemon bool
	// Lift, when closed during the run, drops Iterations and Minutes for
	// the rest of it and keeps it serving (Daemon): a scheduler driving a
	// campaign for what was left of another run's limits is asked to
	// drive it as its own (amkctl start), without stopping its driver.
	Lift <-chan struct{}
}

// Driver runs one campaign over a dispatcher until the campaign is done,
// the run's limits are reached, or ctx is cancelled.
type Driver struct {
	Ledger     *Ledger
	Dispatcher dispatch.Dispatcher
	// Workers is the number of trials kept in flight.
	Workers int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Progress receives one line per recorded outcome (nil: silent).
	Progress *Progress
	// ReportEvery writes the wake-up report after every so many outcomes
	// (25 when zero), and always at the end.
	ReportEvery int
	// TickEvery is how often time-based criteria are checked (5s when zero).
	TickEvery time.Duration
	// Recorded, when set, is called with each outcome the campaign recorded,
	// once it is durable in the ledger (refused duplicates are not passed).
	Recorded func(trial.Outcome)
	// Refused, when set, is called with each outcome the campaign refused
	// because its trial is already recorded (a late copy) or was never in
	// flight: nothing of it is needed any more.
	Refused func(trial.Outcome)
	// Unbound, when set, is called with each outcome refused because it
	// does not answer the spec issued for its trial (trial.CheckBound),
	// before the trial is submitted again: a transport that remembers what
	// it delivered forgets this delivery, so that the trial's own outcome
	// can still come.
	Unbound func(trial.Outcome)

	reqOnce sync.Once
	reqs    chan request
}

type request struct {
	ev    campaign.Event
	reply chan reply
}

type reply struct {
	dec campaign.Decision
	err error
}

func (d *Driver) requests() chan request {
	d.reqOnce.Do(func() { d.reqs = make(chan request) })
	return d.reqs
}

// Do applies an event (an operator command, an agent's record) to the
// campaign from outside the driver's loop, serialised with it; trials the
// event asks for are submitted. It fails if ctx ends first (e.g. the driver
// is not running) and the driver has not taken the event.
func (d *Driver) Do(ctx context.Context, ev campaign.Event) (campaign.Decision, error) {
	r := request{ev: ev, reply: make(chan reply, 1)}
	select {
	case d.requests() <- r:
	case <-ctx.Done():
		return campaign.Decision{}, ctx.Err()
	}
	select {
	case rep := <-r.reply:
		return rep.dec, rep.err
	case <-ctx.Done():
		// A driver that took the event has replied by the time it stops:
		// its answer wins over a cancellation that came with it.
		select {
		case rep := <-r.reply:
			return rep.dec, rep.err
		default:
		}
		return campaign.Decision{}, ctx.Err()
	}
}

// RunSummary is what one run did: the trials it proposed, the outcomes it
// recorded, the trials a previous run left in flight that it sent again,
// the campaign's status (and why) at the end, and why the run stopped.
type RunSummary struct {
	Proposed    int             `json:"proposed"`
	Recorded    int             `json:"recorded"`
	Resubmitted int             `json:"resubmitted"`
	Status      campaign.Status `json:"status"`
	Reason      string          `json:"reason,omitempty"`
	StopReason  string          `json:"stop_reason"`
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

// Run drives the campaign. Trials still in flight when ctx is cancelled stay
// in the ledger and are re-run on the next Run.
func (d *Driver) Run(ctx context.Context, lim Limits) (RunSummary, error) {
	var sum RunSummary
	l := d.Ledger
	workers := max(1, d.Workers)
	every := d.ReportEvery
	if every <= 0 {
		every = 25
	}
	tick := d.TickEvery
	if tick <= 0 {
		tick = 5 * time.Second
	}
	start := d.now()
	var deadline time.Time
	if lim.Minutes > 0 {
		deadline = start.Add(time.Duration(lim.Minutes * float64(time.Minute)))
	}
	// The time since the campaign's last event, when no driver had it
	// open, is not campaign time (docs/spec/rules.md R5): a killed run's
	// downtime spends none of its minutes budget. The event carries this
	// run's limits, so that a scheduler adopting the campaign after this
	// run drives only what is left of them (campaign.LeftOfLastRun).
	if l.Campaign().Status() == campaign.StatusOptimizing {
		dec, err := l.Apply(campaign.Command{Time: start, Op: campaign.OpDriverOpened,
			Run: &campaign.RunLimits{Iterations: lim.Iterations, Minutes: lim.Minutes}})
		if err != nil && !errors.Is(err, campaign.ErrDone) {
			return sum, err
		}
		d.Progress.logLines(dec.Log)
	}
	// Re-send what a previous run left in flight (write-ahead: it is in the
	// ledger, perhaps not in the transport).
	for _, spec := range inFlightSpecs(l.Campaign().State()) {
		if err := d.submit(ctx, spec); err != nil {
			return sum, err
		}
		sum.Resubmitted++
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	defer func() { _ = d.WriteReport() }()
	for {
		inflight := len(l.Campaign().State().InFlight)
		stop := d.stopReason(ctx, lim, sum, deadline)
		if stop == "" && inflight < workers {
			n := workers - inflight
			if lim.Iterations > 0 {
				n = min(n, lim.Iterations-sum.Proposed)
			}
			dec, err := l.Apply(campaign.Propose{Time: d.now(), N: n})
			if err != nil && !errors.Is(err, campaign.ErrDone) {
				return sum, err
			}
			for _, spec := range dec.Enqueue {
				if err := d.submit(ctx, spec); err != nil {
					return sum, err
				}
				sum.Proposed++
			}
			d.Progress.logLines(dec.Log)
			inflight = len(l.Campaign().State().InFlight)
			if len(dec.Enqueue) == 0 && inflight == 0 {
				stop = "nothing left to propose"
			}
		}
		if stop != "" && inflight == 0 && !lim.Daemon {
			sum.StopReason = stop
			break
		}
		if ctx.Err() != nil {
			sum.StopReason = "interrupted; " + fmt.Sprint(inflight) + " trial(s) left in flight resume next run"
			break
		}
		select {
		case <-ctx.Done():
		case r := <-d.requests():
			dec, err := l.Apply(r.ev)
			if err == nil {
				for _, spec := range dec.Enqueue {
					if err = d.submit(ctx, spec); err != nil {
						break
					}
					sum.Proposed++
				}
				if cmd, ok := r.ev.(campaign.Command); ok && err == nil && cmd.Op == campaign.OpStop {
					lines, werr := d.withdrawQueued(ctx)
					if werr != nil {
						lines = append(lines, "withdrawing the queued trials: "+werr.Error())
					}
					dec.Log = append(dec.Log, lines...)
				}
				d.Progress.logLines(dec.Log)
			}
			r.reply <- reply{dec, err}
		case o := <-d.Dispatcher.Outcomes():
			if err := d.record(ctx, o); err != nil {
				return sum, err
			}
			sum.Recorded++
			if sum.Recorded%every == 0 {
				if err := d.WriteReport(); err != nil {
					return sum, err
				}
			}
		case <-lim.Lift:
			lim, deadline = Limits{Daemon: true}, time.Time{}
			d.Progress.logLines([]string{"this run's limits were lifted: it goes on without them"})
		case <-ticker.C:
			if l.Campaign().Status() == campaign.StatusOptimizing {
				if _, err := l.Apply(campaign.Tick{Time: d.now()}); err != nil && !errors.Is(err, campaign.ErrDone) {
					return sum, err
				}
			}
		}
	}
	st := l.Campaign().State()
	sum.Status, sum.Reason = st.Status, st.MoveOnReason
	return sum, nil
}

// submit hands a trial to the transport. A trial whose submission is cut
// short by cancellation stays in flight in the ledger and is re-sent by the
// next run, so that is not an error.
func (d *Driver) submit(ctx context.Context, spec trial.Spec) error {
	if err := d.Dispatcher.Submit(ctx, spec); err != nil && ctx.Err() == nil {
		return fmt.Errorf("submitting trial %d: %w", spec.TrialID, err)
	}
	return nil
}

func (d *Driver) stopReason(ctx context.Context, lim Limits, sum RunSummary, deadline time.Time) string {
	switch {
	case ctx.Err() != nil:
		return "interrupted"
	case d.Ledger.Campaign().Status() != campaign.StatusOptimizing:
		return "campaign " + string(d.Ledger.Campaign().Status())
	case lim.Iterations > 0 && sum.Proposed >= lim.Iterations:
		return fmt.Sprintf("this run's %d iterations are done", lim.Iterations)
	case !deadline.IsZero() && !d.now().Before(deadline):
		return fmt.Sprintf("this run's %g minutes are up", lim.Minutes)
	}
	return ""
}

// record applies one outcome (the ledger logs it to trials.jsonl with the
// state, exactly once). Outcomes the campaign refuses (duplicates of
// recorded trials, trials of another campaign) are logged and dropped: they
// change nothing.
func (d *Driver) record(ctx context.Context, o trial.Outcome) error {
	l := d.Ledger
	if err := l.Campaign().CheckOutcome(o); err != nil {
		return d.unbound(ctx, o, err)
	}
	dec, err := l.Apply(campaign.Finished{Time: d.now(), Outcome: o, Regions: o.Regions})
	switch {
	case errors.Is(err, campaign.ErrDuplicateTrial), errors.Is(err, campaign.ErrUnknownTrial):
		d.Progress.logLines([]string{fmt.Sprintf("ignored outcome of trial %d: %v", o.TrialID, err)})
		if d.Refused != nil {
			d.Refused(o)
		}
		return nil
	case errors.Is(err, campaign.ErrWrongCampaign):
		d.Progress.logLines([]string{fmt.Sprintf("ignored outcome of trial %d: %v", o.TrialID, err)})
		return nil
	case err != nil:
		return err
	}
	d.Progress.outcome(l.Campaign(), d.now(), dec)
	if d.Recorded != nil {
		d.Recorded(o)
	}
	return nil
}

// unbound refuses an outcome that does not answer its trial's spec
// (campaign.Campaign.CheckOutcome) and submits the trial again, so that it
// is evaluated as issued: the refused outcome is logged and recorded
// nowhere.
func (d *Driver) unbound(ctx context.Context, o trial.Outcome, why error) error {
	d.Progress.logLines([]string{fmt.Sprintf("refused an outcome of trial %d (%v); the trial is submitted again", o.TrialID, why)})
	if d.Unbound != nil {
		d.Unbound(o)
	}
	inf, ok := d.Ledger.Campaign().State().InFlight[o.TrialID]
	if !ok {
		return nil
	}
	return d.submit(ctx, inf.Spec)
}

// WriteReport writes report.json, report.md and report.svg (the wake-up
// report and its picture: the trajectory, and for a workload campaign the
// latency against KV length) into the campaign directory.
func (d *Driver) WriteReport() error {
	return WriteReport(d.Ledger.Dir(), d.Ledger.Campaign(), d.now())
}

// WriteReport writes a campaign's wake-up report files into dir, with the
// best config in campaign.BestConfigFile once there is one.
func WriteReport(dir string, c *campaign.Campaign, now time.Time) error {
	return WriteWakeUp(dir, c.WakeUp(now))
}

// WriteWakeUp writes a wake-up report's files into dir: report.json,
// report.md and its plot report.svg. A client of a scheduler writes them
// from the report the scheduler sends, as the scheduler writes its own.
func WriteWakeUp(dir string, w campaign.WakeUp) error {
	js, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return err
	}
	svg, err := chart.ReportSVG(w)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"report.json": append(js, '\n'),
		"report.md":   []byte(w.Markdown() + "\n![trajectory and latency against KV length](report.svg)\n"),
		"report.svg":  svg,
	}
	if len(w.KnobImportance) > 0 {
		slice, err := chart.KnobSliceSVG(w)
		if err != nil {
			return err
		}
		files[campaign.KnobSliceFile] = slice
	}
	if w.BestFile != "" {
		var best bytes.Buffer
		if err := json.Indent(&best, w.BestConfig, "", "  "); err != nil {
			return err
		}
		files[w.BestFile] = append(best.Bytes(), '\n')
	}
	for name, data := range files {
		if err := atomicfile.Write(dir+string(os.PathSeparator)+name, data); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// Progress renders a live display on a terminal, or plain log lines.
type Progress struct {
	W        io.Writer
	Terminal bool
	Target   int // iterations planned for this run (0 = open-ended)
	started  time.Time
	done     int
	base     int // the campaign's experiments before this run's first outcome
}

// NewProgress detects whether w is a terminal.
func NewProgress(w io.Writer, target int) *Progress {
	return &Progress{W: w, Terminal: IsTerminal(w), Target: target, started: time.Now()}
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *Progress) logLines(lines []string) {
	if p == nil {
		return
	}
	for _, ln := range lines {
		p.clear()
		fmt.Fprintln(p.W, ln)
	}
}

func (p *Progress) clear() {
	if p.Terminal {
		fmt.Fprint(p.W, "\r\033[K")
	}
}

func (p *Progress) outcome(c *campaign.Campaign, now time.Time, dec campaign.Decision) {
	if p == nil {
		return
	}
	st := c.State()
	if p.done == 0 {
		p.base = max(0, st.ExperimentsRun-1)
	}
	p.done++
	best, pct, speed := "-", "-", "-"
	if st.Best != nil {
		best = fmt.Sprintf("%.3fus", st.Best.LatencyUS)
		if st.Best.PctOfRoofline != nil {
			pct = fmt.Sprintf("%.1f%%", *st.Best.PctOfRoofline)
		}
	}
	if s := c.Speedup(); s != nil {
		speed = fmt.Sprintf("%.3fx", *s)
	}
	// The run ends at its own target or at the campaign's budget of
	// experiments, whichever comes first (0: neither is set).
	planned := 0
	if p.Target > 0 {
		planned = p.base + p.Target
	}
	if b := st.Settings.Budget.Iterations; b > 0 && (planned == 0 || b < planned) {
		planned = b
	}
	eta := ""
	if planned > 0 && p.done > 0 {
		per := time.Since(p.started) / time.Duration(p.done)
		// An upper bound: a plateau or a move-on criterion may end it sooner.
		eta = " eta <= " + (per * time.Duration(max(0, planned-st.ExperimentsRun))).Round(time.Second).String()
	}
	status := fmt.Sprintf("[%s] iter %d/%s best %s (%s of floor) speedup %s%s",
		st.ID, st.ExperimentsRun, target(planned), best, pct, speed, eta)
	if p.Terminal {
		for _, r := range dec.Rows {
			p.clear()
			fmt.Fprintf(p.W, "  #%d %-7s %s %s\n", r.Experiment, r.Tag, r.ScheduleID, r.Description)
		}
		p.clear()
		fmt.Fprint(p.W, status)
		return
	}
	for _, r := range dec.Rows {
		fmt.Fprintf(p.W, "%s #%d %s %s %s | %s\n", now.Format(time.RFC3339), r.Experiment, r.Tag, r.ScheduleID, r.Description, status)
	}
}

// Finish ends the live line.
func (p *Progress) Finish() {
	if p != nil && p.Terminal {
		fmt.Fprintln(p.W)
	}
}

func target(n int) string {
	if n <= 0 {
		return "∞"
	}
	return fmt.Sprint(n)
}

// inFlightSpecs lists the specs of trials in flight, in trial order.
// withdrawQueued takes the trials of a stopped campaign that no evaluator
// has started off the transport (where it can: dispatch.Withdrawer), and
// out of the campaign's trials in flight, so that nothing of the campaign
// waits in a queue for a worker that may never come. Trials that run are
// left to finish; their outcomes are recorded.
func (d *Driver) withdrawQueued(ctx context.Context) ([]string, error) {
	var ids []int
	for _, spec := range inFlightSpecs(d.Ledger.Campaign().State()) {
		ok, err := dispatch.Withdraw(ctx, d.Dispatcher, spec)
		if err != nil {
			d.Progress.logLines([]string{fmt.Sprintf("trial %d: could not withdraw it from the queue: %v", spec.TrialID, err)})
			continue
		}
		if ok {
			ids = append(ids, spec.TrialID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	dec, err := d.Ledger.Apply(campaign.Command{Time: d.now(), Op: campaign.OpWithdraw, Trials: ids})
	return dec.Log, err
}

func inFlightSpecs(st campaign.State) []trial.Spec {
	ids := make([]int, 0, len(st.InFlight))
	for id := range st.InFlight {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	specs := make([]trial.Spec, len(ids))
	for i, id := range ids {
		specs[i] = st.InFlight[id].Spec
	}
	return specs
}

// DefaultWorkers is the number of trials a run on this machine keeps in
// flight when not told: min(4, CPUs) on the CPU, one on a GPU (its trials
// are timed side by side and must not share the device).
func DefaultWorkers(device schedule.Device) int {
	if device == schedule.DeviceCPU {
		return min(4, runtime.NumCPU())
	}
	return 1
}
