package chart

import (
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

// TrajectorySize is the size of a campaign's progress chart.
var TrajectorySize = Size{W: 900, H: 480}

// Trajectory is a campaign's progress chart: every latency a trial got
// (filled when kept, open when not), the best so far as a step line, and
// the baseline and the streamed-bytes floor (bound_us) as dashed levels. The x axis is the
// experiment number; the y axis is latency in µs, on a log scale (so that
// the floor and a slow start both fit). The title and the y axis say whether
// the latencies are predicted by the cost model or measured, and on what.
func Trajectory(w campaign.WakeUp) Chart {
	what := LatencyWords(w.LatencyKind, w.GPU)
	c := Chart{Title: w.Campaign + " — " + what + ", best against the streamed-bytes floor", XLabel: "experiment",
		YLabel: what, Unit: " µs", Step: true, LogY: true}
	var kept, tried, best []Point
	last := 1.0
	for _, t := range w.Trajectory {
		x := float64(t.Experiment)
		last = max(last, x)
		if t.LatencyUS != nil {
			if t.Kept {
				kept = append(kept, Point{x, *t.LatencyUS})
			} else {
				tried = append(tried, Point{x, *t.LatencyUS})
			}
		}
		if t.BestUS != nil {
			best = append(best, Point{x, *t.BestUS})
		}
	}
	if n := len(best); n > 0 && best[n-1].X < last {
		best = append(best, Point{last, best[n-1].Y})
	}
	level := func(v *float64) []Point {
		if v == nil {
			return nil
		}
		return []Point{{0, *v}, {last, *v}}
	}
	c.Lines = []Line{
		{Name: "best so far", Points: best, Color: Palette[0]},
		{Name: "streamed-bytes floor", Points: level(w.BoundUS), Color: Red, Dashed: true},
		{Name: "baseline", Points: level(w.BaselineUS), Color: Grey, Dashed: true},
		{Name: "kept", Points: kept, Color: Palette[0], Dots: true},
		{Name: "tried", Points: tried, Color: Grey, Dots: true, Hollow: true},
	}
	return c
}

// LatencyWords names a campaign's latencies for a chart's title and axis:
// "latency predicted by the cost model", "latency measured on h100", or
// "latency" when the kind is not known yet.
func LatencyWords(kind trial.LatencyKind, gpu string) string {
	switch kind {
	case trial.KindPredicted:
		return "latency predicted by the cost model"
	case trial.KindMeasuredGPU:
		if gpu == "" {
			return "latency measured on the GPU"
		}
		return "latency measured on " + gpu
	}
	return "latency"
}

// TrajectorySVG draws Trajectory as SVG.
func TrajectorySVG(w campaign.WakeUp) ([]byte, error) {
	return Draw(Trajectory(w), SVG, TrajectorySize)
}
