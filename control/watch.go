package control

import (
	"context"
	"time"

	"github.com/amk-dev/amk/campaign"
)

// Watch shows a campaign's status (the report and its text) at once and
// then every interval, until the campaign is done (after showing it done)
// or ctx ends (nil: the watcher stopped it). An error of s or of show ends
// it with that error.
func Watch(ctx context.Context, s Service, id string, interval time.Duration, show func(rep campaign.StatusReport, text string) error) error {
	if interval <= 0 {
		return Errorf(ErrBadValue, "the watch interval must be positive, not %s", interval)
	}
	for {
		rep, err := s.Status(ctx, id)
		if err == nil {
			var text string
			if text, err = s.StatusText(ctx, id); err == nil {
				err = show(rep, text)
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		case rep.Status == campaign.StatusDone:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}
