package api

import (
	"context"

	"github.com/amk-dev/amk/campaign"
)

// Service is what the API serves: a scheduler's campaigns and transport.
// Its errors wrap ErrNotFound, ErrBadValue, ErrUnavailable, ErrUnsupported
// or the campaign package's Err* values; the server maps them to statuses.
type Service interface {
	// IDs lists the campaigns, sorted.
	IDs() []string
	// Read runs fn on a campaign's live state, with no event applied
	// meanwhile.
	Read(id string, fn func(c *campaign.Campaign)) error
	// Create starts a campaign, or finds it when it exists (created false).
	Create(ctx context.Context, req CreateRequest) (id string, created bool, workers int, err error)
	// Do applies an event (a command or a record) to a campaign, serialised
	// with its driver.
	Do(ctx context.Context, id string, ev campaign.Event) (campaign.Decision, error)
	// WriteReport writes the campaign's report files.
	WriteReport(id string) (ReportFiles, error)
	// Workers lists the live workers of the transport.
	Workers(ctx context.Context) ([]Worker, error)
	// Queues reports the transport's queues.
	Queues(ctx context.Context) ([]Queue, error)
	// Health is nil while the service can do its work.
	Health(ctx context.Context) error
}
