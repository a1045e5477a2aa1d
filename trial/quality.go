package trial

import (
	"context"
	"fmt"

	"github.com/amk-dev/amk/model"
)

// DefaultQualityPrompt is the prompt of the model-quality figure when none
// is given: the token amk's own specs check, once.
var DefaultQualityPrompt = []int32{DefaultToken}

// ModelQuality compares the quantised model named by modelSpec (a
// "NAME:SCHEME" spec, or a plain model whose weights file is quantised)
// with its float twin on the same weights over n greedy tokens after
// prompt (model.CompareQuality). The float twin is the float model with the
// same seeded weights, or with the same float checkpoint the quantised
// weights were made from; a checkpoint that holds only quantised weights
// has no float twin here (compare with the float file it came from).
func ModelQuality(ctx context.Context, cache *ModelCache, modelSpec, weightsPath string, prompt []int32, n int) (*model.Quality, error) {
	lm, release, err := cache.acquire(ctx, modelSpec, weightsPath)
	if err != nil {
		return nil, err
	}
	defer release()
	if !lm.Config.Quant.On() {
		return nil, fmt.Errorf("model %s is not quantised: the model-quality figure compares a quantised model with its float twin", lm.Config.Name)
	}
	if lm.Truncated() {
		return nil, fmt.Errorf("model %s is checked on %d of its %d layers (host check budget); its model quality needs every layer", lm.Config.Name, lm.Check.NLayers, lm.Config.NLayers)
	}
	if weightsPath != "" {
		if q, err := model.InspectSafetensors([]string{weightsPath}, lm.Config); err != nil {
			return nil, err
		} else if q.On() {
			return nil, fmt.Errorf("%s holds quantised weights only: compare against the float checkpoint they were made from (--weights FLOAT.safetensors with the scheme in the model, e.g. small:%s)", weightsPath, q)
		}
	}
	name, _, err := model.SplitModelSpec(modelSpec)
	if err != nil {
		return nil, err
	}
	fm, releaseFloat, err := cache.acquire(ctx, name, weightsPath)
	if err != nil {
		return nil, fmt.Errorf("the float twin: %w", err)
	}
	defer releaseFloat()
	ef, err := model.NewEager(fm.Config, fm.Weights)
	if err != nil {
		return nil, err
	}
	eq, err := model.NewEager(lm.Config, lm.Weights)
	if err != nil {
		return nil, err
	}
	q, err := model.CompareQuality(ctx, ef, eq, prompt, n)
	if err != nil {
		return nil, err
	}
	return &q, nil
}
