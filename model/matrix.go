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
// scratch row first (its conversion is not a shift). A quantised weight
// (I8 bytes or packed I4 with its scales) is dequantised into the scratch
// row by docs/spec/quantization.md's rule before the same dot product.
type matrix struct {
	rows, cols int
	dt         ir.DType
	f          []float32
	half       []uint16
	q          *quantRows
}

// quantRows is a quantised weight's storage: int8 values (two's
// complement bytes) or int4 nibbles (q + 8, two per byte, low nibble
// first), and scales [rows, groups] widened to float32.
type quantRows struct {
	i8     []byte
	i4     []byte
	scales []float32
	group  int
	groups int
}

// pad4 rounds n up to a multiple of 4.
func pad4(n int) int { return (n + 3) &^ 3 }

// newMatrix is the eager view of a 2-D float tensor.
func newMatrix(t *tensor.Tensor) *matrix {
	return &matrix{rows: t.Shape[0], cols: t.Shape[1], dt: t.DType, f: t.F, half: t.Half}
}

// newQuantMatrix is the eager view of a quantised [rows, cols] weight with
// its scales [rows, groups], each group covering group columns.
func newQuantMatrix(t, scales *tensor.Tensor, group int) *matrix {
	m := &matrix{rows: t.Shape[0], cols: t.Shape[1], dt: t.DType}
	m.q = &quantRows{i8: t.Bytes, i4: t.Packed, scales: scales.Floats(), group: group, groups: scales.Shape[1]}
	return m
}

// row copies row r into dst[:cols] (a float weight).
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

// dequantRow writes row r of a quantised weight into dst[:cols]: column c
// is q·s in float32, q its integer (int4: nibble − 8) and s the scale of
// group c / group.
func (m *matrix) dequantRow(r int, dst []float32) {
	q := m.q
	base := r * m.cols
	for g := 0; g < q.groups; g++ {
		s := q.scales[r*q.groups+g]
		c0, c1 := g*q.group, min((g+1)*q.group, m.cols)
		if q.i4 == nil {
			for c, b := range q.i8[base+c0 : base+c1] {
				dst[c0+c] = float32(int8(b)) * s
			}
			continue
		}
		for c := c0; c < c1; c++ {
			e := base + c
			dst[c] = float32(int(q.i4[e>>1]>>(4*(e&1))&0xf)-8) * s
		}
	}
}

// dot is row r · x in float32 in dotF32's order. x must hold pad4(cols)
// values, zero past cols; scratch (cols values) is used for fp16 and
// quantised rows.
func (m *matrix) dot(r int, x, scratch []float32) float32 {
	switch {
	case m.q != nil:
		m.dequantRow(r, scratch)
		return dotF32(scratch[:m.cols], x)
	case m.half == nil:
		return dotF32(m.f[r*m.cols:(r+1)*m.cols], x)
	case m.dt == ir.BF16:
		return dotBF16(m.half[r*m.cols:(r+1)*m.cols], x)
	}
	m.row(r, scratch)
	return dotF32(scratch[:m.cols], x)
}

// dotF32 is Σ w[i]·x[i] over len(w) elements in the reference VM's order
// (see the package doc): element i accumulates in lane i mod 8 and the
// lanes are added as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func dotF32(w, x []float32) float32 {
	x = x[:len(w)]
	var l [8]float32
	n := len(w) &^ 7
	for i := 0; i < n; i += 8 {
		ws, xs := w[i:i+8:i+8], x[i:i+8:i+8]
		l[0] += ws[0] * xs[0]
		l[1] += ws[1] * xs[1]
		l[2] += ws[2] * xs[2]
		l[3] += ws[3] * xs[3]
		l[4] += ws[4] * xs[4]
		l[5] += ws[5] * xs[5]
		l[6] += ws[6] * xs[6]
		l[7] += ws[7] * xs[7]
	}
	for j, v := range w[n:] {
		l[j] += v * x[n+j]
	}
	return laneTree(&l)
}

// dotBF16 is dotF32 with the row held as bf16 bit patterns, each widened
// exactly (a shift) before its product: the same lanes and tree.
func dotBF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var l [8]float32
	n := len(w) &^ 7
	for i := 0; i < n; i += 8 {
		ws, xs := w[i:i+8:i+8], x[i:i+8:i+8]
		l[0] += tensor.BF16ToFloat(ws[0]) * xs[0]
		l[1] += tensor.BF16ToFloat(ws[1]) * xs[1]
		l[2] += tensor.BF16ToFloat(ws[2]) * xs[2]
		l[3] += tensor.BF16ToFloat(ws[3]) * xs[3]
		l[4] += tensor.BF16ToFloat(ws[4]) * xs[4]
		l[5] += tensor.BF16ToFloat(ws[5]) * xs[5]
		l[6] += tensor.BF16ToFloat(ws[6]) * xs[6]
		l[7] += tensor.BF16ToFloat(ws[7]) * xs[7]
	}
	for j, v := range w[n:] {
		l[j] += tensor.BF16ToFloat(v) * x[n+j]
	}
	return laneTree(&l)
}

// laneTree adds eight partial sums in the fixed tree of dotF32.
func laneTree(l *[8]float32) float32 {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
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
	if j.m.q != nil || (j.m.half != nil && j.m.dt != ir.BF16) {
		scratch = make([]float32, j.m.cols)
	}
	for r := lo; r < hi; r++ {
		j.out[r] = tensor.Round(dt, j.m.dot(r, j.x, scratch))
	}
}
