package model

import (
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// matrix is a [rows, cols] weight as the eager pass reads it: the
// tensor's own storage, never a copy. F32 weights are float32 values; BF16
// and F16 weights are held at their stored width (tensor.Tensor.Half), so a
// decode step reads 2 bytes per weight, as the device does. A bf16 value
// widens with a shift inside the dot product; an fp16 row is widened into a
// scratch row first (its conversion is not a shift).
type matrix struct {
	rows, cols int
	dt         ir.DType
	f          []float32
	half       []uint16
}

// pad4 rounds n up to a multiple of 4.
func pad4(n int) int { return (n + 3) &^ 3 }

// newMatrix is the eager view of a 2-D float tensor.
func newMatrix(t *tensor.Tensor) *matrix {
	return &matrix{rows: t.Shape[0], cols: t.Shape[1], dt: t.DType, f: t.F, half: t.Half}
}

// row copies row r into dst[:cols].
func (m *matrix) row(r int, dst []float32) {
	if m.half == nil {
		copy(dst, m.f[r*m.cols:(r+1)*m.cols])
		return
	}
	src := m.half[r*m.cols : (r+1)*m.cols]
	for i, h := range src {
		dst[i] = tensor.FromHalf(m.dt, h)
	}
}

// dot is row r · x in float32, element i accumulated in lane i mod 4 and the
// lanes summed as (l0+l1)+(l2+l3). x must hold pad4(cols) values, zero past
// cols; scratch (cols values) is used for fp16 rows.
func (m *matrix) dot(r int, x, scratch []float32) float32 {
	switch {
	case m.half == nil:
		return dotF32(m.f[r*m.cols:(r+1)*m.cols], x)
	case m.dt == ir.BF16:
		return dotBF16(m.half[r*m.cols:(r+1)*m.cols], x)
	}
	m.row(r, scratch)
	return dotF32(scratch[:m.cols], x)
}

func dotF32(w, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	n := len(w) &^ 3
	for i := 0; i < n; i += 4 {
		ws, xs := w[i:i+4:i+4], x[i:i+4:i+4]
		s0 += ws[0] * xs[0]
		s1 += ws[1] * xs[1]
		s2 += ws[2] * xs[2]
		s3 += ws[3] * xs[3]
	}
	switch rem, xr := w[n:], x[n:]; len(rem) {
	case 3:
		s2 += rem[2] * xr[2]
		fallthrough
	case 2:
		s1 += rem[1] * xr[1]
		fallthrough
	case 1:
		s0 += rem[0] * xr[0]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotBF16 is the bf16 row w · x with a row that does not fill its last group
// of 4 read as padded with zero weights, every lane taking a product (x is
// zero past len(w)).
func dotBF16(w []uint16, x []float32) float32 {
	x = x[:pad4(len(w))]
	var s0, s1, s2, s3 float32
	n := len(w) &^ 3
	for i := 0; i < n; i += 4 {
		ws, xs := w[i:i+4:i+4], x[i:i+4:i+4]
		s0 += tensor.BF16ToFloat(ws[0]) * xs[0]
		s1 += tensor.BF16ToFloat(ws[1]) * xs[1]
		s2 += tensor.BF16ToFloat(ws[2]) * xs[2]
		s3 += tensor.BF16ToFloat(ws[3]) * xs[3]
	}
	if n < len(w) {
		var ws [4]uint16
		copy(ws[:], w[n:])
		xs := x[n : n+4 : n+4]
		s0 += tensor.BF16ToFloat(ws[0]) * xs[0]
		s1 += tensor.BF16ToFloat(ws[1]) * xs[1]
		s2 += tensor.BF16ToFloat(ws[2]) * xs[2]
		s3 += tensor.BF16ToFloat(ws[3]) * xs[3]
	}
	return (s0 + s1) + (s2 + s3)
}

// matvec is one projection of a decode step: out = round(x · mᵀ).
type matvec struct {
	m      *matrix
	x, out []float32
}

// parallelMinMACs is the work below which a group of projections runs on
// the calling goroutine.
const parallelMinMACs = 1 << 16

// matvecs runs projections, splitting output rows across workers. Every row
// is computed by one goroutine in a fixed order, so the result is the same
// for any worker count.
func matvecs(dt ir.DType, workers int, jobs ...matvec) {
	total := 0
	for _, j := range jobs {
		total += j.m.rows * j.m.cols
	}
	if workers <= 1 || total < parallelMinMACs {
		for _, j := range jobs {
			matvecRows(dt, j, 0, j.m.rows)
		}
		return
	}
	type chunk struct {
		job    int
		lo, hi int
	}
	per := max(total/(workers*8), parallelMinMACs/4)
	var chunks []chunk
	for i, j := range jobs {
		rows := max(1, per/max(j.m.cols, 1))
		for lo := 0; lo < j.m.rows; lo += rows {
			chunks = append(chunks, chunk{i, lo, min(lo+rows, j.m.rows)})
		}
	}
	parallelForN(workers, len(chunks), func(c int) {
		ch := chunks[c]
		matvecRows(dt, jobs[ch.job], ch.lo, ch.hi)
	})
}

func matvecRows(dt ir.DType, j matvec, lo, hi int) {
	var scratch []float32
	if j.m.half != nil && j.m.dt != ir.BF16 {
		scratch = make([]float32, j.m.cols)
	}
	for r := lo; r < hi; r++ {
		j.out[r] = tensor.Round(dt, j.m.dot(r, j.x, scratch))
	}
}
