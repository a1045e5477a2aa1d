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
// as bit patterns in Half, and then F is nil. I32 keeps one value per
// element in I; I8, U8 and BOOL keep one byte per element in Bytes. I4 keeps
// the packed bytes in Packed (two elements per byte, low nibble first),
// exactly as stored in memory. Int, SetInt and IntCount read and write I and
// Bytes alike.
type Tensor struct {
	DType  ir.DType
	Shape  []int
	F      []float32
	I      []int32
	Packed []byte
	// Bytes holds an I8, U8 or BOOL tensor's values at their stored width,
	// one byte per element (I8 as two's complement, BOOL as 0 or 1); nil
	// for every other dtype.
	Bytes []byte
	// Half holds a BF16 or F16 tensor's values at their stored width, one
	// bit pattern per element (nil otherwise). It may be a view of a
	// read-only file mapping: a tensor with Half is never written.
	Half []uint16
}

// HeldAtStoredWidth reports whether dt's values can be held in Half.
func HeldAtStoredWidth(dt ir.DType) bool { return dt == ir.BF16 || dt == ir.F16 }

// HeldInBytes reports whether dt's values are held in Bytes.
func HeldInBytes(dt ir.DType) bool { return dt == ir.I8 || dt == ir.U8 || dt == ir.BOOL }

// IntCount is how many integer values the tensor holds (in I or in Bytes).
func (t *Tensor) IntCount() int {
	if HeldInBytes(t.DType) {
		return len(t.Bytes)
	}
	return len(t.I)
}

// Int returns integer element i widened to int32 (I8 sign-extended, U8 and
// BOOL zero-extended); i must be below IntCount.
func (t *Tensor) Int(i int) int32 {
	switch t.DType {
	case ir.I8:
		return int32(int8(t.Bytes[i]))
	case ir.U8, ir.BOOL:
		return int32(t.Bytes[i])
	}
	return t.I[i]
}

// SetInt stores v as integer element i. For I8, U8 and BOOL only v's low
// byte is kept, so v must already fit the dtype; i must be below IntCount.
func (t *Tensor) SetInt(i int, v int32) {
	if HeldInBytes(t.DType) {
		t.Bytes[i] = byte(v)
		return
	}
	t.I[i] = v
}

// Ints returns the integer values widened to int32 in a new slice.
func (t *Tensor) Ints() []int32 {
	if !HeldInBytes(t.DType) {
		return append([]int32(nil), t.I...)
	}
	out := make([]int32, len(t.Bytes))
	for i := range out {
		out[i] = t.Int(i)
	}
	return out
}

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
	case HeldInBytes(dt):
		t.Bytes = make([]byte, n)
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

// FromInts builds an integer tensor (I32, I8, U8, BOOL). I8, U8 and BOOL
// values are held in Bytes and must fit the dtype (I8 −128..127; U8 and
// BOOL 0..255, as the device stores them).
func FromInts(dt ir.DType, shape []int, vals []int32) (*Tensor, error) {
	if dt.IsFloat() || dt == ir.I4 {
		return nil, fmt.Errorf("FromInts: %s is not an unpacked integer dtype", dt)
	}
	if Numel(shape) != len(vals) {
		return nil, fmt.Errorf("FromInts: shape %v holds %d values, got %d", shape, Numel(shape), len(vals))
	}
	if !HeldInBytes(dt) {
		return &Tensor{DType: dt, Shape: append([]int(nil), shape...), I: append([]int32(nil), vals...)}, nil
	}
	lo, hi := intRange(dt)
	b := make([]byte, len(vals))
	for i, v := range vals {
		if v < lo || v > hi {
			return nil, fmt.Errorf("FromInts: element %d = %d does not fit %s", i, v, dt)
		}
		b[i] = byte(v)
	}
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Bytes: b}, nil
}

// intRange is the range of values a byte-held dtype stores.
func intRange(dt ir.DType) (lo, hi int32) {
	switch dt {
	case ir.I8:
		return math.MinInt8, math.MaxInt8
	}
	return 0, math.MaxUint8
}

// Numel is the tensor's element count.
func (t *Tensor) Numel() int { return Numel(t.Shape) }

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...),
		F: append([]float32(nil), t.F...), I: append([]int32(nil), t.I...), Packed: append([]byte(nil), t.Packed...),
		Half: append([]uint16(nil), t.Half...), Bytes: append([]byte(nil), t.Bytes...)}
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
		for i := range n {
			out[i] = float32(Nibble(t.Packed, i))
		}
		return out
	default:
		out := make([]float32, t.IntCount())
		for i := range out {
			out[i] = float32(t.Int(i))
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
