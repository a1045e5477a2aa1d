package control

import (
	"context"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/api"
)

// Remote is a scheduler's campaigns, through its HTTP API.
type Remote struct {
	Client *api.Client
}

var _ Campaigns = Remote{}

// Where names the scheduler.
func (r Remote) Where() string { return "on the scheduler at " + r.Client.Server() }

// List reports the scheduler's campaigns.
func (r Remote) List(ctx context.Context) ([]campaign.StatusReport, error) {
	return r.Client.Campaigns(ctx)
}

// Resolve names a campaign; a lone argument without --gpu is an id.
func (r Remote) Resolve(ctx context.Context, sel Selector) (string, error) {
	if id, ok, err := sel.fixed(); ok || err != nil {
		return id, err
	}
	if sel.Arg != "" {
		return sel.Arg, nil
	}
	reports, err := r.Client.Campaigns(ctx)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(reports))
	for i, rep := range reports {
		ids[i] = rep.ID
	}
	return only(ids, r.Where(), "start one with amkctl --server URL start MODEL --gpu G")
}

// Status is the campaign's status report.
func (r Remote) Status(ctx context.Context, id string) (campaign.StatusReport, error) {
	return r.Client.Status(ctx, id)
}

// StatusText is the status text block.
func (r Remote) StatusText(ctx context.Context, id string) (string, error) {
	return r.Client.StatusText(ctx, id)
}

// Next is the continue-or-stop decision.
func (r Remote) Next(ctx context.Context, id string) (campaign.NextReport, error) {
	return r.Client.Next(ctx, id)
}

// Report is the wake-up report.
func (r Remote) Report(ctx context.Context, id string) (campaign.WakeUp, error) {
	return r.Client.Report(ctx, id)
}

// WriteReport has the scheduler write the report files on its machine.
func (r Remote) WriteReport(ctx context.Context, id string) (api.ReportFiles, error) {
	return r.Client.WriteReport(ctx, id)
}

// Create creates the campaign on the scheduler, which starts running it.
func (r Remote) Create(ctx context.Context, req api.CreateRequest) (api.CreateResponse, error) {
	return r.Client.Create(ctx, req)
}

// Record records an agent's experiment.
func (r Remote) Record(ctx context.Context, id string, req api.RecordRequest) (api.RecordResponse, error) {
	return r.Client.Record(ctx, id, req)
}

// Command applies an operator command.
func (r Remote) Command(ctx context.Context, id, op string, req api.CommandRequest) (api.CommandResponse, error) {
	if op == campaign.OpBudget {
		if req.Budget == nil {
			return api.CommandResponse{}, errNoBudget
		}
		return r.Client.SetBudget(ctx, id, *req.Budget)
	}
	return r.Client.Command(ctx, id, op, req)
}
