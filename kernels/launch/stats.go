package launch

import (
	"fmt"
	"math"
	"slices"

	"github.com/amk-dev/amk/ir"
)

// Stats summarises repeated timings of one program (microseconds).
type Stats struct {
	N        int     `json:"n"`
	MedianUS float64 `json:"median_us"`
	MeanUS   float64 `json:"mean_us"`
	MinUS    float64 `json:"min_us"`
	MaxUS    float64 `json:"max_us"`
	P10US    float64 `json:"p10_us"`
	P90US    float64 `json:"p90_us"`
	StdUS    float64 `json:"std_us"`
}

// Spread is (p90 - p10) / median: the relative noise of the sample.
func (s Stats) Spread() float64 {
	if s.MedianUS <= 0 {
		return math.NaN()
	}
	return (s.P90US - s.P10US) / s.MedianUS
}

// Summarize computes Stats over samples (order irrelevant). Percentiles
// interpolate linearly between order statistics.
func Summarize(samples []float64) Stats {
	n := len(samples)
	if n == 0 {
		return Stats{}
	}
	xs := slices.Clone(samples)
	slices.Sort(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(n)
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	std := 0.0
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	return Stats{N: n, MedianUS: quantile(xs, 0.5), MeanUS: mean, MinUS: xs[0], MaxUS: xs[n-1],
		P10US: quantile(xs, 0.1), P90US: quantile(xs, 0.9), StdUS: std}
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Comparison is a candidate timed side by side with the incumbent on one
// device in one session (docs/spec/rules.md R7). Ratio = candidate median / incumbent median
// (< 1: the candidate is faster); 0 when there is no incumbent.
type Comparison struct {
	Candidate Stats   `json:"candidate"`
	Incumbent *Stats  `json:"incumbent,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
}

// Compare builds a Comparison from interleaved samples.
func Compare(cand, inc []float64) *Comparison {
	c := &Comparison{Candidate: Summarize(cand)}
	if len(inc) > 0 {
		s := Summarize(inc)
		c.Incumbent = &s
		if s.MedianUS > 0 {
			c.Ratio = c.Candidate.MedianUS / s.MedianUS
		}
	}
	return c
}

// FloorGuard applies the honesty rule to a measured latency: a reading below
// floorUS, a bandwidth floor (bytes that must cross HBM / spec bandwidth), is
// physically impossible for a correct full pass and is withheld (ok false)
// with a note saying why. floorName says which floor it is in that note: a
// whole program's "streamed-bytes floor" (kernels/gpu) or one op's
// "op-bytes floor" (kernels/tune). A missing floor (NaN or <= 0) withholds
// nothing.
func FloorGuard(latencyUS, floorUS float64, floorName string) (ok bool, note string) {
	if math.IsNaN(floorUS) || floorUS <= 0 {
		return true, fmt.Sprintf("no %s for this target; latency not checked against it", floorName)
	}
	if math.IsNaN(latencyUS) || latencyUS <= 0 {
		return false, fmt.Sprintf("latency %v us is not a positive measurement; withheld", latencyUS)
	}
	if latencyUS < floorUS {
		pct, _ := ir.PctOfRoofline(latencyUS, floorUS)
		return false, fmt.Sprintf("measured %.3f us is below the %s %.3f us (%.1f%% of it): impossible for a full pass, withheld",
			latencyUS, floorName, floorUS, pct)
	}
	return true, ""
}
