// Package rank ranks task graphs of Mirage's persistent kernel by amk's
// predicted latency: each graph that mpk.Check accepts is translated into
// an amk program (mpk.ToProgram) and costed on a GPU target by the cost
// model (schedule.Predict). Every latency is predicted: MPK's kernels are
// not run, so numerics are not checked.
package rank

import (
	"errors"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/schedule"
)

// Entry is one graph's line of a ranking.
type Entry struct {
	Rank          int      `json:"rank"`
	File          string   `json:"file"`
	Valid         bool     `json:"valid"`
	LatencyUS     float64  `json:"latency_us"`
	LatencyKind   string   `json:"latency_kind"`
	BoundUS       float64  `json:"bound_us"`
	PctOfRoofline float64  `json:"pct_of_roofline"`
	Tasks         int      `json:"tasks"`
	Events        int      `json:"events"`
	GPU           string   `json:"gpu"`
	Notes         []string `json:"notes"`
}

// ErrRejected: the graph failed its check (no latency without a PASS).
var ErrRejected = errors.New("no latency without a PASS")

// Predict checks graph g (named file) for the launch opt and predicts the
// latency of its translation on target. A graph the check rejects is
// ErrRejected, with the report; one that does not translate is the
// translation's error.
func Predict(file string, g *mpk.Graph, target *ir.GpuTarget, opt mpk.CheckOptions) (Entry, mpk.Report, error) {
	rep := mpk.Check(g, opt)
	if !rep.OK {
		return Entry{}, rep, ErrRejected
	}
	p, err := mpk.ToProgram(g)
	if err != nil {
		return Entry{}, rep, err
	}
	cost := schedule.Predict(p, target, schedule.Default())
	e := Entry{File: file, Valid: true, LatencyUS: ir.RoundTo(cost.PredictedUS, 3), LatencyKind: "predicted",
		BoundUS: ir.RoundTo(cost.BandwidthBoundUS, 3), Tasks: len(g.Tasks), Events: len(g.Events), GPU: target.Name,
		Notes: append([]string{"amk's cost model on the graph's translation; MPK's kernels are not run, so numerics are not checked"}, cost.Notes...)}
	if pct, ok := ir.PctOfRoofline(cost.PredictedUS, cost.BandwidthBoundUS); ok {
		e.PctOfRoofline = pct
	}
	return e, rep, nil
}

// Order sorts entries fastest first (ties keep their order) and numbers
// their ranks from 1.
func Order(entries []Entry) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].LatencyUS < entries[j].LatencyUS })
	for i := range entries {
		entries[i].Rank = i + 1
	}
}
