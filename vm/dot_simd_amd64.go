//go:build goexperiment.simd && amd64

package vm

import (
	"math"
	"simd/archsimd"
)

// hasAVX2 is whether the vector form of dotBF16Rows can run.
var hasAVX2 = archsimd.X86.AVX2()

// dotBF16Rows sets dst[j] = dotBF16(x, row j of w), w holding len(dst)
// rows of len(x) bf16 values. With AVX2 it keeps dotBF16's eight lanes as
// the eight float32 lanes of one vector register per row — element i
// multiplied and then added (two roundings, no fused multiply-add) into
// lane i mod 8 — and runs four rows side by side, so four independent
// additions hide each other's latency; the tail and the final tree are
// dotBF16's, so every result is dotBF16's bit for bit.
func dotBF16Rows(x []float32, w []uint16, dst []float32) {
	k := len(x)
	j := 0
	if hasAVX2 {
		for ; j+4 <= len(dst); j += 4 {
			w0, w1, w2, w3 := w[j*k:(j+1)*k], w[(j+1)*k:(j+2)*k], w[(j+2)*k:(j+3)*k], w[(j+3)*k:(j+4)*k]
			var a0, a1, a2, a3 archsimd.Float32x8
			i := 0
			for ; i+8 <= k; i += 8 {
				xv := archsimd.LoadFloat32x8Slice(x[i : i+8])
				a0 = a0.Add(xv.Mul(widenBF16x8(w0[i : i+8])))
				a1 = a1.Add(xv.Mul(widenBF16x8(w1[i : i+8])))
				a2 = a2.Add(xv.Mul(widenBF16x8(w2[i : i+8])))
				a3 = a3.Add(xv.Mul(widenBF16x8(w3[i : i+8])))
			}
			dst[j] = finishBF16(a0, x[i:], w0[i:])
			dst[j+1] = finishBF16(a1, x[i:], w1[i:])
			dst[j+2] = finishBF16(a2, x[i:], w2[i:])
			dst[j+3] = finishBF16(a3, x[i:], w3[i:])
		}
	}
	for ; j < len(dst); j++ {
		dst[j] = dotBF16(x, w[j*k:(j+1)*k])
	}
}

// widenBF16x8 widens eight bf16 values exactly (zero-extend, shift left 16).
func widenBF16x8(w []uint16) archsimd.Float32x8 {
	return archsimd.LoadUint16x8Slice(w).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8()
}

// finishBF16 adds the tail (fewer than eight elements, element t into lane
// t) to the lanes and sums them in dotBF16's tree.
func finishBF16(acc archsimd.Float32x8, x []float32, w []uint16) float32 {
	var a [8]float32
	acc.Store(&a)
	for lane, v := range x {
		a[lane] += v * math.Float32frombits(uint32(w[lane])<<16)
	}
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}
