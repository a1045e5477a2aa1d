package dispatch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/dispatch/dispatchtest"
)

func TestMuxRoutesByCampaign(t *testing.T) {
	var calls atomic.Int64
	m := dispatch.NewMux(dispatch.NewLocal(2, dispatchtest.EchoEvaluator(&calls)))
	defer m.Close()
	a, b := m.For("a"), m.For("b")
	for i := 0; i < 5; i++ {
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
		for i := 0; i < 5; i++ {
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

func TestMuxHoldsOutcomesUntilAViewOpens(t *testing.T) {
	var calls atomic.Int64
	under := dispatch.NewLocal(1, dispatchtest.EchoEvaluator(&calls))
	m := dispatch.NewMux(under)
	defer m.Close()
	if err := under.Submit(context.Background(), dispatchtest.Spec("late", 1)); err != nil {
		t.Fatal(err)
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	select {
	case o := <-m.For("late").Outcomes():
		if o.TrialID != 1 {
			t.Fatalf("got trial %d", o.TrialID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held outcome not delivered")
	}
}
