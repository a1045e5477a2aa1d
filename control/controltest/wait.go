package controltest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/waitfor"
)

// WaitStatus polls the campaign's status on s until done holds and returns
// that status. After limit the test fails naming what it waited for and
// the last status (or error) seen.
func WaitStatus(t testing.TB, s control.Service, id string, limit time.Duration, what string, done func(campaign.StatusReport) bool) campaign.StatusReport {
	t.Helper()
	var st campaign.StatusReport
	waitfor.Check(t, limit, func() error {
		var err error
		st, err = s.Status(context.Background(), id)
		switch {
		case err != nil:
			return fmt.Errorf("campaign %s, waiting for %s: %w", id, what, err)
		case !done(st):
			return fmt.Errorf("campaign %s, waiting for %s: %s after %d experiments, %d in flight", id, what, st.Status, st.ExperimentsRun, len(st.InFlight))
		}
		return nil
	})
	return st
}

// Finished holds for a campaign that is done with no trial in flight.
func Finished(st campaign.StatusReport) bool {
	return st.Status == campaign.StatusDone && len(st.InFlight) == 0
}

// Ran holds for a campaign that has recorded at least n experiments.
func Ran(n int) func(campaign.StatusReport) bool {
	return func(st campaign.StatusReport) bool { return st.ExperimentsRun >= n }
}
