package dispatch_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/trial"
)

func TestMuxRoutesByCampaign(t *testing.T) {
	var calls atomic.Int64
	m := dispatch.NewMux(dispatch.NewLocal(2, dispatchtest.EchoEvaluator(&calls)))
	defer m.Close()
	a, b := m.For("a"), m.For("b")
	for i := range 5 {
		if err := a.Submit(context.Background(), dispatchtest.Spec("ignored", i)); err != nil {
			t.Fatal(err)
		}
		if err := b.Submit(context.Background(), dispatchtest.Spec("b", 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []struct {
		d  dispatch.Dispatcher
		id string
	}{{a, "a"}, {b, "b"}} {
		for range 5 {
			select {
			case o := <-v.d.Outcomes():
				if o.CampaignID != v.id {
					t.Fatalf("view %s got an outcome of %s", v.id, o.CampaignID)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("view %s: missing outcomes", v.id)
			}
		}
	}
}

// In a synctest bubble synctest.Wait returns once every goroutine of the
// Mux and the evaluators is blocked: the outcomes have arrived where the
// test looks, with no sleeping and polling.
func TestMuxHoldsOutcomesUntilAViewOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		under := dispatch.NewLocal(1, dispatchtest.EchoEvaluator(&calls))
		m := dispatch.NewMux(under)
		defer m.Close()
		if err := under.Submit(context.Background(), dispatchtest.Spec("late", 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if calls.Load() != 1 || m.Held() != 1 {
			t.Fatalf("%d evaluations, %d outcomes held; want 1 and 1", calls.Load(), m.Held())
		}
		select {
		case o := <-m.For("late").Outcomes():
			if o.TrialID != 1 {
				t.Fatalf("got trial %d", o.TrialID)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("held outcome not delivered")
		}
	})
}

// settle waits until every goroutine of the test's synctest bubble is
// blocked (the outcomes submitted have gone where they go) and checks cond.
func settle(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("once settled, not so: %s", what)
	}
}

func TestMuxHoldsAtMostMaxHeldOutcomes(t *testing.T) {
	synctest.Test(t, testMuxHoldsAtMostMaxHeldOutcomes)
}

func testMuxHoldsAtMostMaxHeldOutcomes(t *testing.T) {
	var calls atomic.Int64
	under := dispatch.NewLocal(1, dispatchtest.EchoEvaluator(&calls))
	var mu sync.Mutex
	var dropped []int
	m := dispatch.NewMuxWith(under, dispatch.MuxOptions{MaxHeld: 3, Dropped: func(gone []trial.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range gone {
			dropped = append(dropped, o.TrialID)
		}
	}})
	defer m.Close()
	for i := 1; i <= 5; i++ {
		if err := under.Submit(context.Background(), dispatchtest.Spec("ghost", i)); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Wait()
	if n := m.Dropped(); n != 2 {
		t.Fatalf("dropped %d outcomes, want 2", n)
	}
	if n := m.Held(); n != 3 {
		t.Fatalf("holding %d outcomes, want the cap of 3", n)
	}
	mu.Lock()
	if !slices.Equal(dropped, []int{1, 2}) {
		t.Fatalf("dropped trials %v, want the oldest: [1 2]", dropped)
	}
	mu.Unlock()
	view := m.For("ghost")
	for want := 3; want <= 5; want++ {
		select {
		case o := <-view.Outcomes():
			if o.TrialID != want {
				t.Fatalf("got trial %d, want %d", o.TrialID, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("held trial %d not delivered", want)
		}
	}
	if n := m.Held(); n != 0 {
		t.Fatalf("still holding %d outcomes after the view opened", n)
	}
}

func TestMuxDropsOutcomesHeldPastHoldFor(t *testing.T) {
	synctest.Test(t, testMuxDropsOutcomesHeldPastHoldFor)
}

func testMuxDropsOutcomesHeldPastHoldFor(t *testing.T) {
	var calls atomic.Int64
	under := dispatch.NewLocal(1, dispatchtest.EchoEvaluator(&calls))
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	var gone atomic.Int64
	m := dispatch.NewMuxWith(under, dispatch.MuxOptions{HoldFor: time.Hour, Now: clock,
		Dropped: func(o []trial.Outcome) { gone.Add(int64(len(o))) }})
	defer m.Close()
	for i := 1; i <= 2; i++ {
		if err := under.Submit(context.Background(), dispatchtest.Spec("never-opened", i)); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, "two outcomes held", func() bool { return m.Held() == 2 })
	now.Add(int64(59 * time.Minute))
	if err := under.Submit(context.Background(), dispatchtest.Spec("late", 1)); err != nil {
		t.Fatal(err)
	}
	settle(t, "three outcomes held", func() bool { return m.Held() == 3 })
	if m.Dropped() != 0 {
		t.Fatal("dropped an outcome held for less than HoldFor")
	}
	now.Add(int64(2 * time.Minute))
	if err := under.Submit(context.Background(), dispatchtest.Spec("later", 1)); err != nil {
		t.Fatal(err)
	}
	settle(t, "the two expired outcomes dropped", func() bool { return gone.Load() == 2 })
	if n := m.Held(); n != 2 {
		t.Fatalf("holding %d outcomes, want the 2 younger than HoldFor", n)
	}
}
