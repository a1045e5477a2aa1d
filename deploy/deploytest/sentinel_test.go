package deploytest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/runner"
)

// TestSentinelFailoverMidCampaign runs the real scheduler and two CPU
// gpuworkers against a Redis primary, its replica and three redis-sentinel
// processes on loopback, configured with --redis-sentinels. The primary is
// SIGKILLed mid-campaign; the sentinels promote the replica, the daemons
// follow, and the campaign finishes with every trial recorded exactly once.
// The time from the kill to the next recorded result is logged for
// docs/results/fleet-faults.md.
func TestSentinelFailoverMidCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("Sentinel failover with real binaries")
	}
	const budget = 40
	primary := redistest.StartWith(t, redistest.Options{AppendOnly: true})
	replica := redistest.StartWith(t, redistest.Options{AppendOnly: true, ReplicaOf: primary.Addr})
	sentinels := redistest.StartSentinels(t, primary, redistest.SentinelOptions{})
	flags := []string{"--redis-sentinels", strings.Join(sentinels.Addrs, ","), "--redis-sentinel-master", sentinels.Master}
	f := startFleet(t, flags, 2)
	created, err := f.client.Create(context.Background(), control.CreateRequest{Model: "toy", GPU: "h100", Device: "cpu",
		Cold: true, Overnight: true, Workers: 2, Budget: &campaign.Budget{Iterations: budget}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	f.waitExperiments(t, id, 5)
	st, _ := f.client.Status(context.Background(), id)
	killed := time.Now()
	primary.Kill()
	var promoted time.Time
	for deadline := time.Now().Add(time.Minute); promoted.IsZero(); time.Sleep(20 * time.Millisecond) {
		if addr, err := sentinels.Primary(); err == nil && addr == replica.Addr {
			promoted = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover to the replica %s\n%s", replica.Addr, sentinels.Log())
		}
	}
	st, _ = f.client.Status(context.Background(), id)
	resumed := f.waitExperiments(t, id, st.ExperimentsRun+1)
	final := f.waitDone(t, id)
	finished := time.Now()
	rows, err := flywheel.ReadRows(filepath.Join(f.workspace, "campaigns", id, "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != budget || final.ExperimentsRun != budget {
		t.Fatalf("%d rows, %d experiments, want %d", len(rows), final.ExperimentsRun, budget)
	}
	for i, r := range rows {
		if r.Experiment != i+1 || r.Correctness != flywheel.CorrectPass {
			t.Fatalf("row %d: experiment %d %s/%s", i, r.Experiment, r.Tag, r.Correctness)
		}
	}
	f.sched.Stop()
	ws, err := runner.OpenWorkspace(f.workspace)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range c.State().Trajectory {
		if seen[p.Trial] {
			t.Fatalf("trial %d recorded twice", p.Trial)
		}
		seen[p.Trial] = true
	}
	t.Logf("FIGURE sentinel-failover: replica promoted %.1fs after SIGKILL of the primary (down-after 1s), next result %.1fs after the promotion, campaign done %.1fs after the kill; %d trials, each recorded once",
		promoted.Sub(killed).Seconds(), resumed.Sub(promoted).Seconds(), finished.Sub(killed).Seconds(), budget)
}
