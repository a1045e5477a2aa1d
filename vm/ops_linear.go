package vm

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// opLinear is GEMV_TILE and GEMM_TILE: out[m, n_off+j] = x[m, :] ·
// W[n_off+j, :] (+ bias[n_off+j]) for j < N_tile, with x viewed as [M, K]
// (M from x; M_tile and m_off are placement hints) and W in nn.Linear layout
// [N, K]. With params.qdtype 6 (int8) or 7 (int4) and a third input the
// weight is quantised: inputs [x, qW, scales(, zeros)], dequantised row by
// row (quantMatrix) before the same dot product. A bf16 weight held at its
// stored width is read as it is (dotBF16: the same results, bit for bit, as
// dot on its widened values); an fp16 one is widened row by row.
func opLinear(in, out []*tensor.Tensor, p ir.Params) error {
	x, err := inputFloats(in[0])
	if err != nil {
		return err
	}
	K, err := needInt(p, "K")
	if err != nil {
		return err
	}
	if K <= 0 || lastDim(in[0]) != K {
		return fmt.Errorf("param K = %d, the input's last dimension is %d", K, lastDim(in[0]))
	}
	M := len(x) / K
	nOff, err := needInt(p, "n_off")
	if err != nil {
		return err
	}
	nTile, err := needInt(p, "N_tile")
	if err != nil {
		return err
	}
	o := out[0]
	nOut := lastDim(o)
	if nOff < 0 || nTile <= 0 || nOff+nTile > nOut {
		return fmt.Errorf("tile [%d, %d) outside the output's %d columns", nOff, nOff+nTile, nOut)
	}
	if o.Numel() != M*nOut {
		return fmt.Errorf("output %s holds %d elements, want %d rows × %d", shapeString(o.Shape), o.Numel(), M, nOut)
	}
	qdtype, err := intOr(p, "qdtype", 0)
	if err != nil {
		return err
	}
	var row func(n int) []float32
	var bias []float32
	var packed []uint16 // a bf16 weight at its stored width
	if (qdtype == qdtypeI8 || qdtype == qdtypeI4) && len(in) >= 3 {
		row, err = quantRows(in, p, qdtype, K, nOff+nTile)
	} else {
		row, packed, bias, err = floatRows(in, K, nOff+nTile)
	}
	if err != nil {
		return err
	}
	res := make([]float32, M*nTile)
	if packed != nil {
		// Every row of the tile against each input row at once
		// (dotBF16Rows, which may run several rows side by side).
		tile := packed[nOff*K : (nOff+nTile)*K]
		for m := range M {
			dotBF16Rows(x[m*K:(m+1)*K], tile, res[m*nTile:(m+1)*nTile])
		}
	}
	for j := range nTile {
		n := nOff + j
		var w []float32
		if packed == nil {
			w = row(n)
		}
		var b float32
		if bias != nil {
			b = bias[n]
		}
		for m := range M {
			v := res[m*nTile+j]
			if packed == nil {
				v = dot(x[m*K:(m+1)*K], w)
			}
			if bias != nil {
				v += b
			}
			res[m*nTile+j] = v
		}
	}
	for m := range M {
		if err := store(o, m*nOut+nOff, res[m*nTile:(m+1)*nTile]); err != nil {
			return err
		}
	}
	return nil
}

// floatRows serves the rows of a float weight [N, K] and the optional bias:
// a bf16 weight held at its stored width as its bit patterns (and no row
// function), an fp16 one widened row by row into one reused buffer, float32
// values without copying.
func floatRows(in []*tensor.Tensor, K, rowsNeeded int) (func(int) []float32, []uint16, []float32, error) {
	wt := in[1]
	if lastDim(wt) != K {
		return nil, nil, nil, fmt.Errorf("weight %s has rows of %d, K is %d", shapeString(wt.Shape), lastDim(wt), K)
	}
	var row func(int) []float32
	var packed []uint16
	n := wt.FloatCount()
	switch {
	case wt.Half != nil && wt.DType == ir.BF16:
		packed = wt.Half
	case wt.Half != nil:
		buf := make([]float32, K)
		row = func(r int) []float32 {
			wt.ReadFloats(buf, r*K)
			return buf
		}
	default:
		w, err := inputFloats(wt)
		if err != nil {
			return nil, nil, nil, err
		}
		n = len(w)
		row = func(r int) []float32 { return w[r*K : (r+1)*K] }
	}
	if n != wt.Numel() {
		return nil, nil, nil, fmt.Errorf("a %s%s tensor holds %d values", wt.DType, shapeString(wt.Shape), n)
	}
	if rows := n / K; rowsNeeded > rows {
		return nil, nil, nil, fmt.Errorf("tile needs weight rows up to %d, the weight has %d", rowsNeeded, rows)
	}
	var bias []float32
	if len(in) > 2 {
		var err error
		if bias, err = inputFloats(in[2]); err != nil {
			return nil, nil, nil, err
		}
		if len(bias) < rowsNeeded {
			return nil, nil, nil, fmt.Errorf("bias has %d values, the tile needs %d", len(bias), rowsNeeded)
		}
	}
	return row, packed, bias, nil
}

// quantRows serves dequantised rows of a quantised weight through one
// reused row buffer.
func quantRows(in []*tensor.Tensor, p ir.Params, qdtype, K, rowsNeeded int) (func(int) []float32, error) {
	qw := in[1]
	switch {
	case qdtype == qdtypeI4 && qw.DType != ir.I4:
		return nil, fmt.Errorf("qdtype 7 (int4) needs an I4 weight, got %s", qw.DType)
	case qdtype == qdtypeI8 && (qw.DType.IsFloat() || qw.DType == ir.I4):
		return nil, fmt.Errorf("qdtype 6 (int8) needs an integer weight, got %s", qw.DType)
	}
	if lastDim(qw) != K {
		return nil, fmt.Errorf("quantised weight %s has rows of %d, K is %d", shapeString(qw.Shape), lastDim(qw), K)
	}
	var zeros *tensor.Tensor
	if len(in) > 3 {
		zeros = in[3]
	}
	group, err := intOr(p, "group", K)
	if err != nil {
		return nil, err
	}
	m, err := newQuantMatrix("quantised weight", qw, in[2], zeros, group)
	if err != nil {
		return nil, err
	}
	if rowsNeeded > m.rows {
		return nil, fmt.Errorf("tile needs weight rows up to %d, the weight has %d", rowsNeeded, m.rows)
	}
	buf := make([]float32, K)
	return func(n int) []float32 {
		m.row(n, buf)
		return buf
	}, nil
}
