package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/schedule"
)

// Campaigns is a set of campaigns a user can inspect and steer: a local
// workspace (Local) or a scheduler (Remote).
type Campaigns interface {
	// Where says where the campaigns are, for messages: "in DIR" or "on
	// the scheduler at URL".
	Where() string
	// List reports every campaign. Campaigns that cannot be read are left
	// out and named in the error, which comes with the others.
	List(ctx context.Context) ([]campaign.StatusReport, error)
	// Resolve names the campaign a selection means.
	Resolve(ctx context.Context, sel Selector) (string, error)
	// Status is the campaign's status report.
	Status(ctx context.Context, id string) (campaign.StatusReport, error)
	// StatusText is the status as the orchestrator's text block.
	StatusText(ctx context.Context, id string) (string, error)
	// Next is the continue-or-stop decision; a criterion that tripped is
	// made to stick (the campaign becomes done).
	Next(ctx context.Context, id string) (campaign.NextReport, error)
	// Report is the wake-up report.
	Report(ctx context.Context, id string) (campaign.WakeUp, error)
	// WriteReport writes the report files (on the campaigns' machine).
	WriteReport(ctx context.Context, id string) (api.ReportFiles, error)
	// Create creates a campaign, or finds it when it exists (Created false).
	Create(ctx context.Context, req api.CreateRequest) (api.CreateResponse, error)
	// Record records an outside agent's experiment.
	Record(ctx context.Context, id string, req api.RecordRequest) (api.RecordResponse, error)
	// Command applies an operator command: campaign.OpPause, OpResume,
	// OpStop, OpReopen (with an optional budget and move-on overrides) or
	// OpBudget (req.Budget is the new budget).
	Command(ctx context.Context, id, op string, req api.CommandRequest) (api.CommandResponse, error)
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

// fixed resolves the selections that need no listing; ok is false for
// "the only campaign".
func (s Selector) fixed() (id string, ok bool, err error) {
	switch {
	case len(s.Extra) > 0:
		return "", false, fmt.Errorf("unexpected arguments %q", s.Extra)
	case s.ID != "" && s.Arg != "":
		return "", false, fmt.Errorf("unexpected argument %q besides --campaign %s", s.Arg, s.ID)
	case s.ID != "":
		return s.ID, true, nil
	case s.Arg != "" && s.GPU != "":
		return campaign.ID(s.Arg, s.GPU, s.Device, s.Name), true, nil
	}
	return "", false, nil
}

// only picks the only campaign of ids.
func only(ids []string, where, hint string) (string, error) {
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no campaigns %s (%s)", where, hint)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d campaigns %s (%s): choose one by id, with --campaign ID or with MODEL --gpu G", len(ids), where, strings.Join(ids, ", "))
}
