package calibrate

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

// A fitted parameter counts as identified by the points when its partial
// sensitivity (doc.go) is at least MinSensitivity (a 10% change of it that
// no other parameter can mimic moves the predictions by at least 0.01%
// RMS) and the standard error of its logarithm is at most MaxStdErr (its
// value known within about ±30%, given how well the model fits).
const (
	MinSensitivity = 1e-3
	MaxStdErr      = 0.25
)

// FitParam is one quantity the fit moves: a value within [Lo, Hi] that
// sets one or more CostParams fields.
type FitParam struct {
	Name   string
	Help   string
	Fields []string // the CostParams fields (schedule.CostParamNames) it sets
	Lo, Hi float64
	// value reads the quantity from a record; set writes it onto a record
	// that starts from the defaults.
	value func(schedule.CostParams) float64
	set   func(*schedule.CostParams, float64)
}

func field(name, help string, lo, hi float64) FitParam {
	return FitParam{Name: name, Help: help, Fields: []string{name}, Lo: lo, Hi: hi,
		value: func(c schedule.CostParams) float64 { v, _ := c.Param(name); return v },
		set:   func(c *schedule.CostParams, v float64) { _ = c.SetParam(name, v) }, // in range: Lo, Hi lie inside the record's range
	}
}

// FitParams are the quantities Fit can move, in fit order.
var FitParams = []FitParam{
	field("achievable_bw", "fraction of the spec HBM bandwidth the SMs' streams share", 0.2, 1),
	field("max_sm_stream_gbs", "cap on one SM's stream rate, GB/s (default 0: off)", 2, 400),
	{Name: "hop", Help: "scale of the hop: dispatch_us, signal_us and wake_us together", Fields: []string{"dispatch_us", "signal_us", "wake_us"},
		Lo: 0.05, Hi: 20,
		value: func(c schedule.CostParams) float64 { return c.HopUS() / schedule.DefaultCostParams().HopUS() },
		set: func(c *schedule.CostParams, s float64) {
			d := schedule.DefaultCostParams()
			c.DispatchUS, c.SignalUS, c.WakeUS = d.DispatchUS*s, d.SignalUS*s, d.WakeUS*s
		}},
	field("tile_fixed_us", "fixed cost of a GEMV/GEMM tile, µs", 0.005, 5),
	field("hbm_latency_us", "one HBM round trip, µs (fill latency and Little's-law window)", 0.1, 5),
	field("staging_us", "a fused tile's staging step, µs", 0.005, 5),
	field("epilogue_us", "a fused tile's RoPE/append epilogue, µs", 0.005, 5),
	field("alu_gops_per_sm", "one SM's ALU rate for the dequantisation of quantised tiles, G ops/s", 20, 2000),
}

// DefaultFit names the quantities Fit moves unless told otherwise.
var DefaultFit = []string{"achievable_bw", "max_sm_stream_gbs", "hop", "tile_fixed_us"}

func findFitParam(name string) (FitParam, bool) {
	for _, p := range FitParams {
		if p.Name == name {
			return p, true
		}
	}
	return FitParam{}, false
}

// ParamResult is what the fit says about one quantity.
type ParamResult struct {
	Name        string
	Default     float64
	Fitted      float64 // the fitted value (the default when not identified)
	Sensitivity float64 // partial sensitivity at the fit (doc.go)
	StdErr      float64 // standard error of ln(value), from the residuals; NaN with too few points
	Identified  bool
	AtBound     bool
}

// Result is a fit: the record before (the defaults) and after, the
// per-point predictions under both, and their RMS log errors.
type Result struct {
	Target                string
	Before, After         schedule.CostParams
	Overrides             map[string]float64 // After's fields that the fit set (schedule.CostRecord.Params)
	Params                []ParamResult
	Labels                []string // the measurements' labels
	Measured              []float64
	PredBefore, PredAfter []float64
	RMSBefore, RMSAfter   float64 // RMS of ln(predicted / measured)
	Evaluations           int     // predictions of the whole set made
}

// Fit fits the named quantities (DefaultFit when names is empty) of
// target's record to the measurements, from DefaultCostParams.
func Fit(target *ir.GpuTarget, ms []Measurement, names []string) (*Result, error) {
	if len(ms) == 0 {
		return nil, errors.New("no measurements")
	}
	if len(names) == 0 {
		names = DefaultFit
	}
	var params []FitParam
	for _, n := range names {
		p, ok := findFitParam(n)
		if !ok {
			known := make([]string, len(FitParams))
			for i, q := range FitParams {
				known[i] = q.Name
			}
			return nil, fmt.Errorf("unknown fit parameter %q (known: %s)", n, strings.Join(known, ", "))
		}
		if slices.ContainsFunc(params, func(q FitParam) bool { return q.Name == n }) {
			return nil, fmt.Errorf("fit parameter %q named twice", n)
		}
		params = append(params, p)
	}
	if len(ms) <= len(params) {
		return nil, fmt.Errorf("%d measured points cannot fit %d parameters: measure more points or fit fewer", len(ms), len(params))
	}
	for _, m := range ms {
		if !(m.MeasuredUS > 0) || math.IsInf(m.MeasuredUS, 0) {
			return nil, fmt.Errorf("%s: measured %v µs", m.Label, m.MeasuredUS)
		}
	}
	f := &fitter{target: target, ms: ms, params: params}
	def := schedule.DefaultCostParams()
	res := &Result{Target: target.Name, Before: def, Measured: make([]float64, len(ms)), Labels: make([]string, len(ms))}
	for i, m := range ms {
		res.Measured[i], res.Labels[i] = m.MeasuredUS, m.Label
	}
	res.PredBefore = f.predict(def)
	res.RMSBefore = rmsLog(res.PredBefore, res.Measured)

	// θ: ln of each free quantity, starting from its default (clamped into
	// its bounds: the per-SM cap's default, off, starts at the top).
	free := make([]bool, len(params))
	theta := make([]float64, len(params))
	for j, p := range params {
		free[j] = true
		theta[j] = math.Log(min(max(p.value(def), p.Lo), p.Hi))
	}
	f.coarsePass(theta, free)
	sens, se := make([]float64, len(params)), make([]float64, len(params))
	for {
		f.levenbergMarquardt(theta, free)
		s, e := f.identify(theta, free)
		worst, worstBad := -1, 1.0
		for j := range params {
			if !free[j] {
				continue
			}
			sens[j], se[j] = s[j], e[j]
			bad := MinSensitivity / max(s[j], 1e-300)
			if !math.IsNaN(e[j]) {
				bad = max(bad, e[j]/MaxStdErr)
			}
			if bad > worstBad {
				worst, worstBad = j, bad
			}
		}
		if worst < 0 {
			break
		}
		free[worst] = false // back to its default; fit the rest again
	}
	res.After, res.Overrides = roundRecord(f.record(theta, free), params, free)
	for j, p := range params {
		r := ParamResult{Name: p.Name, Default: p.value(def), Fitted: p.value(res.After), Sensitivity: sens[j], StdErr: se[j], Identified: free[j]}
		r.AtBound = free[j] && (theta[j] <= math.Log(p.Lo)+1e-9 || theta[j] >= math.Log(p.Hi)-1e-9)
		res.Params = append(res.Params, r)
	}
	res.PredAfter = f.predict(res.After)
	res.RMSAfter = rmsLog(res.PredAfter, res.Measured)
	res.Evaluations = f.evals
	return res, nil
}

// fitter evaluates candidate records on the measurements.
type fitter struct {
	target *ir.GpuTarget
	ms     []Measurement
	params []FitParam
	evals  int
}

// record is the defaults with the free quantities set from θ.
func (f *fitter) record(theta []float64, free []bool) schedule.CostParams {
	c := schedule.DefaultCostParams()
	for j, p := range f.params {
		if free[j] {
			p.set(&c, math.Exp(theta[j]))
		}
	}
	return c
}

// predict is every measurement's prediction under c, in parallel.
func (f *fitter) predict(c schedule.CostParams) []float64 {
	f.evals++
	out := make([]float64, len(f.ms))
	workers := min(runtime.GOMAXPROCS(0), len(f.ms))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				m := &f.ms[i]
				out[i] = schedule.PredictWith(m.Program, f.target, m.Point, c).PredictedUS
			}
		})
	}
	for i := range f.ms {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// residuals are ln(predicted / measured) under θ.
func (f *fitter) residuals(theta []float64, free []bool) []float64 {
	pred := f.predict(f.record(theta, free))
	r := make([]float64, len(pred))
	for i := range pred {
		r[i] = math.Log(pred[i] / f.ms[i].MeasuredUS)
	}
	return r
}

func sumSq(r []float64) float64 {
	s := 0.0
	for _, x := range r {
		if math.IsNaN(x) {
			return math.Inf(1)
		}
		s += x * x
	}
	return s
}

func rmsLog(pred, measured []float64) float64 {
	s := 0.0
	for i := range pred {
		d := math.Log(pred[i] / measured[i])
		s += d * d
	}
	return math.Sqrt(s / float64(len(pred)))
}

func (f *fitter) bounds(j int) (lo, hi float64) {
	return math.Log(f.params[j].Lo), math.Log(f.params[j].Hi)
}

// coarseGrid is the number of values the coarse pass tries per quantity.
const coarseGrid = 7

// coarsePass moves each free quantity in turn to the best of a coarseGrid-value
// logarithmic grid over its bounds (the others held), keeping the current
// value unless a grid value is strictly better.
func (f *fitter) coarsePass(theta []float64, free []bool) {
	best := sumSq(f.residuals(theta, free))
	for j := range theta {
		if !free[j] {
			continue
		}
		lo, hi := f.bounds(j)
		keep := theta[j]
		for k := range coarseGrid {
			theta[j] = lo + (hi-lo)*float64(k)/(coarseGrid-1)
			if s := sumSq(f.residuals(theta, free)); s < best {
				best, keep = s, theta[j]
			}
		}
		theta[j] = keep
	}
}

// jacobianStep is the forward-difference step in ln(value).
const jacobianStep = 0.02

// jacobian is ∂r/∂θ of the free quantities (columns of fixed ones zero),
// by forward differences, backward at an upper bound.
func (f *fitter) jacobian(theta []float64, free []bool, r []float64) [][]float64 {
	J := make([][]float64, len(r))
	for i := range J {
		J[i] = make([]float64, len(theta))
	}
	for j := range theta {
		if !free[j] {
			continue
		}
		_, hi := f.bounds(j)
		h := jacobianStep
		if theta[j]+h > hi {
			h = -h
		}
		t := slices.Clone(theta)
		t[j] += h
		rj := f.residuals(t, free)
		for i := range r {
			J[i][j] = (rj[i] - r[i]) / h
		}
	}
	return J
}

// levenbergMarquardt minimises Σ r² over the free θ within the bounds.
func (f *fitter) levenbergMarquardt(theta []float64, free []bool) {
	k := len(theta)
	r := f.residuals(theta, free)
	s := sumSq(r)
	lambda := 1e-2
	for iter := 0; iter < 40 && s > 0; iter++ {
		J := f.jacobian(theta, free, r)
		A, g := normalEquations(J, r, free)
		improved := false
		for lambda < 1e10 {
			M := make([][]float64, k)
			for a := range M {
				M[a] = slices.Clone(A[a])
				M[a][a] += lambda * (A[a][a] + 1e-9)
			}
			step, ok := solve(M, g)
			if !ok {
				lambda *= 4
				continue
			}
			t := slices.Clone(theta)
			for j := range t {
				if free[j] {
					lo, hi := f.bounds(j)
					t[j] = min(max(t[j]-step[j], lo), hi)
				}
			}
			rt := f.residuals(t, free)
			if st := sumSq(rt); st < s {
				gain := (s - st) / s
				copy(theta, t)
				r, s = rt, st
				lambda = max(lambda/3, 1e-9)
				improved = gain > 1e-7
				break
			}
			lambda *= 4
		}
		if !improved {
			return
		}
	}
}

// normalEquations are JᵀJ and Jᵀr over the free columns (fixed ones get an
// identity row, so the system stays solvable and their step is zero).
func normalEquations(J [][]float64, r []float64, free []bool) ([][]float64, []float64) {
	k := len(free)
	A := make([][]float64, k)
	g := make([]float64, k)
	for a := range k {
		A[a] = make([]float64, k)
		if !free[a] {
			A[a][a] = 1
			continue
		}
		for b := range k {
			if !free[b] {
				continue
			}
			for i := range J {
				A[a][b] += J[i][a] * J[i][b]
			}
		}
		for i := range J {
			g[a] += J[i][a] * r[i]
		}
	}
	return A, g
}

// solve solves M x = b by Gaussian elimination with partial pivoting (M is
// overwritten); ok is false for a singular M.
func solve(M [][]float64, b []float64) ([]float64, bool) {
	n := len(b)
	x := slices.Clone(b)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(M[r][c]) > math.Abs(M[p][c]) {
				p = r
			}
		}
		if math.Abs(M[p][c]) < 1e-300 {
			return nil, false
		}
		M[c], M[p] = M[p], M[c]
		x[c], x[p] = x[p], x[c]
		for r := c + 1; r < n; r++ {
			q := M[r][c] / M[c][c]
			for k := c; k < n; k++ {
				M[r][k] -= q * M[c][k]
			}
			x[r] -= q * x[c]
		}
	}
	for c := n - 1; c >= 0; c-- {
		for k := c + 1; k < n; k++ {
			x[c] -= M[c][k] * x[k]
		}
		x[c] /= M[c][c]
	}
	return x, true
}

// identify returns each free quantity's partial sensitivity 1 / sqrt(n ·
// (JᵀJ)⁻¹ⱼⱼ) and the standard error of its logarithm, √(S/(n-k) ·
// (JᵀJ)⁻¹ⱼⱼ) (NaN unless n > k), at θ. A column that is zero, or a
// combination of the others, has sensitivity 0.
func (f *fitter) identify(theta []float64, free []bool) (sens, se []float64) {
	r := f.residuals(theta, free)
	J := f.jacobian(theta, free, r)
	A, _ := normalEquations(J, r, free)
	k, n := len(theta), len(r)
	nFree := 0
	for _, fr := range free {
		if fr {
			nFree++
		}
	}
	sens, se = make([]float64, k), make([]float64, k)
	for j := range k {
		se[j] = math.NaN()
		if !free[j] {
			continue
		}
		// (JᵀJ)⁻¹ⱼⱼ by solving A x = eⱼ, A slightly regularised so that a
		// zero or dependent column yields a huge, not an infinite, value.
		M := make([][]float64, k)
		scale := 0.0
		for a := range k {
			scale = max(scale, A[a][a])
		}
		for a := range M {
			M[a] = slices.Clone(A[a])
			M[a][a] += 1e-12 * max(scale, 1)
		}
		e := make([]float64, k)
		e[j] = 1
		x, ok := solve(M, e)
		if !ok || !(x[j] > 0) {
			continue
		}
		sens[j] = 1 / math.Sqrt(float64(n)*x[j])
		if n > nFree {
			se[j] = math.Sqrt(sumSq(r) / float64(n-nFree) * x[j])
		}
	}
	return sens, se
}

// roundRecord is the record's overrides: every CostParams field a fitted
// quantity sets, rounded to 4 significant digits, and the defaults with
// them applied.
func roundRecord(c schedule.CostParams, params []FitParam, free []bool) (schedule.CostParams, map[string]float64) {
	out := schedule.DefaultCostParams()
	fields := map[string]float64{}
	for j, p := range params {
		if !free[j] {
			continue
		}
		for _, name := range p.Fields {
			v, _ := c.Param(name)
			lo, hi, _ := schedule.CostParamRange(name)
			fields[name] = min(max(roundSig(v, 4), lo), hi)
			_ = out.SetParam(name, fields[name])
		}
	}
	return out, fields
}

func roundSig(v float64, digits int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	e := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}
