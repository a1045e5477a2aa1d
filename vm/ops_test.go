package vm

import (
	"math"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func TestCopyRoundsToOutputDType(t *testing.T) {
	// 1+2^-8 lies exactly between bf16 neighbours 1 and 1+2^-7: ties go to
	// the even mantissa, 1. 3.14159 rounds to 3.140625; 1+3·2^-8 to 1+2^-6.
	src := ft(t, ir.F32, shp(4), 1.00390625, 3.14159, 1.01171875, -2.5)
	out := tensor.New(ir.BF16, 4)
	kernel(t, ir.OpCOPY, []*tensor.Tensor{src}, out)
	same(t, "bf16 copy", out.F, []float32{1, 3.140625, 1.015625, -2.5})

	// fp16: 1+2^-11 ties to even (1); 65520 overflows to +Inf.
	h := tensor.New(ir.F16, 2)
	kernel(t, ir.OpCOPY, []*tensor.Tensor{ft(t, ir.F32, shp(2), 1.00048828125, 65520)}, h)
	same(t, "fp16 copy", h.F, []float32{1, float32(math.Inf(1))})

	toInt := tensor.New(ir.I32, 4)
	kernel(t, ir.OpCOPY, []*tensor.Tensor{ft(t, ir.F32, shp(4), 2.7, -2.7, 0.4, 100)}, toInt)
	if got := toInt.I; got[0] != 2 || got[1] != -2 || got[2] != 0 || got[3] != 100 {
		t.Errorf("float->int copy = %v, want [2 -2 0 100] (truncation)", got)
	}
	big := it(t, ir.I32, shp(1), 1<<30+1)
	dst := tensor.New(ir.I32, 1)
	kernel(t, ir.OpCOPY, []*tensor.Tensor{big}, dst)
	if dst.I[0] != 1<<30+1 {
		t.Errorf("int copy lost bits: %d", dst.I[0])
	}
	if err := kernelErr(ir.OpCOPY, []*tensor.Tensor{src}, tensor.New(ir.F32, 3)); err == nil {
		t.Error("COPY into a smaller output succeeded")
	}
	// Into int8 (held one byte per element): floats truncate then wrap as a
	// C cast; integers keep their low byte.
	i8 := tensor.New(ir.I8, 4)
	kernel(t, ir.OpCOPY, []*tensor.Tensor{ft(t, ir.F32, shp(4), 200.5, -2.7, 127, -128)}, i8)
	if string(i8.Bytes) != "\xc8\xfe\x7f\x80" {
		t.Errorf("float->int8 copy = % x, want c8 fe 7f 80", i8.Bytes)
	}
	kernel(t, ir.OpCOPY, []*tensor.Tensor{it(t, ir.I32, shp(4), 300, -1, 5, -129)}, i8)
	if string(i8.Bytes) != "\x2c\xff\x05\x7f" {
		t.Errorf("int32->int8 copy = % x, want 2c ff 05 7f", i8.Bytes)
	}
}

func TestAddMulAllreduce(t *testing.T) {
	a := ft(t, ir.F32, shp(2, 2), 1, 2, 3, 4)
	b := ft(t, ir.F32, shp(2, 2), 10, 20, 30, 40)
	out := tensor.New(ir.F32, 2, 2)
	kernel(t, ir.OpADD, []*tensor.Tensor{a, b}, out)
	same(t, "add", out.F, []float32{11, 22, 33, 44})

	row := ft(t, ir.F32, shp(2), 0.5, -1)
	kernel(t, ir.OpMUL, []*tensor.Tensor{a, row}, out)
	same(t, "mul broadcast", out.F, []float32{0.5, -2, 1.5, -4})

	kernel(t, ir.OpMUL, []*tensor.Tensor{a}, out, fp("scale", 0.25))
	same(t, "mul scale", out.F, []float32{0.25, 0.5, 0.75, 1})
	kernel(t, ir.OpMUL, []*tensor.Tensor{a}, out)
	same(t, "mul default scale", out.F, []float32{1, 2, 3, 4})

	// bf16 storage: 1 + 2^-9 is not representable and rounds to 1.
	ob := tensor.New(ir.BF16, 1)
	kernel(t, ir.OpADD, []*tensor.Tensor{ft(t, ir.F32, shp(1), 1), ft(t, ir.F32, shp(1), 1.0/512)}, ob)
	same(t, "bf16 add", ob.F, []float32{1})

	if err := kernelErr(ir.OpADD, []*tensor.Tensor{a, ft(t, ir.F32, shp(3), 1, 2, 3)}, out); err == nil {
		t.Error("ADD of [2 2] and [3] succeeded")
	}

	c := ft(t, ir.F32, shp(2, 2), 100, 200, 300, 400)
	kernel(t, ir.OpAllreduceShard, []*tensor.Tensor{a, b, c}, out)
	same(t, "allreduce", out.F, []float32{111, 222, 333, 444})
}

func TestGELUSiLUSoftmax(t *testing.T) {
	x := ft(t, ir.F32, shp(4), -1, 0, 1, 2)
	out := tensor.New(ir.F32, 4)
	kernel(t, ir.OpGELU, []*tensor.Tensor{x}, out)
	// x·Φ(x) from tables of the normal CDF.
	near(t, "gelu", out.F, []float64{-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416}, 1e-7)

	g := ft(t, ir.F32, shp(2), 1, -2)
	u := ft(t, ir.F32, shp(2), 2, 3)
	o2 := tensor.New(ir.F32, 2)
	kernel(t, ir.OpSiLUMul, []*tensor.Tensor{g, u}, o2)
	// silu(1)·2 = 2/(1+e^-1); silu(-2)·3 = -6/(1+e^2).
	near(t, "silu_mul", o2.F, []float64{2 / (1 + math.Exp(-1)), -6 / (1 + math.Exp(2))}, 1e-7)

	s := ft(t, ir.F32, shp(3), 1, 2, 3)
	o3 := tensor.New(ir.F32, 3)
	kernel(t, ir.OpSOFTMAX, []*tensor.Tensor{s}, o3)
	near(t, "softmax", o3.F, []float64{0.09003057317038046, 0.24472847105479764, 0.6652409557748219}, 1e-6)

	// dim 0 of [[0, 1], [ln 3, 1]]: column 0 is [1/4, 3/4], column 1 [1/2, 1/2].
	m := ft(t, ir.F32, shp(2, 2), 0, 1, float32(math.Log(3)), 1)
	o4 := tensor.New(ir.F32, 2, 2)
	kernel(t, ir.OpSOFTMAX, []*tensor.Tensor{m}, o4, ip("dim", 0))
	near(t, "softmax dim 0", o4.F, []float64{0.25, 0.5, 0.75, 0.5}, 1e-6)
	if err := kernelErr(ir.OpSOFTMAX, []*tensor.Tensor{m}, o4, ip("dim", 2)); err == nil {
		t.Error("softmax over dim 2 of a rank-2 tensor succeeded")
	}
}

func TestRMSNormLayerNorm(t *testing.T) {
	x := ft(t, ir.F32, shp(2, 4), 1, 2, 3, 4, -2, 0, 0, 2)
	wt := ft(t, ir.F32, shp(4), 1, 1, 2, 0.5)
	out := tensor.New(ir.F32, 2, 4)
	kernel(t, ir.OpRMSNORM, []*tensor.Tensor{x, wt}, out, fp("eps", 1e-6), ip("hidden", 4))
	r0 := 1 / math.Sqrt(30.0/4+1e-6) // mean of squares 7.5
	r1 := 1 / math.Sqrt(8.0/4+1e-6)  // mean of squares 2
	near(t, "rmsnorm", out.F, []float64{r0, 2 * r0, 6 * r0, 2 * r0, -2 * r1, 0, 0, r1}, 1e-6)

	b := ft(t, ir.F32, shp(4), 0, 0, 0, 1)
	ones := ft(t, ir.F32, shp(4), 1, 1, 1, 1)
	kernel(t, ir.OpLAYERNORM, []*tensor.Tensor{x, ones, b}, out, fp("eps", 1e-5), ip("hidden", 4))
	s0 := 1 / math.Sqrt(1.25+1e-5) // mean 2.5, variance 1.25
	s1 := 1 / math.Sqrt(2+1e-5)    // mean 0, variance 2
	near(t, "layernorm", out.F, []float64{-1.5 * s0, -0.5 * s0, 0.5 * s0, 1.5*s0 + 1, -2 * s1, 0, 0, 2*s1 + 1}, 1e-6)

	if err := kernelErr(ir.OpRMSNORM, []*tensor.Tensor{x, ft(t, ir.F32, shp(3), 1, 1, 1)}, out, fp("eps", 1e-6), ip("hidden", 4)); err == nil {
		t.Error("RMSNORM with a 3-value weight succeeded")
	}
	if err := kernelErr(ir.OpRMSNORM, []*tensor.Tensor{x, wt}, out, fp("eps", 1e-6), ip("hidden", 0)); err == nil {
		t.Error("RMSNORM with hidden 0 succeeded")
	}
}

func TestEmbedGathersAndReshapes(t *testing.T) {
	table := ft(t, ir.F32, shp(4, 3), 0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32)
	out := tensor.New(ir.BF16, 2, 3)
	kernel(t, ir.OpEMBED, []*tensor.Tensor{it(t, ir.I32, shp(2), 2, 0), table}, out, ip("hidden", 3))
	same(t, "embed", out.F, []float32{20, 21, 22, 0, 1, 2})

	// The flat->head reshape: ids [0], table = the flat (1, 8) activation,
	// hidden = head_dim 4.
	flat := ft(t, ir.F32, shp(1, 8), 1, 2, 3, 4, 5, 6, 7, 8)
	heads := tensor.New(ir.F32, 2, 4)
	kernel(t, ir.OpEMBED, []*tensor.Tensor{it(t, ir.I32, shp(1), 0), flat}, heads, ip("hidden", 4))
	same(t, "reshape", heads.F, flat.F)
	// B = 2 sequences: ids [0, 1] over (2, 4) -> (2, 2, 2).
	flat2 := ft(t, ir.F32, shp(2, 4), 1, 2, 3, 4, 5, 6, 7, 8)
	heads2 := tensor.New(ir.F32, 2, 2, 2)
	kernel(t, ir.OpEMBED, []*tensor.Tensor{it(t, ir.I32, shp(2), 0, 1), flat2}, heads2, ip("hidden", 2))
	same(t, "batched reshape", heads2.F, flat2.F)

	err := kernelErr(ir.OpEMBED, []*tensor.Tensor{it(t, ir.I32, shp(2), 4, 0), table}, out, ip("hidden", 3))
	if err == nil || !strings.Contains(err.Error(), "id 4") {
		t.Errorf("id 4 of a 4-row table: err = %v", err)
	}
}

func TestGEMVTileWritesOnlyItsColumns(t *testing.T) {
	x := ft(t, ir.F32, shp(1, 4), 1, 2, 3, 4)
	wt := ft(t, ir.F32, shp(3, 4),
		1, 0, 0, 0,
		0.5, 0.5, 0.5, 0.5,
		-1, 2, -3, 4)
	out := ft(t, ir.F32, shp(1, 3), -7, -7, -7)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, wt}, out, ip("K", 4), ip("N_tile", 2), ip("n_off", 1))
	same(t, "gemv tile", out.F, []float32{-7, 5, 10})

	bias := ft(t, ir.F32, shp(3), 100, 200, 300)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, wt, bias}, out, ip("K", 4), ip("N_tile", 1), ip("n_off", 0))
	same(t, "gemv bias", out.F, []float32{101, 5, 10})

	// GEMM: two rows of x share the weight read.
	x2 := ft(t, ir.F32, shp(2, 4), 1, 2, 3, 4, 0, 1, 0, -1)
	o2 := tensor.New(ir.BF16, 2, 3)
	kernel(t, ir.OpGEMMTile, []*tensor.Tensor{x2, wt}, o2, ip("M_tile", 2), ip("K", 4), ip("N_tile", 3), ip("n_off", 0))
	same(t, "gemm", o2.F, []float32{1, 5, 10, 0, 0, -2})

	for _, bad := range [][]ir.Param{
		{ip("K", 4), ip("N_tile", 2), ip("n_off", 2)},  // past the output
		{ip("K", 3), ip("N_tile", 1), ip("n_off", 0)},  // K mismatch
		{ip("K", 4), ip("N_tile", 0), ip("n_off", 0)},  // empty tile
		{ip("K", 4), ip("N_tile", 1), ip("n_off", -1)}, // negative offset
		{ip("N_tile", 1), ip("n_off", 0)},              // no K
	} {
		if err := kernelErr(ir.OpGEMVTile, []*tensor.Tensor{x, wt}, out, bad...); err == nil {
			t.Errorf("GEMV with %v succeeded", bad)
		}
	}
}

// TestGEMVLongRows checks the 8-way accumulation against float64 on rows
// whose length is not a multiple of 8, and that a row's value does not
// depend on the tile it is computed in.
func TestGEMVLongRows(t *testing.T) {
	const K, N = 37, 5
	xs := make([]float32, K)
	ws := make([]float32, N*K)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i)))
	}
	for i := range ws {
		ws[i] = float32(math.Cos(float64(i) * 0.7))
	}
	x, wt := ft(t, ir.F32, shp(1, K), xs...), ft(t, ir.F32, shp(N, K), ws...)
	whole := tensor.New(ir.F32, 1, N)
	kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, wt}, whole, ip("K", K), ip("N_tile", N), ip("n_off", 0))
	want := make([]float64, N)
	for n := range want {
		for k := range K {
			want[n] += float64(xs[k]) * float64(ws[n*K+k])
		}
	}
	near(t, "gemv", whole.F, want, 1e-6)
	tiled := tensor.New(ir.F32, 1, N)
	for _, tile := range [][2]int64{{0, 2}, {2, 1}, {3, 2}} {
		kernel(t, ir.OpGEMVTile, []*tensor.Tensor{x, wt}, tiled, ip("K", K), ip("N_tile", tile[1]), ip("n_off", tile[0]))
	}
	same(t, "tiled vs whole", tiled.F, whole.F)
}

func TestRoPE(t *testing.T) {
	// head_dim 4: half 2, inv_freq = [1, 1/100] at theta 1e4.
	x := ft(t, ir.F32, shp(2, 4), 1, 2, 3, 4, -1, 0.5, 2, 0)
	out := tensor.New(ir.F32, 2, 4)
	kernel(t, ir.OpROPE, []*tensor.Tensor{x, it(t, ir.I32, shp(1), 3)}, out, ip("head_dim", 4), fp("theta", 10000))
	rot := func(x1, x2, ang float64) (float64, float64) {
		return x1*math.Cos(ang) - x2*math.Sin(ang), x2*math.Cos(ang) + x1*math.Sin(ang)
	}
	a0, b0 := rot(1, 3, 3)
	a1, b1 := rot(2, 4, 0.03)
	c0, d0 := rot(-1, 2, 3)
	c1, d1 := rot(0.5, 0, 0.03)
	near(t, "rope rank 2", out.F, []float64{a0, a1, b0, b1, c0, c1, d0, d1}, 1e-6)

	// Rank 3 [S=2, heads=1, hd=4]: one position per row; position 0 is the
	// identity.
	x3 := ft(t, ir.F32, shp(2, 1, 4), 1, 2, 3, 4, 1, 2, 3, 4)
	o3 := tensor.New(ir.F32, 2, 1, 4)
	kernel(t, ir.OpROPE, []*tensor.Tensor{x3, it(t, ir.I32, shp(2), 0, 3)}, o3, ip("head_dim", 4), fp("theta", 10000))
	near(t, "rope rank 3", o3.F, []float64{1, 2, 3, 4, a0, a1, b0, b1}, 1e-6)

	if err := kernelErr(ir.OpROPE, []*tensor.Tensor{x3, it(t, ir.I32, shp(1), 0)}, o3, ip("head_dim", 4), fp("theta", 10000)); err == nil {
		t.Error("rank-3 ROPE with one position for two rows succeeded")
	}
	if err := kernelErr(ir.OpROPE, []*tensor.Tensor{x, it(t, ir.I32, shp(1), 0)}, out, ip("head_dim", 3), fp("theta", 10000)); err == nil {
		t.Error("ROPE with an odd head_dim succeeded")
	}
}

func TestKVAppend(t *testing.T) {
	cache := tensor.New(ir.F32, 4, 1, 2)
	kernel(t, ir.OpKVAppend, []*tensor.Tensor{ft(t, ir.F32, shp(1, 1, 2), 5, 6), cache}, cache, ip("pos", 2))
	same(t, "rank-3 append", cache.F, []float32{0, 0, 0, 0, 5, 6, 0, 0})

	// Rank 4 [B=2, max_seq=3, n_kv=1, hd=2], flat v (2, 2) at pos 1.
	c4 := tensor.New(ir.BF16, 2, 3, 1, 2)
	kernel(t, ir.OpKVAppend, []*tensor.Tensor{ft(t, ir.F32, shp(2, 2), 1, 2, 3, 4), c4}, c4, ip("pos", 1))
	same(t, "rank-4 append", c4.F, []float32{0, 0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0})

	before := append([]float32(nil), cache.F...)
	for _, pos := range []int64{4, -1} {
		err := kernelErr(ir.OpKVAppend, []*tensor.Tensor{ft(t, ir.F32, shp(1, 1, 2), 9, 9), cache}, cache, ip("pos", pos))
		if err == nil {
			t.Errorf("KV_APPEND at pos %d of 4 succeeded", pos)
		}
	}
	same(t, "cache after refused appends", cache.F, before)
	if err := kernelErr(ir.OpKVAppend, []*tensor.Tensor{ft(t, ir.F32, shp(2), 9, 9), c4}, c4, ip("pos", 3)); err == nil {
		t.Error("rank-4 KV_APPEND at pos 3 of 3 succeeded")
	}
}

func TestSampleArgmax(t *testing.T) {
	logits := ft(t, ir.F32, shp(2, 4), 1, 5, 5, 2, -1, -3, -0.5, -2)
	o := tensor.New(ir.I32, 2)
	kernel(t, ir.OpSampleArgmax, []*tensor.Tensor{logits}, o)
	if o.I[0] != 1 || o.I[1] != 2 {
		t.Errorf("argmax = %v, want [1 2] (ties to the lowest index)", o.I)
	}
	of := tensor.New(ir.F32, 2)
	kernel(t, ir.OpSampleArgmax, []*tensor.Tensor{logits}, of)
	same(t, "float argmax", of.F, []float32{1, 2})
}

func TestNOPAndArity(t *testing.T) {
	if err := runOp(ir.OpNOP, nil, nil, nil); err != nil {
		t.Errorf("NOP: %v", err)
	}
	x := ft(t, ir.F32, shp(1), 1)
	if err := kernelErr(ir.OpADD, []*tensor.Tensor{x}, tensor.New(ir.F32, 1)); err == nil {
		t.Error("ADD with one input succeeded")
	}
	if err := runOp(ir.OpFUSED, []*tensor.Tensor{x}, []*tensor.Tensor{x}, nil); err == nil {
		t.Error("FUSED without a recipe ran as a primitive")
	}
}
