package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
)

// The progress line counts up to this run's target or the campaign's own
// budget of experiments, whichever ends the run first; "∞" only when
// neither is set.
func TestProgressShowsThePlannedExperiments(t *testing.T) {
	cases := []struct {
		runTarget, budget int
		want              string
	}{
		{0, 0, "iter 0/∞ "},
		{0, 5, "iter 0/5 "},
		{3, 5, "iter 0/3 "},
		{10, 5, "iter 0/5 "},
	}
	for _, c := range cases {
		start := toyStart(1)
		start.Settings.Budget.Iterations = c.budget
		camp := campaign.New()
		if _, err := camp.Step(start); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		p := &Progress{W: &out, Target: c.runTarget, started: time.Now()}
		p.outcome(camp, time.Now(), campaign.Decision{Rows: []flywheel.Row{{Experiment: 1, Tag: "keep"}}})
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("run target %d, budget %d: %q, want %q", c.runTarget, c.budget, out.String(), c.want)
		}
	}
}
