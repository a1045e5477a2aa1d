//go:build amd64 && !purego

package vm

import (
	"math"

	"golang.org/x/sys/cpu"
)

// hasAVX2 is whether dotBF16x4AVX2 can run (the CPU and the OS support
// 256-bit registers).
var hasAVX2 = cpu.X86.HasAVX2

// dotBF16x4AVX2 runs dotBF16's eight-lane loop over blocks·8 elements for
// four bf16 rows against one x, each row's eight lanes in the eight float32
// lanes of its own 256-bit register: element i is widened (zero-extend,
// shift left 16), multiplied by x[i] and the product then added (two
// roundings, no fused multiply-add) into lane i mod 8. acc[r] receives row
// r's lanes. (dot_amd64.s)
//
//go:noescape
func dotBF16x4AVX2(x *float32, w0, w1, w2, w3 *uint16, blocks int, acc *[4][8]float32)

// dotBF16Rows sets dst[j] = dotBF16(x, row j of w), w holding len(dst)
// rows of len(x) bf16 values. With AVX2, four rows run side by side
// (dotBF16x4AVX2: four independent vector additions hide each other's
// latency) and the tail and the final tree are dotBF16's, so every result
// is dotBF16's bit for bit; without it, or for the last rows, dotBF16 runs
// row by row.
func dotBF16Rows(x []float32, w []uint16, dst []float32) {
	k := len(x)
	j := 0
	if blocks := k / 8; hasAVX2 && blocks > 0 {
		var acc [4][8]float32
		for ; j+4 <= len(dst); j += 4 {
			rows := w[j*k : (j+4)*k]
			dotBF16x4AVX2(&x[0], &rows[0], &rows[k], &rows[2*k], &rows[3*k], blocks, &acc)
			for r := range 4 {
				dst[j+r] = finishBF16(&acc[r], x[8*blocks:], rows[r*k+8*blocks:(r+1)*k])
			}
		}
	}
	for ; j < len(dst); j++ {
		dst[j] = dotBF16(x, w[j*k:(j+1)*k])
	}
}

// finishBF16 adds the tail (fewer than eight elements, element t into lane
// t) to the lanes and sums them in dotBF16's tree.
func finishBF16(a *[8]float32, x []float32, w []uint16) float32 {
	for lane, v := range x {
		a[lane] += v * math.Float32frombits(uint32(w[lane])<<16)
	}
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}
