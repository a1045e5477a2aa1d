//go:build !amd64 || purego

package vm

// dotBF16Rows sets dst[j] = dotBF16(x, row j of w), w holding len(dst)
// rows of len(x) bf16 values: the portable form, one row at a time (on
// amd64, dot_amd64.go runs four rows side by side in AVX2 registers with
// the same results bit for bit).
func dotBF16Rows(x []float32, w []uint16, dst []float32) {
	k := len(x)
	for j := range dst {
		dst[j] = dotBF16(x, w[j*k:(j+1)*k])
	}
}
