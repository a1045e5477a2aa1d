package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
)

// errNoBudget: a budget command without a budget.
var errNoBudget = errors.New("a budget command needs the new budget")

// Local is the campaigns of a workspace on this machine.
type Local struct {
	Workspace *runner.Workspace
	// Env describes this machine in the corpus records of a campaign it
	// creates (Target and Device are filled per campaign).
	Env flywheel.Env
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ Campaigns = (*Local)(nil)

// OpenLocal opens the workspace at dir, which must exist unless create is
// set.
func OpenLocal(dir string, create bool, env flywheel.Env) (*Local, error) {
	if !create {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("no workspace at %s (run amkctl autoresearch or amkctl start first, or pass --workspace)", dir)
		}
	}
	ws, err := runner.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	return &Local{Workspace: ws, Env: env}, nil
}

func (l *Local) now() time.Time {
	if l.Now != nil {
		return l.Now().UTC()
	}
	return time.Now().UTC()
}

// Where names the workspace.
func (l *Local) Where() string { return "in " + l.Workspace.Dir }

// ids lists the campaigns; a workspace without campaigns has none.
func (l *Local) ids() ([]string, error) {
	ids, err := l.Workspace.IDs()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return ids, err
}

// List reports the workspace's campaigns.
func (l *Local) List(_ context.Context) ([]campaign.StatusReport, error) {
	ids, err := l.ids()
	if err != nil {
		return nil, err
	}
	now := l.now()
	reports := []campaign.StatusReport{}
	var errs []error
	for _, id := range ids {
		c, err := l.Workspace.View(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		reports = append(reports, c.StatusReport(now))
	}
	return reports, errors.Join(errs...)
}

// Resolve names a campaign; a lone argument without --gpu must be the id of
// one of the workspace's campaigns.
func (l *Local) Resolve(_ context.Context, sel Selector) (string, error) {
	if id, ok, err := sel.fixed(); ok || err != nil {
		return id, err
	}
	if sel.Arg != "" {
		if l.Workspace.Exists(sel.Arg) {
			return sel.Arg, nil
		}
		return "", fmt.Errorf("no campaign %q in %s; a MODEL needs --gpu to name a campaign (see amkctl campaigns)", sel.Arg, l.Workspace.Dir)
	}
	ids, err := l.ids()
	if err != nil {
		return "", err
	}
	return only(ids, l.Where(), "start one with amkctl autoresearch or amkctl start")
}

// view loads a campaign without its lock.
func (l *Local) view(id string) (*campaign.Campaign, error) {
	c, err := l.Workspace.View(id)
	if errors.Is(err, runner.ErrNoCampaign) {
		return nil, fmt.Errorf("no campaign %q %s (see amkctl campaigns)", id, l.Where())
	}
	return c, err
}

// Status is the campaign's status report.
func (l *Local) Status(_ context.Context, id string) (campaign.StatusReport, error) {
	c, err := l.view(id)
	if err != nil {
		return campaign.StatusReport{}, err
	}
	return c.StatusReport(l.now()), nil
}

// StatusText is the status text block.
func (l *Local) StatusText(_ context.Context, id string) (string, error) {
	c, err := l.view(id)
	if err != nil {
		return "", err
	}
	return c.StatusText(l.now()), nil
}

// Next is the continue-or-stop decision. With the campaign's lock a
// criterion that tripped is made to stick (the campaign flips to done);
// while a driver holds the lock, the driver does that.
func (l *Local) Next(_ context.Context, id string) (campaign.NextReport, error) {
	now := l.now()
	ledger, err := l.Workspace.Open(id)
	switch {
	case errors.Is(err, runner.ErrLocked):
		c, err := l.view(id)
		if err != nil {
			return campaign.NextReport{}, err
		}
		return c.Next(now), nil
	case errors.Is(err, runner.ErrNoCampaign):
		_, err = l.view(id)
		return campaign.NextReport{}, err
	case err != nil:
		return campaign.NextReport{}, err
	}
	defer ledger.Close()
	c := ledger.Campaign()
	if c.Status() == campaign.StatusOptimizing {
		if _, err := ledger.Apply(campaign.Tick{Time: now}); err != nil && !errors.Is(err, campaign.ErrDone) {
			return campaign.NextReport{}, err
		}
	}
	return c.Next(now), nil
}

// Report is the wake-up report.
func (l *Local) Report(_ context.Context, id string) (campaign.WakeUp, error) {
	c, err := l.view(id)
	if err != nil {
		return campaign.WakeUp{}, err
	}
	return c.WakeUp(l.now()), nil
}

// WriteReport writes the campaign's report files into its directory.
func (l *Local) WriteReport(_ context.Context, id string) (api.ReportFiles, error) {
	c, err := l.view(id)
	if err != nil {
		return api.ReportFiles{}, err
	}
	return WriteReports(id, l.Workspace.CampaignDir(id), c, l.now())
}

// Create creates the campaign in the workspace without running it (amkctl
// autoresearch, or a scheduler on this workspace, runs it).
func (l *Local) Create(_ context.Context, req api.CreateRequest) (api.CreateResponse, error) {
	start, _, err := l.startEvent(req, "")
	if err != nil {
		return api.CreateResponse{}, err
	}
	ledger, created, err := l.Workspace.Create(start)
	if err != nil {
		return api.CreateResponse{}, err
	}
	defer ledger.Close()
	return api.CreateResponse{ID: ledger.ID(), Created: created, Campaign: ledger.Campaign().StatusReport(l.now())}, nil
}

// startEvent makes req the first event of a campaign of this workspace,
// warm-started from the workspace's flywheel corpus (skipped counts its
// malformed lines). The corpus records of the campaign name the evaluating
// device l.Env.DeviceName or, when that is empty, LAUNCHER@HOST, with the
// device ("cpu", "cuda") for a launcher not named.
func (l *Local) startEvent(req api.CreateRequest, launcher string) (start campaign.Start, skipped int, err error) {
	req.Device, err = schedule.ParseDevice(string(req.Device))
	if err != nil {
		return campaign.Start{}, 0, fmt.Errorf("--device: %w", err)
	}
	target, err := ir.Target(req.GPU)
	if err != nil {
		return campaign.Start{}, 0, err
	}
	env := l.Env
	env.Target, env.Device = target.Name, string(req.Device)
	if launcher == "" {
		launcher = string(req.Device)
	}
	if env.DeviceName == "" {
		env.DeviceName = launcher + "@" + hostName()
	}
	corpus, skipped, err := flywheel.ReadCorpus(l.Workspace.CorpusPath())
	if err != nil {
		return campaign.Start{}, 0, fmt.Errorf("corpus: %w", err)
	}
	start, err = req.Start(l.now(), target, corpus, env)
	return start, skipped, err
}

// apply applies one event to a campaign under its lock and reports the
// campaign afterwards.
func (l *Local) apply(id string, event func(c *campaign.Campaign) campaign.Event) (campaign.Decision, campaign.StatusReport, error) {
	ledger, err := l.Workspace.Open(id)
	if errors.Is(err, runner.ErrLocked) {
		return campaign.Decision{}, campaign.StatusReport{}, fmt.Errorf("%w\n  another process drives it: send the command to its scheduler (--server URL), or stop amkctl autoresearch first", err)
	}
	if errors.Is(err, runner.ErrNoCampaign) {
		_, err = l.view(id)
	}
	if err != nil {
		return campaign.Decision{}, campaign.StatusReport{}, err
	}
	defer ledger.Close()
	dec, err := ledger.Apply(event(ledger.Campaign()))
	if err != nil {
		return dec, campaign.StatusReport{}, fmt.Errorf("refused: %w", err)
	}
	return dec, ledger.Campaign().StatusReport(l.now()), nil
}

// Record records an agent's experiment.
func (l *Local) Record(_ context.Context, id string, req api.RecordRequest) (api.RecordResponse, error) {
	ev := req.Event(l.now())
	dec, rep, err := l.apply(id, func(*campaign.Campaign) campaign.Event { return ev })
	if err != nil {
		return api.RecordResponse{}, err
	}
	return api.RecordResponse{ID: id, Rows: dec.Rows, Log: dec.Log, Campaign: rep}, nil
}

// Command applies an operator command.
func (l *Local) Command(_ context.Context, id, op string, req api.CommandRequest) (api.CommandResponse, error) {
	if op == campaign.OpBudget && req.Budget == nil {
		return api.CommandResponse{}, errNoBudget
	}
	dec, rep, err := l.apply(id, func(c *campaign.Campaign) campaign.Event {
		ev := campaign.Command{Time: l.now(), Op: op, Note: req.Note, Budget: req.Budget}
		if req.MoveOn != nil {
			mo := req.MoveOn.Over(c.State().Settings.MoveOn)
			ev.MoveOn = &mo
		}
		return ev
	})
	if err != nil {
		return api.CommandResponse{}, err
	}
	return api.CommandResponse{ID: id, Log: dec.Log, Campaign: rep}, nil
}
