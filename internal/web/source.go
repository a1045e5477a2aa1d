package web

import (
	"context"
	"errors"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/api"
)

// Source is what the pages show and steer: control.Local and control.Remote
// satisfy it, and ServiceSource adapts an api.Service.
type Source interface {
	// List reports every campaign (those that cannot be read are named in
	// the error, which comes with the others).
	List(ctx context.Context) ([]campaign.StatusReport, error)
	// Report is a campaign's wake-up report, its trajectory included.
	Report(ctx context.Context, id string) (campaign.WakeUp, error)
	// Command applies campaign.OpPause, OpResume or OpStop.
	Command(ctx context.Context, id, op string, req api.CommandRequest) (api.CommandResponse, error)
}

// Fleet reports the workers and queues of a transport. Either may answer
// an error wrapping api.ErrUnsupported (an in-process transport).
type Fleet interface {
	Workers(ctx context.Context) ([]api.Worker, error)
	Queues(ctx context.Context) ([]api.Queue, error)
}

// ServiceSource adapts the scheduler's api.Service; now is the clock of
// reports and commands (time.Now when nil).
func ServiceSource(svc api.Service, now func() time.Time) Source {
	if now == nil {
		now = time.Now
	}
	return serviceSource{svc: svc, now: func() time.Time { return now().UTC() }}
}

type serviceSource struct {
	svc api.Service
	now func() time.Time
}

func (s serviceSource) List(context.Context) ([]campaign.StatusReport, error) {
	now := s.now()
	var out []campaign.StatusReport
	var errs []error
	for _, id := range s.svc.IDs() {
		if err := s.svc.Read(id, func(c *campaign.Campaign) { out = append(out, c.StatusReport(now)) }); err != nil && !errors.Is(err, api.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (s serviceSource) Report(_ context.Context, id string) (campaign.WakeUp, error) {
	var w campaign.WakeUp
	err := s.svc.Read(id, func(c *campaign.Campaign) { w = c.WakeUp(s.now()) })
	return w, err
}

func (s serviceSource) Command(ctx context.Context, id, op string, req api.CommandRequest) (api.CommandResponse, error) {
	dec, err := s.svc.Do(ctx, id, campaign.Command{Time: s.now(), Op: op, Note: req.Note, Budget: req.Budget})
	if err != nil {
		return api.CommandResponse{}, err
	}
	resp := api.CommandResponse{ID: id, Log: dec.Log}
	err = s.svc.Read(id, func(c *campaign.Campaign) { resp.Campaign = c.StatusReport(s.now()) })
	return resp, err
}
