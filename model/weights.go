package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/amk-dev/amk/ir"
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
// shape and stored dtype (the model dtype, or a quantised projection's and
// its scales'), reporting every problem at once (up to 8 missing keys by
// name).
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
		if t.DType != spec.DType {
			problems = append(problems, fmt.Sprintf("%s has dtype %s, want %s", spec.Key, t.DType, spec.DType))
			continue
		}
		if got, want := storedCount(t), storedCount(&tensor.Tensor{DType: spec.DType, Shape: spec.Shape}); got != want {
			problems = append(problems, fmt.Sprintf("%s holds %d stored units, its shape %v needs %d", spec.Key, got, spec.Shape, want))
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

// storedCount is what t holds, in the units of its dtype's storage: float
// values (or their bit patterns), integer bytes, or packed int4 bytes. For
// a tensor without data it is what its shape needs.
func storedCount(t *tensor.Tensor) int64 {
	n := int64(t.Numel())
	switch {
	case t.DType == ir.I4:
		if t.Packed == nil {
			return (n + 1) / 2
		}
		return int64(len(t.Packed))
	case tensor.HeldInBytes(t.DType):
		if t.Bytes == nil {
			return n
		}
		return int64(len(t.Bytes))
	case t.F == nil && t.Half == nil:
		return n
	}
	return int64(t.FloatCount())
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
