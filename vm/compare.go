package vm

import (
	"fmt"
	"math"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// Top1Floor is the minimum fraction of rows whose argmax must agree.
const Top1Floor = 0.99

// Tolerance returns the (atol, rtol) pair the Python reference uses for values
// produced in dtype dt: fp32 (1e-4, 1e-4), fp16 (1e-2, 1e-2), bf16 (2e-2,
// 2e-2), anything else (3e-2, 3e-2).
func Tolerance(dt ir.DType) (atol, rtol float64) {
	switch dt {
	case ir.F32:
		return 1e-4, 1e-4
	case ir.F16:
		return 1e-2, 1e-2
	case ir.BF16:
		return 2e-2, 2e-2
	}
	return 3e-2, 3e-2
}

// Comparison is the verdict of Compare.
type Comparison struct {
	Pass bool
	// MaxAbsErr is max |test − ref| (+Inf when a pair is not finite).
	MaxAbsErr float64
	// MaxRelErr is max |test − ref| / (|ref| + 1e-12) over finite pairs.
	MaxRelErr float64
	// ToleranceShare is the worst value's error as a share of what the
	// tolerance allows it, max |test − ref| / (atol + rtol·|ref|): at most
	// 1 when the values are allclose (+Inf when a pair is not finite).
	ToleranceShare float64
	// Top1Agreement is the fraction of rows whose argmax agrees.
	Top1Agreement float64
	// KL is the mean over rows of KL(softmax(ref) ‖ softmax(test)) in nats
	// (+Inf when a value is not finite).
	KL     float64
	Reason string // why it failed; empty on PASS
}

// Compare judges test values against reference values laid out in rows of
// rowLen (rowLen <= 0: one row) at the tolerances of dt. It passes iff every
// pair is close (|test − ref| <= atol + rtol·|ref|), every value is finite,
// and the top-1 agreement over rows is at least Top1Floor. A length
// mismatch, a row length that does not divide the data, empty data, and any
// NaN or ±Inf in either side fail with a reason.
func Compare(test, ref []float32, rowLen int, dt ir.DType) Comparison {
	c := Comparison{MaxAbsErr: math.Inf(1), MaxRelErr: math.Inf(1), ToleranceShare: math.Inf(1), KL: math.Inf(1)}
	switch {
	case len(test) != len(ref):
		c.Reason = fmt.Sprintf("shape mismatch: test has %d values, ref has %d", len(test), len(ref))
		return c
	case len(ref) == 0:
		c.Reason = "nothing to compare: no values"
		return c
	}
	if rowLen <= 0 {
		rowLen = len(ref)
	}
	if len(ref)%rowLen != 0 {
		c.Reason = fmt.Sprintf("shape mismatch: %d values are not rows of %d", len(ref), rowLen)
		return c
	}
	atol, rtol := Tolerance(dt)
	var notes []string
	testBad, refBad := countNonFinite(test), countNonFinite(ref)
	if testBad > 0 {
		notes = append(notes, fmt.Sprintf("test values contain NaN/Inf (%d of %d)", testBad, len(test)))
	}
	if refBad > 0 {
		notes = append(notes, fmt.Sprintf("reference values contain NaN/Inf (%d of %d)", refBad, len(ref)))
	}
	c.MaxAbsErr, c.MaxRelErr, c.ToleranceShare = 0, 0, 0
	anyFinite := false
	allClose := true
	for i := range ref {
		a, b := float64(test[i]), float64(ref[i])
		if !ir.Finite(a) || !ir.Finite(b) {
			c.MaxAbsErr, c.ToleranceShare = math.Inf(1), math.Inf(1)
			allClose = false
			continue
		}
		d := math.Abs(a - b)
		anyFinite = true
		c.MaxAbsErr = math.Max(c.MaxAbsErr, d)
		c.ToleranceShare = math.Max(c.ToleranceShare, d/(atol+rtol*math.Abs(b)))
		c.MaxRelErr = math.Max(c.MaxRelErr, d/(math.Abs(b)+1e-12))
		if d > atol+rtol*math.Abs(b) {
			allClose = false
		}
	}
	if !anyFinite {
		c.MaxRelErr = math.Inf(1)
	}
	rows := len(ref) / rowLen
	agree := 0
	for r := range rows {
		if argmax(test[r*rowLen:(r+1)*rowLen]) == argmax(ref[r*rowLen:(r+1)*rowLen]) {
			agree++
		}
	}
	c.Top1Agreement = float64(agree) / float64(rows)
	if testBad == 0 && refBad == 0 {
		c.KL = meanKL(ref, test, rowLen)
	}
	if !allClose && testBad == 0 && refBad == 0 {
		notes = append(notes, fmt.Sprintf("not allclose at atol=%.1e rtol=%.1e (max_abs=%.3e)", atol, rtol, c.MaxAbsErr))
	}
	if c.Top1Agreement < Top1Floor {
		notes = append(notes, fmt.Sprintf("top1_agreement %.4f < floor %v", c.Top1Agreement, Top1Floor))
	}
	c.Pass = allClose && testBad == 0 && refBad == 0 && c.Top1Agreement >= Top1Floor
	c.Reason = strings.Join(notes, "; ")
	return c
}

func countNonFinite(xs []float32) int {
	n := 0
	for _, v := range xs {
		if !ir.Finite(float64(v)) {
			n++
		}
	}
	return n
}

// meanKL is the mean over rows of KL(softmax(p) ‖ softmax(q)), in float64.
func meanKL(p, q []float32, rowLen int) float64 {
	rows := len(p) / rowLen
	lp, lq := make([]float64, rowLen), make([]float64, rowLen)
	var total float64
	for r := range rows {
		logSoftmax(p[r*rowLen:(r+1)*rowLen], lp)
		logSoftmax(q[r*rowLen:(r+1)*rowLen], lq)
		var kl float64
		for i := range lp {
			kl += math.Exp(lp[i]) * (lp[i] - lq[i])
		}
		total += kl
	}
	return total / float64(rows)
}

func logSoftmax(x []float32, dst []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	ls := math.Log(s) + m
	for i, v := range x {
		dst[i] = float64(v) - ls
	}
}
