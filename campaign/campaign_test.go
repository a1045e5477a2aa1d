package campaign

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func TestID(t *testing.T) {
	cases := map[[4]string]string{
		{"toy", "h200", "cpu", ""}:      "toy-h200-cpu",
		{"small", "h100", "cuda", ""}:   "small-h100-cuda",
		{"toy", "h200", "cpu", "night"}: "toy-h200-cpu-night",
	}
	for in, want := range cases {
		if got := ID(in[0], in[1], schedule.Device(in[2]), in[3]); got != want {
			t.Errorf("ID%v = %q, want %q", in, got, want)
		}
	}
	a := ID("/models/llama/config.json", "h100", "cuda", "")
	b := ID("/models/qwen/config.json", "h100", "cuda", "")
	if a == b || strings.ContainsAny(a, "/ ") || !strings.HasPrefix(a, "models-llama-config.json-") {
		t.Errorf("path model ids: %q %q", a, b)
	}
	if ID("Toy", "h200", "cpu", "") == ID("toy", "h200", "cpu", "") {
		t.Error("ids differing only in case collide")
	}
}

func startEvent() Start {
	return Start{Time: epoch, Model: "toy", GPU: "h200", Device: "cpu", Seed: 1, Shape: toyShape,
		Cold: true, Settings: DefaultSettings()}
}

func TestStepRefusals(t *testing.T) {
	c := New()
	if _, err := c.Step(Tick{Time: epoch}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("tick before start: %v", err)
	}
	if _, err := c.Marshal(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("marshal before start: %v", err)
	}
	bad := []func(*Start){
		func(s *Start) { s.GPU = "nope" },
		func(s *Start) { s.Device = "tpu" },
		func(s *Start) { s.Model = "" },
		func(s *Start) { s.Settings.MinGain = math.NaN() },
		func(s *Start) { s.Settings.Explore = 2 },
		func(s *Start) { s.Settings.RestartAfter = 0 },
		func(s *Start) { s.Settings.MoveOn.MaxMinutes = -1 },
		func(s *Start) { s.Settings.Budget.Iterations = -3 },
		func(s *Start) { s.Settings.Batch = -1 },
		func(s *Start) { s.Settings.Batch = 100000 },
	}
	for i, mod := range bad {
		s := startEvent()
		mod(&s)
		if _, err := New().Step(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad start %d: %v", i, err)
		}
	}
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(startEvent()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second start: %v", err)
	}
	if _, err := c.Step(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil event: %v", err)
	}
	for _, cmd := range []Command{{Op: "dance"}, {Op: OpResume}, {Op: OpReopen}, {Op: OpBudget}, {Op: OpCriteria},
		{Op: OpBudget, Budget: &Budget{Minutes: math.Inf(1)}}} {
		if _, err := c.Step(cmd); !errors.Is(err, ErrInvalid) {
			t.Errorf("command %+v: %v", cmd, err)
		}
	}
}

func TestLoadRejectsBadState(t *testing.T) {
	c := New()
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	data, _ := c.Marshal()
	for name, mangle := range map[string]func(map[string]any){
		"version": func(m map[string]any) { m["version"] = 99 },
		"gpu":     func(m map[string]any) { m["gpu"] = "nope" },
		"device":  func(m map[string]any) { m["device"] = "abacus" },
		"rng":     func(m map[string]any) { m["rng"] = "AAAA" },
	} {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		mangle(m)
		bad, _ := json.Marshal(m)
		if _, err := Load(bad); err == nil {
			t.Errorf("%s: mangled state loaded", name)
		}
	}
	if _, err := Load([]byte("{not json")); err == nil {
		t.Error("garbage loaded")
	}
}

// TestClockNeverRunsBackwards: an event stamped before the last one cannot
// un-spend campaign time.
func TestClockNeverRunsBackwards(t *testing.T) {
	c := New()
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Tick{Time: epoch.Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Tick{Time: epoch.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := c.ElapsedMinutes(epoch); got != 30 {
		t.Fatalf("elapsed %v, want 30", got)
	}
}

// A done campaign's clock stops; a reopen continues it without the time it
// spent done.
func TestElapsedStopsWhenDone(t *testing.T) {
	c := New()
	if _, err := c.Step(startEvent()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Command{Time: epoch.Add(10 * time.Minute), Op: OpStop}); err != nil {
		t.Fatal(err)
	}
	for _, later := range []time.Duration{10 * time.Minute, time.Hour, 48 * time.Hour} {
		if got := c.ElapsedMinutes(epoch.Add(later)); got != 10 {
			t.Fatalf("elapsed %v after %v, want 10 (the campaign is done)", got, later)
		}
		if got := c.StatusReport(epoch.Add(later)).ElapsedMinutes; got != 10 {
			t.Fatalf("status elapsed %v after %v, want 10", got, later)
		}
	}
	if _, err := c.Step(Command{Time: epoch.Add(70 * time.Minute), Op: OpReopen}); err != nil {
		t.Fatal(err)
	}
	if got := c.ElapsedMinutes(epoch.Add(75 * time.Minute)); got != 15 {
		t.Fatalf("elapsed %v five minutes after the reopen, want 15", got)
	}
}

// TestBestNeverLostAcrossManyTrials drives a long parallel campaign and
// checks the ledger's bookkeeping invariants at the end.
func TestLedgerInvariants(t *testing.T) {
	h := &harness{t: t, now: epoch}
	h.exec("start model=toy gpu=h200 seed=3 prior=20 overnight=true restart_after=4")
	out := h.exec("run n=120 workers=4 order=newest")
	if strings.Contains(out, "error") {
		t.Fatal(out)
	}
	st := h.c.State()
	if st.ExperimentsRun != 120 || len(st.Trajectory) != 120 {
		t.Fatalf("experiments %d, trajectory %d", st.ExperimentsRun, len(st.Trajectory))
	}
	if st.Counts.Trials+len(st.InFlight) != st.NextTrial {
		t.Fatalf("trials %d + in flight %d != issued %d", st.Counts.Trials, len(st.InFlight), st.NextTrial)
	}
	seen := map[int]bool{}
	best := math.Inf(1)
	for i, tp := range st.Trajectory {
		if tp.Experiment != i+1 || seen[tp.Trial] {
			t.Fatalf("trajectory %d: experiment %d trial %d", i, tp.Experiment, tp.Trial)
		}
		seen[tp.Trial] = true
		if tp.BestUS != nil {
			if *tp.BestUS > best*(1+st.Settings.MinGain) {
				t.Fatalf("best got worse: %v -> %v", best, *tp.BestUS)
			}
			best = *tp.BestUS
		}
	}
	if st.Restarts == 0 {
		t.Fatal("no basin hop in 120 overnight trials")
	}
	// Every point issued is a distinct schedule id.
	if len(st.Tried) != st.NextTrial {
		t.Fatalf("%d ids tried for %d trials", len(st.Tried), st.NextTrial)
	}
}

// --- the fuzz target ---

type fuzzRun struct {
	t        *testing.T
	a, b     *Campaign // b is reloaded from its own state before every event
	now      time.Time
	rows     int
	finished map[int]bool
	data     []byte
	pos      int
}

func (f *fuzzRun) byte() byte {
	if f.pos >= len(f.data) {
		return 0
	}
	f.pos++
	return f.data[f.pos-1]
}

func (f *fuzzRun) step(ev Event) {
	t := f.t
	before, _ := f.a.Marshal()
	var bestBefore *Result
	if f.a.st.Best != nil {
		r := *f.a.st.Best
		bestBefore = &r
	}
	da, erra := f.a.Step(ev)
	data, err := f.b.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if f.b, err = Load(data); err != nil {
		t.Fatalf("load: %v", err)
	}
	db, errb := f.b.Step(ev)
	ja, _ := json.Marshal(da)
	jb, _ := json.Marshal(db)
	if string(ja) != string(jb) || (erra == nil) != (errb == nil) {
		t.Fatalf("a reloaded campaign decided differently on %#v:\n%s\n%s", ev, ja, jb)
	}
	if erra != nil {
		after, _ := f.a.Marshal()
		if string(after) != string(before) {
			t.Fatalf("refused event %#v changed the state (%v)", ev, erra)
		}
		return
	}
	if e, ok := ev.(Finished); ok {
		if f.finished[e.Outcome.TrialID] {
			t.Fatalf("trial %d recorded twice", e.Outcome.TrialID)
		}
		f.finished[e.Outcome.TrialID] = true
	}
	f.rows += len(da.Rows)
	st := &f.a.st
	if f.rows != st.ExperimentsRun {
		t.Fatalf("%d rows for %d experiments", f.rows, st.ExperimentsRun)
	}
	if st.Counts.Trials+len(st.InFlight) != st.NextTrial {
		t.Fatalf("trials %d + in flight %d != issued %d", st.Counts.Trials, len(st.InFlight), st.NextTrial)
	}
	if st.Status == StatusDone && len(da.Enqueue) > 0 {
		t.Fatal("a done campaign enqueued trials")
	}
	for _, r := range da.Rows {
		if r.Correctness == "" || (r.LatencyUS != nil && r.Correctness != flywheel.CorrectPass) {
			t.Fatalf("dishonest row %+v", r)
		}
	}
	for _, r := range da.Corpus {
		if err := r.Check(); err != nil {
			t.Fatalf("bad corpus record: %v", err)
		}
	}
	if b := st.Best; bestBefore != nil && b != nil && b.ScheduleID != bestBefore.ScheduleID {
		if b.Score > bestBefore.Score*(1+st.Settings.MinGain)*(1+1e-12) {
			t.Fatalf("best worsened: %v -> %v", bestBefore.Score, b.Score)
		}
	}
	if bestBefore != nil && st.Best == nil {
		t.Fatal("best lost")
	}
}

func (f *fuzzRun) number() *float64 {
	switch b := f.byte(); b % 8 {
	case 0:
		return nil
	case 1:
		return new(math.NaN())
	case 2:
		return new(math.Inf(1))
	case 3:
		return new(-float64(b))
	default:
		return new(10 + float64(b))
	}
}

func (f *fuzzRun) outcome(id int) trial.Outcome {
	o := trial.Outcome{TrialID: id}
	switch f.byte() % 8 {
	case 0:
		o.Failure = &trial.Failure{Class: []trial.FailClass{trial.FailCrash, trial.FailTimeout, trial.FailInfra, "odd"}[f.byte()%4], Message: "x"}
	case 1:
		o.Verdict = &trial.Verdict{Valid: false}
	case 2:
		no := false
		o.Verdict = &trial.Verdict{Valid: true, Correct: &no}
	case 3:
		yes := true
		o.Verdict = &trial.Verdict{Valid: true, Correct: &yes, LatencyUS: f.number(), BoundUS: f.number(), PctOfRoofline: f.number()}
		kind := []trial.LatencyKind{trial.KindPredicted, trial.KindMeasuredGPU, ""}[f.byte()%3]
		o.Verdict.LatencyKind = &kind
		o.Ratio = f.number()
	case 4:
		o.CampaignID = "someone-else"
		fallthrough
	default:
		yes := true
		lat := 1.0
		if inf, ok := f.a.st.InFlight[id]; ok {
			if p, err := schedule.ParsePoint(inf.Spec.Point); err == nil {
				lat = fakeLatency(p) * (0.9 + float64(f.byte()%20)/100)
			}
		}
		kind := f.a.st.LatencyKind
		bound := 1.0
		o.Verdict = &trial.Verdict{Valid: true, Correct: &yes, LatencyUS: &lat, LatencyKind: &kind, BoundUS: &bound}
		if f.byte()%2 == 0 {
			o.Ratio = new(0.9 + float64(f.byte()%25)/100)
		}
	}
	return o
}

func (f *fuzzRun) pickTrial() int {
	ids := f.a.inFlightIDs()
	b := int(f.byte())
	if len(ids) == 0 || b%5 == 0 {
		return b%12 - 2 // unknown, duplicate or negative
	}
	return ids[b%len(ids)]
}

func (f *fuzzRun) event() Event {
	f.now = f.now.Add(time.Duration(f.byte()%4) * time.Minute)
	switch f.byte() % 9 {
	case 0, 1:
		return Propose{Time: f.now, N: int(f.byte() % 4)}
	case 2, 3:
		id := f.pickTrial()
		return Finished{Time: f.now, Outcome: f.outcome(id)}
	case 4:
		f.now = f.now.Add(time.Duration(f.byte()) * time.Minute)
		return Tick{Time: f.now}
	case 5:
		op := []string{OpPause, OpResume, OpStop, OpReopen, OpBudget, OpCriteria, "bogus"}[f.byte()%7]
		cmd := Command{Time: f.now, Op: op}
		if f.byte()%2 == 0 {
			cmd.Budget = &Budget{Iterations: int(f.byte() % 40), Minutes: float64(f.byte())}
		}
		if f.byte()%2 == 0 {
			m := DefaultMoveOn()
			m.ConsecutiveReverts = int(f.byte() % 10)
			m.PctRooflineTarget = float64(f.byte()) * 100
			cmd.MoveOn = &m
		}
		return cmd
	case 6:
		statuses := []string{"kept", "revert", "tried", "failed", "crash", "timeout", "rejected", "baseline", "same", "?"}
		rec := Record{Time: f.now, Status: statuses[f.byte()%10], LatencyUS: f.number(), PctOfRoofline: f.number(),
			BoundUS: f.number(), Kind: []trial.LatencyKind{trial.KindPredicted, trial.KindMeasuredGPU, ""}[f.byte()%3]}
		if f.byte()%2 == 0 {
			rec.Point = json.RawMessage(`{"tiling": {"gemv": {"N_tile": 32}}, "pipelining_depth": 1}`)
		}
		return rec
	case 7:
		return Finished{Time: f.now, Outcome: f.outcome(f.pickTrial()), Regions: map[string]float64{"mlp": float64(f.byte()) / 255}}
	}
	return Propose{Time: f.now, N: 2}
}

func FuzzCampaignEvents(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 2, 1, 5, 0, 2, 0, 7, 0, 3, 2, 9, 9, 9, 0, 1, 3})
	f.Add([]byte{1, 0, 1, 3, 0, 2, 0, 5, 1, 2, 1, 6, 1, 0, 6, 0, 4, 200, 0, 5, 3})
	f.Add([]byte{2, 7, 0, 1, 3, 0, 2, 0, 3, 0, 1, 3, 0, 2, 1, 3, 2, 4, 5, 0, 2, 2, 0, 5, 2, 4, 0, 6, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte("overnight campaign with a prior and many many events to drive it a long way"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 600 {
			data = data[:600]
		}
		fr := &fuzzRun{t: t, a: New(), b: New(), now: epoch, finished: map[int]bool{}, data: data}
		cfg := fr.byte()
		s := startEvent()
		s.Cold = cfg&1 == 0
		s.Settings.Overnight = cfg&2 != 0
		s.Settings.RestartAfter = 1 + int(cfg>>5)
		if cfg&4 != 0 {
			s.Device, s.GPU = "cuda", "h100"
		}
		if !s.Cold {
			s.Corpus = fakeCorpus(8+int(cfg>>4), nearShape, s.GPU, s.Device)
		}
		s.Seed = uint64(fr.byte())
		if _, err := fr.a.Step(s); err != nil {
			t.Fatal(err)
		}
		if _, err := fr.b.Step(s); err != nil {
			t.Fatal(err)
		}
		for fr.pos < len(fr.data) {
			fr.step(fr.event())
		}
	})
}

// TestBatchReachesEveryTrial: a campaign's batch setting is in every spec it
// issues: a campaign saved before workloads (its batch in the settings,
// one decode step), and a workload campaign (the workload in every spec).
// A batch beside a workload is refused.
func TestBatchReachesEveryTrial(t *testing.T) {
	w := trial.Workload{PromptLens: []int{64}, GenLen: 8, Batch: 4}
	for _, tc := range []struct {
		batch    int
		workload *trial.Workload
	}{{4, nil}, {0, &w}} {
		c := New()
		s := startEvent()
		s.Settings.Batch, s.Settings.Workload = tc.batch, tc.workload
		if _, err := c.Step(s); err != nil {
			t.Fatal(err)
		}
		d, err := c.Step(Propose{Time: epoch, N: 3})
		if err != nil || len(d.Enqueue) != 3 {
			t.Fatalf("propose: %v %+v", err, d)
		}
		for _, spec := range d.Enqueue {
			switch {
			case tc.workload == nil && (spec.Batch != 4 || spec.Workload != nil):
				t.Errorf("trial %d has batch %d, workload %v; want batch 4, one step", spec.TrialID, spec.Batch, spec.Workload)
			case tc.workload != nil && (spec.Workload == nil || !spec.Workload.Equal(w)):
				t.Errorf("trial %d has workload %v, want %v", spec.TrialID, spec.Workload, w)
			}
		}
	}
	s := startEvent()
	s.Settings.Batch = 4
	if _, err := New().Step(s); err == nil {
		t.Error("a batch beside the default workload was accepted")
	}
}

// An operator's note is kept with its time, in any status, shown in both
// reports; an empty or oversized note is refused and changes nothing.
func TestOperatorNotes(t *testing.T) {
	c := New()
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	if _, err := c.Step(Start{Time: t0, Model: "toy", GPU: "h100", Device: "cpu", Cold: true, Settings: DefaultSettings()}); err != nil {
		t.Fatal(err)
	}
	dec, err := c.Step(Command{Time: t0.Add(time.Minute), Op: OpNote, Note: "  swapped the\nfan  "})
	if err != nil || len(dec.Log) != 1 || dec.Log[0] != "note: swapped the\nfan" {
		t.Fatalf("note: %+v %v", dec, err)
	}
	if _, err := c.Step(Command{Time: t0.Add(2 * time.Minute), Op: OpStop}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Command{Time: t0.Add(3 * time.Minute), Op: OpNote, Note: "after the stop"}); err != nil {
		t.Fatalf("a note on a done campaign: %v", err)
	}
	for _, bad := range []string{"", " \n ", strings.Repeat("x", MaxNoteBytes+1)} {
		if _, err := c.Step(Command{Time: t0.Add(4 * time.Minute), Op: OpNote, Note: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("note of %d bytes: %v", len(bad), err)
		}
	}
	notes := c.State().Notes
	if len(notes) != 2 || notes[0].Text != "swapped the\nfan" || !notes[0].Time.Equal(t0.Add(time.Minute)) || notes[1].Text != "after the stop" {
		t.Fatalf("notes %+v", notes)
	}
	wake := c.WakeUp(t0.Add(5 * time.Minute))
	if len(wake.Notes) != 2 || !strings.Contains(wake.Markdown(), "## Operator notes\n\n- 2026-03-04 05:07 UTC: swapped the fan\n- 2026-03-04 05:09 UTC: after the stop\n") {
		t.Errorf("wake-up report:\n%s", wake.Markdown())
	}
	if !strings.Contains(c.ReportMarkdown(t0.Add(5*time.Minute)), "- 2026-03-04 05:09 UTC: after the stop") {
		t.Errorf("campaign report:\n%s", c.ReportMarkdown(t0.Add(5*time.Minute)))
	}
}
