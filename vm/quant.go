package vm

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Quantised weight dtypes (params.qdtype), the ir.DType codes.
const (
	qdtypeI8 = int(ir.I8)
	qdtypeI4 = int(ir.I4)
)

// quantMatrix is a group-wise quantised [rows, cols] matrix with one rule
// for every op that dequantises (docs/spec/rules.md R27): q is the stored integer (int8 or any
// unpacked integer as is; packed int4 nibble − 8), or stored − zero when zero
// points are given; real = q·scale. Column k uses group k/group; a ragged
// tail (cols not a multiple of group) reuses the last group.
type quantMatrix struct {
	packed  []byte    // packed int4, two per byte, low nibble first
	bytes   []byte    // int8 (two's complement), uint8 or bool, one per byte, as stored
	signed  bool      // bytes holds int8
	ints    []int32   // int32 integers
	vals    []float32 // integer values held in a float tensor
	rows    int
	cols    int
	group   int
	nGroups int
	scales  []float32 // [rows, nGroups]
	zeros   []float32 // [rows, nGroups] or nil
}

// newQuantMatrix checks q (rows×cols elements, cols = its last dimension),
// scales and optional zeros ([rows, nGroups] each).
func newQuantMatrix(op string, q, scales, zeros *tensor.Tensor, group int) (*quantMatrix, error) {
	cols := lastDim(q)
	n := q.Numel()
	if cols <= 0 || n%cols != 0 {
		return nil, fmt.Errorf("%s: quantised operand %s%s has no rows", op, q.DType, shapeString(q.Shape))
	}
	m := &quantMatrix{rows: n / cols, cols: cols, group: group}
	switch {
	case q.DType == ir.I4:
		if len(q.Packed) != (n+1)/2 {
			return nil, fmt.Errorf("%s: int4 operand holds %d bytes, needs %d", op, len(q.Packed), (n+1)/2)
		}
		m.packed = q.Packed
	case q.DType.IsFloat():
		vals := floats(q)
		if len(vals) != n {
			return nil, fmt.Errorf("%s: operand holds %d values, needs %d", op, len(vals), n)
		}
		m.vals = vals
	default:
		if q.IntCount() != n {
			return nil, fmt.Errorf("%s: operand holds %d values, needs %d", op, q.IntCount(), n)
		}
		if tensor.HeldInBytes(q.DType) {
			m.bytes, m.signed = q.Bytes, q.DType == ir.I8
		} else {
			m.ints = q.I
		}
	}
	if group <= 0 {
		return nil, fmt.Errorf("%s: group must be >= 1, got %d", op, group)
	}
	s, err := inputFloats(scales)
	if err != nil {
		return nil, err
	}
	if len(s) == 0 || len(s)%m.rows != 0 {
		return nil, fmt.Errorf("%s: scales hold %d values, want rows (%d) × groups", op, len(s), m.rows)
	}
	m.scales, m.nGroups = s, len(s)/m.rows
	if zeros != nil {
		z, err := inputFloats(zeros)
		if err != nil {
			return nil, err
		}
		if len(z) != len(s) {
			return nil, fmt.Errorf("%s: zeros hold %d values, scales %d", op, len(z), len(s))
		}
		m.zeros = z
	}
	return m, nil
}

// row dequantises row r into dst[:cols].
func (m *quantMatrix) row(r int, dst []float32) {
	dst = dst[:m.cols]
	base := r * m.cols
	sc := m.scales[r*m.nGroups : (r+1)*m.nGroups]
	var zs []float32
	if m.zeros != nil {
		zs = m.zeros[r*m.nGroups : (r+1)*m.nGroups]
	}
	for k0 := 0; k0 < m.cols; {
		g := k0 / m.group
		k1 := k0 + m.group
		if g >= m.nGroups-1 {
			g, k1 = m.nGroups-1, m.cols
		}
		if k1 > m.cols {
			k1 = m.cols
		}
		s := sc[g]
		var z float32
		if zs != nil {
			z = zs[g]
		}
		switch {
		case m.packed != nil:
			if zs == nil {
				z = 8
			}
			for k := k0; k < k1; k++ {
				e := base + k
				nib := m.packed[e>>1]
				if e&1 == 1 {
					nib >>= 4
				}
				dst[k] = (float32(nib&0xf) - z) * s
			}
		case m.bytes != nil && m.signed:
			q := m.bytes[base+k0 : base+k1]
			for i, v := range q {
				dst[k0+i] = (float32(int8(v)) - z) * s
			}
		case m.bytes != nil:
			q := m.bytes[base+k0 : base+k1]
			for i, v := range q {
				dst[k0+i] = (float32(v) - z) * s
			}
		case m.ints != nil:
			q := m.ints[base+k0 : base+k1]
			for i, v := range q {
				dst[k0+i] = (float32(v) - z) * s
			}
		default:
			q := m.vals[base+k0 : base+k1]
			for i, v := range q {
				dst[k0+i] = (v - z) * s
			}
		}
		k0 = k1
	}
}

// opDequant: (q − zeros)·scales grouped along the last dimension, reshaped
// to the output.
func opDequant(in, out []*tensor.Tensor, p ir.Params) error {
	var zeros *tensor.Tensor
	if len(in) > 2 {
		zeros = in[2]
	}
	group, err := intOr(p, "group", lastDim(in[0]))
	if err != nil {
		return err
	}
	m, err := newQuantMatrix("DEQUANT", in[0], in[1], zeros, group)
	if err != nil {
		return err
	}
	res := make([]float32, m.rows*m.cols)
	for r := 0; r < m.rows; r++ {
		m.row(r, res[r*m.cols:])
	}
	return storeAll(out[0], res)
}
