package vm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// Int8, K = 5 with groups of 2 and only two groups: column 4 is a ragged
// tail that reuses the last group.
func int8Case(t *testing.T) (x, q, s *tensor.Tensor) {
	x = ft(t, ir.F32, shp(1, 5), 1, 2, 3, 4, 5)
	q = it(t, ir.I8, shp(2, 5), 1, -2, 3, -4, 5, -128, 127, 0, 10, -10)
	s = ft(t, ir.F16, shp(2, 2), 0.5, 0.25, 0.125, 2)
	return
}

func TestGEMVInt8RaggedGroups(t *testing.T) {
	x, q, s := int8Case(t)
	out := tensor.New(ir.F32, 1, 2)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, q, s}, out,
		ip("K", 5), ip("N_tile", 2), ip("n_off", 0), ip("qdtype", 6), ip("group", 2))
	// row 0 dequantises to [0.5 -1 0.75 -1 1.25], row 1 to [-16 15.875 0 20 -20].
	same(t, "int8 gemv", out.F, []float32{3, -4.25})

	// With zero points: (q − z)·s. GEMV's arity stops at three inputs, so
	// the four-input form is exercised on the kernel itself.
	z := ft(t, ir.F16, shp(2, 2), 1, -1, 0, 2)
	if err := opLinear([]*tensor.Tensor{x, q, s, z}, []*tensor.Tensor{out},
		ir.Params{ip("K", 5), ip("N_tile", 2), ip("n_off", 0), ip("qdtype", 6), ip("group", 2)}); err != nil {
		t.Fatal(err)
	}
	// row 0: [0 -3 4 -3 6]·s = [0 -1.5 1 -0.75 1.5]; row 1: [-128 127 -2 8 -12]·s.
	same(t, "int8 gemv with zeros", out.F, []float32{4.5, -52.25})

	deq := tensor.New(ir.F32, 2, 5)
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q, s, z}, deq, ip("qdtype", 6), ip("group", 2))
	same(t, "int8 dequant with zeros", deq.F, []float32{0, -1.5, 1, -0.75, 1.5, -16, 15.875, -4, 16, -24})
}

func TestInt4NibbleRule(t *testing.T) {
	x := ft(t, ir.F32, shp(1, 4), 1, 2, 3, 4)
	// Row 0 nibbles [0 15 8 9], row 1 [3 12 1 14], low nibble first.
	q := i4(shp(2, 4), 0, 15, 8, 9, 3, 12, 1, 14)
	if q.Packed[0] != 0xf0 || q.Packed[1] != 0x98 {
		t.Fatalf("packing helper: % x", q.Packed)
	}
	s := ft(t, ir.F16, shp(2, 2), 0.5, 1, 0.25, 0.5)
	out := tensor.New(ir.F32, 1, 2)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, q, s}, out,
		ip("K", 4), ip("N_tile", 2), ip("n_off", 0), ip("qdtype", 7), ip("group", 2))
	// Symmetric: q = nibble − 8 -> [-4 3.5 0 1] and [-1.25 1 -3.5 3].
	same(t, "int4 gemv", out.F, []float32{7, 2.25})

	one := ft(t, ir.F32, shp(1, 2), -1, -1)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, q, s}, one,
		ip("K", 4), ip("N_tile", 1), ip("n_off", 1), ip("qdtype", 7), ip("group", 2))
	same(t, "int4 gemv second tile", one.F, []float32{-1, 2.25})

	// docs/spec/rules.md R27: with zero points q = nibble − zero (no −8).
	z := ft(t, ir.F16, shp(2, 2), 8, 0, 3, 7)
	deq := tensor.New(ir.F32, 2, 4)
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q, s, z}, deq, ip("qdtype", 7), ip("group", 2))
	same(t, "int4 dequant with zeros", deq.F, []float32{-4, 3.5, 8, 9, 0, 2.25, -3, 3.5})
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q, s}, deq, ip("qdtype", 7), ip("group", 2))
	same(t, "int4 dequant symmetric", deq.F, []float32{-4, 3.5, 0, 1, -1.25, 1, -3.5, 3})
	if err := opLinear([]*tensor.Tensor{x, q, s, z}, []*tensor.Tensor{out},
		ir.Params{ip("K", 4), ip("N_tile", 2), ip("n_off", 0), ip("qdtype", 7), ip("group", 2)}); err != nil {
		t.Fatal(err)
	}
	// [-4 3.5 8 9]·x = 63, [0 2.25 -3 3.5]·x = 9.5.
	same(t, "int4 gemv with zeros", out.F, []float32{63, 9.5})
}

// Rows of an odd length straddle bytes: element 3 is the low nibble of
// byte 1.
func TestInt4OddRowLength(t *testing.T) {
	q := i4(shp(2, 3), 9, 10, 11, 7, 6, 5)
	s := ft(t, ir.F16, shp(2, 1), 1, 2)
	deq := tensor.New(ir.BF16, 2, 3)
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q, s}, deq, ip("qdtype", 7), ip("group", 3))
	same(t, "odd int4 dequant", deq.F, []float32{1, 2, 3, -2, -4, -6})
}

func TestQuantErrors(t *testing.T) {
	x, q, s := int8Case(t)
	out := tensor.New(ir.F32, 1, 2)
	base := []ir.Param{ip("K", 5), ip("N_tile", 2), ip("n_off", 0)}
	cases := map[string]struct {
		in []*tensor.Tensor
		ps []ir.Param
	}{
		"int4 qdtype on int8 weights": {[]*tensor.Tensor{x, q, s}, append(base, ip("qdtype", 7), ip("group", 2))},
		"group 0":                     {[]*tensor.Tensor{x, q, s}, append(base, ip("qdtype", 6), ip("group", 0))},
		"scales of the wrong size":    {[]*tensor.Tensor{x, q, ft(t, ir.F16, shp(3), 1, 1, 1)}, append(base, ip("qdtype", 6), ip("group", 2))},
	}
	for name, c := range cases {
		if err := kernelErr(ir.OpGEMVTile, c.in, out, c.ps...); err == nil {
			t.Errorf("%s: succeeded", name)
		}
	}
}

// An int8 weight is held one byte per element and the quantised kernels read
// it straight from those bytes with the numerics of the widened int32 form:
// GEMV (with and without zero points) and DEQUANT give the same bits on the
// same values held as I8 and as I32.
func TestInt8HeldAsStoredSameBits(t *testing.T) {
	const rows, cols, group = 7, 37, 8 // ragged last group
	rng := rand.New(rand.NewPCG(14, 8))
	vals := make([]int32, rows*cols)
	for i := range vals {
		vals[i] = int32(rng.IntN(256)) - 128
	}
	vals[0], vals[1] = -128, 127
	q8, err := tensor.FromInts(ir.I8, []int{rows, cols}, vals)
	if err != nil {
		t.Fatal(err)
	}
	if len(q8.Bytes) != rows*cols || q8.I != nil {
		t.Fatalf("int8 weight holds %d bytes and %d int32s, want %d bytes only", len(q8.Bytes), len(q8.I), rows*cols)
	}
	q32 := it(t, ir.I32, shp(rows, cols), vals...)
	nGroups := (cols + group - 1) / group
	randF := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x := ft(t, ir.F32, shp(1, cols), randF(cols)...)
	s := ft(t, ir.F16, shp(rows, nGroups), randF(rows*nGroups)...)
	z := ft(t, ir.F16, shp(rows, nGroups), randF(rows*nGroups)...)
	params := ir.Params{ip("K", cols), ip("N_tile", rows), ip("n_off", 0), ip("qdtype", 6), ip("group", group)}
	for _, zeros := range [][]*tensor.Tensor{nil, {z}} {
		var got, want [rows]float32
		for _, c := range []struct {
			q   *tensor.Tensor
			out []float32
		}{{q8, got[:]}, {q32, want[:]}} {
			o := tensor.New(ir.F32, 1, rows)
			if err := opLinear(append([]*tensor.Tensor{x, c.q, s}, zeros...), []*tensor.Tensor{o}, params); err != nil {
				t.Fatal(err)
			}
			copy(c.out, o.F)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("zeros %v: gemv[%d] = %v from int8 bytes, %v from int32", zeros != nil, i, got[i], want[i])
			}
		}
	}
	d8, d32 := tensor.New(ir.F32, rows, cols), tensor.New(ir.F32, rows, cols)
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q8, s, z}, d8, ip("qdtype", 6), ip("group", group))
	kernel(t, ir.OpDEQUANT, []*tensor.Tensor{q32, s, z}, d32, ip("qdtype", 6), ip("group", group))
	for i := range d8.F {
		if math.Float32bits(d8.F[i]) != math.Float32bits(d32.F[i]) {
			t.Fatalf("dequant[%d] = %v from int8 bytes, %v from int32", i, d8.F[i], d32.F[i])
		}
	}
}
