package scheduler

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/waitfor"
)

// tampering is a transport through which someone who can write to the
// queue changes what is evaluated: change, when set, rewrites a spec
// before it reaches the evaluators (the real transport then evaluates and
// answers the spec it was handed, as a worker does).
type tampering struct {
	dispatch.Dispatcher
	change func(*trial.Spec)
}

func (t *tampering) Submit(ctx context.Context, spec trial.Spec) error {
	if t.change != nil {
		t.change(&spec)
	}
	return t.Dispatcher.Submit(ctx, spec)
}

// An outcome is bound to the spec issued for its trial: a spec replaced
// on the queue under an issued trial's id is evaluated (here by a worker
// that does not check what it is handed), but its outcome answers another
// spec, so the campaign refuses it and submits the trial again; what is
// recorded for the trial is the issued point's own evaluation.
func TestAnOutcomeOfAReplacedSpecIsNotRecorded(t *testing.T) {
	ws, _ := runner.OpenWorkspace(t.TempDir())
	var mu sync.Mutex
	var issued trial.Spec // trial 0's spec as the campaign issued it
	replaced := false
	tr := &tampering{Dispatcher: dispatch.NewLocal(1, evaluate(0))}
	tr.change = func(s *trial.Spec) {
		mu.Lock()
		defer mu.Unlock()
		if s.TrialID != 0 || replaced {
			return
		}
		issued, replaced = *s, true
		s.Point = json.RawMessage(`{"threads_per_block": 128, "tiling": {"gemv": {"N_tile": 16}}}`)
	}
	var rejected atomic.Int64
	f := startFleet(t, ws, Options{Transport: tr, Rejected: func(reason string) {
		if reason == RejectNotIssued {
			rejected.Add(1)
		}
	}})
	req := toyRequest(3)
	req.Workers = 1
	id, _, _, err := f.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the campaign to finish", func() bool {
		st := status(t, f, id)
		return st.Status == campaign.StatusDone && len(st.InFlight) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if !replaced {
		t.Fatal("no spec was replaced: the test tested nothing")
	}
	honest := trial.Evaluate(context.Background(), issued, trial.Options{Models: models}).Verdict
	if honest == nil || honest.LatencyUS == nil {
		t.Fatalf("the issued point has no latency to compare: %+v", honest)
	}
	c, err := ws.View(id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range c.State().Trajectory {
		if p.Trial != 0 {
			continue
		}
		found = true
		if p.LatencyUS == nil || *p.LatencyUS != *honest.LatencyUS {
			t.Errorf("trial 0 recorded latency %v; the issued point's is %v: the replaced spec's evaluation was recorded", value(p.LatencyUS), *honest.LatencyUS)
		}
	}
	if !found {
		t.Fatal("trial 0 was never recorded")
	}
	if n := rejected.Load(); n != 1 {
		t.Errorf("%d outcomes counted as not issued, want 1", n)
	}
	checkLedger(t, ws, id, 3)
}

// replaying is a transport that answers one trial, once, with an outcome
// captured earlier instead of evaluating it.
type replaying struct {
	dispatch.Dispatcher
	mu       sync.Mutex
	captured *trial.Outcome
	out      chan trial.Outcome
}

func newReplaying(under dispatch.Dispatcher) *replaying {
	r := &replaying{Dispatcher: under, out: make(chan trial.Outcome, 16)}
	go func() {
		for o := range under.Outcomes() {
			r.out <- o
		}
	}()
	return r
}

func (r *replaying) Submit(ctx context.Context, spec trial.Spec) error {
	r.mu.Lock()
	c := r.captured
	if c != nil && c.TrialID == spec.TrialID {
		r.captured = nil
		r.mu.Unlock()
		r.out <- *c
		return nil
	}
	r.mu.Unlock()
	return r.Dispatcher.Submit(ctx, spec)
}

func (r *replaying) Outcomes() <-chan trial.Outcome { return r.out }

// A campaign deleted and created again under the same id is another
// incarnation: an outcome captured from the first (genuine, evaluated by a
// real worker, for the same trial id and the same point) answers another
// spec and is refused by the second.
func TestAnOutcomeOfAnEarlierIncarnationIsRefused(t *testing.T) {
	dir := t.TempDir()
	ws, _ := runner.OpenWorkspace(dir)
	first := newReplaying(dispatch.NewLocal(1, evaluate(0)))
	f := startFleet(t, ws, Options{Transport: first, RescanEvery: -1})
	req := toyRequest(2)
	req.Workers = 1
	id, _, _, err := f.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the first incarnation to finish", func() bool {
		st := status(t, f, id)
		return st.Status == campaign.StatusDone && len(st.InFlight) == 0
	})
	captured := trialLog(t, ws, id)[0]
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ws.CampaignDir(id)); err != nil {
		t.Fatal(err)
	}

	captured.Worker = "captured from the first incarnation"
	again := newReplaying(dispatch.NewLocal(1, evaluate(0)))
	again.captured = &captured
	var rejected atomic.Int64
	g := startFleet(t, ws, Options{Transport: again, RescanEvery: -1, Rejected: func(string) { rejected.Add(1) }})
	if _, _, _, err := g.Create(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, time.Minute, "the second incarnation to finish", func() bool {
		st := status(t, g, id)
		return st.Status == campaign.StatusDone && len(st.InFlight) == 0
	})
	for _, o := range trialLog(t, ws, id) {
		if o.Worker == captured.Worker {
			t.Fatalf("the captured outcome of trial %d was recorded by the new campaign", o.TrialID)
		}
	}
	again.mu.Lock()
	left := again.captured != nil
	again.mu.Unlock()
	if left || rejected.Load() != 1 {
		t.Fatalf("the captured outcome was not replayed and refused once (left %v, refused %d)", left, rejected.Load())
	}
	checkLedger(t, ws, id, 2)
}

// trialLog reads a campaign's trials.jsonl.
func trialLog(t *testing.T, ws *runner.Workspace, id string) []trial.Outcome {
	t.Helper()
	f, err := os.Open(filepath.Join(ws.CampaignDir(id), "trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []trial.Outcome
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var o trial.Outcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}
