package vm

import (
	"math"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func TestTolerance(t *testing.T) {
	for dt, want := range map[ir.DType][2]float64{ir.F32: {1e-4, 1e-4}, ir.F16: {1e-2, 1e-2}, ir.BF16: {2e-2, 2e-2}, ir.F8E4M3: {3e-2, 3e-2}, ir.I8: {3e-2, 3e-2}} {
		if a, r := Tolerance(dt); a != want[0] || r != want[1] {
			t.Errorf("Tolerance(%s) = (%g, %g), want %v", dt, a, r, want)
		}
	}
}

func TestComparePassAndMetrics(t *testing.T) {
	ref := []float32{1, 2, 3, 10, 20, 30}
	c := Compare(ref, ref, 3, ir.F32)
	if !c.Pass || c.MaxAbsErr != 0 || c.MaxRelErr != 0 || c.Top1Agreement != 1 || c.KL != 0 || c.Reason != "" {
		t.Errorf("identical: %+v", c)
	}
	// 1e-2 off on a value of 1 passes bf16 (2e-2 + 2e-2·1) but not fp32.
	test := []float32{1.01, 2, 3, 10, 20, 30}
	if c := Compare(test, ref, 3, ir.BF16); !c.Pass || math.Abs(c.MaxAbsErr-0.01) > 1e-6 || math.Abs(c.MaxRelErr-0.01) > 1e-6 || c.KL <= 0 {
		t.Errorf("bf16: %+v", c)
	}
	// Its share of the tolerance: 0.01 of the 0.04 bf16 allows at 1 is a quarter.
	if c := Compare(test, ref, 3, ir.BF16); math.Abs(c.ToleranceShare-0.25) > 1e-5 {
		t.Errorf("bf16 tolerance share %v, want 0.25", c.ToleranceShare)
	}
	c = Compare(test, ref, 3, ir.F32)
	if c.Pass || !strings.Contains(c.Reason, "not allclose at atol=1.0e-04 rtol=1.0e-04") || c.ToleranceShare < 40 {
		t.Errorf("fp32: %+v", c)
	}
	// The bound is atol + rtol·|ref|, judged against ref: 0.03 off on 0.5
	// is 0.03 <= 0.02 + 0.02·0.5 = 0.03 (passes, just), 0.031 is not.
	if c := Compare([]float32{0.53}, []float32{0.5}, 1, ir.BF16); !c.Pass {
		t.Errorf("on the bound: %+v", c)
	}
	if c := Compare([]float32{0.532}, []float32{0.5}, 1, ir.BF16); c.Pass {
		t.Errorf("past the bound: %+v", c)
	}
}

func TestCompareFailures(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name      string
		test, ref []float32
		rowLen    int
		want      string
	}{
		{"length mismatch", []float32{1, 2}, []float32{1, 2, 3}, 0, "shape mismatch: test has 2 values, ref has 3"},
		{"rows do not divide", []float32{1, 2, 3}, []float32{1, 2, 3}, 2, "are not rows of 2"},
		{"empty", nil, nil, 1, "nothing to compare"},
		{"NaN in test", []float32{1, nan}, []float32{1, 2}, 2, "test values contain NaN/Inf (1 of 2)"},
		{"Inf in test", []float32{inf, 2}, []float32{1, 2}, 2, "test values contain NaN/Inf"},
		{"Inf in ref", []float32{1, 2}, []float32{1, inf}, 2, "reference values contain NaN/Inf"},
		{"same Inf both sides", []float32{1, inf}, []float32{1, inf}, 2, "test values contain NaN/Inf"},
		// Within tolerance everywhere, but the argmax flips in the only row.
		{"top-1 flip", []float32{1.00001, 1}, []float32{1, 1.00001}, 2, "top1_agreement 0.0000 < floor 0.99"},
	}
	for _, c := range cases {
		got := Compare(c.test, c.ref, c.rowLen, ir.F32)
		if got.Pass || !strings.Contains(got.Reason, c.want) {
			t.Errorf("%s: %+v, want a FAIL with %q", c.name, got, c.want)
		}
	}
	if c := Compare([]float32{nan}, []float32{1}, 1, ir.F32); !math.IsInf(c.MaxAbsErr, 1) || !math.IsInf(c.KL, 1) {
		t.Errorf("NaN metrics: %+v", c)
	}
}

// 99 of 100 rows agreeing is enough; 98 is not.
func TestCompareTop1Floor(t *testing.T) {
	rows := func(flips int) ([]float32, []float32) {
		var test, ref []float32
		for r := range 100 {
			ref = append(ref, 1, 1.00001)
			if r < flips {
				test = append(test, 1.00001, 1)
			} else {
				test = append(test, 1, 1.00001)
			}
		}
		return test, ref
	}
	if c := Compare(first(rows(1)), second(rows(1)), 2, ir.F32); !c.Pass || c.Top1Agreement != 0.99 {
		t.Errorf("one flip: %+v", c)
	}
	if c := Compare(first(rows(2)), second(rows(2)), 2, ir.F32); c.Pass {
		t.Errorf("two flips: %+v", c)
	}
}

func first(a, _ []float32) []float32  { return a }
func second(_, b []float32) []float32 { return b }
