package vm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/tensor"
)

// dotBF16 must equal dot on the widened weights bit for bit, for every
// length (whole 8-lane steps and every tail).
func TestDotBF16EqualsDotOnWidenedWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 67; n++ {
		x := make([]float32, n)
		w := make([]uint16, n)
		wf := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			h := tensor.FloatToBF16(float32(rng.NormFloat64() * 0.1))
			w[i] = h
			wf[i] = tensor.BF16ToFloat(h)
		}
		if got, want := dotBF16(x, w), dot(x, wf); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: dotBF16 %v, dot %v", n, got, want)
		}
	}
}

// dotBF16Rows (the vector form where the build has one) equals dotBF16 row
// by row, bit for bit, for every length and row count around its groups.
func TestDotBF16RowsEqualsDotBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for k := 0; k <= 35; k++ {
		for rows := 0; rows <= 9; rows++ {
			x := make([]float32, k)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			w := make([]uint16, rows*k)
			for i := range w {
				w[i] = tensor.FloatToBF16(float32(rng.NormFloat64() * 0.1))
			}
			got := make([]float32, rows)
			dotBF16Rows(x, w, got)
			for j := range got {
				if want := dotBF16(x, w[j*k:(j+1)*k]); math.Float32bits(got[j]) != math.Float32bits(want) {
					t.Fatalf("k=%d rows=%d row %d: %v, want %v", k, rows, j, got[j], want)
				}
			}
		}
	}
}
