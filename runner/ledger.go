package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/atomicfile"
	"github.com/amk-dev/amk/pyjson"
)

// ledgerVersion is the on-disk format of ledger.json.
const ledgerVersion = 1

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
}

type ledgerFile struct {
	Version int             `json:"version"`
	State   json.RawMessage `json:"state"`
	Outbox  outbox          `json:"outbox"`
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
	l, err = w.lockNew(id)
	if err != nil {
		return nil, false, err
	}
	c := campaign.New()
	d, err := c.Step(start)
	if err != nil {
		l.Close()
		return nil, false, err
	}
	l.c = c
	if err := l.persist(d); err != nil {
		l.Close()
		return nil, false, err
	}
	return l, true, nil
}

// Open loads an existing campaign and repairs whatever a crash left undone.
func (w *Workspace) Open(id string) (*Ledger, error) {
	if !w.Exists(id) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoCampaign, id, w.Dir)
	}
	l, err := w.lockNew(id)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(l.path("ledger.json"))
	if err != nil {
		l.Close()
		return nil, err
	}
	var lf ledgerFile
	if err := json.Unmarshal(data, &lf); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s: corrupt ledger: %w", l.path("ledger.json"), err)
	}
	if lf.Version != ledgerVersion {
		l.Close()
		return nil, fmt.Errorf("%s: ledger version %d, want %d", l.path("ledger.json"), lf.Version, ledgerVersion)
	}
	if l.c, err = campaign.Load(lf.State); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.recover(lf.Outbox); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.removeOrphanTemps(); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.repairTrialLog(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// View loads a campaign read-only, without the lock (for status and report
// while a driver runs).
func (w *Workspace) View(id string) (*campaign.Campaign, error) {
	if !w.Exists(id) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNoCampaign, id, w.Dir)
	}
	data, err := os.ReadFile(filepath.Join(w.CampaignDir(id), "ledger.json"))
	if err != nil {
		return nil, err
	}
	var lf ledgerFile
	if err := json.Unmarshal(data, &lf); err != nil {
		return nil, fmt.Errorf("corrupt ledger of %s: %w", id, err)
	}
	return campaign.Load(lf.State)
}

func (w *Workspace) lockNew(id string) (*Ledger, error) {
	dir := w.CampaignDir(id)
	lock, err := flywheel.TryLock(filepath.Join(dir, "lock"), fmt.Sprintf("pid %d", os.Getpid()))
	var held *flywheel.HeldError
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

// Close releases the campaign lock.
func (l *Ledger) Close() error {
	if l.lock == nil {
		return nil
	}
	err := l.lock.Close()
	l.lock = nil
	return err
}

// Apply feeds one event to the campaign and makes its decision durable:
// state and outbox first, then rows and corpus. A refused event changes
// nothing and returns the campaign's error.
func (l *Ledger) Apply(ev campaign.Event) (campaign.Decision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := l.c.Step(ev)
	if err != nil {
		return d, err
	}
	var trials []json.RawMessage
	if f, ok := ev.(campaign.Finished); ok {
		line, err := json.Marshal(f.Outcome)
		if err != nil {
			return d, fmt.Errorf("trials log: %w", err)
		}
		trials = append(trials, line)
	}
	return d, l.persist(d, trials...)
}

func (l *Ledger) persist(d campaign.Decision, trials ...json.RawMessage) error {
	ob := outbox{Rows: d.Rows, Trials: trials}
	for i := range d.Corpus {
		ob.Corpus = append(ob.Corpus, pyjson.Compact(d.Corpus[i].Value(), false))
	}
	state, err := l.c.Marshal()
	if err != nil {
		return err
	}
	data, err := json.Marshal(ledgerFile{Version: ledgerVersion, State: state, Outbox: ob})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(l.path("ledger.json"), data); err != nil {
		return fmt.Errorf("writing the ledger: %w", err)
	}
	return l.flush(ob, false, d.Corpus)
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
		for _, ln := range bytes.Split(data, []byte("\n")) {
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

// appendTrials appends the outbox's outcome lines to trials.jsonl (fsync).
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
	var buf bytes.Buffer
	for _, ln := range lines {
		buf.Write(ln)
		buf.WriteByte('\n')
	}
	f, err := os.OpenFile(l.path("trials.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("trials log: %w", err)
	}
	return f.Sync()
}

// readTrialLog returns the trial ids of trials.jsonl's well-formed lines
// and those lines, in order (a missing file is empty).
func (l *Ledger) readTrialLog() (map[int]bool, [][]byte, error) {
	data, err := os.ReadFile(l.path("trials.jsonl"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("trials log: %w", err)
	}
	ids := map[int]bool{}
	var lines [][]byte
	for _, ln := range bytes.Split(data, []byte("\n")) {
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
	for _, ln := range bytes.Split(data, []byte("\n")) {
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
