package campaign

import (
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/trial"
)

// A trial its evaluator refused before evaluating it (no memory for the
// model, no GPU for a cuda trial) tells nothing about its point: the
// point is not queued again (it used to be, at once, for ever without a
// budget), and after MaxRefusals refusals in a row the campaign pauses
// itself, saying why, instead of spending its budget on refusals. Resuming
// queues the canonical default first when it has no baseline yet.
func TestRefusedTrialsAreNotQueuedAgainAndPauseTheCampaign(t *testing.T) {
	c := New()
	now := epoch
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	refused := func(id int) trial.Outcome {
		return trial.Outcome{CampaignID: c.ID(), TrialID: id, Failure: &trial.Failure{Class: trial.FailInfra, Phase: trial.PhaseMemory,
			Message: "model toy needs about 300 MiB of host memory to check a trial, but this evaluator has 12 MiB available"}}
	}
	issued := map[string]int{}
	for i := range MaxRefusals {
		now = now.Add(time.Second)
		d, err := c.Step(Propose{Time: now, N: 1})
		if err != nil || len(d.Enqueue) != 1 {
			t.Fatalf("propose %d: %+v %v", i, d, err)
		}
		spec := d.Enqueue[0]
		id := c.State().InFlight[spec.TrialID].ScheduleID
		if issued[id]++; issued[id] > 1 {
			t.Fatalf("refused point %s issued again (trial %d)", id, spec.TrialID)
		}
		if d, err = c.Step(Finished{Time: now, Outcome: refused(spec.TrialID)}); err != nil {
			t.Fatal(err)
		}
		if len(c.State().Queue) != 0 {
			t.Fatalf("after refusal %d the queue holds %+v", i+1, c.State().Queue)
		}
		if want := i == MaxRefusals-1; (c.Status() == StatusPaused) != want {
			t.Fatalf("after %d refusal(s) the campaign is %s", i+1, c.Status())
		}
	}
	rep := c.StatusReport(now)
	if !strings.Contains(rep.PauseReason, "refused by their evaluators") || !strings.Contains(rep.PauseReason, "12 MiB available") {
		t.Errorf("pause reason %q does not say why", rep.PauseReason)
	}
	if n := c.Next(now); n.Decision != "paused" || !strings.Contains(n.Reason, "refused") {
		t.Errorf("next: %+v", n)
	}
	if d, err := c.Step(Propose{Time: now, N: 1}); err != nil || len(d.Enqueue) != 0 {
		t.Fatalf("a paused campaign proposed %+v %v", d.Enqueue, err)
	}
	d, err := c.Step(Command{Time: now, Op: OpResume})
	if err != nil {
		t.Fatal(err)
	}
	if q := c.State().Queue; len(q) != 1 || q[0].Source != SourceDefault || c.StatusReport(now).PauseReason != "" {
		t.Fatalf("after resume: queue %+v, log %q", q, d.Log)
	}
}
