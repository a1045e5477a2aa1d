package api

import (
	"fmt"
	"slices"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/trial"
)

// The requests made into campaign events: one translation, used by the
// scheduler and by amkctl on a local workspace alike.

// Start is the first event of the campaign the request creates: target is
// the record of the request's GPU, corpus the workspace's flywheel corpus
// and env describes the evaluating machines. Settings the request leaves
// out keep campaign.DefaultSettings.
func (r CreateRequest) Start(now time.Time, target *ir.GpuTarget, corpus []flywheel.Record, env flywheel.Env) (campaign.Start, error) {
	cfg, err := model.Load(r.Model)
	if err != nil {
		return campaign.Start{}, fmt.Errorf("%w: %v", ErrBadValue, err)
	}
	s := campaign.DefaultSettings()
	s.Overnight = r.Overnight
	setIf(&s.RestartAfter, r.RestartAfter)
	setIf(&s.Epsilon, r.Epsilon)
	setIf(&s.Explore, r.Explore)
	setIf(&s.MinGain, r.MinGain)
	setIf(&s.TrialTimeoutS, r.TrialTimeoutS)
	w, err := r.ResolvedWorkload()
	if err != nil {
		return campaign.Start{}, fmt.Errorf("%w: %v", ErrBadValue, err)
	}
	if _, err := trial.ContextConfig(cfg, r.Model, w); err != nil {
		return campaign.Start{}, fmt.Errorf("%w: %v", ErrBadValue, err)
	}
	s.Workload = &w
	if r.Budget != nil {
		s.Budget = *r.Budget
	}
	s.MoveOn = r.MoveOn.Over(s.MoveOn)
	return campaign.Start{
		Time: now, Model: r.Model, Label: cfg.Name, GPU: target.Name, Device: r.Device, Name: r.CampaignName(),
		Weights: r.Weights, Seed: r.Seed, Shape: ShapeOf(cfg), Corpus: corpus, Cold: r.Cold, Settings: s, Env: env,
	}, nil
}

// ResolvedWorkload is the workload the request's campaign tunes for: its
// Workload (the default when absent), with Batch as its batch when set.
func (r CreateRequest) ResolvedWorkload() (trial.Workload, error) {
	w := trial.DefaultWorkload()
	if r.Workload != nil {
		w = *r.Workload
		w.PromptLens = slices.Clone(w.PromptLens)
	}
	if r.Batch != nil {
		if r.Workload != nil && r.Workload.Batch > 1 && r.Workload.Batch != *r.Batch {
			return w, fmt.Errorf("batch %d and the workload's batch %d differ", *r.Batch, r.Workload.Batch)
		}
		w.Batch = *r.Batch
	}
	w.Batch = w.B()
	return w, w.Check()
}

// CampaignName is the name in the id of the request's campaign: Name, or
// for a workload other than the default without one, the workload's short
// name ("p2048-g128"), so that each workload has a campaign of its own.
func (r CreateRequest) CampaignName() string {
	if r.Name != "" {
		return r.Name
	}
	if w, err := r.ResolvedWorkload(); err == nil && !w.Equal(trial.DefaultWorkload()) {
		return w.Name()
	}
	return ""
}

// ShapeOf is a model's shape as the flywheel compares it.
func ShapeOf(c model.Config) flywheel.Shape {
	return flywheel.Shape{Hidden: c.Hidden, NLayers: c.NLayers, NHeads: c.NHeads, NKVHeads: c.NKVHeads,
		HeadDim: c.HeadDim, Intermediate: c.Intermediate, Vocab: c.Vocab}
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Event is the campaign event of an agent's experiment, recorded at now.
func (r RecordRequest) Event(now time.Time) campaign.Record {
	ev := campaign.Record{Time: now, Status: r.Status, Correctness: r.Correctness,
		LatencyUS: r.LatencyUS, PctOfRoofline: r.PctOfRoofline, BoundUS: r.BoundUS, Kind: r.Kind,
		Point: r.Config, ScheduleID: r.ScheduleID, Description: r.Description, Source: r.Source,
		Regions: r.Regions}
	if string(r.Config) == "null" {
		ev.Point = nil
	}
	return ev
}
