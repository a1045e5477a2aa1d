package kernels

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	floats := []float32{0, 1, -2.5, 3.140625, 1e-3, -65504}
	for _, dt := range []ir.DType{ir.F32, ir.F16, ir.BF16} {
		b := &ir.Buffer{ID: 3, Name: "w", DType: dt, Shape: []int{2, 3}}
		src, err := tensor.FromFloats(dt, []int{2, 3}, floats)
		if err != nil {
			t.Fatal(err)
		}
		data, err := EncodeTensor(b, src)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != b.NBytes() {
			t.Fatalf("%s: %d bytes", dt, len(data))
		}
		back, err := DecodeTensor(b, data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range floats {
			if back.F[i] != src.F[i] {
				t.Errorf("%s[%d]: %v != %v", dt, i, back.F[i], src.F[i])
			}
		}
	}
	// A weight held at its stored width encodes to the bytes of the same
	// values held as float32, into its own dtype and into the others.
	for _, dt := range []ir.DType{ir.F16, ir.BF16} {
		src, _ := tensor.FromFloats(dt, []int{2, 3}, floats)
		stored := tensor.NewStored(dt, 2, 3)
		for i, v := range src.F {
			stored.Half[i] = tensor.ToHalf(dt, v)
		}
		for _, bt := range []ir.DType{ir.F32, ir.F16, ir.BF16} {
			b := &ir.Buffer{ID: 3, Name: "w", DType: bt, Shape: []int{2, 3}}
			want, err1 := EncodeTensor(b, src)
			got, err2 := EncodeTensor(b, stored)
			if err1 != nil || err2 != nil || string(got) != string(want) {
				t.Errorf("%s weight into a %s buffer: % x, want % x (%v, %v)", dt, bt, got, want, err1, err2)
			}
		}
	}
	// Little-endian bf16 bits of 1.0 are 0x3f80.
	one, _ := tensor.FromFloats(ir.BF16, []int{1}, []float32{1})
	data, _ := EncodeTensor(&ir.Buffer{DType: ir.BF16, Shape: []int{1}}, one)
	if data[0] != 0x80 || data[1] != 0x3f {
		t.Errorf("bf16 1.0 encoded % x", data)
	}
	ints := []int32{0, -1, 127, -128, 5}
	for _, dt := range []ir.DType{ir.I32, ir.I8} {
		b := &ir.Buffer{DType: dt, Shape: []int{5}}
		src, _ := tensor.FromInts(dt, []int{5}, ints)
		data, err := EncodeTensor(b, src)
		if err != nil {
			t.Fatal(err)
		}
		if dt == ir.I8 && string(data) != "\x00\xff\x7f\x80\x05" {
			t.Errorf("int8 encoded % x, want 00 ff 7f 80 05", data)
		}
		back, _ := DecodeTensor(b, data)
		for i := range ints {
			if back.Int(i) != ints[i] {
				t.Errorf("%s[%d] = %d", dt, i, back.Int(i))
			}
		}
	}
	i4 := &tensor.Tensor{DType: ir.I4, Shape: []int{3}, Packed: []byte{0x21, 0x03}}
	data, err := EncodeTensor(&ir.Buffer{DType: ir.I4, Shape: []int{3}}, i4)
	if err != nil || len(data) != 2 || data[0] != 0x21 || data[1] != 0x03 {
		t.Errorf("i4: % x %v", data, err)
	}
}

func TestCheckBinding(t *testing.T) {
	b := &ir.Buffer{ID: 1, Name: "emb", DType: ir.BF16, Shape: []int{4, 2}}
	f32, _ := tensor.FromFloats(ir.F32, []int{4, 2}, make([]float32, 8))
	if err := CheckBinding(b, f32); err != nil {
		t.Errorf("float tensor into a bf16 buffer refused: %v", err)
	}
	wrong, _ := tensor.FromFloats(ir.BF16, []int{8}, make([]float32, 8))
	if err := CheckBinding(b, wrong); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("shape mismatch: %v", err)
	}
	ids, _ := tensor.FromInts(ir.I32, []int{4, 2}, make([]int32, 8))
	if err := CheckBinding(b, ids); err == nil || !strings.Contains(err.Error(), "I32") {
		t.Errorf("int into float: %v", err)
	}
	if err := CheckBinding(b, nil); err == nil {
		t.Error("nil tensor accepted")
	}
	short := &tensor.Tensor{DType: ir.BF16, Shape: []int{4, 2}, F: make([]float32, 3)}
	if err := CheckBinding(b, short); err == nil {
		t.Error("short tensor accepted")
	}
	fp8 := &ir.Buffer{DType: ir.F8E4M3, Shape: []int{1}}
	x, _ := tensor.FromFloats(ir.F32, []int{1}, []float32{1})
	if err := CheckBinding(fp8, x); err == nil {
		t.Error("fp8 buffer accepted")
	}
	// An int8 tensor holds one byte per element, so an out-of-range value is
	// refused when the tensor is built, before any encoding.
	if _, err := tensor.FromInts(ir.I8, []int{1}, []int32{300}); err == nil {
		t.Error("int8 overflow accepted")
	}
	short8 := &tensor.Tensor{DType: ir.I8, Shape: []int{2}, Bytes: []byte{1}}
	if _, err := EncodeTensor(&ir.Buffer{DType: ir.I8, Shape: []int{2}}, short8); err == nil {
		t.Error("int8 tensor with too few bytes accepted")
	}
	if _, err := DecodeTensor(b, make([]byte, 3)); err == nil {
		t.Error("short read-back accepted")
	}
}
