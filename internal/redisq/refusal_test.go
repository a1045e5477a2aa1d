package redisq

import (
	"slices"
	"testing"

	"github.com/amk-dev/amk/internal/metrics"
)

// The worker's metric starts a series for every reason the handler refuses
// a payload for, so the two lists must name the same reasons.
func TestMetricsKnowEveryRefusalReason(t *testing.T) {
	want := []string{RefuseUnsigned, RefuseMisplaced}
	if got := metrics.SpecRefusalReasons; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("metrics.SpecRefusalReasons = %v, the handler refuses for %v", got, want)
	}
}
