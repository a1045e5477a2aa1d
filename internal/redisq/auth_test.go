package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/amk-dev/amk/dispatch/dispatchtest"
	"github.com/amk-dev/amk/internal/redistest"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
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
	waitfor.Cond(t, 20*time.Second, "the forgery to be refused", func() bool { mu.Lock(); defer mu.Unlock(); return rejected[RejectMissingMAC] == 1 })
	startWorker(t, srv, ns, "honest", func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) },
		func(o *WorkerOptions) { o.Secret = fleetSecret })
	o := next(t, d, 20*time.Second)
	if o.Verdict == nil || o.Worker != "honest" || *o.Verdict.LatencyUS == lat {
		t.Fatalf("got %+v, want the honest worker's verdict", o)
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

// A spec replaced on the queue under an issued trial's task id (by anyone
// who can write to Redis but has not the fleet secret) is refused by the
// worker: it is never evaluated and nothing is published for it; the
// dispatcher's sweep finds the archived task and enqueues the spec it
// issued again, whose outcome is the one delivered.
func TestAReplacedSpecIsNeverEvaluated(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	d := startDispatcher(t, srv, ns, DispatcherOptions{Secret: fleetSecret, SweepInterval: 200 * time.Millisecond})
	issued := dispatchtest.Spec("swap", 0)
	issued.Point = json.RawMessage(`{"threads_per_block": 128}`)
	issued.WeightsID = &trial.WeightsID{Kind: trial.WeightsCheckpoint,
		Files: []trial.WeightsFileID{{Name: "model.safetensors", Bytes: 1 << 30, SHA256: strings.Repeat("ab", 32)}}}
	if err := d.Submit(context.Background(), issued); err != nil {
		t.Fatal(err)
	}
	queue := TrialQueue(ns, testTarget)
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr})
	defer insp.Close()
	if err := insp.DeleteTask(queue, TaskID(issued)); err != nil {
		t.Fatal(err)
	}
	forged := issued
	forged.Point = json.RawMessage(`{"threads_per_block": 1024}`)
	for name, payload := range map[string][]byte{
		"unsigned":                   must(json.Marshal(forged)),
		"signed with another secret": must(sealSpec([]byte("not-the-fleet-secret-not-the-fleet"), forged)),
		// The issued spec and its MAC, for other weights: evaluated, it
		// would record seeded weights' figures as the checkpoint's.
		"the issued MAC on other weights": otherWeights(t, must(sealSpec(fleetSecret, issued))),
	} {
		client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr})
		if _, err := client.Enqueue(asynq.NewTask(TypeTrial, payload), asynq.Queue(queue), asynq.TaskID(TaskID(issued))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		client.Close()
		var mu sync.Mutex
		var seen []string
		var refused atomic.Int64
		w := startWorker(t, srv, ns, "honest", func(ctx context.Context, spec trial.Spec) trial.Outcome {
			mu.Lock()
			seen = append(seen, spec.Digest())
			mu.Unlock()
			return okVerdict(spec)
		}, func(o *WorkerOptions) {
			o.Secret = fleetSecret
			o.Refused = func(string) { refused.Add(1) }
		})
		o := next(t, d, 30*time.Second)
		if o.SpecDigest != issued.Digest() {
			t.Fatalf("%s: the outcome delivered answers spec %q, not the one issued %q", name, o.SpecDigest, issued.Digest())
		}
		mu.Lock()
		for _, digest := range seen {
			if digest != issued.Digest() {
				t.Fatalf("%s: the worker evaluated spec %s, which the dispatcher never issued", name, digest)
			}
		}
		mu.Unlock()
		if refused.Load() != 1 {
			t.Fatalf("%s: the worker refused %d payloads, want 1", name, refused.Load())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = w.Shutdown(ctx)
		cancel()
		// The next round replaces the trial of another submission.
		d.Forget(o)
		waitfor.Cond(t, 20*time.Second, "the trial to be forgotten", func() bool {
			_, err := insp.GetTaskInfo(queue, TaskID(issued))
			return errors.Is(err, asynq.ErrTaskNotFound)
		})
		d.Undeliver(o)
		if err := d.Submit(context.Background(), issued); err != nil {
			t.Fatal(err)
		}
		if err := insp.DeleteTask(queue, TaskID(issued)); err != nil {
			t.Fatal(err)
		}
	}
}

// An outcome signed with the fleet secret, captured from a campaign that
// was deleted and created again under the same id (another incarnation:
// the same trial id, the same point), answers another spec: the
// dispatcher refuses it, and the new incarnation's own outcome arrives.
func TestACapturedOutcomeIsRefusedByANewIncarnation(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	var mu sync.Mutex
	rejected := map[string]int{}
	d := startDispatcher(t, srv, ns, DispatcherOptions{Secret: fleetSecret, SweepInterval: 200 * time.Millisecond,
		OnReject: func(reason string) { mu.Lock(); rejected[reason]++; mu.Unlock() }})
	earlier := dispatchtest.Spec("again", 0)
	earlier.Incarnation = "first"
	now := earlier
	now.Incarnation = "second"
	captured := okVerdict(earlier)
	captured.CampaignID, captured.TrialID, captured.SpecDigest, captured.Worker = earlier.CampaignID, earlier.TrialID, earlier.Digest(), "captured"
	sealed, err := sealOutcome(fleetSecret, captured)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr})
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask(TypeOutcome, sealed), asynq.Queue(ResultQueue(ns)), asynq.TaskID("again/0")); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 20*time.Second, "the captured outcome to be refused", func() bool { mu.Lock(); defer mu.Unlock(); return rejected[RejectNotIssued] == 1 })
	startWorker(t, srv, ns, "honest", func(ctx context.Context, spec trial.Spec) trial.Outcome { return okVerdict(spec) },
		func(o *WorkerOptions) { o.Secret = fleetSecret })
	o := next(t, d, 30*time.Second)
	if o.Worker == "captured" || o.SpecDigest != now.Digest() {
		t.Fatalf("got %+v, want the new incarnation's own outcome", o)
	}
}

// otherWeights is a signed trial payload with its weights identity
// replaced by seeded weights' and its MAC kept.
func otherWeights(t *testing.T, payload []byte) []byte {
	t.Helper()
	var fields map[string]any
	if err := json.Unmarshal(payload, &fields); err != nil || fields["mac"] == nil || fields["weights_id"] == nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
	fields["weights_id"] = map[string]any{"kind": trial.WeightsSeeded, "seed": trial.WeightSeed}
	return must(json.Marshal(fields))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
