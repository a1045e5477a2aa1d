package gpu

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/tensor"
)

// WeightProvider is the launcher child's launch.WeightProvider: it builds
// the weights the trial's model cache holds — model.InitWeights with the
// given seed, or model.LoadSafetensorsShards — from the model the parent encodes
// in the source, and keeps the last set so that the candidate, the
// incumbent and the check program of one trial share it.
type WeightProvider struct {
	mu  sync.Mutex
	key string
	w   model.Weights
}

// Weights implements launch.WeightProvider.
func (p *WeightProvider) Weights(ctx context.Context, src launch.WeightSource, prog *ir.Program) (map[string]*tensor.Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%q", src.Kind, src.Model, src.Seed, src.Paths)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.key == key && p.w != nil {
		return p.w, nil
	}
	cfg, err := decodeModel(src.Model)
	if err != nil {
		return nil, err
	}
	p.key, p.w = "", nil // release the previous set before building the next
	var w model.Weights
	switch src.Kind {
	case SourceSeeded:
		if src.Seed < 0 {
			return nil, fmt.Errorf("negative weight seed %d", src.Seed)
		}
		w, err = model.InitWeights(cfg, uint64(src.Seed))
	case SourceSafetensors:
		if len(src.Paths) == 0 || slices.Contains(src.Paths, "") {
			return nil, fmt.Errorf("safetensors weight source without a path")
		}
		w, err = model.LoadSafetensorsShards(src.Paths, cfg)
	default:
		return nil, fmt.Errorf("unknown weight source kind %q (want %s or %s)", src.Kind, SourceSeeded, SourceSafetensors)
	}
	if err != nil {
		return nil, err
	}
	p.key, p.w = key, w
	return w, nil
}
