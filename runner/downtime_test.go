package runner

import (
	"context"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
)

// A run killed mid-campaign and resumed hours later spends none of a
// minutes budget on the hours nothing ran it: the campaign's clock counts
// the time a driver had it open (docs/spec/rules.md R5), so a 30-minute
// budget is not used up by a night with the process dead.
func TestKilledRunsDowntimeIsNotCampaignTime(t *testing.T) {
	ws, _ := OpenWorkspace(t.TempDir())
	start := toyStart(3)
	start.Settings.Overnight = false
	start.Settings.MoveOn.ConsecutiveReverts = 0
	start.Settings.Budget = campaign.Budget{Minutes: 30}
	t0 := start.Time
	l, _, err := ws.Create(start)
	if err != nil {
		t.Fatal(err)
	}
	clock := t0.Add(2 * time.Minute)
	now := func() time.Time { return clock }
	d := dispatch.NewLocal(1, evaluator)
	if _, err := (&Driver{Ledger: l, Dispatcher: d, Workers: 1, Now: now}).Run(context.Background(), Limits{Iterations: 2}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// The process dies here: nothing closes the run, the campaign stays
	// optimizing, and three hours pass before anyone resumes it.
	l.Close()
	clock = t0.Add(3 * time.Hour)

	l, err = ws.Open(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d2 := dispatch.NewLocal(1, evaluator)
	defer d2.Close()
	sum, err := (&Driver{Ledger: l, Dispatcher: d2, Workers: 1, Now: now}).Run(context.Background(), Limits{Iterations: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != campaign.StatusOptimizing || sum.Recorded != 2 {
		t.Fatalf("the resumed run ended %s (%q) after %d outcome(s): the downtime was spent from its 30-minute budget",
			sum.Status, sum.Reason, sum.Recorded)
	}
	if got := l.Campaign().ElapsedMinutes(clock); got > 2.5 {
		t.Fatalf("elapsed %.1f min after a 2-minute run and a 3-hour outage, want about 2", got)
	}
}
