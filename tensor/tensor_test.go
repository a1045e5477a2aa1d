package tensor

import (
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func TestBF16RoundNearestEven(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1.0
		{0x3f808000, 0x3f80}, // exactly half, even stays
		{0x3f818000, 0x3f82}, // exactly half, odd rounds up
		{0x3f808001, 0x3f81}, // above half
		{0x7f7fffff, 0x7f80}, // max float rounds to inf
	}
	for _, c := range cases {
		if got := FloatToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("FloatToBF16(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
	if v := BF16ToFloat(FloatToBF16(float32(math.NaN()))); v == v {
		t.Error("NaN did not survive bf16")
	}
}

func TestF16Conversions(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {5.960464477539063e-08, 0x0001},
		{0.000060975552, 0x03ff}, {1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}, {1.00146484375, 0x3c02},
	}
	for _, c := range cases {
		if got := FloatToF16(c.in); got != c.want {
			t.Errorf("FloatToF16(%v) = %#x, want %#x", c.in, got, c.want)
		}
	}
	for h := range 0x7c00 {
		if got := FloatToF16(F16ToFloat(uint16(h))); got != uint16(h) {
			t.Fatalf("f16 round trip of %#x gave %#x", h, got)
		}
	}
}

func TestRoundAndNibbles(t *testing.T) {
	if Round(ir.F32, 1.0001) != 1.0001 {
		t.Error("F32 rounding changed the value")
	}
	if Round(ir.BF16, 1.0001) != 1 {
		t.Error("BF16 rounding kept too many bits")
	}
	packed := []byte{0x21, 0xf3}
	want := []int{1, 2, 3, 15}
	for i, w := range want {
		if Nibble(packed, i) != w {
			t.Errorf("nibble %d = %d, want %d", i, Nibble(packed, i), w)
		}
	}
}

func TestByteHeldIntegers(t *testing.T) {
	vals := []int32{0, -1, 127, -128, 5}
	q, err := FromInts(ir.I8, []int{5}, vals)
	if err != nil {
		t.Fatal(err)
	}
	if string(q.Bytes) != "\x00\xff\x7f\x80\x05" || q.I != nil {
		t.Fatalf("int8 held as % x (I %v), want one two's-complement byte per element", q.Bytes, q.I)
	}
	for i, v := range vals {
		if q.Int(i) != v || q.Floats()[i] != float32(v) {
			t.Errorf("element %d reads %d / %v, want %d", i, q.Int(i), q.Floats()[i], v)
		}
	}
	c := q.Clone()
	c.SetInt(0, -7)
	if q.Int(0) != 0 || c.Int(0) != -7 || c.IntCount() != 5 {
		t.Errorf("clone shares bytes or lost the write: %d, %d", q.Int(0), c.Int(0))
	}
	u := New(ir.U8, 2)
	u.SetInt(1, 255)
	if len(u.Bytes) != 2 || u.Int(1) != 255 || New(ir.BOOL, 3).IntCount() != 3 || New(ir.I32, 3).IntCount() != 3 {
		t.Errorf("U8/BOOL/I32 storage: %v %d", u.Bytes, u.Int(1))
	}
	for _, c := range []struct {
		dt ir.DType
		v  int32
	}{{ir.I8, 128}, {ir.I8, -129}, {ir.U8, -1}, {ir.U8, 256}, {ir.BOOL, 256}} {
		if _, err := FromInts(c.dt, []int{1}, []int32{c.v}); err == nil {
			t.Errorf("FromInts(%s, %d) accepted a value the dtype cannot hold", c.dt, c.v)
		}
	}
}
