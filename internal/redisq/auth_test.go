package redisq

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
)

var fleetSecret = []byte("0123456789abcdef0123456789abcdef")

func TestSealedOutcomesOpenAndForgeriesDoNot(t *testing.T) {
	lat := 150.5
	out := trial.Outcome{CampaignID: "c", TrialID: 3, Verdict: &trial.Verdict{Valid: true, LatencyUS: &lat},
		Regions: map[string]float64{"mlp": 0.25, "attention": 0.5}, Worker: "w"}
	sealed, err := sealOutcome(fleetSecret, out)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := openOutcome(fleetSecret, sealed)
	if err != nil || got.TrialID != 3 || *got.Verdict.LatencyUS != lat {
		t.Fatalf("open sealed: %+v %v", got, err)
	}
	tampered := []byte(strings.Replace(string(sealed), "150.5", "15.5", 1))
	if _, reason, err := openOutcome(fleetSecret, tampered); err == nil || reason != RejectBadMAC {
		t.Fatalf("tampered outcome: reason %q err %v", reason, err)
	}
	plain, _ := json.Marshal(out)
	if _, reason, err := openOutcome(fleetSecret, plain); err == nil || reason != RejectMissingMAC {
		t.Fatalf("unsigned outcome: reason %q err %v", reason, err)
	}
	other, _ := sealOutcome([]byte("another-secret-another-secret"), out)
	if _, reason, _ := openOutcome(fleetSecret, other); reason != RejectBadMAC {
		t.Fatalf("other fleet's outcome: reason %q", reason)
	}
	if _, _, err := openOutcome(nil, plain); err != nil {
		t.Fatalf("no secret: unsigned outcomes are accepted, got %v", err)
	}
}

// A hand-made outcome put on the results queue of a fleet with a secret is
// refused and counted; the worker's real outcome still arrives.
func TestForgedOutcomeOnTheQueueIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var mu sync.Mutex
	rejected := map[string]int{}
	d := startDispatcher(t, srv, ns, DispatcherOptions{Secret: fleetSecret, SweepInterval: 200 * time.Millisecond,
		OnReject: func(reason string) { mu.Lock(); rejected[reason]++; mu.Unlock() }})
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr})
	defer client.Close()
	lat, pct := 150.5, 101.0
	ok := true
	forged, _ := json.Marshal(trial.Outcome{CampaignID: "forge", TrialID: 1, Verdict: &trial.Verdict{Valid: true,
		Correct: &ok, LatencyUS: &lat, PctOfRoofline: &pct}})
	if err := d.Submit(context.Background(), dispatchtest.Spec("forge", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask(TypeOutcome, forged), asynq.Queue(ResultQueue(ns)), asynq.TaskID("forge/1")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the forgery to be refused", func() bool { mu.Lock(); defer mu.Unlock(); return rejected[RejectMissingMAC] == 1 })
	startWorker(t, srv, ns, "honest", func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) },
		func(o *WorkerOptions) { o.Secret = fleetSecret })
	o := next(t, d, 20*time.Second)
	if o.Verdict == nil || o.Worker != "honest" || *o.Verdict.LatencyUS == lat {
		t.Fatalf("got %+v, want the honest worker's verdict", o)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func FuzzOpenOutcome(f *testing.F) {
	sealed, _ := sealOutcome(fleetSecret, trial.Outcome{CampaignID: "c", TrialID: 1})
	f.Add(sealed)
	f.Add([]byte(`{"trial_id":1,"mac":"00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := openOutcome(fleetSecret, b)
		if err != nil {
			return
		}
		again, err := sealOutcome(fleetSecret, out)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := openOutcome(fleetSecret, again); err != nil {
			t.Fatalf("an accepted outcome does not reopen: %v", err)
		}
	})
}
