package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// opCopy: out = in, cast to out's dtype. Integer to integer copies keep
// every bit of the value.
func opCopy(in, out []*tensor.Tensor, _ ir.Params) error {
	src, dst := in[0], out[0]
	if src.Numel() != dst.Numel() {
		return fmt.Errorf("COPY: input has %d elements, output %d", src.Numel(), dst.Numel())
	}
	if isUnpackedInt(src) && isUnpackedInt(dst) && src.IntCount() == dst.IntCount() {
		for i := range src.IntCount() {
			dst.SetInt(i, narrowInt(dst.DType, int64(src.Int(i))))
		}
		return nil
	}
	vals, err := inputFloats(src)
	if err != nil {
		return err
	}
	return storeAll(dst, vals)
}

func isUnpackedInt(t *tensor.Tensor) bool { return !t.DType.IsFloat() && t.DType != ir.I4 }

// narrowInt stores an integer in an unpacked integer dtype.
func narrowInt(dt ir.DType, v int64) int32 {
	switch dt {
	case ir.I8:
		return int32(int8(v))
	case ir.U8:
		return int32(uint8(v))
	case ir.BOOL:
		if v != 0 {
			return 1
		}
		return 0
	}
	return int32(v)
}

// broadcast pairs two operands: equal sizes, or the smaller one's shape
// (leading 1s dropped) is a suffix of the larger's and it repeats.
func broadcast(op string, a, b *tensor.Tensor) (n int, err error) {
	na, nb := a.Numel(), b.Numel()
	if na == nb {
		return na, nil
	}
	big, small := a, b
	if nb > na {
		big, small = b, a
	}
	ss := trimOnes(small.Shape)
	bs := big.Shape
	ok := small.Numel() > 0 && len(ss) <= len(bs)
	for i := 1; ok && i <= len(ss); i++ {
		ok = ss[len(ss)-i] == bs[len(bs)-i]
	}
	if !ok {
		return 0, fmt.Errorf("%s: shapes %v and %v do not broadcast", op, a.Shape, b.Shape)
	}
	return big.Numel(), nil
}

func trimOnes(s []int) []int {
	for len(s) > 0 && s[0] == 1 {
		s = s[1:]
	}
	return s
}

// binary computes out[i] = f(a[i], b[i]) with broadcasting.
func binary(op string, in, out []*tensor.Tensor, f func(x, y float32) float32) error {
	n, err := broadcast(op, in[0], in[1])
	if err != nil {
		return err
	}
	a, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	b, err := inputFloats(in[1])
	if err != nil {
		return err
	}
	res := make([]float32, n)
	for i := range res {
		res[i] = f(a[i%len(a)], b[i%len(b)])
	}
	return storeAll(out[0], res)
}

// opAdd: out = f32(a) + f32(b).
func opAdd(in, out []*tensor.Tensor, _ ir.Params) error {
	return binary("ADD", in, out, func(x, y float32) float32 { return x + y })
}

// opMul: a·b for two inputs, a·params.scale (default 1.0) for one.
func opMul(in, out []*tensor.Tensor, p ir.Params) error {
	if len(in) == 2 {
		return binary("MUL", in, out, func(x, y float32) float32 { return x * y })
	}
	scale, err := floatOr(p, "scale", 1.0)
	if err != nil {
		return err
	}
	s := float32(scale)
	return unary(in, out, func(x float32) float32 { return x * s })
}

func unary(in, out []*tensor.Tensor, f func(x float32) float32) error {
	x, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	res := make([]float32, len(x))
	for i, v := range x {
		res[i] = f(v)
	}
	return storeAll(out[0], res)
}

// opGELU: exact GELU, x·Φ(x) = 0.5·x·(1 + erf(x/√2)).
func opGELU(in, out []*tensor.Tensor, _ ir.Params) error {
	return unary(in, out, gelu)
}

func gelu(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
}

// opSiLUMul: silu(gate)·up with silu(g) = g·sigmoid(g).
func opSiLUMul(in, out []*tensor.Tensor, _ ir.Params) error {
	if in[0].Numel() != in[1].Numel() {
		return fmt.Errorf("SILU_MUL: gate has %d elements, up %d", in[0].Numel(), in[1].Numel())
	}
	return binary("SILU_MUL", in, out, func(g, u float32) float32 { return silu(g) * u })
}

func silu(g float32) float32 {
	v := float64(g)
	return float32(v / (1 + math.Exp(-v)))
}

// opSoftmax: softmax over params.dim (default -1).
func opSoftmax(in, out []*tensor.Tensor, p ir.Params) error {
	x, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	rank := len(in[0].Shape)
	dim, err := intOr(p, "dim", -1)
	if err != nil {
		return err
	}
	if rank == 0 {
		rank = 1 // a scalar is one row of one
	}
	if dim < -rank || dim >= rank {
		return fmt.Errorf("SOFTMAX: dim %d out of range for rank %d", dim, rank)
	}
	if dim < 0 {
		dim += rank
	}
	shape := in[0].Shape
	axis, inner := 1, 1
	if len(shape) > 0 {
		axis = shape[dim]
		inner = tensor.Numel(shape[dim+1:])
	}
	res := make([]float32, len(x))
	if axis == 0 || inner == 0 {
		return storeAll(out[0], res)
	}
	outer := len(x) / (axis * inner)
	row := make([]float32, axis)
	for o := range outer {
		for j := 0; j < inner; j++ {
			base := o*axis*inner + j
			for k := range row {
				row[k] = x[base+k*inner]
			}
			softmaxInPlace(row)
			for k, v := range row {
				res[base+k*inner] = v
			}
		}
	}
	return storeAll(out[0], res)
}

// softmaxInPlace: exp(x − max) / Σ, accumulated in float32.
func softmaxInPlace(row []float32) {
	m := float32(math.Inf(-1))
	for _, v := range row {
		if v > m || v != v {
			m = v
		}
	}
	var sum float32
	for i, v := range row {
		e := float32(math.Exp(float64(v - m)))
		row[i] = e
		sum += e
	}
	for i := range row {
		row[i] /= sum
	}
}

// opAllreduce: the sum of every shard (the single-device stand-in for a
// tensor-parallel all-reduce).
func opAllreduce(in, out []*tensor.Tensor, _ ir.Params) error {
	acc, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	acc = append([]float32(nil), acc...)
	for k, t := range in[1:] {
		v, err := inputFloats(t)
		if err != nil {
			return err
		}
		if len(v) != len(acc) {
			return fmt.Errorf("ALLREDUCE_SHARD: shard %d has %d elements, shard 0 has %d", k+1, len(v), len(acc))
		}
		for i := range acc {
			acc[i] += v[i]
		}
	}
	return storeAll(out[0], acc)
}
