package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/runner"
)

// A device cuda campaign promises latencies measured on a GPU: a fleet
// whose live workers of the target all evaluate on the CPU refuses to
// create it (they would refuse every trial, or, before, label predictions
// as its measurements). One GPU worker, or none yet, lets it start.
func TestACudaCampaignOnACPUOnlyFleetIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers []control.Worker
		refused bool
	}{
		{"cpu workers only", []control.Worker{{ID: "a", Target: "h100", Device: "cpu"}, {ID: "b", Target: "h100", Device: "cpu"},
			{ID: "gpu-other-target", Target: "h200", Device: "0"}}, true},
		{"one gpu worker", []control.Worker{{ID: "a", Target: "h100", Device: "cpu"}, {ID: "g", Target: "h100", Device: "0"}}, false},
		{"no worker yet", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := runner.OpenWorkspace(t.TempDir())
			f := startFleet(t, ws, Options{Workers: func(context.Context) ([]control.Worker, error) { return tc.workers, nil }})
			_, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h100", Device: "cuda", Workers: 1})
			if tc.refused {
				if !errors.Is(err, control.ErrBadValue) || !strings.Contains(err.Error(), "evaluate on the CPU") {
					t.Fatalf("%v, want ErrBadValue saying the workers evaluate on the CPU", err)
				}
				if ids, _ := f.IDs(); len(ids) != 0 {
					t.Fatalf("a refused campaign was created: %v", ids)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := f.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h100", Device: "cpu", Workers: 1}); err != nil {
				t.Fatalf("a cpu campaign: %v", err)
			}
		})
	}
}
