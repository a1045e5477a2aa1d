package api

import (
	"fmt"
	"time"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
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
	setIf(&s.Batch, r.Batch)
	if r.Budget != nil {
		s.Budget = *r.Budget
	}
	s.MoveOn = r.MoveOn.Over(s.MoveOn)
	return campaign.Start{
		Time: now, Model: r.Model, Label: cfg.Name, GPU: target.Name, Device: r.Device, Name: r.Name,
		Weights: r.Weights, Seed: r.Seed, Shape: ShapeOf(cfg), Corpus: corpus, Cold: r.Cold, Settings: s, Env: env,
	}, nil
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
