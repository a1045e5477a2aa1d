package campaign

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

// Campaign is one campaign's live state machine. It is not safe for
// concurrent use: one driver feeds it events one at a time.
type Campaign struct {
	st        State
	started   bool
	pcg       *rand.PCG
	rng       *rand.Rand
	target    *ir.GpuTarget
	defaultID string
	inert     []schedule.Knob  // knobs this device cannot use
	ranker    *flywheel.Ranker // built lazily from st.Prior; nil when stale
	space     []modelCandidate // the enumerated search space (model proposer), built lazily
	stats     *surrogateStats  // the model proposer's sufficient statistics, built lazily
	priorRows *bool            // whether the observations hold prior rows, derived lazily
}

// New returns an empty campaign; its first event must be a Start.
func New() *Campaign { return &Campaign{} }

// Load restores a campaign from Marshal's output.
func Load(data []byte) (*Campaign, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("campaign state: %w", err)
	}
	return LoadState(st)
}

// LoadState restores a campaign from its state as State returns it (a
// ledger that stores the state in parts puts it together first); the
// campaign owns st's maps and slices afterwards.
func LoadState(st State) (*Campaign, error) {
	if st.Version != StateVersion {
		return nil, fmt.Errorf("campaign state: version %d, want %d", st.Version, StateVersion)
	}
	c := &Campaign{st: st, started: true}
	if err := c.attach(); err != nil {
		return nil, fmt.Errorf("campaign state: %w", err)
	}
	if err := c.pcg.UnmarshalBinary(st.RNG); err != nil {
		return nil, fmt.Errorf("campaign state: rng: %w", err)
	}
	if c.st.Tried == nil {
		c.st.Tried = map[string]int{}
	}
	if c.st.InFlight == nil {
		c.st.InFlight = map[int]*InFlight{}
	}
	if c.st.Scores == nil {
		c.st.Scores = map[string]float64{}
	}
	return c, nil
}

// attach derives the non-serialised parts from the state.
func (c *Campaign) attach() error {
	t, err := ir.Target(c.st.GPU)
	if err != nil {
		return err
	}
	if !c.st.Device.Valid() {
		return fmt.Errorf("device %q is not cpu or cuda", c.st.Device)
	}
	c.target = t
	c.inert = flywheel.Inert(t, c.st.Device)
	c.pcg = rand.NewPCG(c.st.Seed, c.st.Seed^0x9e3779b97f4a7c15)
	c.rng = rand.New(c.pcg)
	c.defaultID = c.project(schedule.Default()).ID()
	return nil
}

// Marshal serialises the campaign state (indented JSON).
func (c *Campaign) Marshal() ([]byte, error) {
	if !c.started {
		return nil, ErrNotStarted
	}
	st := c.State()
	return json.MarshalIndent(&st, "", "  ")
}

// State returns the campaign state, with the generator's current state.
// The maps and slices are shared with the campaign: do not modify them.
func (c *Campaign) State() State {
	st := c.st
	if c.pcg != nil {
		st.RNG, _ = c.pcg.MarshalBinary()
	}
	return st
}

// ID is the campaign's id ("" before Start).
func (c *Campaign) ID() string { return c.st.ID }

// Status is the campaign's status ("" before Start).
func (c *Campaign) Status() Status { return c.st.Status }

// Step applies one event. A refused event returns an error wrapping one of
// the Err* values, a Decision that only reports it, and changes nothing.
func (c *Campaign) Step(ev Event) (Decision, error) {
	if ev == nil {
		return c.refuse(fmt.Errorf("%w: nil event", ErrInvalid))
	}
	if s, ok := ev.(Start); ok {
		if c.started {
			return c.refuse(ErrStarted)
		}
		return c.start(s)
	}
	if !c.started {
		return c.refuse(ErrNotStarted)
	}
	now := c.clock(ev.At())
	var d Decision
	var err error
	switch e := ev.(type) {
	case Propose:
		d, err = c.proposeN(now, e.N)
	case Finished:
		d, err = c.finished(now, e)
	case Tick:
		d = c.tick(now)
	case Command:
		d, err = c.command(now, e)
	case Record:
		d, err = c.record(now, e)
	default:
		err = fmt.Errorf("%w: unknown event %T", ErrInvalid, ev)
	}
	if err != nil {
		return c.refuse(err)
	}
	c.st.LastEventAt = now
	d.Status = c.st.Status
	return d, nil
}

func (c *Campaign) refuse(err error) (Decision, error) {
	return Decision{Status: c.st.Status, Log: []string{"refused: " + err.Error()}}, err
}

// clock normalises an event time: no monotonic reading, UTC, and never
// before the last event (a clock stepping back cannot un-spend time).
func (c *Campaign) clock(t time.Time) time.Time {
	t = t.Round(0).UTC()
	if t.Before(c.st.LastEventAt) {
		return c.st.LastEventAt
	}
	return t
}

// ElapsedMinutes is the campaign time at now: since the start, across
// resumes, excluding time spent paused or done (docs/spec/rules.md R5).
func (c *Campaign) ElapsedMinutes(now time.Time) float64 {
	now = c.clock(now)
	if c.st.Status == StatusDone {
		end := c.st.LastEventAt // a ledger written before done_at existed
		if c.st.DoneAt != nil {
			end = *c.st.DoneAt
		}
		if now.After(end) {
			now = end
		}
	}
	s := now.Sub(c.st.StartedAt).Seconds() - c.st.PausedSeconds
	if c.st.PausedAt != nil {
		s -= now.Sub(*c.st.PausedAt).Seconds()
	}
	return max(0, s) / 60
}

// LeftOfLastRun is what remains at now of the allowance of the run that
// last opened the campaign (State.LastRun): the trials it may still
// propose and the campaign minutes it may still run, zero for a limit it
// did not have. spent says it had a limit and has used it up (a figure
// of zero left then means nothing, not no limit). A run without limits
// leaves everything: zero, zero, not spent.
func (c *Campaign) LeftOfLastRun(now time.Time) (left RunLimits, spent bool) {
	r := c.st.LastRun
	if r == nil {
		return RunLimits{}, false
	}
	if r.Iterations > 0 {
		left.Iterations = r.Iterations - (c.st.NextTrial - r.TrialsAtOpen)
		spent = left.Iterations <= 0
	}
	if r.Minutes > 0 {
		left.Minutes = r.Minutes - (c.ElapsedMinutes(now) - r.MinutesAtOpen)
		spent = spent || left.Minutes <= 0
	}
	if spent {
		return RunLimits{}, true
	}
	return left, false
}

func (c *Campaign) start(s Start) (Decision, error) {
	if s.Model == "" || s.GPU == "" {
		return c.refuse(fmt.Errorf("%w: start needs a model and a gpu", ErrInvalid))
	}
	if err := s.Settings.Check(); err != nil {
		return c.refuse(fmt.Errorf("%w: %v", ErrInvalid, err))
	}
	now := s.Time.Round(0).UTC()
	label := s.Label
	if label == "" {
		label = s.Model
	}
	kind := trial.KindPredicted
	if s.Device == schedule.DeviceCUDA {
		kind = trial.KindMeasuredGPU
	}
	env := s.Env
	env.Target, env.Device = s.GPU, string(s.Device)
	c.st = State{
		Version: StateVersion, ID: ID(s.Model, s.GPU, s.Device, s.Name), Name: s.Name,
		Model: s.Model, Label: label, GPU: s.GPU, Device: s.Device, Weights: s.Weights,
		LatencyKind: kind, Status: StatusOptimizing, StartedAt: now, LastEventAt: now,
		Settings: s.Settings, Shape: s.Shape, Env: env, Cold: s.Cold, Seed: s.Seed, Incarnation: s.Incarnation, WeightsID: s.WeightsID,
		Tried: map[string]int{}, InFlight: map[int]*InFlight{}, Scores: map[string]float64{},
	}
	if err := c.attach(); err != nil {
		c.st = State{}
		return c.refuse(fmt.Errorf("%w: %v", ErrInvalid, err))
	}
	c.started = true
	d := Decision{Status: c.st.Status}
	def := c.project(schedule.Default())
	var seeds []flywheel.Seed
	if !s.Cold {
		seeds = flywheel.WarmStart(s.Shape, s.GPU, string(kind), s.Corpus, s.Settings.WarmSeeds)
		c.st.Prior = flywheel.Examples(s.Corpus, s.GPU, string(kind))
		if s.Settings.Proposer == ProposerModel {
			c.observePrior(flywheel.PriorPoints(s.Corpus, s.GPU, string(kind)))
		}
	}
	c.st.WarmSeeds = len(seeds)
	if len(seeds) == 0 {
		c.enqueue(def, SourceDefault)
	}
	for i, sd := range seeds {
		c.enqueue(sd.Point, SourceWarmSeed)
		if i == 0 {
			c.enqueue(def, SourceBaseline) // dropped by enqueue when a seed is the default
		}
	}
	mode := "cold"
	if !s.Cold {
		mode = fmt.Sprintf("warm: %d warm seed(s), ranker %s", len(seeds), c.rankerStatus())
	}
	d.Log = append(d.Log, fmt.Sprintf("campaign %s started: %s on %s (device %s, %s latencies), %s",
		c.st.ID, label, s.GPU, s.Device, kind, mode))
	return d, nil
}

// enqueue appends an opening point unless the same point is already queued.
func (c *Campaign) enqueue(p schedule.Point, source string) {
	id := p.ID()
	for _, q := range c.st.Queue {
		if q.ScheduleID == id {
			return
		}
	}
	c.st.Queue = append(c.st.Queue, Queued{ScheduleID: id, Point: p, Source: source})
}

// project puts a point in the campaign's canonical form: normalised, with
// knobs this device cannot use at their defaults.
func (c *Campaign) project(p schedule.Point) schedule.Point {
	return flywheel.ProjectInert(p, c.inert)
}

// rankerFor returns the prior's ranker (nil for a cold campaign).
func (c *Campaign) rankerFor() *flywheel.Ranker {
	if c.st.Cold {
		return nil
	}
	if c.ranker == nil {
		c.ranker = flywheel.NewRanker(c.st.Prior)
	}
	return c.ranker
}

func (c *Campaign) rankerStatus() string {
	r := c.rankerFor()
	if !r.Trained() {
		return fmt.Sprintf("untrained (%d examples, needs %d)", len(c.st.Prior), flywheel.MinExamplesToRank)
	}
	return fmt.Sprintf("trained on %d examples", r.Size())
}

func pointJSON(p schedule.Point) json.RawMessage {
	return json.RawMessage(pyjsonCompact(p.Value()))
}

func parsePoint(raw json.RawMessage) (schedule.Point, error) {
	return schedule.ParsePoint(raw)
}
