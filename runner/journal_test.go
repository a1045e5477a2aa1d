package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/schedule"
)

// The crash tests drive a synthetic campaign (benchStart, outcomes from
// syntheticOutcome) through a deterministic stream of events, and compare
// what a reopened ledger holds with an uncrashed run of the same events.

// syntheticEvent is the e-th event (from 0) of the stream: mostly an
// outcome for the oldest trial in flight, else a proposal, with now and
// then a tick, an operator command or an agent's record, so that every
// kind of event goes through the journal.
func syntheticEvent(t testing.TB, c *campaign.Campaign, e int) campaign.Event {
	now := benchEpoch.Add(time.Duration(e+1) * time.Second)
	switch {
	case e%17 == 5:
		return campaign.Tick{Time: now}
	case e%29 == 7:
		return campaign.Command{Time: now, Op: campaign.OpBudget, Budget: &campaign.Budget{Iterations: 100000}, Note: fmt.Sprint("event ", e)}
	case e%41 == 11:
		point, err := json.MarshalIndent(schedule.Default(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		lat := 500.0
		return campaign.Record{Time: now, Status: "tried", LatencyUS: &lat, Kind: "predicted", Point: point, Description: "an agent's point"}
	case e%41 == 12:
		return campaign.Record{Time: now, Status: "failed", Description: "an agent's failure"}
	}
	if specs := inFlightSpecs(c.State()); len(specs) > 0 {
		return campaign.Finished{Time: now, Outcome: syntheticOutcome(specs[0])}
	}
	return campaign.Propose{Time: now, N: 1}
}

// uncrashedRun is the stream's first n events through a campaign held in
// memory: the state and what the files must hold.
type uncrashedRun struct {
	c      *campaign.Campaign
	rows   []flywheel.Row
	corpus []string
	trials []int
	// corpusAt[e] is true when event e appended corpus records.
	corpusAt []bool
}

// runUncrashed runs the stream's first n events, the campaign reloaded
// from its state as a ledger writes it (compact JSON) before each event in
// reloads: the points of the trials in flight then come back re-encoded,
// and the synthetic evaluator hashes their bytes.
func runUncrashed(t testing.TB, n int, reloads ...int) *uncrashedRun {
	t.Helper()
	r := &uncrashedRun{c: campaign.New()}
	d, err := r.c.Step(benchStart())
	if err != nil {
		t.Fatal(err)
	}
	r.collect(d, nil)
	for e := range n {
		if slices.Contains(reloads, e) {
			st := r.c.State()
			data, err := json.Marshal(&st)
			if err != nil {
				t.Fatal(err)
			}
			if r.c, err = campaign.Load(data); err != nil {
				t.Fatal(err)
			}
		}
		ev := syntheticEvent(t, r.c, e)
		d, err := r.c.Step(ev)
		if err != nil {
			t.Fatalf("event %d (%T): %v", e, ev, err)
		}
		r.collect(d, ev)
	}
	return r
}

func (r *uncrashedRun) collect(d campaign.Decision, ev campaign.Event) {
	r.rows = append(r.rows, d.Rows...)
	ob, _ := newOutbox(ev, d)
	r.corpus = append(r.corpus, ob.Corpus...)
	if f, ok := ev.(campaign.Finished); ok {
		r.trials = append(r.trials, f.Outcome.TrialID)
	}
	if ev != nil {
		r.corpusAt = append(r.corpusAt, len(ob.Corpus) > 0)
	}
}

// applyEvents feeds the stream's events from..to-1 to the ledger.
func applyEvents(t testing.TB, l *Ledger, from, to int) {
	t.Helper()
	for e := from; e < to; e++ {
		ev := syntheticEvent(t, l.Campaign(), e)
		if _, err := l.Apply(ev); err != nil {
			t.Fatalf("event %d (%T): %v", e, ev, err)
		}
	}
}

// abandon is a crash: the lock is let go, nothing more is written (Close
// no longer snapshots).
func (l *Ledger) abandon() {
	l.lock.Close()
	l.journalReady, l.lock = false, nil
}

func newSyntheticLedger(t testing.TB) (*Workspace, *Ledger) {
	t.Helper()
	ws, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, created, err := ws.Create(benchStart())
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	return ws, l
}

// checkAgainst fails unless the campaign's state and files are the
// uncrashed run's.
func checkAgainst(t testing.TB, ws *Workspace, id string, c *campaign.Campaign, want *uncrashedRun) {
	t.Helper()
	got, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	exp, err := want.c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, exp) {
		t.Fatalf("the reopened state differs from the uncrashed run's (experiments %d, want %d)", c.State().ExperimentsRun, want.c.State().ExperimentsRun)
	}
	rows, err := flywheel.ReadRows(filepath.Join(ws.CampaignDir(id), "results.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var gotLines, wantLines []string
	for _, r := range rows {
		gotLines = append(gotLines, r.Line())
	}
	for _, r := range want.rows {
		wantLines = append(wantLines, r.Line())
	}
	if !slices.Equal(gotLines, wantLines) {
		t.Fatalf("results.tsv has %d rows, the uncrashed run %d (or they differ)", len(gotLines), len(wantLines))
	}
	var trials []int
	if _, err := os.Stat(filepath.Join(ws.CampaignDir(id), "trials.jsonl")); err == nil {
		trials = trialLogIDs(t, filepath.Join(ws.CampaignDir(id), "trials.jsonl"))
	}
	if !slices.Equal(trials, want.trials) {
		t.Fatalf("trials.jsonl holds trials %v, want %v", trials, want.trials)
	}
	data, err := os.ReadFile(ws.CorpusPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var corpus []string
	for ln := range strings.SplitSeq(string(data), "\n") {
		if ln != "" {
			corpus = append(corpus, ln)
		}
	}
	if !slices.Equal(corpus, want.corpus) {
		t.Fatalf("the corpus has %d lines, the uncrashed run %d (or they differ)", len(corpus), len(want.corpus))
	}
}

// Events past two snapshots: the ledger reopened after a crash, and a
// view taken while it is held, are the uncrashed run, files included.
func TestJournalReplayIsTheUncrashedRun(t *testing.T) {
	const n = 2*SnapshotEvery + 77
	ws, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, n)
	want := runUncrashed(t, n)
	if l.seq != n || l.snapSeq != 2*SnapshotEvery {
		t.Fatalf("seq %d, snapshot at %d; want %d and %d", l.seq, l.snapSeq, n, 2*SnapshotEvery)
	}
	v, err := ws.View(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, l.ID(), v, want)
	l.abandon()
	l, err = ws.Open(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, l.ID(), l.Campaign(), want)
	// Close snapshots and empties the journal; a view of that is the same.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(ws.CampaignDir(l.ID()), journalName)); err != nil || st.Size() != 0 {
		t.Fatalf("journal after Close: %v, %v", st, err)
	}
	if v, err = ws.View(l.ID()); err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, l.ID(), v, want)
}

// copyDir copies a workspace (files only, two levels of directories).
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A kill at any byte of a journal append: the journal cut at every offset
// of its last record, with the files as they were before the event (its
// outbox is appended only once the record is durable) and, for the whole
// record, also after it. The reopened campaign is the uncrashed run of the
// events whose records are whole, each row, trial and corpus line on disk
// once, and the next event appends after the cut.
func TestJournalTornAtEveryByte(t *testing.T) {
	// The last event appends a corpus record (a kept point with a floor),
	// so that every file has something to lose or duplicate.
	probe := runUncrashed(t, 120)
	last := -1
	for e := 10; e < len(probe.corpusAt); e++ {
		if probe.corpusAt[e] {
			last = e
			break
		}
	}
	if last < 0 {
		t.Fatal("no event of the stream appends a corpus record")
	}
	ws, l := newSyntheticLedger(t)
	id := l.ID()
	applyEvents(t, l, 0, last)
	l.abandon()
	before := t.TempDir()
	copyDir(t, ws.Dir, before)
	journalBefore, _ := os.ReadFile(filepath.Join(ws.CampaignDir(id), journalName))
	if l, err := ws.Open(id); err != nil {
		t.Fatal(err)
	} else {
		applyEvents(t, l, last, last+1)
		l.abandon()
	}
	after := t.TempDir()
	copyDir(t, ws.Dir, after)
	journal, _ := os.ReadFile(filepath.Join(ws.CampaignDir(id), journalName))
	if !bytes.HasPrefix(journal, journalBefore) || len(journal) <= len(journalBefore) {
		t.Fatalf("the journal did not grow by one record (%d -> %d bytes)", len(journalBefore), len(journal))
	}
	runs := map[int]*uncrashedRun{}
	for _, n := range []int{last, last + 1, last + 2} {
		runs[n] = runUncrashed(t, n)
	}
	// Every cut is reopened; a sample of them twice, and then takes one
	// more event.
	check := func(files string, cut int, events int, more bool) {
		t.Helper()
		dir := t.TempDir()
		copyDir(t, files, dir)
		cws := &Workspace{Dir: dir}
		if err := os.WriteFile(filepath.Join(cws.CampaignDir(id), journalName), journal[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		opens := 1
		if more {
			opens = 2 // a second open repairs nothing more
		}
		for range opens {
			l, err := cws.Open(id)
			if err != nil {
				t.Fatalf("cut at byte %d: %v", cut, err)
			}
			checkAgainst(t, cws, id, l.Campaign(), runs[events])
			l.abandon()
		}
		if !more {
			return
		}
		l, err := cws.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		applyEvents(t, l, events, events+1)
		l.abandon()
		if l, err = cws.Open(id); err != nil {
			t.Fatalf("cut at byte %d, then one more event: %v", cut, err)
		}
		checkAgainst(t, cws, id, l.Campaign(), runs[events+1])
		l.abandon()
	}
	for cut := len(journalBefore); cut < len(journal); cut++ {
		check(before, cut, last, cut%61 == 0 || cut-len(journalBefore) < 2 || len(journal)-cut < 3)
	}
	check(before, len(journal), last+1, true)
	check(after, len(journal), last+1, true)
}

// A kill inside a snapshot: before ledger.json's rename (a half-written
// temporary file beside the old snapshot) and after it, before the journal
// is emptied (the new snapshot and a journal of events it already holds).
func TestKillDuringSnapshot(t *testing.T) {
	for _, stage := range []string{snapshotWriting, snapshotWritten} {
		t.Run(stage, func(t *testing.T) {
			ws, l := newSyntheticLedger(t)
			applyEvents(t, l, 0, SnapshotEvery-1)
			killed := errors.New("killed")
			snapshotHook = func(at, dir string, _ uint64, data []byte) {
				if at != stage {
					return
				}
				if at == snapshotWriting {
					if err := os.WriteFile(filepath.Join(dir, ".ledger.json.tmp-4242"), data[:len(data)/2], 0o644); err != nil {
						t.Fatal(err)
					}
				}
				panic(killed)
			}
			func() {
				defer func() {
					if r := recover(); r != killed {
						t.Fatalf("the snapshot was not reached: %v", r)
					}
				}()
				applyEvents(t, l, SnapshotEvery-1, SnapshotEvery)
			}()
			snapshotHook = func(string, string, uint64, []byte) {}
			l.abandon()
			want := runUncrashed(t, SnapshotEvery)
			v, err := ws.View(l.ID())
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, ws, l.ID(), v, want)
			l, err = ws.Open(l.ID())
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, ws, l.ID(), l.Campaign(), want)
			if orphans, _ := filepath.Glob(filepath.Join(l.Dir(), ".ledger.json.tmp-*")); len(orphans) > 0 {
				t.Errorf("temporary files left: %v", orphans)
			}
			applyEvents(t, l, SnapshotEvery, SnapshotEvery+10)
			l.abandon()
			if l, err = ws.Open(l.ID()); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			checkAgainst(t, ws, l.ID(), l.Campaign(), runUncrashed(t, SnapshotEvery+10))
		})
	}
}

// A damaged record with whole records after it is not a torn write: the
// ledger refuses to open rather than drop events whose rows are on disk.
func TestJournalCorruptionIsRefused(t *testing.T) {
	ws, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, 5)
	l.abandon()
	path := filepath.Join(ws.CampaignDir(l.ID()), journalName)
	data, _ := os.ReadFile(path)
	data[20] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Open(l.ID()); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("open of a journal with a damaged first record: %v", err)
	}
	if _, err := ws.View(l.ID()); err == nil {
		t.Fatal("view of a journal with a damaged first record succeeded")
	}
}

// The journal's Record carries every field of campaign.Record (a field
// added there must be added to recordWire), the point's bytes exactly.
func TestRecordEventRoundTrip(t *testing.T) {
	rt, wt := reflect.TypeFor[campaign.Record](), reflect.TypeFor[recordWire]()
	if rt.NumField() != wt.NumField() {
		t.Fatalf("campaign.Record has %d fields, the journal's recordWire %d", rt.NumField(), wt.NumField())
	}
	for i := range rt.NumField() {
		if rt.Field(i).Name != wt.Field(i).Name {
			t.Fatalf("field %d: %s vs %s", i, rt.Field(i).Name, wt.Field(i).Name)
		}
	}
	lat := 1.5
	for _, ev := range []campaign.Record{
		{Time: benchEpoch, Status: "kept", LatencyUS: &lat, Point: json.RawMessage(" { \"a\" : 1 }\n"), Regions: map[string]float64{"mlp": 0.5}},
		{Time: benchEpoch, Status: "failed"},
	} {
		kind, data, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeEvent(kind, data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, campaign.Event(ev)) {
			t.Fatalf("round trip: %+v, want %+v", back, ev)
		}
	}
	if _, _, err := encodeEvent(campaign.Start{}); !errors.Is(err, campaign.ErrInvalid) {
		t.Fatalf("a start event encoded: %v", err)
	}
}

// journalOf is a journal of the stream's first n events.
func journalOf(t testing.TB, n int) []byte {
	_, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, n)
	data, err := os.ReadFile(l.path(journalName))
	if err != nil {
		t.Fatal(err)
	}
	l.abandon()
	return data
}

// FuzzParseJournal: the journal decoder never panics, its valid prefix
// parses again to the same records, and every record's event decodes or
// is refused with an error.
func FuzzParseJournal(f *testing.F) {
	data := journalOf(f, 4)
	f.Add(data)
	f.Add(data[:len(data)-7])
	f.Add(append(bytes.Clone(data), 0, 0, 0))
	f.Add([]byte("00000000 {}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, good, err := parseJournal(data)
		if err != nil {
			return
		}
		if good < 0 || good > len(data) {
			t.Fatalf("valid prefix of %d bytes in %d", good, len(data))
		}
		again, good2, err := parseJournal(data[:good])
		if err != nil || good2 != good || !reflect.DeepEqual(again, recs) {
			t.Fatalf("the valid prefix parses differently: %d records, %d bytes, %v", len(again), good2, err)
		}
		for _, r := range recs {
			_, _ = decodeEvent(r.Kind, r.Event)
		}
	})
}

// tearLastLine leaves the first half of the file's last line, as a kill in
// the middle of its append would.
func tearLastLine(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	if err := os.WriteFile(path, data[:start+(len(data)-start)/2], 0o644); err != nil {
		t.Fatal(err)
	}
}

// A kill in the middle of the outbox's appends (the journal record whole,
// results.tsv, trials.jsonl and the corpus each ending in half a line):
// reopening completes every file, each line once.
func TestTornOutboxAppendsAreCompleted(t *testing.T) {
	probe := runUncrashed(t, 60)
	last := slices.Index(probe.corpusAt[10:], true) + 10
	ws, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, last+1)
	l.abandon()
	dir := ws.CampaignDir(l.ID())
	for _, f := range []string{filepath.Join(dir, "results.tsv"), filepath.Join(dir, "trials.jsonl"), ws.CorpusPath()} {
		tearLastLine(t, f)
	}
	for range 2 {
		l, err := ws.Open(l.ID())
		if err != nil {
			t.Fatal(err)
		}
		checkAgainst(t, ws, l.ID(), l.Campaign(), runUncrashed(t, last+1))
		l.abandon()
	}
}

// Views taken while a driver applies events across snapshots each see a
// whole state: never an error, never going back in time.
func TestViewDuringSnapshots(t *testing.T) {
	// A snapshot after every event, as when events are slow to replay:
	// a view then often reads a snapshot that is replaced, and the journal
	// emptied, before it has read the journal.
	defer func(b time.Duration) { replayBudget = b }(replayBudget)
	replayBudget = time.Nanosecond
	ws, l := newSyntheticLedger(t)
	defer l.Close()
	const n = 2*SnapshotEvery + 10
	done := make(chan error, 1)
	go func() {
		for e := range n {
			if _, err := l.Apply(syntheticEvent(t, l.Campaign(), e)); err != nil {
				done <- fmt.Errorf("event %d: %w", e, err)
				return
			}
		}
		done <- nil
	}()
	seen, views := 0, 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		c, err := ws.View(l.ID())
		if err != nil {
			t.Fatalf("view %d: %v", views, err)
		}
		views++
		n := c.State().NextTrial + c.State().ExperimentsRun
		if n < seen {
			t.Fatalf("view %d went back in time: %d after %d", views, n, seen)
		}
		seen = n
	}
	c, err := ws.View(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkAgainst(t, ws, l.ID(), c, runUncrashed(t, n))
	t.Logf("%d views", views)
}

// Events that keep the state machine busy are snapshotted sooner than
// every SnapshotEvery events: the journal never holds more than about
// replayBudget of replay.
func TestSlowEventsAreSnapshottedSooner(t *testing.T) {
	defer func(b time.Duration) { replayBudget = b }(replayBudget)
	replayBudget = time.Nanosecond
	ws, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, 5)
	if l.snapSeq != 5 {
		t.Fatalf("snapshot at event %d after 5 events over budget", l.snapSeq)
	}
	l.abandon()
	if l, err := ws.Open(l.ID()); err != nil {
		t.Fatal(err)
	} else {
		defer l.Close()
		checkAgainst(t, ws, l.ID(), l.Campaign(), runUncrashed(t, 5))
	}
}

// An open that fails in the repair (here results.tsv is not one) leaves
// the snapshot and the journal as they were: Close does not snapshot a
// state whose outboxes were never appended. Once the file is put right,
// the campaign opens whole.
func TestFailedOpenKeepsTheJournal(t *testing.T) {
	ws, l := newSyntheticLedger(t)
	applyEvents(t, l, 0, 30)
	l.abandon()
	dir := ws.CampaignDir(l.ID())
	results := filepath.Join(dir, "results.tsv")
	good, _ := os.ReadFile(results)
	journal, _ := os.ReadFile(filepath.Join(dir, journalName))
	snapshot, _ := os.ReadFile(filepath.Join(dir, "ledger.json"))
	if err := os.WriteFile(results, []byte("not\ta results file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Open(l.ID()); err == nil {
		t.Fatal("opened with a broken results.tsv")
	}
	if j, _ := os.ReadFile(filepath.Join(dir, journalName)); !bytes.Equal(j, journal) {
		t.Fatalf("the failed open changed the journal (%d -> %d bytes)", len(journal), len(j))
	}
	if s, _ := os.ReadFile(filepath.Join(dir, "ledger.json")); !bytes.Equal(s, snapshot) {
		t.Fatal("the failed open wrote a snapshot")
	}
	// Put it right, minus its last row, which the journal restores.
	good = good[:bytes.LastIndexByte(good[:len(good)-1], '\n')+1]
	if err := os.WriteFile(results, good, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ws.Open(l.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkAgainst(t, ws, l.ID(), l.Campaign(), runUncrashed(t, 30))
}

// An event the journal cannot hold (too large, or with a number JSON has
// no word for) is refused before the state machine moves.
func TestUnjournallableEventIsRefused(t *testing.T) {
	_, l := newSyntheticLedger(t)
	defer l.Close()
	applyEvents(t, l, 0, 3)
	before, _ := l.Campaign().Marshal()
	inf := math.Inf(1)
	for _, ev := range []campaign.Event{
		campaign.Record{Time: benchEpoch, Status: "tried", LatencyUS: &inf, Kind: "predicted"},
		campaign.Record{Time: benchEpoch, Status: "failed", Description: strings.Repeat("x", maxJournalRecord)},
	} {
		if _, err := l.Apply(ev); !errors.Is(err, campaign.ErrInvalid) {
			t.Fatalf("%.80v: %v, want ErrInvalid", ev, err)
		}
	}
	if after, _ := l.Campaign().Marshal(); !bytes.Equal(before, after) {
		t.Fatal("a refused event changed the campaign")
	}
	applyEvents(t, l, 3, 4) // still writable
}
