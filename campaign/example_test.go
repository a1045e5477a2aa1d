package campaign_test

import (
	"context"
	"fmt"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

// A campaign is driven by feeding it events and acting on its decisions:
// ask for trials (Propose), evaluate what it enqueues, hand back each
// outcome (Finished), until it is done. runner.Driver does this with a
// ledger on disk and a dispatcher; here the loop is bare, one trial at a
// time, on the CPU cost model.
func ExampleCampaign_Step() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	settings := campaign.DefaultSettings()
	settings.Budget = campaign.Budget{Iterations: 4}
	c := campaign.New()
	if _, err := c.Step(campaign.Start{Time: now(), Model: "toy", GPU: "h100", Device: "cpu", Cold: true, Seed: 1, Settings: settings}); err != nil {
		fmt.Println(err)
		return
	}
	models := trial.NewModelCache(0)
	for c.Status() == campaign.StatusOptimizing {
		dec, err := c.Step(campaign.Propose{Time: now(), N: 1})
		if err != nil || len(dec.Enqueue) == 0 {
			break
		}
		for _, spec := range dec.Enqueue {
			out := trial.Evaluate(context.Background(), spec, trial.Options{Models: models})
			if _, err := c.Step(campaign.Finished{Time: now(), Outcome: out}); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	st := c.StatusReport(now())
	fmt.Println(st.Status, st.ExperimentsRun, "experiments;", st.MoveOnReason)
	fmt.Println("best latency kind:", st.BestKind)
	// Output:
	// done 4 experiments; budget exhausted: 4 experiments (budget 4)
	// best latency kind: predicted
}
