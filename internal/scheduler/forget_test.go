package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// forgettingLocal is the in-process transport with the redisq
// dispatcher's Forget, noting what it is told.
type forgettingLocal struct {
	*dispatch.Local
	mu        sync.Mutex
	forgotten map[int]int
}

func (l *forgettingLocal) Forget(o trial.Outcome) {
	l.mu.Lock()
	l.forgotten[o.TrialID]++
	l.mu.Unlock()
}

// Once a campaign has recorded an outcome the fleet tells the transport,
// once per trial, so that it can drop what it kept to recover it; the
// Recorded hook sees the same outcomes.
func TestFleetTellsTheTransportWhatIsRecorded(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	tr := &forgettingLocal{Local: dispatch.NewLocal(2, evaluate(0)), forgotten: map[int]int{}}
	var hooked sync.Map
	f := startFleet(t, ws, Options{Transport: tr, Recorded: func(o trial.Outcome) { hooked.Store(o.TrialID, true) }})
	id, _, _, err := f.Create(context.Background(), toyRequest(8))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitfor.Cond(t, time.Minute, "the last trials", func() bool { return len(status(t, f, id).InFlight) == 0 })
	// Every trial the transport evaluated, once: the trajectory's trials.
	var want []int
	if err := f.Read(id, func(c *campaign.Campaign) {
		for _, p := range c.State().Trajectory {
			if p.Trial >= 0 {
				want = append(want, p.Trial)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(want) == 0 || len(tr.forgotten) != len(want) {
		t.Fatalf("transport told of trials %v, want %v", tr.forgotten, want)
	}
	for _, trialID := range want {
		if n := tr.forgotten[trialID]; n != 1 {
			t.Fatalf("trial %d forgotten %d times", trialID, n)
		}
		if _, ok := hooked.Load(trialID); !ok {
			t.Fatalf("Recorded did not see trial %d", trialID)
		}
	}
}

// twiceLocal delivers every outcome of its transport twice, as a lost
// worker's late answer or a redelivery after a restart would.
type twiceLocal struct {
	*forgettingLocal
	out chan trial.Outcome
}

func (l *twiceLocal) Outcomes() <-chan trial.Outcome { return l.out }

// A copy of an outcome the campaign already recorded is refused, and the
// transport is told to forget it too (what Redis kept of the copy is not
// needed either); the Recorded hook sees each trial once.
func TestFleetForgetsRefusedCopies(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	tr := &twiceLocal{forgettingLocal: &forgettingLocal{Local: dispatch.NewLocal(2, evaluate(0)), forgotten: map[int]int{}},
		out: make(chan trial.Outcome)}
	go func() {
		for o := range tr.Local.Outcomes() {
			tr.out <- o
			tr.out <- o
		}
	}()
	recorded := map[int]int{}
	var mu sync.Mutex
	f := startFleet(t, ws, Options{Transport: tr, Recorded: func(o trial.Outcome) {
		mu.Lock()
		recorded[o.TrialID]++
		mu.Unlock()
	}})
	id, _, _, err := f.Create(context.Background(), toyRequest(6))
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool { return status(t, f, id).Status == campaign.StatusDone })
	waitfor.Cond(t, time.Minute, "every copy to be refused and forgotten", func() bool {
		mu.Lock()
		defer mu.Unlock()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for trialID, n := range recorded {
			if tr.forgotten[trialID] != 2*n {
				return false
			}
		}
		return len(recorded) > 0 && len(status(t, f, id).InFlight) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	for trialID, n := range recorded {
		if n != 1 {
			t.Fatalf("trial %d recorded %d times", trialID, n)
		}
	}
}
