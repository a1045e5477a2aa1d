package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/trial"
)

func TestLocalSuite(t *testing.T) {
	dispatchtest.Run(t, func(t *testing.T, eval dispatch.Evaluator) dispatch.Dispatcher {
		return dispatch.NewLocal(4, eval)
	})
}

func TestLocalPanicBecomesCrash(t *testing.T) {
	d := dispatch.NewLocal(1, func(ctx context.Context, spec trial.Spec) trial.Outcome { panic("boom") })
	defer d.Close()
	if err := d.Submit(context.Background(), dispatchtest.Spec("c", 3)); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-d.Outcomes():
		if o.Failure == nil || o.Failure.Class != trial.FailCrash || o.TrialID != 3 {
			t.Fatalf("got %+v, want a crash for trial 3", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome")
	}
}
