package flywheel

import (
	"slices"
	"strconv"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// ShapeRadius is how far (in shape feature space) WarmStart looks before it
// falls back to every point on the GPU.
const ShapeRadius = 1.0

// Seed is one warm-start point with where it came from.
type Seed struct {
	Point         schedule.Point
	ID            string
	Model         string
	Distance      float64 // shape distance to the campaign's model
	PctOfRoofline float64
	LatencyUS     float64
}

// DeviceForKind is the evaluator that produces a latency kind: the CPU cost
// model predicts, a GPU measures (amk never labels a GPU fallback predicted).
func DeviceForKind(kind string) schedule.Device {
	if kind == KindMeasuredGPU {
		return schedule.DeviceCUDA
	}
	return schedule.DeviceCPU
}

// WarmStart returns up to k points from the corpus to start a campaign from
// (docs/spec/rules.md R14): rows on the same GPU with the same latency kind, the nearest model
// shape first (within ShapeRadius, else all), ordered by (distance rounded to
// 3 places, pct_of_roofline). Each point is re-checked against today's rules
// (schedule.PointFromValue and schedule.CheckLaunch) and dropped if no longer
// legal; knobs the kind's device cannot use are reset to their defaults; the
// result is deduplicated by schedule id. An unknown GPU yields no seeds.
func WarmStart(shape Shape, gpu, kind string, corpus []Record, k int) []Seed {
	target, err := ir.Target(gpu)
	if err != nil || k <= 0 {
		return nil
	}
	type scored struct {
		rec  *Record
		dist float64
	}
	var all, near []scored
	for i := range corpus {
		r := &corpus[i]
		if !usable(r, gpu, kind) {
			continue
		}
		s := scored{r, shape.Distance(r.Shape)}
		all = append(all, s)
		if s.dist <= ShapeRadius {
			near = append(near, s)
		}
	}
	pool := near
	if len(pool) == 0 {
		pool = all
	}
	slices.SortStableFunc(pool, func(a, b scored) int {
		if c := cmpFloat(round3(a.dist), round3(b.dist)); c != 0 {
			return c
		}
		return cmpFloat(a.rec.PctOfRoofline, b.rec.PctOfRoofline)
	})
	device := DeviceForKind(kind)
	var seeds []Seed
	seen := map[string]bool{}
	for _, s := range pool {
		p, err := schedule.PointFromValue(s.rec.Schedule)
		if err != nil {
			continue
		}
		p = Project(p, target, device)
		if schedule.CheckLaunch(p, target) != nil {
			continue
		}
		id := p.ID()
		if seen[id] {
			continue
		}
		seen[id] = true
		seeds = append(seeds, Seed{Point: p, ID: id, Model: s.rec.Model, Distance: s.dist,
			PctOfRoofline: s.rec.PctOfRoofline, LatencyUS: s.rec.LatencyUS})
		if len(seeds) == k {
			break
		}
	}
	return seeds
}

// Project returns the normalised point with every knob the device cannot
// use (not effective in schedule.Space for it) reset to its default, so a
// point from another device is not a distinct point here.
func Project(p schedule.Point, t *ir.GpuTarget, device schedule.Device) schedule.Point {
	return ProjectInert(p, Inert(t, device))
}

// Inert lists the knobs of the space a device cannot use (for ProjectInert).
func Inert(t *ir.GpuTarget, device schedule.Device) []schedule.Knob {
	var out []schedule.Knob
	for _, k := range schedule.Space(t, device) {
		if !k.Effective {
			out = append(out, k)
		}
	}
	return out
}

// ProjectInert is Project with the inert knobs computed once.
func ProjectInert(p schedule.Point, inert []schedule.Knob) schedule.Point {
	p = p.Normalize()
	for _, k := range inert {
		p.SetKnob(k.Path, k.Default)
	}
	return p.Normalize()
}

func usable(r *Record, gpu, kind string) bool {
	return r.GPU == gpu && r.LatencyKind == kind && r.Correctness == CorrectPass &&
		ir.Finite(r.PctOfRoofline) && r.PctOfRoofline > 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// round3 rounds like Python's round(x, 3): correctly rounded, ties to even.
func round3(x float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 3, 64), 64)
	if err != nil {
		return x
	}
	return f
}

// Example is one training point of the ranker: the feature vector (shape
// features then schedule.Features) and the observed pct_of_roofline. It is
// plain data so a campaign can persist the prior it was started with.
type Example struct {
	X   []float64 `json:"x"`
	Pct float64   `json:"pct"`
}

// ExampleOf builds the training example of a point on a model shape.
func ExampleOf(shape Shape, p schedule.Point, pct float64) Example {
	return Example{X: append(shape.Features(), schedule.Features(p)...), Pct: pct}
}

// PriorPoint is a usable corpus row as a point of a device's search space:
// what the prior learns from.
type PriorPoint struct {
	Point schedule.Point
	Shape Shape
	Pct   float64
}

// PriorPoints returns the corpus rows for a GPU and latency kind (docs/spec/rules.md R14:
// kinds are never mixed) as points projected onto the kind's device; rows
// whose schedule no longer parses are skipped.
func PriorPoints(corpus []Record, gpu, kind string) []PriorPoint {
	target, err := ir.Target(gpu)
	if err != nil {
		return nil
	}
	device := DeviceForKind(kind)
	var out []PriorPoint
	for i := range corpus {
		r := &corpus[i]
		if !usable(r, gpu, kind) {
			continue
		}
		p, err := schedule.PointFromValue(r.Schedule)
		if err != nil {
			continue
		}
		out = append(out, PriorPoint{Point: Project(p, target, device), Shape: r.Shape, Pct: r.PctOfRoofline})
	}
	return out
}

// Examples turns PriorPoints into ranker examples.
func Examples(corpus []Record, gpu, kind string) []Example {
	var out []Example
	for _, pp := range PriorPoints(corpus, gpu, kind) {
		out = append(out, ExampleOf(pp.Shape, pp.Point, pp.Pct))
	}
	return out
}
