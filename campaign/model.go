package campaign

import (
	"math"
	"math/rand/v2"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/schedule"
)

// Proposers (Settings.Proposer).
const (
	// ProposerReference is the Python reference's proposer (docs/spec/loop.md §2): an explore fraction
	// of uniform random points, otherwise one-knob mutations of the
	// incumbent, ranked by the prior when it is trained.
	ProposerReference = "reference"
	// ProposerModel is the model-based proposer: a Bayesian surrogate of
	// the campaign's own outcomes over the knob space, sampled (Thompson
	// sampling; see modelNext), with the prior's ranker deciding first on
	// a warm campaign.
	ProposerModel = "model"
)

// Model proposer constants.
const (
	// modelStartup is how many scored outcomes a cold campaign's model
	// needs before it proposes; until then proposals are uniform random
	// points. A warm campaign's model proposes from its first scored
	// outcome on: the prior's corpus rows are evidence already.
	modelStartup = 5
	// probeFraction is the share of the plateau threshold after which
	// every model proposal comes from the incumbent's one-knob
	// neighbourhood (see probeNeighbours).
	probeFraction = 0.2
	// warmGlobalEvery: on a warm campaign, the trial ids divisible by it
	// get a global proposal; the others step to a neighbour.
	warmGlobalEvery = 8
	// localOptimism is how many posterior standard deviations a warm
	// campaign's local step subtracts from the predicted log score (a lower
	// confidence bound; 0.5 measured best in docs/results/search.md).
	localOptimism = 0.5
)

// Observation is one evaluated point as the model proposer sees it: the
// choice index of every searchable knob (-1 where the point's value is not
// one of the choices) and the score keep/revert compared, nil when the
// point was not correct or had no latency (rejected, incorrect, crashed
// and timed-out points count as bad).
type Observation struct {
	Levels []int    `json:"levels"`
	Score  *float64 `json:"score"`
	// Prior marks a corpus row a warm campaign starts from; its score is
	// the row's pct_of_roofline on its own model shape.
	Prior bool `json:"prior,omitempty"`
}

// searchKnobs are the knobs a proposal can move on this target and device:
// effective, with more than one choice, in Space's order.
func (c *Campaign) searchKnobs() []schedule.Knob {
	var out []schedule.Knob
	for _, k := range c.searchSpace() {
		if k.Effective && len(k.Choices) > 1 {
			out = append(out, k)
		}
	}
	return out
}

// levelsOf encodes a point as the choice index of every searchable knob.
func levelsOf(p schedule.Point, knobs []schedule.Knob) []int {
	out := make([]int, len(knobs))
	for i, k := range knobs {
		out[i] = -1
		v := pyjson.Compact(p.KnobValue(k.Path), true)
		for j, ch := range k.Choices {
			if pyjson.Compact(ch, true) == v {
				out[i] = j
				break
			}
		}
	}
	return out
}

// observe records an evaluated point for the model proposer.
func (c *Campaign) observe(r result) {
	if r.infra || r.sched == nil {
		return
	}
	o := Observation{Levels: levelsOf(c.project(*r.sched), c.searchKnobs())}
	if r.score != nil && r.correctness == flywheel.CorrectPass {
		o.Score = new(*r.score)
	}
	c.st.Observations = append(c.st.Observations, o)
}

// surrogate is a Bayesian linear model of log(score) over one-hot knob
// levels (main effects plus every pairwise interaction): ridge regression
// with a Gaussian prior on the effects, whose posterior is sampled once
// per proposal (Thompson sampling). Lower predictions are better.
type surrogate struct {
	knobs   []schedule.Knob
	offset  []int // first column of each knob's one-hot block
	pairs   [][2]int
	pairAt  []int // first column of each pair's block
	dim     int
	mainDim int       // columns of the main effects (the first ones)
	priorC  int       // the column that is 1 for prior rows (their offset)
	mean    float64   // mean log score of the campaign's own rows
	w       []float64 // one posterior sample of the effects (or its mean)
	factor  []float64 // Cholesky factor of the posterior precision
}

// Surrogate constants (natural-log units): the prior standard deviation of
// a main effect, of a pairwise effect and of the prior rows' offset; the
// noise of the campaign's own log scores and of a prior row (another
// shape's pct: weaker evidence); the largest number of columns for which
// pairwise interactions are modelled.
const (
	surrogateMainSD   = 0.3
	surrogatePairSD   = 0.1
	surrogateOffsetSD = 10.0
	surrogateNoiseSD  = 0.02
	surrogatePriorSD  = 0.2
	surrogateMaxDim   = 256
)

func newSurrogate(knobs []schedule.Knob) *surrogate {
	s := &surrogate{knobs: knobs}
	for _, k := range knobs {
		s.offset = append(s.offset, s.dim)
		s.dim += len(k.Choices)
	}
	pairDim := 0
	for a := range knobs {
		for b := a + 1; b < len(knobs); b++ {
			pairDim += len(knobs[a].Choices) * len(knobs[b].Choices)
		}
	}
	s.mainDim = s.dim
	if s.dim+pairDim+1 <= surrogateMaxDim {
		for a := range knobs {
			for b := a + 1; b < len(knobs); b++ {
				s.pairs = append(s.pairs, [2]int{a, b})
				s.pairAt = append(s.pairAt, s.dim)
				s.dim += len(knobs[a].Choices) * len(knobs[b].Choices)
			}
		}
	}
	s.priorC = s.dim
	s.dim++
	return s
}

// columns lists the one-hot columns set for a point's levels.
func (s *surrogate) columns(levels []int, out []int) []int {
	out = out[:0]
	for i, l := range levels {
		if l >= 0 && l < len(s.knobs[i].Choices) {
			out = append(out, s.offset[i]+l)
		}
	}
	for j, pr := range s.pairs {
		la, lb := levels[pr[0]], levels[pr[1]]
		if la >= 0 && lb >= 0 && la < len(s.knobs[pr[0]].Choices) && lb < len(s.knobs[pr[1]].Choices) {
			out = append(out, s.pairAt[j]+la*len(s.knobs[pr[1]].Choices)+lb)
		}
	}
	return out
}

// fit computes the posterior of the effects from the scored observations
// and draws one sample of it with rng (with a nil rng it takes the
// posterior mean); false when there is nothing to fit or the posterior
// cannot be factored (non-finite input).
func (s *surrogate) fit(obs []Observation, rng *rand.Rand) bool {
	n := s.dim
	a := make([]float64, n*n) // Σ wφφᵀ/σ² + prior precision, then its Cholesky factor
	b := make([]float64, n)   // Σ wφy/σ²
	own := 0
	for _, o := range obs {
		if !o.Prior && o.Score != nil && *o.Score > 0 {
			s.mean += math.Log(*o.Score)
			own++
		}
	}
	if own == 0 {
		return false
	}
	s.mean /= float64(own)
	var cols []int
	for _, o := range obs {
		if o.Score == nil || !(*o.Score > 0) || len(o.Levels) != len(s.knobs) {
			continue
		}
		cols = s.columns(o.Levels, cols)
		prec := 1 / (surrogateNoiseSD * surrogateNoiseSD)
		if o.Prior {
			cols = append(cols, s.priorC)
			prec = 1 / (surrogatePriorSD * surrogatePriorSD)
		}
		y := math.Log(*o.Score) - s.mean
		for _, p := range cols {
			b[p] += prec * y
			for _, q := range cols {
				a[p*n+q] += prec
			}
		}
	}
	for i := range n {
		sd := surrogateMainSD
		switch {
		case i == s.priorC:
			sd = surrogateOffsetSD
		case i >= s.mainDim:
			sd = surrogatePairSD
		}
		a[i*n+i] += 1 / (sd * sd)
	}
	if !cholesky(a, n) {
		return false
	}
	// mean = A⁻¹b; sample = mean + L⁻ᵀz, whose covariance is A⁻¹.
	s.factor = a
	s.w = solveUpper(a, n, solveLower(a, n, b))
	if rng == nil {
		return true
	}
	z := make([]float64, n)
	for i := range z {
		z[i] = rng.NormFloat64()
	}
	z = solveUpper(a, n, z)
	for i := range s.w {
		s.w[i] += z[i]
	}
	return true
}

// spread is the posterior standard deviation of a point's predicted log
// score: |L⁻¹φ| for the point's one-hot columns φ.
func (s *surrogate) spread(levels []int, scratch []int) float64 {
	phi := make([]float64, s.dim)
	for _, p := range s.columns(levels, scratch) {
		phi[p] = 1
	}
	v := 0.0
	for _, x := range solveLower(s.factor, s.dim, phi) {
		v += x * x
	}
	return math.Sqrt(v)
}

// predict is the sampled model's log score for a point's levels.
func (s *surrogate) predict(levels []int, scratch []int) float64 {
	v := s.mean
	for _, p := range s.columns(levels, scratch) {
		v += s.w[p]
	}
	return v
}

// cholesky factors the n×n symmetric positive definite a in place into L
// (lower triangle, a = LLᵀ); false if a is not positive definite.
func cholesky(a []float64, n int) bool {
	for j := range n {
		d := a[j*n+j]
		for k := range j {
			d -= a[j*n+k] * a[j*n+k]
		}
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			v := a[i*n+j]
			for k := range j {
				v -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = v / d
		}
	}
	return true
}

// solveLower solves Lx = b for the factor in a's lower triangle.
func solveLower(a []float64, n int, b []float64) []float64 {
	x := make([]float64, n)
	for i := range n {
		v := b[i]
		for k := range i {
			v -= a[i*n+k] * x[k]
		}
		x[i] = v / a[i*n+i]
	}
	return x
}

// solveUpper solves Lᵀx = b for the factor in a's lower triangle.
func solveUpper(a []float64, n int, b []float64) []float64 {
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		v := b[i]
		for k := i + 1; k < n; k++ {
			v -= a[k*n+i] * x[k]
		}
		x[i] = v / a[i*n+i]
	}
	return x
}

// enumerateLimit is the largest searchable space the model proposer scores
// in full; above it, it scores a pool of modelPool drawn candidates.
const (
	enumerateLimit = 4096
	modelPool      = 64
)

// modelCandidate is a point the model proposer may score, with its id and
// knob levels.
type modelCandidate struct {
	p      schedule.Point
	id     string
	levels []int
}

// enumerate lists every point of a searchable space of at most
// enumerateLimit points (projected, deduplicated), once per campaign: the
// list depends only on the target and device.
func (c *Campaign) enumerate(knobs []schedule.Knob) []modelCandidate {
	if c.space != nil {
		return c.space
	}
	seen := map[string]bool{}
	levels := make([]int, len(knobs))
	for {
		p := schedule.Default()
		for i, k := range knobs {
			p.SetKnob(k.Path, k.Choices[levels[i]])
		}
		p = c.project(p)
		if id := p.ID(); !seen[id] {
			seen[id] = true
			c.space = append(c.space, modelCandidate{p: p, id: id, levels: levelsOf(p, knobs)})
		}
		i := 0
		for ; i < len(knobs); i++ {
			if levels[i]++; levels[i] < len(knobs[i].Choices) {
				break
			}
			levels[i] = 0
		}
		if i == len(knobs) {
			return c.space
		}
	}
}

// modelCandidates lists the untried candidates the model proposer scores:
// every untried point of a small space, else a pool of one-knob mutations
// of the anchor and uniform random points (alternating).
func (c *Campaign) modelCandidates(knobs []schedule.Knob, anchor schedule.Point) []modelCandidate {
	var out []modelCandidate
	if schedule.SpaceSize(knobs) <= enumerateLimit {
		for _, mc := range c.enumerate(knobs) {
			if _, tried := c.st.Tried[mc.id]; !tried {
				out = append(out, mc)
			}
		}
		return out
	}
	seen := map[string]bool{}
	for i := range modelPool {
		var p schedule.Point
		if i%2 == 0 {
			p = schedule.MutateIn(anchor, c.rng, c.searchSpace())
		} else {
			p = c.random()
		}
		p = c.project(p)
		id := p.ID()
		if _, tried := c.st.Tried[id]; tried || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, modelCandidate{p: p, id: id, levels: levelsOf(p, knobs)})
	}
	return out
}

// modelNext is the model-based proposal. Until modelStartup of the
// campaign's own outcomes are scored it proposes uniform random points
// (source "random"; a warm campaign's opening points come first, and a
// warm campaign needs only one scored outcome). Then it fits the surrogate
// to the campaign's outcomes — and on a warm campaign to the prior's
// corpus rows, as weaker evidence with an offset of their own — draws one
// sample of its posterior, and proposes the untried candidate the sample
// predicts fastest (source "model"): Thompson sampling, which explores
// where the model is unsure and exploits where it is confident. A local
// step (see probeNeighbours) only ranks the incumbent's untried one-knob
// neighbours, on a warm campaign by the posterior mean less localOptimism
// standard deviations. Every draw comes from the campaign's PCG generator,
// so proposals are a function of the persisted state.
func (c *Campaign) modelNext(anchor schedule.Point) (candidate, bool) {
	knobs := c.searchKnobs()
	scored := 0
	for _, o := range c.st.Observations {
		if o.Score != nil && !o.Prior {
			scored++
		}
	}
	warm := c.hasPriorRows()
	if scored < modelStartup && !(warm && scored > 0) {
		return c.fresh(SourceRandom, c.random)
	}
	pool := c.modelCandidates(knobs, anchor)
	if len(pool) == 0 {
		return c.fresh(SourceRandom, c.random)
	}
	rng := c.rng
	optimism := 0.0
	if c.probeNeighbours(warm) {
		pool = neighbours(pool, levelsOf(anchor, knobs))
		if warm {
			// The corpus rows make the posterior worth exploiting: rank by
			// its mean, less a share of its spread so that knob levels
			// nobody tried still come up.
			rng, optimism = nil, localOptimism
		}
	}
	s := newSurrogate(knobs)
	if !s.fit(c.st.Observations, rng) {
		return c.fresh(SourceRandom, c.random)
	}
	best, bestScore := 0, math.Inf(1)
	var scratch []int
	for i, mc := range pool {
		v := s.predict(mc.levels, scratch)
		if optimism > 0 {
			v -= optimism * s.spread(mc.levels, scratch)
		}
		if v < bestScore {
			best, bestScore = i, v
		}
	}
	return candidate{p: pool[best].p, id: pool[best].id, source: SourceModel}, true
}

// observePrior records a warm campaign's corpus rows for the model
// proposer.
func (c *Campaign) observePrior(points []flywheel.PriorPoint) {
	knobs := c.searchKnobs()
	for _, pp := range points {
		c.st.Observations = append(c.st.Observations,
			Observation{Levels: levelsOf(c.project(pp.Point), knobs), Score: new(pp.Pct), Prior: true})
	}
}

// remainingPoints is the number of searchable points not yet tried.
func (c *Campaign) remainingPoints() float64 {
	return max(0, float64(c.SpacePoints()-len(c.st.Tried)))
}

// hasPriorRows reports whether the model learns from a prior's corpus rows
// (a warm campaign whose corpus had rows for this GPU and latency kind).
func (c *Campaign) hasPriorRows() bool {
	for _, o := range c.st.Observations {
		if o.Prior {
			return true
		}
	}
	return false
}

// probeNeighbours reports whether the next model proposal is a local step:
// restricted to the untried one-knob neighbours of the incumbent (ranked
// by a lower confidence bound of the posterior on a warm campaign, by the
// posterior sample on a cold one), in a search that is otherwise global
// (Thompson-sampled over the whole space):
//
//   - on a warm campaign, every proposal but those of trial ids divisible
//     by warmGlobalEvery: the incumbent came from the corpus's best rows,
//     and the optimum of a neighbouring shape is usually a knob or two
//     away from its own, which a posterior sample drawn from few rows of
//     the campaign's own may otherwise not try for many trials (the
//     surrogate still ranks the neighbours with the corpus rows' evidence);
//   - on any campaign, once the consecutive reverts reach probeFraction of
//     the plateau threshold: the campaign stops on a plateau only after the
//     model has had the incumbent's neighbours to choose from, so it does
//     not stop one knob short of a better point.
//
// Both read only persisted state, so a reloaded campaign proposes the same.
func (c *Campaign) probeNeighbours(warm bool) bool {
	if warm && c.st.NextTrial%warmGlobalEvery != 0 {
		return true
	}
	limit := c.plateauThreshold()
	return limit > 0 && float64(c.st.ConsecutiveReverts) >= probeFraction*float64(limit)
}

// neighbours keeps the candidates one knob away from the incumbent's
// levels; all of them when none is (every neighbour tried).
func neighbours(pool []modelCandidate, incumbent []int) []modelCandidate {
	var out []modelCandidate
	for _, mc := range pool {
		if differingKnobs(mc.levels, incumbent) == 1 {
			out = append(out, mc)
		}
	}
	if len(out) == 0 {
		return pool
	}
	return out
}

// differingKnobs counts the knobs whose levels differ.
func differingKnobs(a, b []int) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
