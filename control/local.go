package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/runner"
)

// Local is the Backend of a workspace on this machine, with the runs this
// process drives (StartRun, OpenRun): reads take a run's live state, or
// load a campaign's ledger without its lock (so they work while another
// process drives it); an event goes through the run's driver, or opens the
// ledger under its lock and applies it, and is refused (ErrConflict) while
// another process (amkctl autoresearch, a scheduler) drives the campaign.
type Local struct {
	Workspace *runner.Workspace
	// Env describes this machine in the corpus records of a campaign it
	// creates (Target and Device are filled per campaign; a DeviceName left
	// empty is the evaluating launcher's name at this host).
	Env flywheel.Env
	// Now is the clock of new campaigns and of the runs' drivers; nil
	// means time.Now.
	Now func() time.Time

	corpusOnce sync.Once
	corpus     *flywheel.CorpusFollower

	mu   sync.Mutex
	runs map[string]*Run // campaign id -> the run this process drives
}

var _ Backend = (*Local)(nil)

// OpenLocal opens the workspace at dir, which must exist unless create is
// set.
func OpenLocal(dir string, create bool, env flywheel.Env) (*Local, error) {
	if !create {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("no workspace at %s (run amkctl autoresearch or amkctl start first, or pass --workspace)", dir)
		}
	}
	ws, err := runner.OpenWorkspace(dir)
	if err != nil {
		return nil, err
	}
	return &Local{Workspace: ws, Env: env}, nil
}

func (l *Local) now() time.Time {
	if l.Now != nil {
		return l.Now().UTC()
	}
	return time.Now().UTC()
}

// Where names the workspace.
func (l *Local) Where() string { return "in " + l.Workspace.Dir }

// Dir is the campaign's directory in the workspace.
func (l *Local) Dir(id string) string { return l.Workspace.CampaignDir(id) }

// IDs lists the workspace's campaigns (a workspace without campaigns has
// none) and the runs of this process.
func (l *Local) IDs() ([]string, error) {
	ids, err := l.Workspace.IDs()
	if errors.Is(err, os.ErrNotExist) {
		ids, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	for id := range l.runs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	slices.Sort(ids)
	return ids, nil
}

// Run is the run of the campaign this process drives, or nil.
func (l *Local) Run(id string) *Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[id]
}

// Runs are the campaigns this process drives, sorted.
func (l *Local) Runs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.runs))
}

// Read runs fn on the live state of a run of this process, or on what the
// campaign's ledger holds.
func (l *Local) Read(id string, fn func(c *campaign.Campaign)) error {
	if r := l.Run(id); r != nil {
		r.Ledger.Read(fn)
		return nil
	}
	c, err := l.Workspace.View(id)
	if errors.Is(err, runner.ErrNoCampaign) {
		return Errorf(ErrNotFound, "%w", err)
	}
	if err != nil {
		return err
	}
	fn(c)
	return nil
}

// Do applies an event: through the run of this process that drives the
// campaign, or to its ledger opened under its lock.
func (l *Local) Do(ctx context.Context, id string, ev campaign.Event) (campaign.Decision, error) {
	for {
		r := l.Run(id)
		if r == nil {
			break
		}
		dec, err := r.Do(ctx, ev)
		if !errors.Is(err, errRunClosed) {
			return dec, err
		}
	}
	ledger, err := l.Workspace.Open(id)
	switch {
	case errors.Is(err, runner.ErrLocked):
		return campaign.Decision{}, Errorf(ErrConflict, "%w\n  another process drives it: send the command to its scheduler (--server URL), or stop amkctl autoresearch first", err)
	case errors.Is(err, runner.ErrNoCampaign):
		return campaign.Decision{}, Errorf(ErrNotFound, "%w", err)
	case err != nil:
		return campaign.Decision{}, err
	}
	defer ledger.Close()
	return ledger.Apply(ev)
}

// Settle tells a campaign of the workspace that no driver runs what time
// it is (under its lock); one a run of this process or another process
// drives is left to its driver.
func (l *Local) Settle(_ context.Context, id string, now time.Time) error {
	if l.Run(id) != nil {
		return nil
	}
	ledger, err := l.Workspace.Open(id)
	switch {
	case errors.Is(err, runner.ErrLocked):
		return nil
	case errors.Is(err, runner.ErrNoCampaign):
		return Errorf(ErrNotFound, "%w", err)
	case err != nil:
		return err
	}
	defer ledger.Close()
	if ledger.Campaign().Status() != campaign.StatusOptimizing {
		return nil
	}
	if _, err := ledger.Apply(campaign.Tick{Time: now}); err != nil && !errors.Is(err, campaign.ErrDone) {
		return err
	}
	return nil
}

// Create creates the campaign in the workspace without running it (amkctl
// autoresearch, or a scheduler on this workspace, runs it).
func (l *Local) Create(ctx context.Context, req CreateRequest) (string, bool, int, error) {
	start, _, err := l.startEvent(ctx, req, "")
	if err != nil {
		return "", false, 0, err
	}
	ledger, created, err := l.Workspace.Create(start)
	if errors.Is(err, runner.ErrLocked) {
		return "", false, 0, Errorf(ErrConflict, "%w", err)
	}
	if err != nil {
		return "", false, 0, err
	}
	return ledger.ID(), created, 0, ledger.Close()
}

// corpusFollower reads the workspace's corpus once, then what was
// appended since.
func (l *Local) corpusFollower() *flywheel.CorpusFollower {
	l.corpusOnce.Do(func() { l.corpus = flywheel.NewCorpusFollower(l.Workspace.CorpusPath()) })
	return l.corpus
}

// startEvent makes a checked request the first event of a campaign of
// this workspace, warm-started from the workspace's flywheel corpus
// unless cold (skipped counts its malformed lines). The corpus records of
// the campaign name the evaluating device l.Env.DeviceName or, when that
// is empty, LAUNCHER@HOST, with the device ("cpu", "cuda") for a launcher
// not named. A campaign that does not exist yet names the weights its
// trials are for (CreateRequest.IdentifyWeights, stopped by ctx); the
// start event of one that exists is not used.
func (l *Local) startEvent(ctx context.Context, req CreateRequest, launcher string) (start campaign.Start, skipped int, err error) {
	target, err := ir.Target(req.GPU)
	if err != nil {
		return campaign.Start{}, 0, badValue("%v", err)
	}
	env := l.Env
	env.Target, env.Device = target.Name, string(req.Device)
	if launcher == "" {
		launcher = string(req.Device)
	}
	if env.DeviceName == "" {
		env.DeviceName = launcher + "@" + hostName()
	}
	var corpus []flywheel.Record
	if !req.Cold {
		if corpus, skipped, err = l.corpusFollower().Records(); err != nil {
			return campaign.Start{}, 0, fmt.Errorf("reading the corpus: %w", err)
		}
	}
	if start, err = req.Start(l.now(), target, corpus, env); err != nil {
		return campaign.Start{}, 0, err
	}
	start.Incarnation = newIncarnation()
	if !l.Workspace.Exists(req.ID()) {
		if err := req.IdentifyWeights(ctx); err != nil {
			return campaign.Start{}, 0, err
		}
		start.WeightsID = req.weightsID
	}
	return start, skipped, nil
}

// newIncarnation is a new campaign's incarnation: 128 random bits, so that
// a campaign created again under an id never takes an earlier one's
// outcomes (campaign.Start.Incarnation).
func newIncarnation() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// hostName is this machine's name in device names ("" when unknown).
func hostName() string {
	host, _ := os.Hostname()
	return host
}
