package chart

import (
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/trial"
)

// ContextLatency is a workload campaign's time per decode step against the
// KV length a step reads: the baseline's and the best's latencies at the
// workload's evaluated positions, and the streamed-bytes floor there (it
// grows with the KV rows read). ok is false for a campaign without
// per-position figures (one decode step, or nothing correct yet).
func ContextLatency(w campaign.WakeUp) (c Chart, ok bool) {
	if len(w.BestPositions) == 0 {
		return Chart{}, false
	}
	title := "time per decode step against KV length"
	if w.Workload != nil {
		title += " (" + w.Workload.String() + ")"
	}
	c = Chart{Title: title, XLabel: "KV length (rows read by the step)", YLabel: "time per step", Unit: " µs"}
	c.Lines = []Line{
		{Name: "baseline (default schedule)", Points: positionPoints(w.BaselinePositions, false), Color: Grey},
		{Name: "best", Points: positionPoints(w.BestPositions, false), Color: Palette[0]},
		{Name: "streamed-bytes floor", Points: positionPoints(w.BestPositions, true), Color: Red, Dashed: true},
	}
	return c, true
}

// positionPoints are the latencies (or floors) of positions, by KV length.
func positionPoints(ps []trial.PositionVerdict, floor bool) []Point {
	var out []Point
	for _, p := range ps {
		v := p.LatencyUS
		if floor {
			v = p.BoundUS
		}
		if v != nil {
			out = append(out, Point{float64(p.KVLen), *v})
		}
	}
	return out
}

// ReportSVG is a campaign report's picture: the trajectory, and below it,
// for a workload campaign, the latency against KV length.
func ReportSVG(w campaign.WakeUp) ([]byte, error) {
	ctx, ok := ContextLatency(w)
	if !ok {
		return TrajectorySVG(w)
	}
	return Grid("", "", []Chart{Trajectory(w), ctx}, 1, SVG, TrajectorySize)
}
