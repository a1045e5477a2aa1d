package vm

import (
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
	"github.com/amk-dev/amk/tensor"
)

// ft builds a float tensor (values rounded to dt).
func ft(t testing.TB, dt ir.DType, shape []int, vals ...float32) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromFloats(dt, shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// it builds an unpacked integer tensor.
func it(t testing.TB, dt ir.DType, shape []int, vals ...int32) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromInts(dt, shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// i4 packs int4 nibbles (0..15), low nibble first.
func i4(shape []int, nibbles ...byte) *tensor.Tensor {
	x := tensor.New(ir.I4, shape...)
	for i, n := range nibbles {
		if i%2 == 0 {
			x.Packed[i/2] |= n & 0xf
		} else {
			x.Packed[i/2] |= (n & 0xf) << 4
		}
	}
	return x
}

func shp(d ...int) []int { return d }

func ip(k string, v int64) ir.Param   { return ir.IntParam(k, v) }
func fp(k string, v float64) ir.Param { return ir.FloatParam(k, v) }

// kernel runs one op directly.
func kernel(t testing.TB, op ir.Op, in []*tensor.Tensor, out *tensor.Tensor, ps ...ir.Param) {
	t.Helper()
	if err := runOp(op, in, []*tensor.Tensor{out}, ir.Params(ps)); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
}

// kernelErr runs one op and returns its error.
func kernelErr(op ir.Op, in []*tensor.Tensor, out *tensor.Tensor, ps ...ir.Param) error {
	return runOp(op, in, []*tensor.Tensor{out}, ir.Params(ps))
}

// near checks got against want (float64) within tol (absolute + relative).
func near(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		g := float64(got[i])
		if math.IsInf(want[i], 0) && g == want[i] {
			continue
		}
		if math.Abs(g-want[i]) > tol*(1+math.Abs(want[i])) || math.IsNaN(g) {
			t.Errorf("%s[%d] = %.9g, want %.9g", what, i, g, want[i])
		}
	}
}

// same checks bit-identical float slices.
func same(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v, want %v (bit-identical)", what, i, got[i], want[i])
		}
	}
}

// builder makes small programs by hand.
type builder struct{ p *ir.Program }

func newBuilder() *builder { return &builder{p: ir.NewProgram()} }

func (b *builder) buf(name string, kind ir.BufferKind, dt ir.DType, shape ...int) int {
	return b.p.AddBuffer(ir.Buffer{Name: name, Kind: kind, DType: dt, Shape: shape, Space: ir.HBM})
}

func (b *builder) weight(name string, dt ir.DType, shape ...int) int {
	src := name
	return b.p.AddBuffer(ir.Buffer{Name: name, Kind: ir.Weight, DType: dt, Shape: shape, Space: ir.HBM, Source: &src})
}

func (b *builder) counter(note string) int { return b.p.AddCounter(note) }

// task adds a task signalling ctr and waiting on waits.
func (b *builder) task(label string, op ir.Op, in, out []int, ctr int, waits []ir.Wait, ps ...ir.Param) int {
	return b.p.AddTask(ir.Task{Op: op, Inputs: in, Outputs: out, OutCounter: ctr, Waits: waits, Params: ir.Params(ps), Label: label})
}

func w(c, th int) ir.Wait { return ir.Wait{Counter: c, Threshold: th} }

func recipeParam(t testing.TB, js string) ir.Param {
	t.Helper()
	v, err := pyjson.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return ir.Param{Key: "recipe", Val: v}
}
