package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/trial"
)

// ledgerVersion is the on-disk format of ledger.json: 2 since the events
// after the snapshot live in the journal (a version 1 ledger has no journal
// and opens as one whose snapshot holds every event; earlier binaries
// refuse version 2 rather than miss the journal's events), 3 since the
// growing parts of the state live in the history (history.go; a ledger.json
// without a history mark holds the whole state, as versions 1 and 2 do).
const ledgerVersion = 3

// SnapshotEvery is how many journalled events pass between two snapshots
// (ledger.json rewritten, the journal emptied); Close snapshots too.
const SnapshotEvery = 256

// replayBudget also bounds the journal: a snapshot is taken once the
// state machine has spent this long on the events since the last one, so
// that replaying them (View, Open) stays about this fast whatever the
// proposer costs. A variable for the tests.
var replayBudget = 250 * time.Millisecond

// ErrLocked means another process is driving the campaign.
var ErrLocked = errors.New("campaign is locked by another process")

// ErrNoCampaign means the workspace has no campaign with that id.
var ErrNoCampaign = errors.New("no such campaign")

// Workspace is a directory of campaigns sharing one flywheel corpus.
type Workspace struct {
	Dir string
	// Corpus, when set, is the corpus file used instead of
	// Dir/flywheel/corpus.jsonl (the reference's --corpus flag).
	Corpus string
}

// OpenWorkspace creates the workspace directory if needed.
func OpenWorkspace(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("workspace directory is empty")
	}
	if err := os.MkdirAll(filepath.Join(dir, "campaigns"), 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return &Workspace{Dir: dir}, nil
}

// CampaignDir is where a campaign's ledger lives.
func (w *Workspace) CampaignDir(id string) string { return filepath.Join(w.Dir, "campaigns", id) }

// CorpusPath is the workspace's flywheel corpus.
func (w *Workspace) CorpusPath() string {
	if w.Corpus != "" {
		return w.Corpus
	}
	return filepath.Join(w.Dir, "flywheel", "corpus.jsonl")
}

// IDs lists the campaigns of the workspace, sorted.
func (w *Workspace) IDs() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(w.Dir, "campaigns"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && campaign.ValidID(e.Name()) == nil && fileExists(filepath.Join(w.CampaignDir(e.Name()), "ledger.json")) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// ResultsPaths are the results.tsv files of the workspace's campaigns
// (those that have one).
func (w *Workspace) ResultsPaths() []string {
	paths, _ := filepath.Glob(filepath.Join(w.Dir, "campaigns", "*", "results.tsv"))
	return paths
}

// Exists reports whether the campaign has a ledger; an id outside the
// shared grammar (campaign.ValidID) never exists.
func (w *Workspace) Exists(id string) bool {
	return campaign.ValidID(id) == nil && fileExists(filepath.Join(w.CampaignDir(id), "ledger.json"))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Ledger is one campaign's state machine bound to its files.
type Ledger struct {
	mu   sync.RWMutex // guards c against readers outside the driver's loop
	ws   *Workspace
	id   string
	dir  string
	c    *campaign.Campaign
	lock *flywheel.FileLock

	// journalReady is set once the journal has been made ready for
	// appending (created, and cut where it had to be) by a create or a
	// load: Close snapshots only a ledger that got that far.
	journalReady bool
	seq          uint64 // the sequence number of the last event applied
	snapSeq      uint64 // the last event ledger.json holds
	// stepTime is the state machine's time on the events since snapSeq.
	stepTime time.Duration
	last     outbox // the last event's outbox (snapshots carry it)
	hist     history
	// broken is set when a write failed after the state machine moved:
	// memory is ahead of the disk, so nothing more is written (reopen).
	broken error
}

// ledgerFile is ledger.json: the snapshot.
type ledgerFile struct {
	Version int `json:"version"`
	// Seq is the sequence number of the last event the state holds; the
	// journal's records after it are replayed on top.
	Seq    uint64          `json:"seq,omitempty"`
	State  json.RawMessage `json:"state"`
	Outbox outbox          `json:"outbox"`
	// History, when set, says how much of the history (ledger.history)
	// State continues: the state's trajectory, observations, prior and
	// tried set are there, not in State.
	History *historyMark `json:"history,omitempty"`
}

type outbox struct {
	Rows   []flywheel.Row `json:"rows"`
	Corpus []string       `json:"corpus"` // compact JSON lines
	// Trials are the trials.jsonl lines of the event: the outcome it
	// recorded, so the log holds one line per recorded trial, exactly once.
	Trials []json.RawMessage `json:"trials,omitempty"`
}

// Create starts a new campaign from start, or — if the campaign already
// exists — resumes it (start is then ignored except for its identity).
// created reports which happened.
func (w *Workspace) Create(start campaign.Start) (l *Ledger, created bool, err error) {
	id := campaign.ID(start.Model, start.GPU, start.Device, start.Name)
	if w.Exists(id) {
		l, err = w.Open(id)
		return l, false, err
	}
	_, statErr := os.Stat(w.CampaignDir(id))
	newDir := errors.Is(statErr, fs.ErrNotExist)
	l, err = w.lockNew(id)
	if err != nil {
		return nil, false, err
	}
	// abandon gives up a create that failed before its snapshot made the
	// campaign exist, removing the directory the lock made (while the lock
	// is still held), so that no empty campaign is left behind.
	abandon := func(err error) (*Ledger, bool, error) {
		if newDir && !fileExists(filepath.Join(l.dir, "ledger.json")) {
			l.c = nil // nothing to snapshot on Close
			_ = os.RemoveAll(l.dir)
		}
		l.Close()
		return nil, false, err
	}
	c := campaign.New()
	d, err := c.Step(start)
	if err != nil {
		return abandon(err)
	}
	// A journal without a ledger.json belongs to no campaign: empty it
	// before the snapshot makes the campaign exist.
	if err := l.openJournal(0); err != nil {
		return abandon(err)
	}
	l.c = c
	ob, err := newOutbox(start, d)
	if err != nil {
		return abandon(err)
	}
	l.last = ob
	if err := l.snapshot(); err != nil {
		return abandon(err)
	}
	if err := l.flush(ob, false, d.Corpus); err != nil {
		l.Close()
		return nil, false, err
	}
	return l, true, nil
}

// readLedgerFile reads and checks a campaign's ledger.json from f, opened
// at path (named in errors).
func readLedgerFile(path string, f *os.File) (ledgerFile, error) {
	var lf ledgerFile
	data, err := io.ReadAll(f)
	if err != nil {
		return lf, err
	}
	if err := json.Unmarshal(data, &lf); err != nil {
		return lf, fmt.Errorf("%s: corrupt ledger: %w", path, err)
	}
	if lf.Version < 1 || lf.Version > ledgerVersion {
		return lf, fmt.Errorf("%s: ledger version %d, want %d", path, lf.Version, ledgerVersion)
	}
	return lf, nil
}

// replayed is the state a snapshot and its journal rebuild.
type replayed struct {
	c       *campaign.Campaign
	hist    history // the snapshot's history (what the next snapshot continues)
	snapSeq uint64
	seq     uint64
	// outboxes are the snapshot's and every replayed event's, in order.
	outboxes []outbox
	good     int // the journal's valid length (what follows is torn)
	size     int // the journal's length
	// stepTime is how long replaying the journal took.
	stepTime time.Duration
}

// errJournalMoved means that, read without the lock, a snapshot was taken
// between reading the snapshot and reading the journal (the journal holds
// no record right after the snapshot although it holds later ones, or
// ledger.json was replaced meanwhile), so read again.
var errJournalMoved = errors.New("the journal moved on past the snapshot read")

// replay loads the snapshot and replays the journal's newer records.
func (w *Workspace) replay(id string) (replayed, error) {
	dir := w.CampaignDir(id)
	snapPath := filepath.Join(dir, "ledger.json")
	// The snapshot stays open until the journal is read: while it is open
	// its file cannot be freed, so a snapshot file at snapPath that is not
	// this one afterwards was written in between.
	snap, err := os.Open(snapPath)
	if err != nil {
		return replayed{}, err
	}
	defer snap.Close()
	lf, err := readLedgerFile(snapPath, snap)
	if err != nil {
		return replayed{}, err
	}
	var st campaign.State
	if err := json.Unmarshal(lf.State, &st); err != nil {
		return replayed{}, fmt.Errorf("campaign state: %w", err)
	}
	var hist history
	if lf.History != nil {
		if err := readHistory(filepath.Join(dir, historyName), *lf.History, &st); err != nil {
			return replayed{}, err
		}
		hist.committed(*lf.History, &st)
	}
	c, err := campaign.LoadState(st)
	if err != nil {
		return replayed{}, err
	}
	r := replayed{c: c, hist: hist, snapSeq: lf.Seq, seq: lf.Seq, outboxes: []outbox{lf.Outbox}}
	path := filepath.Join(dir, journalName)
	data, err := readJournalFile(path)
	if err != nil {
		return replayed{}, err
	}
	recs, good, err := parseJournal(data)
	if err != nil {
		return replayed{}, fmt.Errorf("%s: %w", path, err)
	}
	r.good, r.size = good, len(data)
	// Read without the lock, a snapshot may have replaced ledger.json and
	// emptied the journal after the snapshot was read: the journal then
	// lacks events the old snapshot needs, and the state would be older
	// than one a reader has already seen.
	if replaced, err := replacedSince(snap, snapPath); err != nil {
		return replayed{}, err
	} else if replaced {
		return replayed{}, fmt.Errorf("%s: %w (a newer snapshot was written while the journal was read)", path, errJournalMoved)
	}
	for _, rec := range recs {
		if rec.Seq <= r.seq {
			continue // already in the snapshot (a crash before the journal was emptied)
		}
		if rec.Seq != r.seq+1 {
			return replayed{}, fmt.Errorf("%s: %w (snapshot at event %d, next record %d)", path, errJournalMoved, r.seq, rec.Seq)
		}
		began := time.Now()
		ob, err := replayRecord(c, rec)
		r.stepTime += time.Since(began)
		if err != nil {
			return replayed{}, fmt.Errorf("%s: event %d: %w", path, rec.Seq, err)
		}
		r.outboxes = append(r.outboxes, ob)
		r.seq = rec.Seq
	}
	return r, nil
}

// replacedSince reports whether the file at path is no longer f (an
// atomic write replaced it).
func replacedSince(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return !os.SameFile(held, now), nil
}

// replayRecord applies one journalled event and checks that the campaign
// decided as it did when the event was first applied.
func replayRecord(c *campaign.Campaign, rec journalRecord) (outbox, error) {
	ev, err := decodeEvent(rec.Kind, rec.Event)
	if err != nil {
		return outbox{}, err
	}
	d, err := c.Step(ev)
	if err != nil {
		return outbox{}, fmt.Errorf("replaying it was refused: %w", err)
	}
	ob, err := newOutbox(ev, d)
	if err != nil {
		return outbox{}, err
	}
	if sum := decisionChecksum(d, ob); sum != rec.Decision {
		return outbox{}, fmt.Errorf("replaying it decided otherwise than when it was applied (decision %s, journalled %s): was amk changed between the crash and this open?", sum, rec.Decision)
	}
	return ob, nil
}

// Open loads an existing campaign — its snapshot and the journalled events
// after it — and repairs whatever a crash left undone.
func (w *Workspace) Open(id string) (*Ledger, error) {
	if !w.Exists(id) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoCampaign, id, w.Dir)
	}
	l, err := w.lockNew(id)
	if err != nil {
		return nil, err
	}
	// A failed open must not snapshot on Close: the journal still holds
	// the outboxes a snapshot would drop.
	fail := func(err error) (*Ledger, error) {
		l.broken = err
		l.Close()
		return nil, err
	}
	if err := l.load(); err != nil {
		return fail(err)
	}
	return l, nil
}

// load reads the campaign from its files (the snapshot and the journalled
// events after it), opens the journal for appending and repairs whatever a
// crash or a failed write left undone.
func (l *Ledger) load() error {
	r, err := l.ws.replay(l.id)
	if err != nil {
		return err
	}
	l.c, l.hist, l.seq, l.snapSeq, l.last, l.stepTime = r.c, r.hist, r.seq, r.snapSeq, r.outboxes[len(r.outboxes)-1], r.stepTime
	// Cut a torn tail off before anything is appended after it.
	if r.good < r.size {
		if err := os.Truncate(l.path(journalName), int64(r.good)); err != nil {
			return fmt.Errorf("cutting the journal's torn tail: %w", err)
		}
	}
	if err := l.openJournal(-1); err != nil {
		return err
	}
	if err := l.recover(mergeOutboxes(r.outboxes)); err != nil {
		return err
	}
	if err := l.removeOrphanTemps(); err != nil {
		return err
	}
	return l.repairTrialLog()
}

// Broken is the failed write that stopped the ledger (nothing more is
// written until Heal succeeds); nil while it is writable.
func (l *Ledger) Broken() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.broken
}

// Heal makes a ledger a failed write stopped (a full or read-only disk)
// writable again once the disk is: it drops the campaign held in memory,
// which is ahead of the disk, and loads it from its files as Open does
// (the repair finishes what the failed write left undone), under the lock
// the ledger holds. A ledger that is not broken is left as it is. If the
// files still cannot be read or written, the ledger stays broken with that
// error, and Heal may be called again.
func (l *Ledger) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken == nil {
		return nil
	}
	l.journalReady = false // load makes it ready again
	if err := l.load(); err != nil {
		l.broken = err
		return err
	}
	l.broken = nil
	return nil
}

// View loads a campaign read-only, without the lock (for status and report
// while a driver runs): the snapshot and the journalled events after it.
// A torn last record (a write in progress) is left out; a snapshot taken
// while reading is met by reading again.
func (w *Workspace) View(id string) (*campaign.Campaign, error) {
	if !w.Exists(id) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoCampaign, id, w.Dir)
	}
	// A driver snapshots at most every event (when events are slow to
	// replay): backing off a little longer each time lets a read fit between
	// two snapshots; 64 tries wait about 0.2 s in all.
	var err error
	for try := range 64 {
		var r replayed
		if r, err = w.replay(id); err == nil {
			return r.c, nil
		}
		if !errors.Is(err, errJournalMoved) {
			break
		}
		time.Sleep(time.Duration(try) * 100 * time.Microsecond)
	}
	return nil, fmt.Errorf("campaign %s: %w", id, err)
}

// Driver says whether a process (this one included) drives the campaign:
// whether its ledger's lock is held, and by whom ("pid 12").
func (w *Workspace) Driver(id string) (holder string, held bool, err error) {
	return flywheel.LockHolder(filepath.Join(w.CampaignDir(id), "lock"))
}

// lockRetry is how long lockNew waits before its second try: a look at
// the lock (Driver) holds it for a moment.
const lockRetry = 20 * time.Millisecond

func (w *Workspace) lockNew(id string) (*Ledger, error) {
	dir := w.CampaignDir(id)
	lockPath, holder := filepath.Join(dir, "lock"), fmt.Sprintf("pid %d", os.Getpid())
	lock, err := flywheel.TryLock(lockPath, holder)
	var held *flywheel.HeldError
	if errors.As(err, &held) {
		time.Sleep(lockRetry)
		lock, err = flywheel.TryLock(lockPath, holder)
	}
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w: %s (holder: %s)", ErrLocked, id, held.Holder)
	}
	if err != nil {
		return nil, err
	}
	return &Ledger{ws: w, id: id, dir: dir, lock: lock}, nil
}

// ErrWorkspaceInUse means another scheduler holds the workspace.
var ErrWorkspaceInUse = errors.New("in use by another scheduler")

// LockForScheduler takes the workspace's scheduler lock, so that one
// scheduler at a time serves a workspace; Close the lock to release it. The
// error names the holder when another scheduler has it.
func (w *Workspace) LockForScheduler() (*flywheel.FileLock, error) {
	host, _ := os.Hostname()
	path := filepath.Join(w.Dir, "scheduler.lock")
	lock, err := flywheel.TryLock(path, fmt.Sprintf("pid %d on %s", os.Getpid(), host))
	var held *flywheel.HeldError
	if errors.As(err, &held) {
		who := held.Holder
		if who == "" {
			who = "unknown process"
		}
		return nil, fmt.Errorf("workspace %s is %w (%s holds %s); run one scheduler per workspace", w.Dir, ErrWorkspaceInUse, who, path)
	}
	if err != nil {
		return nil, fmt.Errorf("workspace lock: %w", err)
	}
	return lock, nil
}

func (l *Ledger) path(name string) string { return filepath.Join(l.dir, name) }

// ID is the campaign id.
func (l *Ledger) ID() string { return l.id }

// Dir is the campaign's directory.
func (l *Ledger) Dir() string { return l.dir }

// Campaign is the live state machine. Only the goroutine that calls Apply
// may read it directly; others use Read.
func (l *Ledger) Campaign() *campaign.Campaign { return l.c }

// Read runs fn with the campaign while no Apply is in progress.
func (l *Ledger) Read(fn func(c *campaign.Campaign)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	fn(l.c)
}

// ResultsPath is the campaign's results.tsv.
func (l *Ledger) ResultsPath() string { return l.path("results.tsv") }

// Close snapshots the campaign if the journal holds events (so the journal
// is empty between runs) and releases the lock.
func (l *Ledger) Close() error {
	var errs []error
	if l.journalReady {
		if l.c != nil && l.broken == nil && l.seq > l.snapSeq {
			l.mu.Lock()
			errs = append(errs, l.snapshot())
			l.mu.Unlock()
		}
		l.journalReady = false
	}
	if l.lock != nil {
		errs = append(errs, l.lock.Close())
		l.lock = nil
	}
	return errors.Join(errs...)
}

// Apply feeds one event to the campaign and makes its decision durable:
// the event goes to the journal (one fsynced append), then the rows,
// trials.jsonl lines and corpus records are appended, and every
// SnapshotEvery events (or replayBudget of state machine time) the state
// is snapshotted. A refused event changes nothing and returns the
// campaign's error.
func (l *Ledger) Apply(ev campaign.Event) (campaign.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := ev.(campaign.Start); ok {
		return l.c.Step(ev) // refused: the campaign has started
	}
	if l.broken != nil {
		return campaign.Decision{}, fmt.Errorf("stalled: the ledger stopped after a failed write (it is loaded again once the disk allows): %w", l.broken)
	}
	// Encoded before the state machine moves: an event the journal cannot
	// hold is refused and changes nothing.
	kind, event, err := encodeEvent(ev)
	if err != nil {
		return campaign.Decision{}, err
	}
	began := time.Now()
	d, err := l.c.Step(ev)
	if err != nil {
		return d, err
	}
	l.stepTime += time.Since(began)
	if err := l.commit(kind, event, ev, d); err != nil {
		l.broken = err
		return d, err
	}
	if l.seq-l.snapSeq >= SnapshotEvery || l.stepTime >= replayBudget {
		if err := l.snapshot(); err != nil {
			l.broken = err
			return d, err
		}
	}
	return d, nil
}

// commit journals an applied event and appends its outbox.
func (l *Ledger) commit(kind string, event []byte, ev campaign.Event, d campaign.Decision) error {
	ob, err := newOutbox(ev, d)
	if err != nil {
		return err
	}
	line, err := encodeJournalRecord(journalRecord{Seq: l.seq + 1, Kind: kind, Event: event, Decision: decisionChecksum(d, ob)})
	if err != nil {
		return err
	}
	if err := l.appendJournal(line); err != nil {
		return err
	}
	l.seq++
	l.last = ob
	return l.flush(ob, false, d.Corpus)
}

// newOutbox is what an applied event appends: its rows, its corpus
// records as compact JSON lines and, for an outcome, its trials.jsonl line.
func newOutbox(ev campaign.Event, d campaign.Decision) (outbox, error) {
	ob := outbox{Rows: d.Rows}
	for i := range d.Corpus {
		ob.Corpus = append(ob.Corpus, pyjson.Compact(d.Corpus[i].Value(), false))
	}
	if f, ok := ev.(campaign.Finished); ok {
		line, err := json.Marshal(f.Outcome)
		if err != nil {
			return ob, fmt.Errorf("trials log: %w", err)
		}
		ob.Trials = []json.RawMessage{line}
	}
	return ob, nil
}

// mergeOutboxes joins outboxes, in order, into one.
func mergeOutboxes(obs []outbox) outbox {
	var all outbox
	for _, ob := range obs {
		all.Rows = append(all.Rows, ob.Rows...)
		all.Corpus = append(all.Corpus, ob.Corpus...)
		all.Trials = append(all.Trials, ob.Trials...)
	}
	return all
}

// The ledger keeps no file of the campaign open between two writes: the
// journal, like results.tsv, trials.jsonl, the history and the corpus, is
// opened for each append and closed after it, and the lock is held on a
// descriptor opened for reading only. A ledger that reopens its files
// recovers from a disk that was remounted or replaced without a restart
// of the process: a file kept open would go on pointing at the old disk
// (or at a file no longer there), and a file kept open for writing stops
// the administrator from remounting the disk read-only at all (the kernel
// answers "mount point is busy"). An open costs a few microseconds; the
// fsync each append already does costs far more.

// openJournal makes the journal ready for appending: it creates the file
// if it is missing and, when truncate >= 0, cuts it to that length. Opening
// it for writing also checks that the disk takes writes again, so a load
// on a disk that is still read-only fails (and Heal leaves the ledger
// stalled) instead of succeeding until the next write.
func (l *Ledger) openJournal(truncate int64) error {
	f, err := os.OpenFile(l.path(journalName), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if truncate >= 0 {
		if err := f.Truncate(truncate); err != nil {
			f.Close()
			return fmt.Errorf("journal: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	l.journalReady = true
	return nil
}

// appendJournal appends one record to the journal, fsyncs it and closes
// the file again. A failed write is cut back off, so no record ever follows
// a partial one.
func (l *Ledger) appendJournal(line []byte) (err error) {
	f, err := os.OpenFile(l.path(journalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("journal: %w", cerr)
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := f.Write(line); err != nil {
		_ = f.Truncate(st.Size())
		return fmt.Errorf("journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// encodeSnapshot is ledger.json's content: a ledgerFile with the state less
// its growing lists (stripGrowing) and the history mark that holds them,
// written field by field so that the state is encoded once (json.Marshal
// of a ledgerFile would re-scan it as a raw message).
func (l *Ledger) encodeSnapshot(st campaign.State, mark historyMark) ([]byte, error) {
	head := stripGrowing(st)
	state, err := json.Marshal(&head) // compact; the state is put together again when read
	if err != nil {
		return nil, err
	}
	ob, err := json.Marshal(l.last)
	if err != nil {
		return nil, err
	}
	hm, err := json.Marshal(mark)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, len(state)+len(ob)+len(hm)+64)
	data = fmt.Appendf(data, `{"version":%d,"seq":%d,"history":`, ledgerVersion, l.seq)
	data = append(data, hm...)
	data = append(data, `,"state":`...)
	data = append(data, state...)
	data = append(data, `,"outbox":`...)
	data = append(data, ob...)
	return append(data, '}'), nil
}

// Stages of a snapshot, for snapshotHook.
const (
	snapshotWriting = "writing" // before ledger.json's atomic write
	snapshotWritten = "written" // after it, before the journal is emptied
)

// snapshotHook lets the crash tests stop the process inside a snapshot.
var snapshotHook = func(stage, dir string, seq uint64, data []byte) {}

// snapshot fsyncs trials.jsonl (results.tsv and the corpus are fsynced on
// every append), appends what the history lacks of the state to it (fsynced),
// writes the rest of the state with the last event's outbox and the
// history's new mark to ledger.json atomically, then empties the journal. A crash between the two leaves
// records the snapshot already holds; their sequence numbers say so, and
// they are skipped.
func (l *Ledger) snapshot() error {
	if err := l.syncTrialLog(); err != nil {
		return err
	}
	st := l.c.State()
	rec, err := l.hist.record(l.seq, &st)
	if err != nil {
		return err
	}
	mark, err := l.hist.append(l.path(historyName), rec, &st)
	if err != nil {
		return err
	}
	data, err := l.encodeSnapshot(st, mark)
	if err != nil {
		return err
	}
	snapshotHook(snapshotWriting, l.dir, l.seq, data)
	if err := atomicfile.Write(l.path("ledger.json"), data); err != nil {
		return fmt.Errorf("writing the ledger: %w", err)
	}
	l.hist.committed(mark, &st)
	snapshotHook(snapshotWritten, l.dir, l.seq, data)
	if err := os.Truncate(l.path(journalName), 0); err != nil {
		return fmt.Errorf("emptying the journal: %w", err)
	}
	l.snapSeq, l.stepTime = l.seq, 0
	return nil
}

// flush appends the outbox. recs are its corpus records as the campaign
// decided them, appended as they are. When repairing after a crash there
// are none: the records are read back from the outbox's lines, and rows and
// corpus lines already on disk are skipped.
func (l *Ledger) flush(ob outbox, repair bool, recs []flywheel.Record) error {
	rows := ob.Rows
	if repair && len(rows) > 0 {
		have, err := flywheel.ReadRows(l.ResultsPath())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		last := 0
		for _, r := range have {
			last = max(last, r.Experiment)
		}
		var keep []flywheel.Row
		for _, r := range rows {
			if r.Experiment > last {
				keep = append(keep, r)
			}
		}
		rows = keep
	}
	if len(rows) > 0 {
		if err := flywheel.AppendRows(l.ResultsPath(), rows...); err != nil {
			return fmt.Errorf("appending results.tsv: %w", err)
		}
	}
	if err := l.appendTrials(ob.Trials, repair); err != nil {
		return err
	}
	if !repair {
		if len(recs) == 0 {
			return nil
		}
		if err := flywheel.AppendCorpus(l.ws.CorpusPath(), recs...); err != nil {
			return fmt.Errorf("appending the corpus: %w", err)
		}
		return nil
	}
	lines := ob.Corpus
	if len(lines) > 0 {
		data, err := os.ReadFile(l.ws.CorpusPath())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		present := map[string]bool{}
		for ln := range bytes.SplitSeq(data, []byte("\n")) {
			present[string(ln)] = true
		}
		var keep []string
		for _, ln := range lines {
			if !present[ln] {
				keep = append(keep, ln)
			}
		}
		lines = keep
	}
	if len(lines) == 0 {
		return nil
	}
	recs = make([]flywheel.Record, 0, len(lines))
	for _, ln := range lines {
		v, err := pyjson.Parse([]byte(ln))
		if err != nil {
			return fmt.Errorf("outbox corpus line: %w", err)
		}
		rec, err := flywheel.RecordFromValue(v)
		if err != nil {
			return fmt.Errorf("outbox corpus line: %w", err)
		}
		recs = append(recs, rec)
	}
	if err := flywheel.AppendCorpus(l.ws.CorpusPath(), recs...); err != nil {
		return fmt.Errorf("appending the corpus: %w", err)
	}
	return nil
}

func (l *Ledger) recover(ob outbox) error { return l.flush(ob, true, nil) }

// trialLogLine is what the repair reads of a trials.jsonl line.
type trialLogLine struct {
	TrialID *int `json:"trial_id"`
}

// appendTrials appends the outbox's outcome lines to trials.jsonl.
// When repairing, a trial already in the log is skipped.
func (l *Ledger) appendTrials(lines []json.RawMessage, repair bool) error {
	if len(lines) == 0 {
		return nil
	}
	if repair {
		have, _, err := l.readTrialLog()
		if err != nil {
			return err
		}
		var keep []json.RawMessage
		for _, ln := range lines {
			var t trialLogLine
			if json.Unmarshal(ln, &t) == nil && t.TrialID != nil && have[*t.TrialID] {
				continue
			}
			keep = append(keep, ln)
		}
		lines = keep
	}
	f, err := os.OpenFile(l.path("trials.jsonl"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	// A line torn by a crash stays a line of its own (the repair drops
	// it) rather than swallowing the first line appended after it.
	if st, err := f.Stat(); err != nil {
		return fmt.Errorf("trials log: %w", err)
	} else if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			return fmt.Errorf("trials log: %w", err)
		}
		if last[0] != '\n' {
			buf.WriteByte('\n')
		}
	}
	for _, ln := range lines {
		buf.Write(ln)
		buf.WriteByte('\n')
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	if repair {
		return f.Sync()
	}
	return nil // the journal holds the line until a snapshot has synced the log
}

// syncTrialLog fsyncs trials.jsonl: a snapshot does so before it drops the
// journal records whose lines Apply appended without an fsync of their own.
func (l *Ledger) syncTrialLog() error {
	f, err := os.OpenFile(l.path("trials.jsonl"), os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	return nil
}

// readTrialLog returns the trial ids of trials.jsonl's well-formed lines
// and those lines, in order (a missing file is empty).
func (l *Ledger) readTrialLog() (map[int]bool, [][]byte, error) {
	return readTrialLogFile(l.path("trials.jsonl"))
}

// TrialOutcome returns the outcome trials.jsonl in a campaign's directory
// holds for one trial, and false when it holds none (the trial has not
// finished, or never existed).
func TrialOutcome(dir string, trialID int) (trial.Outcome, bool, error) {
	_, lines, err := readTrialLogFile(filepath.Join(dir, "trials.jsonl"))
	if err != nil {
		return trial.Outcome{}, false, err
	}
	for _, ln := range lines {
		var out trial.Outcome
		if err := json.Unmarshal(ln, &out); err == nil && out.TrialID == trialID {
			return out, true, nil
		}
	}
	return trial.Outcome{}, false, nil
}

// readTrialLogFile is readTrialLog on a trials.jsonl file.
func readTrialLogFile(path string) (map[int]bool, [][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("trials log: %w", err)
	}
	ids := map[int]bool{}
	var lines [][]byte
	for ln := range bytes.SplitSeq(data, []byte("\n")) {
		var t trialLogLine
		if len(ln) == 0 || json.Unmarshal(ln, &t) != nil || t.TrialID == nil {
			continue
		}
		ids[*t.TrialID] = true
		lines = append(lines, ln)
	}
	return ids, lines, nil
}

// repairTrialLog makes trials.jsonl agree with the ledger (and so with
// results.tsv, one row per recorded outcome): a torn or unreadable line, a
// second line for one trial (earlier versions logged every outcome received,
// before recording it, so a crash or a redelivery left extra lines) and a
// line for a trial the campaign has not recorded are dropped. The file is
// rewritten atomically only when something was dropped.
func (l *Ledger) repairTrialLog() error {
	data, err := os.ReadFile(l.path("trials.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	st := l.c.State()
	recorded := func(id int) bool {
		_, inFlight := st.InFlight[id]
		return id >= 0 && id < st.NextTrial && !inFlight
	}
	seen := map[int]bool{}
	var out bytes.Buffer
	dropped := 0
	for ln := range bytes.SplitSeq(data, []byte("\n")) {
		if len(ln) == 0 {
			continue
		}
		var t trialLogLine
		if json.Unmarshal(ln, &t) != nil || t.TrialID == nil || seen[*t.TrialID] || !recorded(*t.TrialID) {
			dropped++
			continue
		}
		seen[*t.TrialID] = true
		out.Write(ln)
		out.WriteByte('\n')
	}
	if dropped == 0 && (len(data) == 0 || data[len(data)-1] == '\n') {
		return nil
	}
	if err := atomicfile.Write(l.path("trials.jsonl"), out.Bytes()); err != nil {
		return fmt.Errorf("repairing the trials log: %w", err)
	}
	return nil
}

// removeOrphanTemps deletes the temporary files an atomic write of the
// ledger or the trials log left behind when the process died between
// creating and renaming them. The campaign lock is held, so no writer of
// these files is running.
func (l *Ledger) removeOrphanTemps() error {
	for _, name := range []string{"ledger.json", "trials.jsonl"} {
		orphans, err := filepath.Glob(filepath.Join(l.dir, "."+name+".tmp-*"))
		if err != nil {
			return err
		}
		for _, o := range orphans {
			if err := os.Remove(o); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing a leftover temporary file: %w", err)
			}
		}
	}
	return nil
}
