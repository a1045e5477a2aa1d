package vm

import (
	"fmt"
	"math"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// normRows checks a row-wise norm's operands: x holds whole rows of hidden
// values and every other operand exactly hidden values.
func normRows(op string, in, out []*tensor.Tensor, p ir.Params) (x []float32, params [][]float32, hidden int, err error) {
	x, err = inputFloats(in[0])
	if err != nil {
		return nil, nil, 0, err
	}
	hidden, err = intOr(p, "hidden", lastDim(in[0]))
	if err != nil {
		return nil, nil, 0, err
	}
	if hidden <= 0 || len(x)%hidden != 0 {
		return nil, nil, 0, fmt.Errorf("%s: hidden %d does not divide the input's %d elements", op, hidden, len(x))
	}
	for k, t := range in[1:] {
		v, err := inputFloats(t)
		if err != nil {
			return nil, nil, 0, err
		}
		if len(v) != hidden {
			return nil, nil, 0, fmt.Errorf("%s: operand %d has %d elements, hidden is %d", op, k+1, len(v), hidden)
		}
		params = append(params, v)
	}
	if out[0].Numel() != len(x) {
		return nil, nil, 0, fmt.Errorf("%s: input has %d elements, output %d", op, len(x), out[0].Numel())
	}
	return x, params, hidden, nil
}

// opRMSNorm: r = rsqrt(mean(x²) + eps) per row; out = (x·r)·w. eps
// defaults to 1e-6; rows are numel/hidden.
func opRMSNorm(in, out []*tensor.Tensor, p ir.Params) error {
	x, ws, h, err := normRows("RMSNORM", in, out, p)
	if err != nil {
		return err
	}
	eps, err := floatOr(p, "eps", 1e-6)
	if err != nil {
		return err
	}
	w := ws[0]
	res := make([]float32, len(x))
	for r := 0; r < len(x); r += h {
		row := x[r : r+h]
		mean := sumSquares(row) / float32(h)
		rs := float32(1 / math.Sqrt(float64(mean+float32(eps))))
		dst := res[r : r+h]
		for i, v := range row {
			dst[i] = v * rs * w[i]
		}
	}
	return store(out[0], 0, res)
}

// opLayerNorm: (x − mean)/sqrt(var + eps)·w (+ b) per row of hidden values;
// the variance is biased; eps defaults to 1e-5.
func opLayerNorm(in, out []*tensor.Tensor, p ir.Params) error {
	x, ps, h, err := normRows("LAYERNORM", in, out, p)
	if err != nil {
		return err
	}
	eps, err := floatOr(p, "eps", 1e-5)
	if err != nil {
		return err
	}
	w := ps[0]
	var b []float32
	if len(ps) > 1 {
		b = ps[1]
	}
	res := make([]float32, len(x))
	dev := make([]float32, h)
	for r := 0; r < len(x); r += h {
		row := x[r : r+h]
		mean := sum(row) / float32(h)
		for i, v := range row {
			dev[i] = v - mean
		}
		variance := sumSquares(dev) / float32(h)
		rs := float32(1 / math.Sqrt(float64(variance+float32(eps))))
		dst := res[r : r+h]
		for i, d := range dev {
			y := d * rs * w[i]
			if b != nil {
				y += b[i]
			}
			dst[i] = y
		}
	}
	return store(out[0], 0, res)
}
