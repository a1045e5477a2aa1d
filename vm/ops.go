package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// opFunc computes one op: read in, write out (both already checked against
// the op's arity), configured by params.
type opFunc func(in, out []*tensor.Tensor, p ir.Params) error

// kernels maps every opcode except FUSED (which runs a recipe) to its
// implementation.
var kernels [ir.OpFUSED]opFunc

func init() {
	kernels = [ir.OpFUSED]opFunc{
		ir.OpNOP:              func([]*tensor.Tensor, []*tensor.Tensor, ir.Params) error { return nil },
		ir.OpCOPY:             opCopy,
		ir.OpEMBED:            opEmbed,
		ir.OpRMSNORM:          opRMSNorm,
		ir.OpLAYERNORM:        opLayerNorm,
		ir.OpGEMVTile:         opLinear,
		ir.OpGEMMTile:         opLinear,
		ir.OpAttentionTile:    opAttention,
		ir.OpROPE:             opRoPE,
		ir.OpSiLUMul:          opSiLUMul,
		ir.OpGELU:             opGELU,
		ir.OpADD:              opAdd,
		ir.OpMUL:              opMul,
		ir.OpDEQUANT:          opDequant,
		ir.OpSOFTMAX:          opSoftmax,
		ir.OpAllreduceShard:   opAllreduce,
		ir.OpKVAppend:         opKVAppend,
		ir.OpSampleArgmax:     opArgmax,
		ir.OpAttentionCombine: opCombine,
	}
}

// runOp checks arity and runs one primitive op.
func runOp(op ir.Op, in, out []*tensor.Tensor, p ir.Params) error {
	spec, ok := op.Spec()
	if !ok || op == ir.OpFUSED {
		return fmt.Errorf("no kernel for opcode %d", int(op))
	}
	maxIn := spec.MaxInputs
	if maxIn == ir.Variadic {
		maxIn = ir.MaxInputs
	}
	if len(in) < spec.MinInputs || len(in) > maxIn {
		return fmt.Errorf("%s takes %d..%d inputs, got %d", op, spec.MinInputs, maxIn, len(in))
	}
	if len(out) < spec.NOutputs {
		return fmt.Errorf("%s writes %d outputs, got %d", op, spec.NOutputs, len(out))
	}
	for _, t := range in {
		if t == nil {
			return fmt.Errorf("%s: nil input", op)
		}
	}
	for _, t := range out {
		if t == nil {
			return fmt.Errorf("%s: nil output", op)
		}
	}
	return kernels[op](in, out, p)
}

// floats returns a tensor's values as float32: the float32 values of a float
// tensor (no copy), a tensor held at its stored width widened into a new
// slice (kernels that read weights read Half directly instead), integers
// converted, packed int4 as raw nibbles.
func floats(t *tensor.Tensor) []float32 {
	if t.DType.IsFloat() && t.Half == nil {
		return t.F
	}
	return t.Floats()
}

// ints returns a tensor's values as integers (floats truncated toward zero).
func ints(t *tensor.Tensor) []int64 {
	n := t.Numel()
	out := make([]int64, n)
	switch {
	case t.DType.IsFloat():
		vals := floats(t)
		for i := range out {
			if i < len(vals) {
				out[i] = int64(truncFloat(vals[i]))
			}
		}
	case t.DType == ir.I4:
		for i := range out {
			if i/2 < len(t.Packed) {
				out[i] = int64(tensor.Nibble(t.Packed, i))
			}
		}
	default:
		n := t.IntCount()
		for i := range out {
			if i < n {
				out[i] = int64(t.Int(i))
			}
		}
	}
	return out
}

func truncFloat(f float32) float64 {
	if f != f {
		return 0
	}
	v := math.Trunc(float64(f))
	return math.Max(math.Min(v, math.MaxInt32), math.MinInt32)
}

// castInt converts a float to an integer dtype's stored value: truncation
// toward zero, then the dtype's width (int8 and uint8 wrap as a C cast of
// the truncated value does; BOOL is v != 0).
func castInt(dt ir.DType, f float32) int32 {
	if dt == ir.BOOL {
		if f != 0 && f == f {
			return 1
		}
		return 0
	}
	v := int64(truncFloat(f))
	switch dt {
	case ir.I8:
		return int32(int8(v))
	case ir.U8:
		return int32(uint8(v))
	case ir.I4:
		return int32(v & 0xf)
	}
	return int32(v)
}

// store writes vals into out starting at element off, rounding each value
// to out's dtype.
func store(out *tensor.Tensor, off int, vals []float32) error {
	if off < 0 || off+len(vals) > out.Numel() {
		return fmt.Errorf("write of %d values at %d overruns an output of %d", len(vals), off, out.Numel())
	}
	dt := out.DType
	switch {
	case dt == ir.F32:
		if off+len(vals) > len(out.F) {
			return fmt.Errorf("output storage holds %d values", len(out.F))
		}
		copy(out.F[off:], vals)
	case dt.IsFloat():
		if off+len(vals) > len(out.F) {
			return fmt.Errorf("output storage holds %d values", len(out.F))
		}
		dst := out.F[off : off+len(vals)]
		for i, v := range vals {
			dst[i] = tensor.Round(dt, v)
		}
	case dt == ir.I4:
		if (off+len(vals)+1)/2 > len(out.Packed) {
			return fmt.Errorf("output storage holds %d packed bytes", len(out.Packed))
		}
		for i, v := range vals {
			e := off + i
			q := byte(castInt(ir.I4, v))
			if e%2 == 0 {
				out.Packed[e/2] = out.Packed[e/2]&0xf0 | q
			} else {
				out.Packed[e/2] = out.Packed[e/2]&0x0f | q<<4
			}
		}
	default:
		if off+len(vals) > out.IntCount() {
			return fmt.Errorf("output storage holds %d values", out.IntCount())
		}
		for i, v := range vals {
			out.SetInt(off+i, castInt(dt, v))
		}
	}
	return nil
}

// storeAll writes a whole output; vals must cover it exactly.
func storeAll(out *tensor.Tensor, vals []float32) error {
	if len(vals) != out.Numel() {
		return fmt.Errorf("result has %d values, output %s%s holds %d", len(vals), out.DType, shapeString(out.Shape), out.Numel())
	}
	return store(out, 0, vals)
}

// inputFloats returns input i's values and checks their count against its
// shape (a bound tensor is checked at bind time; this guards FUSED scratch
// and tests that call kernels directly).
func inputFloats(t *tensor.Tensor) ([]float32, error) {
	v := floats(t)
	if len(v) != t.Numel() {
		return nil, fmt.Errorf("a %s%s tensor holds %d values", t.DType, shapeString(t.Shape), len(v))
	}
	return v, nil
}

func lastDim(t *tensor.Tensor) int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}
