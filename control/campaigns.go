package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
)

// Campaigns is the one implementation of every campaign operation, over a
// Backend: it checks each request, translates it into the campaign's
// event, applies it and says what came of it. It also offers the
// backend's Fleet when it has one (ErrUnsupported otherwise).
type Campaigns struct {
	b Backend
	// Now is the clock of events and reports; nil means time.Now.
	Now func() time.Time
}

var (
	_ Service = (*Campaigns)(nil)
	_ Fleet   = (*Campaigns)(nil)
)

// New serves the campaigns of b.
func New(b Backend) *Campaigns { return &Campaigns{b: b} }

// Backend is where the campaigns live.
func (s *Campaigns) Backend() Backend { return s.b }

func (s *Campaigns) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Where says where the campaigns are.
func (s *Campaigns) Where() string { return s.b.Where() }

// read runs fn on a campaign.
func (s *Campaigns) read(id string, fn func(c *campaign.Campaign)) error {
	if err := checkID(id, s.Where()); err != nil {
		return err
	}
	err := s.b.Read(id, fn)
	if errors.Is(err, ErrNotFound) {
		return notFound(id, s.Where())
	}
	return err
}

// status is a campaign's status report, with its health.
func (s *Campaigns) status(ctx context.Context, id string) (rep campaign.StatusReport, err error) {
	if err := checkID(id, s.Where()); err != nil {
		return rep, err
	}
	f := s.facts(ctx)
	drv, known := f.driver(id)
	now := s.now()
	err = s.read(id, func(c *campaign.Campaign) { rep, _ = f.report(c, drv, known, now) })
	return rep, err
}

// do applies an event; refusals by the campaign are of kind refusal.
func (s *Campaigns) do(ctx context.Context, id string, ev campaign.Event, refusal error) (campaign.Decision, error) {
	if err := checkID(id, s.Where()); err != nil {
		return campaign.Decision{}, err
	}
	dec, err := s.b.Do(ctx, id, ev)
	switch {
	case err == nil:
		return dec, nil
	case errors.Is(err, ErrNotFound):
		return dec, notFound(id, s.Where())
	case errors.Is(err, campaign.ErrInvalid), errors.Is(err, campaign.ErrDone):
		return dec, refused(refusal, err)
	}
	return dec, err
}

// List reports every campaign; those that cannot be read are named in the
// error.
func (s *Campaigns) List(ctx context.Context) ([]campaign.StatusReport, error) {
	ids, err := s.b.IDs()
	if err != nil {
		return nil, err
	}
	now := s.now()
	f := s.facts(ctx)
	out := []campaign.StatusReport{}
	var errs []error
	for _, id := range ids {
		drv, known := f.driver(id)
		err := s.b.Read(id, func(c *campaign.Campaign) {
			rep, _ := f.report(c, drv, known, now)
			out = append(out, rep)
		})
		if err != nil && !errors.Is(err, ErrNotFound) { // one removed meanwhile is not listed
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return out, errors.Join(errs...)
}

// Status is the campaign's status report, with its health.
func (s *Campaigns) Status(ctx context.Context, id string) (campaign.StatusReport, error) {
	return s.status(ctx, id)
}

// StatusText is the status text block, with the last event's time and
// the campaign's alerts.
func (s *Campaigns) StatusText(ctx context.Context, id string) (text string, err error) {
	if err := checkID(id, s.Where()); err != nil {
		return "", err
	}
	f := s.facts(ctx)
	drv, known := f.driver(id)
	now := s.now()
	err = s.read(id, func(c *campaign.Campaign) {
		rep, at := f.report(c, drv, known, now)
		text = strings.TrimSuffix(c.StatusText(at), "\n") + healthText(rep, now) + "\n"
	})
	return text, err
}

// Next is the continue-or-stop decision. A campaign no driver runs is told
// the time first (Backend.Settle), so that a criterion that tripped
// sticks; a driver does that itself.
func (s *Campaigns) Next(ctx context.Context, id string) (campaign.NextReport, error) {
	now := s.now()
	if err := checkID(id, s.Where()); err != nil {
		return campaign.NextReport{}, err
	}
	if err := s.b.Settle(ctx, id, now); err != nil && !errors.Is(err, ErrNotFound) {
		return campaign.NextReport{}, err
	}
	var n campaign.NextReport
	err := s.read(id, func(c *campaign.Campaign) { n = c.Next(now) })
	return n, err
}

// Report is the wake-up report; a campaign nothing drives is reported at
// its last event (its elapsed time stops when nothing runs it).
func (s *Campaigns) Report(ctx context.Context, id string) (w campaign.WakeUp, err error) {
	if err := checkID(id, s.Where()); err != nil {
		return w, err
	}
	f := s.facts(ctx)
	drv, known := f.driver(id)
	now := s.now()
	err = s.read(id, func(c *campaign.Campaign) {
		_, at := f.report(c, drv, known, now)
		w = c.WakeUp(at)
	})
	return w, err
}

// AggregateReport is the campaign report as markdown.
func (s *Campaigns) AggregateReport(_ context.Context, id string) (md string, err error) {
	err = s.read(id, func(c *campaign.Campaign) { md = c.ReportMarkdown(s.now()) })
	return md, err
}

// WriteReport writes the campaign's report files into its directory.
func (s *Campaigns) WriteReport(_ context.Context, id string) (files ReportFiles, err error) {
	var werr error
	err = s.read(id, func(c *campaign.Campaign) { files, werr = WriteReports(id, s.b.Dir(id), c, s.now()) })
	if err == nil {
		err = werr
	}
	return files, err
}

// Create checks the request and creates the campaign, or finds it; an
// existing campaign tuned for another workload than the one the request
// names is a conflict.
func (s *Campaigns) Create(ctx context.Context, req CreateRequest) (CreateResponse, error) {
	if err := req.Check(); err != nil {
		return CreateResponse{}, err
	}
	if err := s.refuseDone(req.ID()); err != nil {
		return CreateResponse{}, err
	}
	id, created, workers, err := s.b.Create(ctx, req)
	if err != nil {
		return CreateResponse{}, err
	}
	rep, err := s.status(ctx, id)
	if err != nil {
		return CreateResponse{}, err
	}
	if !created {
		if err := req.sameWorkload(rep.Settings.Workload); err != nil {
			return CreateResponse{}, err
		}
	}
	return CreateResponse{ID: id, Created: created, Workers: workers, Campaign: rep}, nil
}

// refuseDone refuses to create a campaign that exists and is done: the
// start would do nothing, so it says what would (reopen it with a new
// total budget, or start another one beside it under a name). A campaign
// that exists and is not done is found as it is.
func (s *Campaigns) refuseDone(id string) error {
	if campaign.ValidID(id) != nil {
		return nil
	}
	var st campaign.State
	err := s.b.Read(id, func(c *campaign.Campaign) { st = c.State() })
	if err != nil || st.Status != campaign.StatusDone {
		return nil // not there yet (or unreadable: Create says why)
	}
	where := s.place().where()
	return Errorf(ErrConflict, "campaign %s already exists and is done after %d experiments (%s): a start would do nothing.\n"+
		"  add experiments to it:  amkctl reopen %s --iters %d%s   (--iters is the new total: %d run + 20)\n"+
		"  or start a new one:     amkctl start %s --gpu %s --device %s --name NAME%s",
		id, st.ExperimentsRun, st.MoveOnReason, id, st.ExperimentsRun+20, where, st.ExperimentsRun, st.Model, st.GPU, st.Device, where)
}

// Record records an agent's experiment; one the campaign refuses is a bad
// value (a conflict when the campaign is done).
func (s *Campaigns) Record(ctx context.Context, id string, req RecordRequest) (RecordResponse, error) {
	if err := req.check(); err != nil {
		return RecordResponse{}, err
	}
	dec, err := s.do(ctx, id, req.Event(s.now()), ErrBadValue)
	if err != nil {
		return RecordResponse{}, err
	}
	resp := RecordResponse{ID: id, Rows: dec.Rows, Log: dec.Log}
	if resp.Rows == nil {
		resp.Rows = []flywheel.Row{}
	}
	resp.Campaign, err = s.status(ctx, id)
	return resp, err
}

// Command applies an operator command (Commands says what each takes).
func (s *Campaigns) Command(ctx context.Context, id, op string, req CommandRequest) (CommandResponse, error) {
	spec, err := req.check(op)
	if err != nil {
		return CommandResponse{}, err
	}
	var current campaign.MoveOn
	if req.MoveOn != nil {
		if err := s.read(id, func(c *campaign.Campaign) { current = c.State().Settings.MoveOn }); err != nil {
			return CommandResponse{}, err
		}
	}
	refusal := ErrBadValue
	if spec.StateConflict {
		refusal = ErrConflict
	}
	dec, err := s.do(ctx, id, req.event(op, s.now(), current), refusal)
	if err != nil {
		return CommandResponse{}, err
	}
	resp := CommandResponse{ID: id, Log: dec.Log}
	if resp.Log == nil {
		resp.Log = []string{}
	}
	resp.Campaign, err = s.status(ctx, id)
	return resp, err
}

// Workers lists the backend's live workers.
func (s *Campaigns) Workers(ctx context.Context) ([]Worker, error) {
	if f, ok := s.b.(Fleet); ok {
		return f.Workers(ctx)
	}
	return nil, Errorf(ErrUnsupported, "the campaigns %s are evaluated in the process that drives them: there is no worker registry", s.Where())
}

// Queues reports the backend's queues.
func (s *Campaigns) Queues(ctx context.Context) ([]Queue, error) {
	if f, ok := s.b.(Fleet); ok {
		return f.Queues(ctx)
	}
	return nil, Errorf(ErrUnsupported, "the campaigns %s are evaluated in the process that drives them: there are no queues", s.Where())
}

// Health is the backend's health; a backend without one is healthy.
func (s *Campaigns) Health(ctx context.Context) error {
	if f, ok := s.b.(Fleet); ok {
		return f.Health(ctx)
	}
	return nil
}
