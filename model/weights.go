package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/amk-dev/amk/tensor"
)

// Weights maps a state-dict key to its tensor. BF16 and F16 tensors are
// held at their stored width (tensor.Tensor.Half); F32 tensors hold float32
// values. They are read, never written.
type Weights map[string]*tensor.Tensor

// WeightsError lists every problem found when binding weights to a model.
type WeightsError struct {
	Problems []string
}

func (e *WeightsError) Error() string {
	return "weights do not match the model: " + strings.Join(e.Problems, "; ")
}

// maxListed is how many missing keys an error names before summarising.
const maxListed = 8

// Check verifies that w holds every tensor of cfg (Keys) with the expected
// shape and cfg's dtype, reporting every problem at once (up to 8 missing keys
// by name).
func (w Weights) Check(cfg Config) error {
	var problems, missing []string
	for _, spec := range Keys(cfg) {
		t, ok := w[spec.Key]
		if !ok || t == nil {
			missing = append(missing, spec.Key)
			continue
		}
		if !slices.Equal(t.Shape, spec.Shape) {
			problems = append(problems, fmt.Sprintf("%s has shape %v, want %v", spec.Key, t.Shape, spec.Shape))
			continue
		}
		if t.DType != cfg.DType {
			problems = append(problems, fmt.Sprintf("%s has dtype %s, want %s", spec.Key, t.DType, cfg.DType))
			continue
		}
		if int64(t.FloatCount()) != spec.Numel() {
			problems = append(problems, fmt.Sprintf("%s holds %d values, its shape %v needs %d", spec.Key, t.FloatCount(), spec.Shape, spec.Numel()))
		}
	}
	if len(missing) > 0 {
		problems = append([]string{missingSummary(missing, cfg)}, problems...)
	}
	if len(problems) > 0 {
		return &WeightsError{Problems: problems}
	}
	return nil
}

// missingSummary names up to maxListed missing keys.
func missingSummary(missing []string, cfg Config) string {
	shown := missing[:min(len(missing), maxListed)]
	s := fmt.Sprintf("%d expected tensor(s) missing (tie_word_embeddings=%v): %s", len(missing), cfg.TiedEmbeddings, strings.Join(shown, ", "))
	if len(missing) > maxListed {
		s += fmt.Sprintf(", … and %d more", len(missing)-maxListed)
	}
	return s
}

// Bytes is the storage size of all tensors at their dtypes.
func (w Weights) Bytes() int64 {
	var n int64
	for _, t := range w {
		n += t.DType.NBytes(int64(t.Numel()))
	}
	return n
}
