package dispatch

import (
	"context"
	"sync"

	"github.com/amk-dev/amk/trial"
)

// Mux shares one Dispatcher between several campaigns: each campaign gets a
// Dispatcher view whose Outcomes carry only its own trials. Outcomes of
// campaigns with no view (yet) are held until a view is opened, so a
// scheduler that restarts loses none of the outcomes waiting in the
// transport.
type Mux struct {
	under Dispatcher
	mu    sync.Mutex
	views map[string]*muxView
	held  map[string][]trial.Outcome
	done  chan struct{}
	wg    sync.WaitGroup
}

// NewMux starts routing under's outcomes by campaign id.
func NewMux(under Dispatcher) *Mux {
	m := &Mux{under: under, views: map[string]*muxView{}, held: map[string][]trial.Outcome{}, done: make(chan struct{})}
	m.wg.Add(1)
	go m.route()
	return m
}

func (m *Mux) route() {
	defer m.wg.Done()
	for {
		select {
		case <-m.done:
			return
		case o, ok := <-m.under.Outcomes():
			if !ok {
				return
			}
			m.mu.Lock()
			v := m.views[o.CampaignID]
			if v == nil {
				m.held[o.CampaignID] = append(m.held[o.CampaignID], o)
				m.mu.Unlock()
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

// For returns the view of one campaign, creating it (and releasing any
// outcomes held for it) on first use.
func (m *Mux) For(campaignID string) Dispatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.views[campaignID]; v != nil {
		return v
	}
	held := m.held[campaignID]
	delete(m.held, campaignID)
	v := &muxView{m: m, id: campaignID, out: make(chan trial.Outcome, 256+len(held))}
	for _, o := range held {
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

func (v *muxView) Outcomes() <-chan trial.Outcome { return v.out }

// Close of a view only detaches it; the shared dispatcher stays open.
func (v *muxView) Close() error {
	v.m.Drop(v.id)
	return nil
}
