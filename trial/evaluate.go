package trial

import "context"

// Options configures Evaluate.
type Options struct {
	// Launcher supplies latencies; nil means the CPU cost model.
	Launcher Launcher
}

// Launcher times a correct program. The CPU implementation returns the
// cost-model prediction labelled "predicted"; the CUDA one times real launches.
type Launcher interface {
	// Name is the device label reported in verdicts ("cpu", "cuda:0 NVIDIA H200").
	Name() string
}

// Evaluate runs the whole pipeline for one trial and never panics.
func Evaluate(ctx context.Context, spec Spec, opts Options) Outcome {
	return Outcome{CampaignID: spec.CampaignID, TrialID: spec.TrialID,
		Failure: &Failure{Class: FailCrash, Phase: "evaluate", Message: "pipeline not wired yet"}}
}
