package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/cputime"
	"github.com/amk-dev/amk/trial"
)

// benchEpoch is the synthetic campaigns' clock origin.
var benchEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// benchStart is a cold, overnight campaign on the h100's CUDA space (large
// enough for tens of thousands of distinct points) with the reference
// proposer, whose cost per proposal does not grow with the history: the
// benchmark is about the ledger, not the proposer.
func benchStart() campaign.Start { return benchStartWith(campaign.ProposerReference) }

// benchStartWith is benchStart with another proposer.
func benchStartWith(proposer string) campaign.Start {
	s := campaign.DefaultSettings()
	s.Overnight = true
	s.Proposer = proposer
	s.PlateauScaling = false
	s.MoveOn.MaxMinutes = 0
	return campaign.Start{Time: benchEpoch, Model: "toy-2L", GPU: "h100", Device: "cuda", Seed: 17, Cold: true, Settings: s,
		Shape: flywheel.Shape{Hidden: 64, NLayers: 2, NHeads: 4, NKVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 256}}
}

// syntheticOutcome is a correct measured verdict whose latency is a hash of
// the point: an evaluator that costs nothing.
func syntheticOutcome(spec trial.Spec) trial.Outcome {
	h := fnv.New32a()
	h.Write(spec.Point)
	lat := 100 + float64(h.Sum32()%100000)/1000
	yes, kind, bound := true, trial.KindMeasuredGPU, 50.0
	pct := float64(int(bound/lat*1e5)) / 1e3
	return trial.Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID, ElapsedS: 1,
		Verdict: &trial.Verdict{Valid: true, Correct: &yes, LatencyUS: &lat, LatencyKind: &kind, BoundUS: &bound,
			PctOfRoofline: &pct, GPU: spec.GPU, Model: spec.Model, Device: string(spec.Device)}}
}

// recordTrial proposes one trial at the k-th second of the campaign and
// records its synthetic outcome: two events through step.
func recordTrial(step func(campaign.Event) (campaign.Decision, error), k int, sink func(campaign.Decision)) error {
	now := benchEpoch.Add(time.Duration(2*k) * time.Second)
	d, err := step(campaign.Propose{Time: now, N: 1})
	if err != nil {
		return err
	}
	if len(d.Enqueue) != 1 {
		return fmt.Errorf("trial %d: nothing proposed: %v", k, d.Log)
	}
	sink(d)
	d, err = step(campaign.Finished{Time: now.Add(time.Second), Outcome: syntheticOutcome(d.Enqueue[0])})
	sink(d)
	return err
}

// benchHistory is a campaign with n recorded trials, made in memory: its
// ledger.json, results.tsv, trials.jsonl and corpus lines.
type benchHistory struct {
	id                                    string
	ledger, history, results, log, corpus []byte
}

type benchHistoryKey struct {
	n        int
	proposer string
}

var (
	benchHistoriesMu sync.Mutex
	benchHistories   = map[benchHistoryKey]*benchHistory{}
)

func makeBenchHistoryWith(b *testing.B, n int, proposer string) *benchHistory {
	benchHistoriesMu.Lock()
	defer benchHistoriesMu.Unlock()
	key := benchHistoryKey{n, proposer}
	if h := benchHistories[key]; h != nil {
		return h
	}
	c := campaign.New()
	if _, err := c.Step(benchStartWith(proposer)); err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	var rows []flywheel.Row
	var recs []flywheel.Record
	var log bytes.Buffer
	sink := func(d campaign.Decision) {
		rows = append(rows, d.Rows...)
		recs = append(recs, d.Corpus...)
	}
	step := func(ev campaign.Event) (campaign.Decision, error) {
		if f, ok := ev.(campaign.Finished); ok {
			line, _ := json.Marshal(f.Outcome)
			log.Write(append(line, '\n'))
		}
		return c.Step(ev)
	}
	for k := range n {
		if err := recordTrial(step, k, sink); err != nil {
			b.Fatal(err)
		}
	}
	// The files a ledger that recorded the history holds: its growing
	// lists in the history, the rest in ledger.json.
	st := c.State()
	var hist history
	rec, err := hist.record(0, &st)
	if err != nil {
		b.Fatal(err)
	}
	mark, err := hist.append(filepath.Join(tmp, historyName), rec, &st)
	if err != nil {
		b.Fatal(err)
	}
	head := stripGrowing(st)
	state, err := json.Marshal(&head)
	if err != nil {
		b.Fatal(err)
	}
	h := &benchHistory{id: c.ID(), log: log.Bytes()}
	if h.ledger, err = json.Marshal(ledgerFile{Version: ledgerVersion, State: state, History: &mark}); err != nil {
		b.Fatal(err)
	}
	if h.history, err = os.ReadFile(filepath.Join(tmp, historyName)); err != nil {
		b.Fatal(err)
	}
	if err := flywheel.AppendRows(filepath.Join(tmp, "results.tsv"), rows...); err != nil {
		b.Fatal(err)
	}
	if len(recs) > 0 {
		if err := flywheel.AppendCorpus(filepath.Join(tmp, "corpus.jsonl"), recs...); err != nil {
			b.Fatal(err)
		}
	}
	h.results, _ = os.ReadFile(filepath.Join(tmp, "results.tsv"))
	h.corpus, _ = os.ReadFile(filepath.Join(tmp, "corpus.jsonl"))
	benchHistories[key] = h
	return h
}

// campaign is the history's campaign, loaded from its files.
func (h *benchHistory) campaign(b *testing.B) *campaign.Campaign {
	ws := h.install(b)
	c, err := ws.View(h.id)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// install writes the history into a fresh workspace.
func (h *benchHistory) install(b *testing.B) *Workspace {
	ws, err := OpenWorkspace(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	dir := ws.CampaignDir(h.id)
	files := map[string][]byte{
		filepath.Join(dir, "ledger.json"):  h.ledger,
		filepath.Join(dir, historyName):    h.history,
		filepath.Join(dir, "results.tsv"):  h.results,
		filepath.Join(dir, "trials.jsonl"): h.log,
		ws.CorpusPath():                    h.corpus,
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// processCPU is the process's user + system CPU time.
func processCPU(b *testing.B) time.Duration {
	d, ok := cputime.Total()
	if !ok {
		b.Skip("no process CPU time on this platform")
	}
	return d
}

// sysCPU is the process's system CPU time (0 where the platform does not say).
func sysCPU() time.Duration {
	d, _ := cputime.System()
	return d
}

// writtenBytes is what the process has passed to write calls so far
// (/proc/self/io's wchar: every file, whatever the file system).
func writtenBytes(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	for ln := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(ln, "wchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Skip("no wchar in /proc/self/io")
	return 0
}

// benchWindow is how many trials are recorded on one copy of the history
// before the next copy is installed, so that every measured trial has
// between history and history+benchWindow trials behind it. Its 256
// events are SnapshotEvery: each window pays for one snapshot, as a long
// run does.
const benchWindow = 128

// BenchmarkLedgerRecord is the ledger's cost of recording one trial (a
// Propose and a Finished event through Ledger.Apply, with the files they
// append) on a campaign with 100, 1,000 and 10,000 trials behind it.
// Reported: CPU-µs/trial (process CPU per trial), step-CPU-µs/trial (the
// same events through the bare state machine, loaded afresh per window as
// the ledger is: the campaign's own share), ledger-CPU-µs/trial (the
// difference), steady-step-CPU-µs/trial (the state machine loaded once and
// stepping on: the campaign's cost per trial in a long run), B/event (bytes
// passed to write calls per event, every file included) and ns/op (wall
// time per trial, fsyncs included).
func BenchmarkLedgerRecord(b *testing.B) {
	for _, history := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) { benchLedgerRecord(b, history, campaign.ProposerReference) })
	}
}

// BenchmarkProposerRecord is BenchmarkLedgerRecord with the model proposer
// (the default) on campaigns with 1,000 and 10,000 trials behind it: its
// step-CPU-µs/trial is the proposer's cost per trial as the history grows.
func BenchmarkProposerRecord(b *testing.B) {
	for _, history := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) { benchLedgerRecord(b, history, campaign.ProposerModel) })
	}
}

func benchLedgerRecord(b *testing.B, history int, proposer string) {
	h := makeBenchHistoryWith(b, history, proposer)
	// steady is the campaign stepping on through every window, loaded once:
	// a driver's campaign between two resumes (each window's ledger and
	// twin are loaded afresh, and rebuild what a loaded campaign derives).
	steady := h.campaign(b)
	var cpu, stepCPU, steadyCPU time.Duration
	var written int64
	var sys time.Duration
	b.ResetTimer()
	b.StopTimer()
	for done := 0; done < b.N; {
		n := min(benchWindow, b.N-done)
		// The state machine alone, on the same events, loaded as the
		// ledger loads it.
		twin := h.campaign(b)
		c0 := processCPU(b)
		for k := range n {
			if err := recordTrial(twin.Step, history+k, func(campaign.Decision) {}); err != nil {
				b.Fatal(err)
			}
		}
		stepCPU += processCPU(b) - c0
		c0 = processCPU(b)
		for k := range n {
			if err := recordTrial(steady.Step, history+done+k, func(campaign.Decision) {}); err != nil {
				b.Fatal(err)
			}
		}
		steadyCPU += processCPU(b) - c0
		// The same events through the ledger.
		ws := h.install(b)
		l, err := ws.Open(h.id)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0, w0, s0 := processCPU(b), writtenBytes(b), sysCPU()
		for k := range n {
			if err := recordTrial(l.Apply, history+k, func(campaign.Decision) {}); err != nil {
				b.Fatal(err)
			}
		}
		// Close is counted: it may write what the window left.
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - c0
		written += writtenBytes(b) - w0
		sys += sysCPU() - s0
		b.StopTimer()
		done += n
	}
	trials := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/trials, "CPU-µs/trial")
	b.ReportMetric(float64(stepCPU.Microseconds())/trials, "step-CPU-µs/trial")
	b.ReportMetric(float64((cpu-stepCPU).Microseconds())/trials, "ledger-CPU-µs/trial")
	b.ReportMetric(float64(written)/(2*trials), "B/event")
	b.ReportMetric(float64(sys.Microseconds())/trials, "sys-CPU-µs/trial")
	b.ReportMetric(float64(steadyCPU.Microseconds())/trials, "steady-step-CPU-µs/trial")
}

// BenchmarkViewFullJournal is Workspace.View (status and report while a
// driver runs) of a campaign whose journal is as full as it gets: the
// reference proposer with SnapshotEvery-1 events after 1,000 trials, and
// the model proposer (the default, whose proposals cost milliseconds) after
// 300, where replayBudget ends the journal sooner. journal-events is how
// many events each view replays.
func BenchmarkViewFullJournal(b *testing.B) {
	for _, tc := range []struct {
		proposer string
		history  int
	}{{campaign.ProposerReference, 1000}, {campaign.ProposerModel, 300}} {
		b.Run(fmt.Sprintf("proposer=%s/history=%d", tc.proposer, tc.history), func(b *testing.B) {
			h := makeBenchHistoryWith(b, tc.history, tc.proposer)
			ws := h.install(b)
			l, err := ws.Open(h.id)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			// Fill the journal to just short of a snapshot.
			for k := 0; l.seq-l.snapSeq < SnapshotEvery-2 && l.stepTime < replayBudget*9/10; k++ {
				if err := recordTrial(l.Apply, tc.history+k, func(campaign.Decision) {}); err != nil {
					b.Fatal(err)
				}
			}
			events := l.seq - l.snapSeq
			for b.Loop() {
				if _, err := ws.View(h.id); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(events), "journal-events")
		})
	}
}

// BenchmarkJournalAppend is one journal append as Apply makes it (the file
// opened, a record of about 300 bytes written and fsynced, the file closed
// again), and, as reopen-only, the open and close it pays so that no file
// is held open between appends: the reopen's share of an append.
func BenchmarkJournalAppend(b *testing.B) {
	_, l := newSyntheticLedger(b)
	defer l.Close()
	line := append(bytes.Repeat([]byte("x"), 299), '\n')
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if err := l.appendJournal(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reopen-only", func(b *testing.B) {
		for b.Loop() {
			f, err := os.OpenFile(l.path(journalName), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
