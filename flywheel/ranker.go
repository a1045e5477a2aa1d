package flywheel

import (
	"math"
	"slices"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// MinExamplesToRank is the fewest examples the ranker trains on; below it
// the ranker is untrained and Rank is the identity.
const MinExamplesToRank = 6

// RankerK is the number of neighbours the ranker averages.
const RankerK = 5

// Ranker predicts a candidate's pct_of_roofline from the examples: the
// inverse-distance weighted mean of log(pct) over the RankerK nearest
// examples in per-dimension standardised feature space. One fixed,
// deterministic backend (docs/spec/rules.md R14); the log target keeps a few huge pct values
// from dominating. Neighbour ties break by example order.
type Ranker struct {
	mu, sd []float64
	x      [][]float64
	logPct []float64
}

// NewRanker trains on the examples with a finite positive pct and today's
// feature length (ExampleOf's): an example a campaign recorded before
// schedule.Features grew a column is left out.
func NewRanker(examples []Example) *Ranker {
	r := &Ranker{}
	dim := exampleDim()
	var rows [][]float64
	for _, e := range examples {
		if !(ir.Finite(e.Pct) && e.Pct > 0) || !allFinite(e.X) {
			continue
		}
		if len(e.X) != dim {
			continue
		}
		rows = append(rows, e.X)
		r.logPct = append(r.logPct, math.Log(e.Pct))
	}
	if len(rows) < MinExamplesToRank {
		r.logPct = nil
		return r
	}
	n := float64(len(rows))
	r.mu = make([]float64, dim)
	r.sd = make([]float64, dim)
	for _, x := range rows {
		for j, v := range x {
			r.mu[j] += v
		}
	}
	for j := range r.mu {
		r.mu[j] /= n
	}
	for _, x := range rows {
		for j, v := range x {
			d := v - r.mu[j]
			r.sd[j] += float64(d * d)
		}
	}
	for j := range r.sd {
		r.sd[j] = math.Sqrt(r.sd[j] / n)
		if r.sd[j] == 0 {
			r.sd[j] = 1
		}
	}
	r.x = make([][]float64, len(rows))
	for i, x := range rows {
		r.x[i] = r.standardise(x)
	}
	return r
}

// exampleDim is the length of ExampleOf's feature vectors.
func exampleDim() int { return len(Shape{}.Features()) + len(schedule.FeatureNames()) }

func allFinite(xs []float64) bool {
	for _, x := range xs {
		if !ir.Finite(x) {
			return false
		}
	}
	return true
}

func (r *Ranker) standardise(x []float64) []float64 {
	out := make([]float64, len(x))
	for j, v := range x {
		out[j] = (v - r.mu[j]) / r.sd[j]
	}
	return out
}

// Trained reports whether the ranker had enough examples to learn from.
func (r *Ranker) Trained() bool { return r != nil && len(r.x) > 0 }

// Size is the number of examples the ranker learned from.
func (r *Ranker) Size() int {
	if r == nil {
		return 0
	}
	return len(r.x)
}

// Predict returns the predicted pct_of_roofline of a feature vector (lower
// is better), or +Inf when untrained or the vector does not fit.
func (r *Ranker) Predict(x []float64) float64 {
	if !r.Trained() || len(x) != len(r.mu) || !allFinite(x) {
		return math.Inf(1)
	}
	q := r.standardise(x)
	type nb struct {
		d float64
		i int
	}
	// The RankerK nearest, kept sorted by (distance, index): examples are
	// scanned in index order, so a tie never displaces an earlier example.
	top := make([]nb, 0, RankerK)
	for i, row := range r.x {
		s := 0.0
		for j, v := range row {
			d := v - q[j]
			s += float64(d * d)
		}
		d := math.Sqrt(s)
		if len(top) == RankerK && d >= top[len(top)-1].d {
			continue
		}
		if len(top) < RankerK {
			top = append(top, nb{})
		}
		k := len(top) - 1
		for k > 0 && top[k-1].d > d {
			top[k] = top[k-1]
			k--
		}
		top[k] = nb{d, i}
	}
	num, den := 0.0, 0.0
	for _, n := range top {
		w := 1 / (n.d + 1e-6)
		num += float64(w * r.logPct[n.i])
		den += w
	}
	return math.Exp(num / den)
}

// Score is Predict on a point of a model shape.
func (r *Ranker) Score(shape Shape, p schedule.Point) float64 {
	return r.Predict(ExampleOf(shape, p, 1).X)
}

// Rank orders candidates best-first by predicted pct_of_roofline (stable:
// equal scores keep their order). An untrained ranker returns them as given.
func (r *Ranker) Rank(shape Shape, cands []schedule.Point) []schedule.Point {
	out := slices.Clone(cands)
	if !r.Trained() {
		return out
	}
	scores := make([]float64, len(cands))
	idx := make([]int, len(cands))
	for i := range cands {
		scores[i] = r.Score(shape, cands[i])
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpFloat(scores[a], scores[b]) })
	for i, j := range idx {
		out[i] = cands[j]
	}
	return out
}
