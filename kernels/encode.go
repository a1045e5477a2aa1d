package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// CheckBinding checks a host tensor against the buffer it is bound to (docs/spec/rules.md R26):
// the same shape, and the same dtype, except that a floating tensor may be
// bound to any floating buffer the device stores (it is rounded on upload,
// as the reference casts weights to the buffer dtype).
func CheckBinding(b *ir.Buffer, t *tensor.Tensor) error {
	if t == nil {
		return fmt.Errorf("buffer %d (%s): no tensor bound", b.ID, b.Name)
	}
	if !slices.Equal(t.Shape, b.Shape) {
		return fmt.Errorf("buffer %d (%s): bound tensor has shape %v, buffer has %v", b.ID, b.Name, t.Shape, b.Shape)
	}
	if t.DType != b.DType && !(t.DType.IsFloat() && b.DType.IsFloat()) {
		return fmt.Errorf("buffer %d (%s): bound tensor is %s, buffer is %s", b.ID, b.Name, t.DType, b.DType)
	}
	if !deviceStores(b.DType) {
		return fmt.Errorf("buffer %d (%s): dtype %s is not supported on the device", b.ID, b.Name, b.DType)
	}
	n := t.Numel()
	switch {
	case t.DType == ir.I4:
		if len(t.Packed) != (n+1)/2 {
			return fmt.Errorf("buffer %d (%s): packed int4 tensor has %d bytes, want %d", b.ID, b.Name, len(t.Packed), (n+1)/2)
		}
	case t.DType.IsFloat():
		if t.FloatCount() != n {
			return fmt.Errorf("buffer %d (%s): tensor has %d values, shape needs %d", b.ID, b.Name, t.FloatCount(), n)
		}
	default:
		if t.IntCount() != n {
			return fmt.Errorf("buffer %d (%s): tensor has %d values, shape needs %d", b.ID, b.Name, t.IntCount(), n)
		}
	}
	return nil
}

// deviceStores reports whether the device kernels read and write the dtype.
func deviceStores(d ir.DType) bool {
	switch d {
	case ir.F32, ir.F16, ir.BF16, ir.I32, ir.I8, ir.I4, ir.U8, ir.BOOL:
		return true
	}
	return false
}

// EncodeTensor returns the device bytes of t stored as buffer b (after
// CheckBinding). A weight held at its stored width in the buffer's dtype is
// copied as it is; any other float tensor is converted value by value.
func EncodeTensor(b *ir.Buffer, t *tensor.Tensor) ([]byte, error) {
	if err := CheckBinding(b, t); err != nil {
		return nil, err
	}
	n := t.Numel()
	le := binary.LittleEndian
	out := make([]byte, b.NBytes())
	if t.Half != nil && t.DType == b.DType {
		for i, h := range t.Half {
			le.PutUint16(out[2*i:], h)
		}
		return out, nil
	}
	switch b.DType {
	case ir.F32:
		for i, v := range t.Floats() {
			le.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case ir.F16:
		for i, v := range t.Floats() {
			le.PutUint16(out[2*i:], tensor.FloatToF16(v))
		}
	case ir.BF16:
		for i, v := range t.Floats() {
			le.PutUint16(out[2*i:], tensor.FloatToBF16(v))
		}
	case ir.I32:
		for i, v := range t.I {
			le.PutUint32(out[4*i:], uint32(v))
		}
	case ir.I8, ir.U8, ir.BOOL:
		copy(out, t.Bytes)
	case ir.I4:
		copy(out, t.Packed[:(n+1)/2])
	}
	return out, nil
}

// DecodeTensor reads a buffer's device bytes back into a host tensor.
func DecodeTensor(b *ir.Buffer, data []byte) (*tensor.Tensor, error) {
	if int64(len(data)) != b.NBytes() {
		return nil, fmt.Errorf("buffer %d (%s): %d bytes read back, want %d", b.ID, b.Name, len(data), b.NBytes())
	}
	if !deviceStores(b.DType) {
		return nil, fmt.Errorf("buffer %d (%s): dtype %s is not supported on the device", b.ID, b.Name, b.DType)
	}
	t := tensor.New(b.DType, b.Shape...)
	le := binary.LittleEndian
	switch b.DType {
	case ir.F32:
		for i := range t.F {
			t.F[i] = math.Float32frombits(le.Uint32(data[4*i:]))
		}
	case ir.F16:
		for i := range t.F {
			t.F[i] = tensor.F16ToFloat(le.Uint16(data[2*i:]))
		}
	case ir.BF16:
		for i := range t.F {
			t.F[i] = tensor.BF16ToFloat(le.Uint16(data[2*i:]))
		}
	case ir.I32:
		for i := range t.I {
			t.I[i] = int32(le.Uint32(data[4*i:]))
		}
	case ir.I8, ir.U8, ir.BOOL:
		copy(t.Bytes, data)
	case ir.I4:
		copy(t.Packed, data)
	}
	return t, nil
}
