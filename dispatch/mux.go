package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/amk-dev/amk/trial"
)

// Mux shares one Dispatcher between several campaigns: each campaign gets a
// Dispatcher view whose Outcomes carry only its own trials. Outcomes of
// campaigns with no view (yet) are held until a view is opened, so a
// scheduler that restarts loses none of the outcomes waiting in the
// transport; they are held for a bounded time and number (MuxOptions), so
// outcomes for a campaign that never opens do not pile up.
type Mux struct {
	under Dispatcher
	opts  MuxOptions
	mu    sync.Mutex
	views map[string]*muxView
	// held are the outcomes of campaigns with no view, oldest first.
	held    []heldOutcome
	dropped atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
}

// heldOutcome is an outcome waiting for its campaign's view.
type heldOutcome struct {
	o  trial.Outcome
	at time.Time
}

// Bounds of what a Mux holds for campaigns with no view.
const (
	DefaultHoldFor = 15 * time.Minute
	DefaultMaxHeld = 1 << 14
)

// MuxOptions bounds the outcomes a Mux holds for campaigns with no view.
type MuxOptions struct {
	// HoldFor is how long an outcome is held (DefaultHoldFor when zero).
	HoldFor time.Duration
	// MaxHeld bounds the outcomes held for all campaigns together
	// (DefaultMaxHeld when zero); beyond it the oldest are dropped.
	MaxHeld int
	// Dropped, when set, is called with the outcomes dropped unheld, outside
	// the Mux's lock; it must not block. A transport that can deliver an
	// outcome again (redisq.Dispatcher.Undeliver) is told here.
	Dropped func([]trial.Outcome)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewMux starts routing under's outcomes by campaign id, with the default
// bounds.
func NewMux(under Dispatcher) *Mux { return NewMuxWith(under, MuxOptions{}) }

// NewMuxWith starts routing under's outcomes by campaign id.
func NewMuxWith(under Dispatcher, opts MuxOptions) *Mux {
	if opts.HoldFor <= 0 {
		opts.HoldFor = DefaultHoldFor
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Mux{under: under, opts: opts, views: map[string]*muxView{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.route()
	return m
}

func (m *Mux) route() {
	defer m.wg.Done()
	expire := time.NewTicker(max(m.opts.HoldFor/8, time.Second))
	defer expire.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-expire.C:
			m.report(m.expire())
		case o, ok := <-m.under.Outcomes():
			if !ok {
				return
			}
			m.mu.Lock()
			v := m.views[o.CampaignID]
			if v == nil {
				m.held = append(m.held, heldOutcome{o: o, at: m.opts.Now()})
				m.mu.Unlock()
				m.report(m.expire())
				continue
			}
			m.mu.Unlock()
			select {
			case v.out <- o:
			case <-m.done:
				return
			}
		}
	}
}

// expire removes the held outcomes older than HoldFor and, beyond MaxHeld,
// the oldest, and returns them.
func (m *Mux) expire() []trial.Outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	cutoff := m.opts.Now().Add(-m.opts.HoldFor)
	n := 0
	for n < len(m.held) && (len(m.held)-n > m.opts.MaxHeld || m.held[n].at.Before(cutoff)) {
		n++
	}
	if n == 0 {
		return nil
	}
	gone := make([]trial.Outcome, n)
	for i := range gone {
		gone[i] = m.held[i].o
	}
	m.held = append(m.held[:0:0], m.held[n:]...)
	m.dropped.Add(int64(n))
	return gone
}

// report hands dropped outcomes to MuxOptions.Dropped.
func (m *Mux) report(gone []trial.Outcome) {
	if len(gone) > 0 && m.opts.Dropped != nil {
		m.opts.Dropped(gone)
	}
}

// Held is how many outcomes wait for a campaign's view.
func (m *Mux) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// Dropped counts the outcomes dropped unheld since the Mux started.
func (m *Mux) Dropped() int64 { return m.dropped.Load() }

// For returns the view of one campaign, creating it (and releasing any
// outcomes held for it) on first use.
func (m *Mux) For(campaignID string) Dispatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.views[campaignID]; v != nil {
		return v
	}
	var mine []trial.Outcome
	kept := m.held[:0]
	for _, h := range m.held {
		if h.o.CampaignID == campaignID {
			mine = append(mine, h.o)
		} else {
			kept = append(kept, h)
		}
	}
	clear(m.held[len(kept):])
	m.held = kept
	v := &muxView{m: m, id: campaignID, out: make(chan trial.Outcome, 256+len(mine))}
	for _, o := range mine {
		v.out <- o
	}
	m.views[campaignID] = v
	return v
}

// Drop forgets a campaign's view (its later outcomes are held again).
func (m *Mux) Drop(campaignID string) {
	m.mu.Lock()
	delete(m.views, campaignID)
	m.mu.Unlock()
}

// Close stops routing and closes the underlying dispatcher.
func (m *Mux) Close() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	close(m.done)
	err := m.under.Close()
	m.wg.Wait()
	return err
}

type muxView struct {
	m   *Mux
	id  string
	out chan trial.Outcome
}

func (v *muxView) Submit(ctx context.Context, spec trial.Spec) error {
	spec.CampaignID = v.id
	return v.m.under.Submit(ctx, spec)
}

// Withdraw takes back a trial of the view's campaign from the shared
// dispatcher, where it can.
func (v *muxView) Withdraw(ctx context.Context, spec trial.Spec) (bool, error) {
	spec.CampaignID = v.id
	return Withdraw(ctx, v.m.under, spec)
}

func (v *muxView) Outcomes() <-chan trial.Outcome { return v.out }

// Close of a view only detaches it; the shared dispatcher stays open.
func (v *muxView) Close() error {
	v.m.Drop(v.id)
	return nil
}
