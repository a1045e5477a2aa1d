package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/schedule"
)

// CommandTimeout is how long a front lets a state-changing request wait
// for the campaign's driver before it answers ErrUnavailable.
const CommandTimeout = 15 * time.Second

// Service is every campaign operation: what an operator or an agent can
// ask of a set of campaigns, wherever they live. Campaigns implements it
// over a Backend (a workspace on this machine, a scheduler's fleet), and
// the HTTP API's client implements it across the network; the fronts
// (amkctl's verbs, the HTTP server, the MCP server, the web view) are
// written once against it.
//
// Errors wrap one of the kinds of errors.go (ErrNotFound, ErrBadValue,
// ErrConflict, ErrUnavailable, ErrUnsupported) unless the machine itself
// failed.
type Service interface {
	// Where says where the campaigns are, for messages: "in DIR" or "on
	// the scheduler at URL".
	Where() string
	// List reports every campaign. Campaigns that cannot be read are left
	// out and named in the error, which comes with the others.
	List(ctx context.Context) ([]campaign.StatusReport, error)
	// Status is the campaign's status report.
	Status(ctx context.Context, id string) (campaign.StatusReport, error)
	// StatusText is the status as the orchestrator's text block.
	StatusText(ctx context.Context, id string) (string, error)
	// Next is the continue-or-stop decision; a criterion that tripped is
	// made to stick (the campaign becomes done) where the campaign can
	// take an event.
	Next(ctx context.Context, id string) (campaign.NextReport, error)
	// Report is the wake-up report.
	Report(ctx context.Context, id string) (campaign.WakeUp, error)
	// AggregateReport is the campaign report (all experiments, per
	// region) as markdown.
	AggregateReport(ctx context.Context, id string) (string, error)
	// WriteReport writes the report files on the campaigns' machine.
	WriteReport(ctx context.Context, id string) (ReportFiles, error)
	// Trial is one trial of a campaign: its spec while it is in flight,
	// its outcome (verdict or failure, worker, stage times) once finished.
	Trial(ctx context.Context, id string, trialID int) (TrialReport, error)
	// Create creates a campaign, or finds it when it exists (Created
	// false); where campaigns are driven (a fleet), it starts running.
	Create(ctx context.Context, req CreateRequest) (CreateResponse, error)
	// Record records an outside agent's experiment.
	Record(ctx context.Context, id string, req RecordRequest) (RecordResponse, error)
	// Command applies an operator command (a key of Commands: pause,
	// resume, stop, reopen, budget, criteria, note).
	Command(ctx context.Context, id, op string, req CommandRequest) (CommandResponse, error)
}

// Selector names a campaign: by ID, by MODEL with GPU (and Device, Name),
// by Arg (a campaign id, or a MODEL when GPU is set), or, with none of
// them, the only campaign there is.
type Selector struct {
	ID        string
	Arg       string
	GPU, Name string
	Device    schedule.Device
	// Extra are unexpected further positional arguments (an error).
	Extra []string
}

// Resolve names the campaign sel means among s's campaigns. A lone Arg
// without GPU must be the id of one of them.
func Resolve(ctx context.Context, s Service, sel Selector) (string, error) {
	switch {
	case len(sel.Extra) > 0:
		return "", badValue("unexpected arguments %q", sel.Extra)
	case sel.ID != "" && sel.Arg != "":
		return "", badValue("unexpected argument %q besides --campaign %s", sel.Arg, sel.ID)
	case sel.ID != "":
		return sel.ID, nil
	case sel.Arg != "" && sel.GPU != "":
		return campaign.ID(sel.Arg, sel.GPU, sel.Device, sel.Name), nil
	case sel.Arg != "":
		_, err := s.Status(ctx, sel.Arg)
		if errors.Is(err, ErrNotFound) {
			return "", Errorf(ErrNotFound, "no campaign %q %s; a MODEL needs --gpu to name a campaign (see amkctl campaigns)", sel.Arg, s.Where())
		}
		if err != nil {
			return "", err
		}
		return sel.Arg, nil
	}
	list, err := s.List(ctx)
	if err != nil && list == nil {
		return "", err
	}
	switch len(list) {
	case 0:
		return "", Errorf(ErrNotFound, "no campaigns %s (start one with amkctl autoresearch, or amkctl start)", s.Where())
	case 1:
		return list[0].ID, nil
	}
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	return "", badValue("%d campaigns %s (%s): choose one by id, with --campaign ID or with MODEL --gpu G", len(ids), s.Where(), strings.Join(ids, ", "))
}

// Backend is where campaigns live and how an event reaches one: the one
// seam between the operations (Campaigns) and a kind of campaign store.
// Local is the workspace of this machine; a scheduler's fleet
// (internal/scheduler) is the other.
type Backend interface {
	// Where says where the campaigns are, for messages.
	Where() string
	// IDs lists the campaigns, sorted.
	IDs() ([]string, error)
	// Read runs fn on a campaign: its live state where it is driven here,
	// otherwise what its ledger holds. A campaign that does not exist is
	// ErrNotFound.
	Read(id string, fn func(c *campaign.Campaign)) error
	// Do applies an event to a campaign, serialised with its driver when
	// it has one here. The campaign's refusal is returned as it is (it
	// wraps campaign.ErrInvalid or ErrDone); a campaign that cannot take
	// events here is ErrConflict or ErrUnavailable.
	Do(ctx context.Context, id string, ev campaign.Event) (campaign.Decision, error)
	// Settle tells a campaign no driver runs what time it is, so that a
	// time criterion that tripped sticks (Next); a campaign a driver runs
	// (here or in another process) is left to it.
	Settle(ctx context.Context, id string, now time.Time) error
	// Create creates the campaign a checked request names, or finds it
	// (created false), and starts driving it where campaigns are driven;
	// workers are its trials in flight there (0: not driven).
	Create(ctx context.Context, req CreateRequest) (id string, created bool, workers int, err error)
	// Dir is the directory of a campaign's files (its report files).
	Dir(id string) string
}

// checkID refuses an id no campaign can have (campaign.ValidID), so that
// an id never names a path outside the campaigns' directory.
func checkID(id, where string) error {
	if campaign.ValidID(id) != nil {
		return notFound(id, where)
	}
	return nil
}

// refused is the error of an event the campaign refused: a conflict with
// its state or a bad value, by the event.
func refused(kind, err error) error {
	if errors.Is(err, campaign.ErrDone) {
		kind = ErrConflict
	}
	return &Error{Kind: kind, Msg: fmt.Sprintf("refused: %v", err), Err: err}
}
