package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
)

// The health of a campaign: what is wrong with it where it lives, judged
// once here from its state, who drives it (Drivers) and, in a fleet, the
// live workers; every front shows the alerts of its status report
// (campaign.Alert).

// StallAfter is how long a campaign that a process drives may go without
// an event before it is stalled: a driver ticks a running campaign every
// few seconds (runner.Driver.TickEvery, 5 s by default).
const StallAfter = 2 * time.Minute

// QueueWaitAfter is how long the oldest trial of a GPU target's queue may
// wait for a worker before the campaigns with trials in that queue say so
// (the Prometheus rule AMKQueueBackingUp in deploy/alerts.yml uses the same
// 10 minutes on amk_queue_latency_seconds).
const QueueWaitAfter = 10 * time.Minute

// StuckAfter is the least time a trial is in flight before it is stuck; a
// trial with a longer timeout gets three times that timeout.
const StuckAfter = 30 * time.Minute

// Driver is who drives a campaign.
type Driver struct {
	// Here: a run of this process drives it.
	Here bool
	// Held: another process holds its ledger; Holder is what that process
	// wrote about itself ("pid 12").
	Held   bool
	Holder string
	// Stalled, for a run of this process, is why its ledger cannot be
	// written (Run.Stalled); "" while it can.
	Stalled string
}

// Drivers is a Backend that can say who drives a campaign (Local and the
// fleet can; a backend that cannot gets no alert that needs it).
type Drivers interface {
	Driver(id string) (Driver, error)
}

// Driver says who drives a campaign of the workspace.
func (l *Local) Driver(id string) (Driver, error) {
	if r := l.Run(id); r != nil {
		d := Driver{Here: true}
		if err := r.Stalled(); err != nil {
			d.Stalled = err.Error()
		}
		return d, nil
	}
	holder, held, err := l.Workspace.Driver(id)
	return Driver{Held: held, Holder: holder}, err
}

// healthFacts are what campaigns' health is judged from beside their
// state: who drives them and, in a fleet, which targets live workers
// serve.
type healthFacts struct {
	drivers Drivers
	// fleet: the campaigns are driven by a scheduler over workers; served
	// lists the targets live workers serve, valid when workersKnown.
	fleet        bool
	workersKnown bool
	served       []string
	// queueWait is, per GPU target, how long the oldest trial pending in
	// its queue has waited (the transport's queue latency); nil when the
	// queues are not known.
	queueWait map[string]time.Duration
	// workspace is the local workspace's directory (for the commands of a
	// fix), "" in a fleet.
	workspace string
}

// facts gathers the health facts of s's backend once, for one or many
// campaigns.
func (s *Campaigns) facts(ctx context.Context) healthFacts {
	f := s.place()
	if fl, ok := s.b.(Fleet); ok {
		if ws, err := fl.Workers(ctx); err == nil {
			f.workersKnown = true
			for _, w := range ws {
				f.served = append(f.served, w.Target)
			}
		}
		if qs, err := fl.Queues(ctx); err == nil {
			f.queueWait = map[string]time.Duration{}
			for _, q := range qs {
				if target, ok := trialQueueTarget(q.Queue); ok {
					f.queueWait[target] = max(f.queueWait[target], time.Duration(q.LatencySeconds*float64(time.Second)))
				}
			}
		}
	}
	return f
}

// trialQueueTarget is the GPU target of a trials queue ("trials:h100", or
// "ns:trials:h100" in a namespace).
func trialQueueTarget(queue string) (string, bool) {
	i := strings.LastIndex(queue, "trials:")
	if i < 0 || (i > 0 && queue[i-1] != ':') || i+len("trials:") == len(queue) {
		return "", false
	}
	return queue[i+len("trials:"):], true
}

// place is what the backend's kind says, without asking anything: whether
// it is a fleet, or a workspace here (and where), and who can say who
// drives a campaign.
func (s *Campaigns) place() healthFacts {
	var f healthFacts
	f.drivers, _ = s.b.(Drivers)
	_, f.fleet = s.b.(Fleet)
	if l, ok := s.b.(*Local); ok {
		f.workspace = l.Workspace.Dir
	}
	return f
}

// driver is who drives a campaign, and whether that is known.
func (f healthFacts) driver(id string) (Driver, bool) {
	if f.drivers == nil {
		return Driver{}, false
	}
	d, err := f.drivers.Driver(id)
	return d, err == nil
}

// report is a campaign's status report at now with its last event's time
// and its alerts, and the time it is reported at: a campaign nothing
// drives is reported at its last event (its elapsed time stops when
// nothing runs it).
func (f healthFacts) report(c *campaign.Campaign, drv Driver, known bool, now time.Time) (campaign.StatusReport, time.Time) {
	st := c.State()
	left, spent := c.LeftOfLastRun(now)
	alerts := f.alerts(st, lastRunLeft{left, spent}, drv, known, now)
	at := now
	if hasAlert(alerts, campaign.AlertNoDriver) && st.LastEventAt.Before(now) {
		at = st.LastEventAt
	}
	rep := c.StatusReport(at)
	rep.LastEventAt = st.LastEventAt.UTC().Format(time.RFC3339)
	rep.Alerts = alerts
	rep.Stalled = drv.Stalled
	return rep, at
}

func hasAlert(alerts []campaign.Alert, kind string) bool {
	return slices.ContainsFunc(alerts, func(a campaign.Alert) bool { return a.Kind == kind })
}

// lastRunLeft is what is left at now of the allowance of the run that last
// opened a campaign (campaign.Campaign.LeftOfLastRun).
type lastRunLeft struct {
	left  campaign.RunLimits
	spent bool
}

// alerts judges a campaign's health at now.
func (f healthFacts) alerts(st campaign.State, run lastRunLeft, drv Driver, known bool, now time.Time) []campaign.Alert {
	if st.Status == campaign.StatusDone {
		if known && drv.Stalled != "" {
			return []campaign.Alert{ledgerStalled(drv.Stalled)} // reopen waits for the disk
		}
		return nil
	}
	since := func(t time.Time) string {
		return fmt.Sprintf("%s UTC (%s ago)", t.UTC().Format("2006-01-02 15:04:05"), ago(now.Sub(t)))
	}
	running := st.Status == campaign.StatusOptimizing
	if known && !drv.Here && !drv.Held {
		if !running || agentDriven(st) {
			return nil // paused, or an agent records into it between its own evaluations
		}
		return []campaign.Alert{{Kind: campaign.AlertNoDriver, Title: "nothing drives it",
			Message: fmt.Sprintf("no process has had this campaign open since its last event, %s, with %d trial(s) in flight: it is optimizing, but nothing runs; its elapsed time stops there",
				since(st.LastEventAt), len(st.InFlight)),
			Fix: f.resumeFix(st, run)}}
	}
	var out []campaign.Alert
	if known && drv.Stalled != "" {
		out = append(out, ledgerStalled(drv.Stalled))
	} else if known && running && now.Sub(st.LastEventAt) > StallAfter {
		who := "its driver (" + drv.Holder + ")"
		switch {
		case drv.Here && f.fleet:
			who = "this scheduler's driver"
		case drv.Here:
			who = "this process"
		}
		out = append(out, campaign.Alert{Kind: campaign.AlertStalled, Title: "its driver is stalled",
			Message: fmt.Sprintf("%s holds the campaign but its ledger has taken no event since %s; a running campaign takes one every few seconds",
				who, since(st.LastEventAt)),
			Fix: "read the driver's log (the scheduler's log says \"campaign driver stopped\" with the error; amkctl autoresearch prints it): " +
				"a driver that cannot reach Redis or write its workspace retries by itself. Restarting the driver loses nothing: the ledger re-sends the trials in flight."})
	}
	unserved := false
	if f.fleet && f.workersKnown && running && !slices.Contains(f.served, st.GPU) {
		unserved = true
		serving := "none"
		if len(f.served) > 0 {
			s := slices.Clone(f.served)
			slices.Sort(s)
			serving = strings.Join(slices.Compact(s), ", ")
		}
		out = append(out, campaign.Alert{Kind: campaign.AlertUnserved, Title: "no worker serves it",
			Message: fmt.Sprintf("no live worker serves GPU target %s: the campaign's %d trial(s) wait in its queue (trials:%s) and nothing runs (targets served now: %s)",
				st.GPU, len(st.InFlight), st.GPU, serving),
			Fix: fmt.Sprintf("start a worker for it: gpuworker --redis ADDR --target %s --device %s; or stop the campaign (amkctl stop %s), which withdraws its queued trials",
				st.GPU, workerDevice(st), st.ID)})
	}
	if a, ok := f.queueWaitAlert(st); ok && !unserved && running {
		out = append(out, a)
	}
	if !unserved && (drv.Here || drv.Held) {
		if a, ok := stuckTrials(st, now, f.fleet); ok {
			out = append(out, a)
		}
	}
	return out
}

// ledgerStalled is the alert of a campaign whose ledger cannot be written,
// said at once: nothing the campaign is told or sent is recorded until the
// disk allows again.
func ledgerStalled(why string) campaign.Alert {
	return campaign.Alert{Kind: campaign.AlertStalled, Title: "its ledger cannot be written",
		Message: "the campaign is stalled: " + why,
		Fix: "free space on the workspace's disk or make it writable again: the driver loads the ledger again by itself (with back-off) " +
			"and the campaign goes on; nothing recorded is lost"}
}

// agentDriven says that an outside agent drives the campaign with its own
// evaluations (record): no process holds it between them, and that is
// how it should be. Its last experiment is an agent's and it has no trial
// of its own in flight.
func agentDriven(st campaign.State) bool {
	n := len(st.Trajectory)
	return n > 0 && st.Trajectory[n-1].Trial < 0 && len(st.InFlight) == 0
}

// resumeFix is what to do about a campaign nothing drives.
func (f healthFacts) resumeFix(st campaign.State, run lastRunLeft) string {
	name := ""
	if st.Name != "" {
		name = " --name " + st.Name
	}
	where := f.where()
	if f.fleet {
		// A scheduler run with --adopt drives a campaign it was not asked
		// to drive only for what is left of the limits of the run that
		// last opened it (amkctl autoresearch --iters/--minutes), and not
		// at all once they are used up; amkctl start drives it without them.
		adopt := " (or run the scheduler with --adopt)"
		switch lim := st.LastRun; {
		case lim == nil:
		case run.spent:
			adopt = fmt.Sprintf(" (the limits of the run that last opened it, %s, are used up, so a scheduler run with --adopt leaves it as it is; "+
				"amkctl autoresearch on the scheduler's workspace runs it again with new ones)", describeLimits(lim.RunLimits))
		default:
			adopt = fmt.Sprintf(" (or run the scheduler with --adopt, which drives only what is left of the limits of the run that last opened it: %s)",
				describeLimits(run.left))
		}
		return fmt.Sprintf("have this scheduler drive it: amkctl start %s --gpu %s --device %s%s%s%s; or stop it: amkctl stop %s%s",
			st.Model, st.GPU, st.Device, name, where, adopt, st.ID, where)
	}
	resent := ""
	if len(st.InFlight) > 0 {
		resent = " (its trials in flight are sent again)"
	}
	return fmt.Sprintf("resume it%s: amkctl autoresearch %s --gpu %s --device %s%s%s; or stop it: amkctl stop %s%s",
		resent, st.Model, st.GPU, st.Device, name, where, st.ID, where)
}

// describeLimits says a run's limits in words ("3 iterations and 12.5
// minutes"); a limit of zero is no limit and is left out.
func describeLimits(lim campaign.RunLimits) string {
	var parts []string
	if lim.Iterations > 0 {
		parts = append(parts, fmt.Sprintf("%d iteration(s)", lim.Iterations))
	}
	if lim.Minutes > 0 {
		parts = append(parts, fmt.Sprintf("%.3g minute(s)", lim.Minutes))
	}
	return strings.Join(parts, " and ")
}

// where is the flag that points an amkctl command at the campaigns: the
// scheduler, or a workspace on this machine.
func (f healthFacts) where() string {
	switch {
	case f.fleet:
		return " --server URL"
	case f.workspace != "":
		return " --workspace " + f.workspace
	}
	return ""
}

// workerDevice is the gpuworker --device that evaluates a campaign's
// trials.
func workerDevice(st campaign.State) string {
	if st.Device == "cpu" {
		return "cpu"
	}
	return "0"
}

// stuckTrials is the alert of trials in flight far longer than a trial may
// take.
func stuckTrials(st campaign.State, now time.Time, fleet bool) (campaign.Alert, bool) {
	timeout := dispatch.DefaultTrialTimeout
	if st.Settings.TrialTimeoutS > 0 {
		timeout = time.Duration(st.Settings.TrialTimeoutS * float64(time.Second))
	}
	limit := max(StuckAfter, 3*timeout)
	oldest, n := -1, 0
	var issued time.Time
	for id, inf := range st.InFlight {
		if now.Sub(inf.IssuedAt) <= limit {
			continue
		}
		n++
		if oldest < 0 || inf.IssuedAt.Before(issued) {
			oldest, issued = id, inf.IssuedAt
		}
	}
	if n == 0 {
		return campaign.Alert{}, false
	}
	fix := "the evaluator of this run may be wedged: stop amkctl autoresearch (Ctrl-C) and run it again; the trial is sent again"
	if fleet {
		fix = "amkctl workers shows which worker runs it (its current trial); restart a worker that is stuck (its trial is offered to another), or stop the campaign (amkctl stop " + st.ID + ")"
	}
	return campaign.Alert{Kind: campaign.AlertStuckTrials, Title: "trials stuck",
		Message: fmt.Sprintf("%d trial(s) have been in flight for more than %s, longer than a trial may take; the oldest, trial %d, since %s UTC (%s ago)",
			n, ago(limit), oldest, issued.UTC().Format("2006-01-02 15:04:05"), ago(now.Sub(issued))),
		Fix: fix}, true
}

// ago is a duration for a person: "42 s", "17 min", "3.5 h", "2.0 days".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

// healthText is the status text's lines about the last event and the
// alerts.
func healthText(rep campaign.StatusReport, now time.Time) string {
	var b strings.Builder
	if t, err := time.Parse(time.RFC3339, rep.LastEventAt); err == nil {
		fmt.Fprintf(&b, "  last event   : %s UTC (%s ago)\n", t.UTC().Format("2006-01-02 15:04:05"), ago(now.Sub(t)))
	}
	for _, a := range rep.Alerts {
		fmt.Fprintf(&b, "  ALERT        : %s (%s)\n", a.Message, a.Kind)
		fmt.Fprintf(&b, "  what to do   : %s\n", a.Fix)
	}
	return b.String()
}

// queueWaitAlert is the alert of a campaign whose trials wait in a queue
// whose oldest trial has waited more than QueueWaitAfter: the workers of
// its target are too few for the campaigns that share it (or all busy with
// long trials).
func (f healthFacts) queueWaitAlert(st campaign.State) (campaign.Alert, bool) {
	wait, known := f.queueWait[st.GPU]
	if !known || wait <= QueueWaitAfter || len(st.InFlight) == 0 {
		return campaign.Alert{}, false
	}
	return campaign.Alert{Kind: campaign.AlertQueueWait, Title: "its trials wait in the queue",
		Message: fmt.Sprintf("the oldest trial waiting in the queue of GPU target %s (trials:%s) has waited %s, more than %s: the live workers for %s do not keep up with the campaigns that use it; this campaign has %d trial(s) in flight",
			st.GPU, st.GPU, ago(wait), ago(QueueWaitAfter), st.GPU, len(st.InFlight)),
		Fix: fmt.Sprintf("start more workers for it (gpuworker --redis ADDR --target %s --device %s), or pause a campaign that shares the target (amkctl pause ID --server URL); amkctl queues shows each queue's wait",
			st.GPU, workerDevice(st))}, true
}
