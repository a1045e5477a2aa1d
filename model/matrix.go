package model

import (
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// matrix is a [rows, cols] weight in the form the eager pass reads.
//
// F32 and F16 weights use the tensor's own float32 values (shared, not
// copied: fp16 values widen exactly, and the conversion per element would
// cost more than the extra bytes). BF16 weights are packed four to a uint64
// word — element 4j+i in bits 16i..16i+15 of word j — with each row padded
// to whole words, so a decode step reads 2 bytes per weight, as the device
// does, and widening is a shift.
type matrix struct {
	rows, cols int
	f          []float32
	bf         []uint64
	stride     int // words per row (bf16)
}

// pad4 rounds n up to a multiple of 4.
func pad4(n int) int { return (n + 3) &^ 3 }

// newMatrix builds the eager form of a 2-D float tensor.
func newMatrix(t *tensor.Tensor, workers int) *matrix {
	m := &matrix{rows: t.Shape[0], cols: t.Shape[1]}
	if t.DType != ir.BF16 {
		m.f = t.F
		return m
	}
	m.stride = pad4(m.cols) / 4
	m.bf = make([]uint64, m.rows*m.stride)
	const rowsPerJob = 256
	parallelForN(workers, (m.rows+rowsPerJob-1)/rowsPerJob, func(j int) {
		for r := j * rowsPerJob; r < min((j+1)*rowsPerJob, m.rows); r++ {
			src := t.F[r*m.cols : (r+1)*m.cols]
			dst := m.bf[r*m.stride : (r+1)*m.stride]
			for i, v := range src {
				dst[i/4] |= uint64(tensor.FloatToBF16(v)) << (16 * (i % 4))
			}
		}
	})
	return m
}

// row copies row r into dst[:cols].
func (m *matrix) row(r int, dst []float32) {
	if m.f != nil {
		copy(dst, m.f[r*m.cols:(r+1)*m.cols])
		return
	}
	words := m.bf[r*m.stride : (r+1)*m.stride]
	for i := 0; i < m.cols; i++ {
		dst[i] = tensor.BF16ToFloat(uint16(words[i/4] >> (16 * (i % 4))))
	}
}

// dot is row r · x in float32, element i accumulated in lane i mod 4 and the
// lanes summed as (l0+l1)+(l2+l3). x must hold pad4(cols) values, zero past
// cols.
func (m *matrix) dot(r int, x []float32) float32 {
	if m.f != nil {
		return dotF32(m.f[r*m.cols:(r+1)*m.cols], x)
	}
	return dotBF16(m.bf[r*m.stride:(r+1)*m.stride], x)
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

func dotBF16(words []uint64, x []float32) float32 {
	x = x[:4*len(words)]
	var s0, s1, s2, s3 float32
	for j, u := range words {
		xs := x[4*j : 4*j+4 : 4*j+4]
		lo, hi := uint32(u), uint32(u>>32)
		s0 += math.Float32frombits(lo<<16) * xs[0]
		s1 += math.Float32frombits(lo&0xffff0000) * xs[1]
		s2 += math.Float32frombits(hi<<16) * xs[2]
		s3 += math.Float32frombits(hi&0xffff0000) * xs[3]
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
	for r := lo; r < hi; r++ {
		j.out[r] = tensor.Round(dt, j.m.dot(r, j.x))
	}
}
