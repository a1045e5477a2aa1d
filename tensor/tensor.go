package tensor

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
)

// Tensor is a dense row-major array.
//
// Floating dtypes keep their values in F as float32, already rounded to the
// dtype's precision — or, for BF16 and F16 tensors held at their stored
// width (model weights: generated, read or memory-mapped from safetensors),
// as bit patterns in Half, and then F is nil. I32, I8, U8 and BOOL keep one
// value per element in I. I4 keeps the packed bytes in Packed (two elements
// per byte, low nibble first), exactly as stored in memory.
type Tensor struct {
	DType  ir.DType
	Shape  []int
	F      []float32
	I      []int32
	Packed []byte
	// Half holds a BF16 or F16 tensor's values at their stored width, one
	// bit pattern per element (nil otherwise). It may be a view of a
	// read-only file mapping: a tensor with Half is never written.
	Half []uint16
}

// HeldAtStoredWidth reports whether dt's values can be held in Half.
func HeldAtStoredWidth(dt ir.DType) bool { return dt == ir.BF16 || dt == ir.F16 }

// NewStored allocates a zeroed tensor at its stored width: BF16 and F16 in
// Half, every other dtype as New.
func NewStored(dt ir.DType, shape ...int) *Tensor {
	if !HeldAtStoredWidth(dt) {
		return New(dt, shape...)
	}
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Half: make([]uint16, Numel(shape))}
}

// ToHalf is the stored bit pattern of f in dt (BF16 or F16, rounded to
// nearest even); the widened value is Round(dt, f).
func ToHalf(dt ir.DType, f float32) uint16 {
	if dt == ir.F16 {
		return FloatToF16(f)
	}
	return FloatToBF16(f)
}

// FromHalf widens a stored BF16 or F16 bit pattern exactly.
func FromHalf(dt ir.DType, h uint16) float32 {
	if dt == ir.F16 {
		return F16ToFloat(h)
	}
	return BF16ToFloat(h)
}

// FloatCount is how many float values the tensor holds (in F or in Half).
func (t *Tensor) FloatCount() int {
	if t.Half != nil {
		return len(t.Half)
	}
	return len(t.F)
}

// ReadFloats fills dst with the float values from element off on, widening
// Half exactly; the range must lie inside the tensor.
func (t *Tensor) ReadFloats(dst []float32, off int) {
	if t.Half == nil {
		copy(dst, t.F[off:off+len(dst)])
		return
	}
	src := t.Half[off : off+len(dst)]
	if t.DType == ir.F16 {
		for i, h := range src {
			dst[i] = F16ToFloat(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = BF16ToFloat(h)
	}
}

// Numel is the number of elements of a shape.
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// New allocates a zeroed tensor.
func New(dt ir.DType, shape ...int) *Tensor {
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...)}
	n := Numel(shape)
	switch {
	case dt == ir.I4:
		t.Packed = make([]byte, (n+1)/2)
	case dt.IsFloat():
		t.F = make([]float32, n)
	default:
		t.I = make([]int32, n)
	}
	return t
}

// FromFloats builds a float tensor, rounding every value to dt.
func FromFloats(dt ir.DType, shape []int, vals []float32) (*Tensor, error) {
	if !dt.IsFloat() {
		return nil, fmt.Errorf("FromFloats: %s is not a floating dtype", dt)
	}
	if Numel(shape) != len(vals) {
		return nil, fmt.Errorf("FromFloats: shape %v holds %d values, got %d", shape, Numel(shape), len(vals))
	}
	t := &Tensor{DType: dt, Shape: append([]int(nil), shape...), F: make([]float32, len(vals))}
	for i, v := range vals {
		t.F[i] = Round(dt, v)
	}
	return t, nil
}

// FromInts builds an integer tensor (I32, I8, U8, BOOL).
func FromInts(dt ir.DType, shape []int, vals []int32) (*Tensor, error) {
	if dt.IsFloat() || dt == ir.I4 {
		return nil, fmt.Errorf("FromInts: %s is not an unpacked integer dtype", dt)
	}
	if Numel(shape) != len(vals) {
		return nil, fmt.Errorf("FromInts: shape %v holds %d values, got %d", shape, Numel(shape), len(vals))
	}
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), I: append([]int32(nil), vals...)}, nil
}

// Numel is the tensor's element count.
func (t *Tensor) Numel() int { return Numel(t.Shape) }

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...),
		F: append([]float32(nil), t.F...), I: append([]int32(nil), t.I...), Packed: append([]byte(nil), t.Packed...),
		Half: append([]uint16(nil), t.Half...)}
}

// Floats returns the values as float32 (Half widened and integers
// converted into a new slice; I4 unpacked as raw nibbles 0..15).
func (t *Tensor) Floats() []float32 {
	switch {
	case t.F != nil:
		return t.F
	case t.Half != nil:
		out := make([]float32, len(t.Half))
		t.ReadFloats(out, 0)
		return out
	case t.DType == ir.I4:
		n := t.Numel()
		out := make([]float32, n)
		for i := 0; i < n; i++ {
			out[i] = float32(Nibble(t.Packed, i))
		}
		return out
	default:
		out := make([]float32, len(t.I))
		for i, v := range t.I {
			out[i] = float32(v)
		}
		return out
	}
}

// Nibble returns element i (0..15) of a packed int4 byte array: element 2b is
// the low nibble of byte b, element 2b+1 the high nibble.
func Nibble(packed []byte, i int) int {
	b := packed[i/2]
	if i%2 == 0 {
		return int(b & 0x0f)
	}
	return int(b >> 4)
}

// Round rounds a float32 to the precision of dt (identity for F32 and for
// non-float dtypes).
func Round(dt ir.DType, f float32) float32 {
	switch dt {
	case ir.BF16:
		return BF16ToFloat(FloatToBF16(f))
	case ir.F16:
		return F16ToFloat(FloatToF16(f))
	case ir.F8E4M3, ir.F8E5M2:
		// fp8 storage is modelled at fp16 precision; no lowering emits it.
		return F16ToFloat(FloatToF16(f))
	}
	return f
}

// FloatToBF16 converts with round-to-nearest-even; NaN stays a quiet NaN.
func FloatToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	if f != f { // NaN
		return uint16(bits>>16) | 0x40
	}
	rounding := uint32(0x7fff) + (bits>>16)&1
	return uint16((bits + rounding) >> 16)
}

// BF16ToFloat widens a bf16 bit pattern.
func BF16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FloatToF16 converts to IEEE binary16 with round-to-nearest-even, handling
// subnormals, overflow to infinity and NaN.
func FloatToF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int32(bits>>23) & 0xff
	mant := bits & 0x7fffff
	switch {
	case exp == 0xff: // inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rem := mant & ((1 << shift) - 1)
		res := mant >> shift
		if rem > half || (rem == half && res&1 == 1) {
			res++
		}
		return sign | uint16(res)
	}
	res := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && res&1 == 1) {
		res++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(res)
}

// F16ToFloat widens an IEEE binary16 bit pattern.
func F16ToFloat(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: value = mant * 2^-24
		v := float32(mant) * float32(1.0/16777216.0)
		if sign != 0 {
			return -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
