package control

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
)

func newLocal(t *testing.T) *Local {
	t.Helper()
	l, err := OpenLocal(filepath.Join(t.TempDir(), "ws"), true, flywheel.Env{AMKVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.Now = func() time.Time { return clock }
	return l
}

func TestOpenLocalNeedsTheWorkspace(t *testing.T) {
	_, err := OpenLocal(filepath.Join(t.TempDir(), "absent"), false, flywheel.Env{})
	if err == nil || !strings.Contains(err.Error(), "no workspace at") {
		t.Fatalf("err %v", err)
	}
}

// A campaign another process drives refuses changes, as a conflict that
// says what to do, but not reads; next reads its decision as it stands.
func TestLocalRefusesChangesToACampaignDrivenElsewhere(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	cs := New(l)
	resp, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200", Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := l.Workspace.Open(resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.Command(ctx, resp.ID, campaign.OpPause, CommandRequest{})
	if !errors.Is(err, ErrConflict) || !errors.Is(err, runner.ErrLocked) || !strings.Contains(err.Error(), "another process drives it") {
		t.Fatalf("pause while locked: %v", err)
	}
	if _, err := cs.Next(ctx, resp.ID); err != nil {
		t.Fatalf("next while locked: %v", err)
	}
	if _, err := cs.Status(ctx, resp.ID); err != nil {
		t.Fatalf("status while locked: %v", err)
	}
	if _, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create of a campaign driven elsewhere: %v", err)
	}
	ledger.Close()
	if _, err := cs.Command(ctx, resp.ID, campaign.OpPause, CommandRequest{}); err != nil {
		t.Fatalf("pause once released: %v", err)
	}
}

// An unreadable ledger is named in List's error; the others are listed.
func TestLocalListSkipsAnUnreadableCampaign(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	cs := New(l)
	if _, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200"}); err != nil {
		t.Fatal(err)
	}
	bad := l.Workspace.CampaignDir("broken")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "ledger.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := cs.List(ctx)
	if len(list) != 1 || err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("list: %+v %v", list, err)
	}
}

// corpusRecord is a kept toy point on h200 with a predicted latency.
func corpusRecord(latency float64) flywheel.Record {
	return flywheel.Record{Model: "toy", GPU: "h200", Regime: flywheel.RegimeSingle, Correctness: flywheel.CorrectPass,
		LatencyUS: latency, BoundUS: 1, PctOfRoofline: latency * 100, Schedule: schedule.Default().Value(),
		IRVersion: "test", ABIVersion: "test", TS: 1780000000, LatencyKind: flywheel.KindPredicted,
		Shape: flywheel.Shape{Hidden: 64, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
}

// New campaigns read the corpus once and then what drivers (or anyone)
// appended: each warm campaign still starts from the whole corpus as it is
// at its creation, and a cold one from none (a scheduler creates many with
// one Local).
func TestCreateSeesTheCorpusAsItGrows(t *testing.T) {
	l := newLocal(t)
	cs := New(l)
	if err := flywheel.AppendCorpus(l.Workspace.CorpusPath(), corpusRecord(3), corpusRecord(4)); err != nil {
		t.Fatal(err)
	}
	prior := func(name string, cold bool) int {
		t.Helper()
		resp, err := cs.Create(context.Background(), CreateRequest{Model: "toy", GPU: "h200", Name: name, Cold: cold})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := l.Read(resp.ID, func(c *campaign.Campaign) { n = len(c.State().Prior) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prior("warm1", false); n != 2 {
		t.Fatalf("first warm campaign's prior has %d examples, want the corpus's 2", n)
	}
	if err := flywheel.AppendCorpus(l.Workspace.CorpusPath(), corpusRecord(5)); err != nil {
		t.Fatal(err)
	}
	if n := prior("warm2", false); n != 3 {
		t.Fatalf("second warm campaign's prior has %d examples, want the 3 of the corpus", n)
	}
	if n := prior("cold", true); n != 0 {
		t.Fatalf("cold campaign's prior has %d examples", n)
	}
}

// Building a warm campaign's start event costs what was appended to the
// corpus since the last one, not a parse of the whole corpus (a scheduler
// creates many): its allocations stay far below one per record of a
// 2,000-record corpus (a full read allocates dozens per record).
func TestStartEventDoesNotReparseTheCorpus(t *testing.T) {
	l := newLocal(t)
	recs := make([]flywheel.Record, 2000)
	for i := range recs {
		recs[i] = corpusRecord(float64(2 + i))
	}
	if err := flywheel.AppendCorpus(l.Workspace.CorpusPath(), recs...); err != nil {
		t.Fatal(err)
	}
	req := CreateRequest{Model: "toy", GPU: "h200"}
	if err := req.Check(); err != nil {
		t.Fatal(err)
	}
	start, _, err := l.startEvent(context.Background(), req, "")
	if err != nil || len(start.Corpus) != len(recs) {
		t.Fatalf("start event with %d corpus records (%v), want %d", len(start.Corpus), err, len(recs))
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, _, err := l.startEvent(context.Background(), req, ""); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= float64(len(recs)) {
		t.Fatalf("%v allocations per start event over an unchanged corpus of %d records", allocs, len(recs))
	}
}

// next tells a campaign no driver runs what time it is: a time criterion
// that tripped sticks (the campaign is done afterwards), where a driver is
// left to do it.
func TestNextMakesATimeCriterionStick(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	start := l.Now()
	cs := New(l)
	resp, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200", Cold: true, Budget: &campaign.Budget{Minutes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	later := start.Add(2 * time.Minute)
	l.Now = func() time.Time { return later }
	if st, err := cs.Status(ctx, resp.ID); err != nil || st.Status != campaign.StatusOptimizing {
		t.Fatalf("before next: %+v %v", st.Status, err)
	}
	n, err := cs.Next(ctx, resp.ID)
	if err != nil || n.Decision != "stop" {
		t.Fatalf("next: %+v %v", n, err)
	}
	if st, err := cs.Status(ctx, resp.ID); err != nil || st.Status != campaign.StatusDone {
		t.Fatalf("after next: %s %v, want done", st.Status, err)
	}
}

// The health of a campaign on this machine: a driver that holds it but
// writes nothing is stalled, a trial far older than a trial may take is
// stuck, and once the driver is gone (killed: the kernel releases its
// lock, as Close does here) nothing drives it: the status says so with the
// command that resumes it, and its elapsed time stops at the last event.
func TestLocalHealth(t *testing.T) {
	ctx := context.Background()
	l := newLocal(t)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := start
	l.Now = func() time.Time { return clock }
	cs := New(l)
	cs.Now = l.Now
	resp, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200", Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.ID
	kinds := func(r campaign.StatusReport) []string {
		var k []string
		for _, a := range r.Alerts {
			k = append(k, a.Kind)
		}
		return k
	}
	// A driver (this ledger, open under its lock) proposes two trials.
	ledger, err := l.Workspace.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if _, err := ledger.Apply(campaign.Propose{Time: clock, N: 2}); err != nil {
		t.Fatal(err)
	}
	proposedAt := clock
	rep, err := cs.Status(ctx, id)
	if err != nil || len(rep.Alerts) != 0 || rep.LastEventAt != proposedAt.Format(time.RFC3339) || len(rep.InFlight) != 2 {
		t.Fatalf("a healthy driven campaign: %v %+v", err, rep)
	}
	clock = clock.Add(31 * time.Minute)
	rep, _ = cs.Status(ctx, id)
	if got := kinds(rep); len(got) != 2 || got[0] != campaign.AlertStalled || got[1] != campaign.AlertStuckTrials ||
		!strings.Contains(rep.Alerts[0].Message, "pid ") {
		t.Fatalf("a driver that wrote nothing for 31 min: %q %+v", got, rep.Alerts)
	}
	// The driver dies.
	if err := ledger.Close(); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	rep, _ = cs.Status(ctx, id)
	if got := kinds(rep); len(got) != 1 || got[0] != campaign.AlertNoDriver {
		t.Fatalf("a campaign whose driver died: %q", got)
	}
	if want := round3(proposedAt.Sub(start).Minutes()); rep.ElapsedMinutes != want {
		t.Errorf("elapsed %v min an hour after the driver died, want %v (it stops at the last event)", rep.ElapsedMinutes, want)
	}
	clock = clock.Add(5 * time.Hour)
	if again, _ := cs.Status(ctx, id); again.ElapsedMinutes != rep.ElapsedMinutes {
		t.Errorf("elapsed grows while nothing runs: %v, then %v", rep.ElapsedMinutes, again.ElapsedMinutes)
	}
	text, err := cs.StatusText(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"last event   : 2026-01-02 03:05:05 UTC (6.5 h ago)", "ALERT", "no process has had this campaign open",
		"2 trial(s) in flight", "amkctl autoresearch toy --gpu h200 --device cpu --workspace " + l.Workspace.Dir, "elapsed      : 1.0 min"} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}
	// Every campaign of the list carries its health too.
	list, err := cs.List(ctx)
	if err != nil || len(list) != 1 || len(list[0].Alerts) != 1 {
		t.Fatalf("list: %v %+v", err, list)
	}
	// A campaign an outside agent drives with record has no process
	// between two of its experiments, and that is as it should be.
	agent, err := cs.Create(ctx, CreateRequest{Model: "toy", GPU: "h200", Name: "agent", Cold: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Record(ctx, agent.ID, RecordRequest{Status: "tried", Correctness: "PASS", LatencyUS: new(12.5), Kind: "predicted", Description: "an agent's own evaluation"}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	if rep, _ := cs.Status(ctx, agent.ID); len(rep.Alerts) != 0 {
		t.Errorf("a campaign an agent drives with record has alerts: %+v", rep.Alerts)
	}
	// A paused or done campaign that nothing drives is as it should be.
	if _, err := cs.Command(ctx, id, campaign.OpStop, CommandRequest{}); err != nil {
		t.Fatal(err)
	}
	if rep, _ := cs.Status(ctx, id); len(rep.Alerts) != 0 {
		t.Errorf("a done campaign has alerts: %+v", rep.Alerts)
	}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
