//go:build !(goexperiment.simd && amd64)

package vm

// dotBF16Rows sets dst[j] = dotBF16(x, row j of w), w holding len(dst)
// rows of len(x) bf16 values. This is the portable form, one row at a time;
// built with GOEXPERIMENT=simd on amd64, dot_simd_amd64.go runs four rows
// side by side in vector registers with the same results bit for bit.
func dotBF16Rows(x []float32, w []uint16, dst []float32) {
	k := len(x)
	for j := range dst {
		dst[j] = dotBF16(x, w[j*k:(j+1)*k])
	}
}
