package campaign

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// A driver-opened event keeps its run's limits with the trial count and
// campaign time at the opening; what is left of them shrinks with the
// trials issued and the campaign time spent, and is spent when either
// runs out. An event without limits (a scheduler's driver, or one a ledger
// wrote before events carried them) leaves no limit, and a state written
// before the field existed loads as such.
func TestWhatIsLeftOfTheLastRun(t *testing.T) {
	c := New()
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	now := epoch.Add(time.Minute)
	if _, err := c.Step(Propose{Time: now, N: 1}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []RunLimits{{Iterations: -1}, {Minutes: -1}, {Minutes: math.NaN()}, {Minutes: math.Inf(1)}} {
		if _, err := c.Step(Command{Time: now, Op: OpDriverOpened, Run: &bad}); err == nil {
			t.Errorf("driver-opened with limits %+v accepted", bad)
		}
	}
	if _, err := c.Step(Command{Time: now, Op: OpDriverOpened, Run: &RunLimits{Iterations: 2, Minutes: 10}}); err != nil {
		t.Fatal(err)
	}
	if r := c.State().LastRun; r == nil || r.Iterations != 2 || r.TrialsAtOpen != c.State().NextTrial {
		t.Fatalf("last run %+v, want 2 iterations from trial %d", r, c.State().NextTrial)
	}
	now = now.Add(3 * time.Minute)
	if _, err := c.Step(Propose{Time: now, N: 1}); err != nil {
		t.Fatal(err)
	}
	left, spent := c.LeftOfLastRun(now)
	if spent || left.Iterations != 1 || math.Abs(left.Minutes-7) > 1e-9 {
		t.Fatalf("left %+v (spent %v) after 1 trial and 3 minutes of 2 and 10, want 1 and 7", left, spent)
	}
	if left, spent := c.LeftOfLastRun(now.Add(8 * time.Minute)); !spent || !left.Unlimited() {
		t.Fatalf("11 minutes into a 10-minute run: left %+v, spent %v", left, spent)
	}
	if _, err := c.Step(Propose{Time: now, N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, spent := c.LeftOfLastRun(now); !spent {
		t.Fatal("a run asked for 2 trials that issued 2 is not spent")
	}

	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if re, err := Load(data); err != nil || re.State().LastRun == nil || *re.State().LastRun != *c.State().LastRun {
		t.Fatalf("the last run's allowance does not survive a reload: %v", err)
	}
	old, err := Load(bytes.Replace(data, []byte(`"last_run"`), []byte(`"not_a_field"`), 1))
	if err != nil {
		t.Fatal(err)
	}
	if left, spent := old.LeftOfLastRun(now); spent || !left.Unlimited() {
		t.Fatalf("a state without last_run: left %+v, spent %v; want no limit", left, spent)
	}

	if _, err := c.Step(Command{Time: now, Op: OpDriverOpened}); err != nil {
		t.Fatal(err)
	}
	if left, spent := c.LeftOfLastRun(now); spent || !left.Unlimited() || c.State().LastRun != nil {
		t.Fatalf("after a driver without limits opened it: left %+v, spent %v", left, spent)
	}
}
