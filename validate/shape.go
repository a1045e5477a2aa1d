package validate

import (
	"math/bits"

	"github.com/amk-dev/amk/ir"
)

// numel is the element count, saturating instead of overflowing (negative
// dimensions, reported as bad-shape, count as 0).
func numel(b *ir.Buffer) int64 {
	n := int64(1)
	for _, d := range b.Shape {
		if d <= 0 {
			return 0
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > uint64(maxInt64) {
			return maxInt64
		}
		n = int64(lo)
	}
	return n
}

// nbytes is the storage size, saturating.
func nbytes(b *ir.Buffer) int64 {
	n := numel(b)
	bitsPer := int64(b.DType.Bits())
	if bitsPer > 0 && n > (maxInt64-7)/bitsPer {
		return maxInt64 / 8
	}
	return (n*bitsPer + 7) / 8
}

// dim returns dimension i of the shape, counting from the end when i < 0.
func dim(b *ir.Buffer, i int) int64 {
	if i < 0 {
		i += len(b.Shape)
	}
	if i < 0 || i >= len(b.Shape) {
		return 1
	}
	return int64(b.Shape[i])
}

// rowsOf is the number of rows when the buffer is viewed as [rows, cols]
// with cols its last dimension.
func rowsOf(b *ir.Buffer) int64 {
	cols := dim(b, -1)
	if cols <= 0 {
		return 0
	}
	return numel(b) / cols
}

// isIndexType reports whether a dtype can carry ids or positions.
func isIndexType(d ir.DType) bool { return d == ir.I32 || d == ir.I8 || d == ir.U8 }
