package ir

import (
	"math"
	"testing"
)

func TestPctOfRoofline(t *testing.T) {
	for _, c := range []struct {
		lat, floor, want float64
		ok               bool
	}{
		{12, 10, 120, true},
		{10, 3, 333.333, true},     // three places
		{2, 3, 66.667, true},       // rounded half away from zero
		{1e-3, 1e-3, 100, true},    // at the floor
		{5, 0, 0, false},           // no floor
		{0, 5, 0, false},           // no latency
		{math.NaN(), 5, 0, false},  // not a number
		{5, math.Inf(1), 0, false}, // not finite
		{-2, 5, 0, false},          // negative
	} {
		got, ok := PctOfRoofline(c.lat, c.floor)
		if got != c.want || ok != c.ok {
			t.Errorf("PctOfRoofline(%v, %v) = %v, %v; want %v, %v", c.lat, c.floor, got, ok, c.want, c.ok)
		}
	}
	if f, ok := FloorFromPct(12, 120); !ok || f != 10 {
		t.Errorf("FloorFromPct(12, 120) = %v, %v", f, ok)
	}
	if _, ok := FloorFromPct(12, 0); ok {
		t.Error("a floor from a zero percentage")
	}
}
