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
