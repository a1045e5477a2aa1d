package chart

import (
	"math"

	"github.com/amk-dev/amk/campaign"
)

// SliceSize is the size of a campaign's knob slice plot.
var SliceSize = Size{W: 700, H: 400}

// KnobSlice is the slice plot of a campaign's most important knob: every
// correct trial's latency (y, log scale) against that knob's value (x, one
// column per value, labelled with it), each column's best as a dashed
// step. A campaign without a slice yet gets an empty chart that says so.
func KnobSlice(w campaign.WakeUp) Chart {
	what := LatencyWords(w.LatencyKind, w.GPU)
	s := w.KnobSlice
	if s == nil {
		return Chart{Title: "which knob mattered: not enough correct trials yet", XLabel: "knob value", YLabel: what, Unit: " µs"}
	}
	c := Chart{Title: what + " against " + s.Knob,
		XLabel: s.Knob, YLabel: what, Unit: " µs", LogY: true, XMin: -0.5, XMax: float64(len(s.Values)) - 0.5, XTicks: s.Values}
	var pts []Point
	best := make([]float64, len(s.Values))
	for i := range best {
		best[i] = math.Inf(1)
	}
	for _, p := range s.Points {
		if p.Value < 0 || p.Value >= len(best) {
			continue
		}
		pts = append(pts, Point{float64(p.Value), p.LatencyUS})
		best[p.Value] = min(best[p.Value], p.LatencyUS)
	}
	var bestLine []Point
	for i, b := range best {
		if !math.IsInf(b, 1) {
			bestLine = append(bestLine, Point{float64(i), b})
		}
	}
	c.Lines = []Line{
		{Name: "correct trial", Points: pts, Color: Palette[0], Dots: true, Hollow: true},
		{Name: "fastest per value", Points: bestLine, Color: Palette[1], Dashed: true},
	}
	return c
}

// KnobSliceSVG draws KnobSlice as SVG.
func KnobSliceSVG(w campaign.WakeUp) ([]byte, error) {
	return Draw(KnobSlice(w), SVG, SliceSize)
}
