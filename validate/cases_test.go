package validate

import (
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// goldenCase is one program of testdata/: good/<name>.json must validate,
// bad/<code>__<name>.json must carry <code> (an error, or a warning for the
// warning codes).
type goldenCase struct {
	code  string // "" for good/
	name  string
	build func(t testing.TB) *ir.Program
	// raw post-processes the encoded document (e.g. to add unknown keys).
	raw func(v *pyjson.Value)
}

func (g goldenCase) file() string {
	if g.code == "" {
		return "good/" + g.name + ".json"
	}
	return "bad/" + g.code + "__" + g.name + ".json"
}

// goldenCases are the Python reference's smoke-test programs and its
// validator test vector (spec23Vector), plus one or more per diagnostic code.
var goldenCases = []goldenCase{
	{name: "ir_smoke_chain", build: irSmokeChain},
	{name: "spec_2_3_vector", build: spec23Vector},
	{name: "waw3_disjoint_tiles_one_counter", build: func(t testing.TB) *ir.Program { return tiledGEMV(t, 4, 4, 2, false) }},
	{name: "additive_unknown_fields", build: additiveFields, raw: addUnknownKeys},
	{name: "writers_totally_ordered", build: orderedWriters},
	{name: "pages_separated_live_ranges", build: func(t testing.TB) *ir.Program { return pagedChain(t, false) }},
	{name: "gemm_row_bands", build: gemmBands},
	{name: "onchip_same_sm", build: func(t testing.TB) *ir.Program { return onChip(t, new(0), new(0)) }},
	{name: "attention_prior_kv_state", build: func(t testing.TB) *ir.Program { return attention(t, 0, 10, 4, 2, 16) }},

	{code: CodePartialJoin, name: "shared_counter_partial_wait", build: func(t testing.TB) *ir.Program { return tiledGEMV(t, 4, 2, 2, false) }},
	{code: CodePartialJoin, name: "two_producers_partial_consumer", build: twoProducersPartial},
	{code: CodeRaceRAW, name: "missing_happens_before", build: missingHappensBefore},
	{code: CodeRaceKV, name: "kv_read_before_append", build: kvReadBeforeAppend},
	{code: CodeRaceWAW, name: "unordered_whole_buffer_writers", build: unorderedWriters},
	{code: CodeRaceWAW, name: "overlapping_tiles_one_counter", build: func(t testing.TB) *ir.Program { return tiledGEMV(t, 2, 2, 4, true) }},
	{code: CodeABICap, name: "allreduce_9_inputs", build: capacityOverflow},
	{code: CodeCycle, name: "ir_smoke_back_edge", build: irSmokeBackEdge},
	{code: CodeUnsatisfiable, name: "ir_smoke_threshold_5", build: irSmokeThreshold5},
	{code: CodeUnsatisfiable, name: "wait_without_producer", build: waitWithoutProducer},
	{code: CodeDenseIDs, name: "buffer_ids_shifted", build: buffersShifted},
	{code: CodeDenseIDs, name: "duplicate_task_ids", build: duplicateTaskIDs},
	{code: CodeMissingBuffer, name: "reads_missing_buffer", build: readsMissing},
	{code: CodeMissingCounter, name: "increments_missing_counter", build: incrementsMissing},
	{code: CodeRankCap, name: "rank_5_buffer", build: rank5},
	{code: CodeBadThreshold, name: "zero_threshold", build: zeroThreshold},
	{code: CodeSelfWait, name: "waits_on_own_counter", build: selfWait},
	{code: CodeArity, name: "rmsnorm_one_input", build: rmsnormOneInput},
	{code: CodeMissingParam, name: "gemv_without_K", build: gemvWithoutK},
	{code: CodeUnknownParam, name: "unknown_param_key", build: unknownParam},
	{code: CodeParamType, name: "hidden_is_float", build: func(t testing.TB) *ir.Program { return normParam(t, "hidden", pyjson.FloatValue(8)) }},
	{code: CodeParamType, name: "eps_is_nan", build: func(t testing.TB) *ir.Program {
		return normParam(t, "eps", pyjson.Value{Kind: pyjson.Float, Num: "NaN"})
	}},
	{code: CodeParamType, name: "eps_is_bool", build: func(t testing.TB) *ir.Program { return normParam(t, "eps", pyjson.BoolValue(true)) }},
	{code: CodeParamType, name: "theta_is_infinite", build: ropeInfiniteTheta},
	{code: CodeNeverProduced, name: "reads_unwritten_activation", build: readsUnwritten},
	{code: CodeSelfRead, name: "in_place_read_without_producer", build: inPlaceRead},
	{code: CodeOnChipCrossSM, name: "smem_used_on_two_sms", build: func(t testing.TB) *ir.Program { return onChip(t, new(0), new(1)) }},
	{code: CodeOnChipUnplaced, name: "smem_users_unplaced", build: func(t testing.TB) *ir.Program { return onChip(t, nil, nil) }},
	{code: CodeSMQueueOrder, name: "consumer_listed_before_producer", build: queueOrder},
	{code: CodeSMQueueOrder, name: "queue_deadlock_through_another_sm", build: queueDeadlockAcrossSMs},
	{code: CodeSMRange, name: "sm_999", build: smOutOfRange},
	{code: CodeTileBounds, name: "gemv_tile_beyond_rank_1_weight", build: gemvRank1Weight},
	{code: CodeShapeMismatch, name: "copy_into_a_larger_buffer", build: copyBroadcast},
	{code: CodeShapeMismatch, name: "add_into_a_larger_buffer", build: addIntoLarger},
	{code: CodeShapeMismatch, name: "embed_from_a_scalar_table", build: embedScalarTable},
	{code: CodeReadOnlyWrite, name: "copy_writes_weight", build: copyIntoWeight},
	{code: CodeReadOnlyWrite, name: "norm_writes_io_input", build: normWritesInput},
	{code: CodeReadOnlyWrite, name: "copy_writes_const", build: copyIntoConst},
	{code: CodeCounterInit, name: "counter_init_3", build: counterInit3},
	{code: CodePageAlias, name: "unordered_page_sharing", build: unorderedPages},
	{code: CodePageAlias, name: "reuse_before_last_read", build: func(t testing.TB) *ir.Program { return pagedChain(t, true) }},
	{code: CodePageBinding, name: "binding_to_missing_buffer", build: pageBindingMissing},
	{code: CodeOutputUnproduced, name: "logits_never_written", build: outputUnproduced},
	{code: CodeGPULabel, name: "meta_gpu_differs_from_target", build: gpuLabel},
	{code: CodeTileBounds, name: "n_off_100_on_8_columns", build: func(t testing.TB) *ir.Program { return gemvTile(t, 8, 100, 64, 8) }},
	{code: CodeTileBounds, name: "negative_n_off", build: func(t testing.TB) *ir.Program { return gemvTile(t, 8, -4, 8, 8) }},
	{code: CodeTileCoverage, name: "half_covered_gemv_output", build: func(t testing.TB) *ir.Program { return gemvTile(t, 8, 0, 4, 8) }},
	{code: CodeTileCoverage, name: "overlapping_ordered_tiles", build: orderedOverlappingTiles},
	{code: CodeBadK, name: "negative_K", build: func(t testing.TB) *ir.Program { return gemvTile(t, 8, 0, 8, -8) }},
	{code: CodeBadK, name: "K_not_input_width", build: func(t testing.TB) *ir.Program { return gemvTile(t, 8, 0, 8, 16) }},
	{code: CodeKVBounds, name: "kv_len_zero", build: func(t testing.TB) *ir.Program { return attention(t, 0, 0, 4, 2, 16) }},
	{code: CodeKVBounds, name: "window_past_cache_end", build: func(t testing.TB) *ir.Program { return attention(t, 250, 10, 4, 2, 16) }},
	{code: CodeKVPos, name: "append_pos_at_max_seq", build: func(t testing.TB) *ir.Program { return kvAppend(t, 256) }},
	{code: CodeKVPos, name: "append_negative_pos", build: func(t testing.TB) *ir.Program { return kvAppend(t, -1) }},
	{code: CodeShapeMismatch, name: "rmsnorm_hidden_not_width", build: func(t testing.TB) *ir.Program { return normParam(t, "hidden", pyjson.IntValue(16)) }},
	{code: CodeShapeMismatch, name: "attention_heads_not_q_shape", build: func(t testing.TB) *ir.Program { return attention(t, 0, 10, 8, 2, 16) }},
	{code: CodeShapeMismatch, name: "attention_head_dim_not_cache", build: func(t testing.TB) *ir.Program { return attention(t, 0, 10, 4, 2, 8) }},
	{code: CodeDTypeMismatch, name: "float_embed_ids", build: floatEmbedIDs},
	{code: CodeDTypeMismatch, name: "float_rope_positions", build: floatRopePositions},
	{name: "int4_gemv_with_scales", build: func(t testing.TB) *ir.Program { return quantGEMV(t, nil) }},
	{code: CodeQuantScales, name: "scales_one_group_short", build: func(t testing.TB) *ir.Program {
		return quantGEMV(t, func(p *ir.Program, qs, _ int) { p.Buffers[qs].Shape = []int{16, 1} })
	}},
	{code: CodeQuantScales, name: "tile_reads_another_weights_scales", build: func(t testing.TB) *ir.Program {
		return quantGEMV(t, func(p *ir.Program, _, os int) { p.Tasks[1].Inputs[2] = os })
	}},
}

// irSmokeChain is test_ir_smoke.py's rmsnorm -> gemv -> add chain (F16).
func irSmokeChain(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	b.p.SetMeta("model", pyjson.StringValue("toy"))
	x := b.bufOf("x", ir.IOInput, ir.F16, 1, 16)
	wn := b.bufOf("norm.w", ir.Weight, ir.F16, 16)
	b.p.Buffers[wn].Source = new("norm.weight")
	wp := b.bufOf("proj.w", ir.Weight, ir.F16, 16, 16)
	b.p.Buffers[wp].Source = new("proj.weight")
	h := b.bufOf("h", ir.Activation, ir.F16, 1, 16)
	y := b.bufOf("y", ir.Activation, ir.F16, 1, 16)
	out := b.bufOf("out", ir.IOOutput, ir.F16, 1, 16)
	cn := b.p.AddCounter("rmsnorm done")
	cp := b.p.AddCounter("gemv done")
	ca := b.p.AddCounter("residual done")
	b.task(ir.OpRMSNORM, ints(x, wn), ints(h), cn, nil, "rmsnorm", rmsParams(16)...)
	b.task(ir.OpGEMVTile, ints(h, wp), ints(y), cp, waits(cn, 1), "gemv", gemvParams(16, 16, 0)...)
	b.task(ir.OpADD, ints(y, x), ints(out), ca, waits(cp, 1), "residual")
	return b.p
}

func irSmokeBackEdge(t testing.TB) *ir.Program {
	p := irSmokeChain(t)
	p.Tasks[0].Waits = append(p.Tasks[0].Waits, ir.Wait{Counter: 2, Threshold: 1})
	return p
}

func irSmokeThreshold5(t testing.TB) *ir.Program {
	p := irSmokeChain(t)
	p.Tasks[1].Waits = waits(0, 5)
	return p
}

// spec23Vector is the Python reference validator's test vector: a three-task
// program whose report line the reference prints exactly (TestSpecVector).
func spec23Vector(t testing.TB) *ir.Program {
	b := newBuilder(t, "")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("norm.w", ir.Weight, 8)
	h := b.buf("h", ir.Activation, 1, 8)
	out := b.buf("out", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(h), c0, nil, "norm", rmsParams(8)...)
	b.task(ir.OpADD, ints(h, x), ints(out), c1, waits(c0, 1), "add")
	return b.p
}

// tiledGEMV writes y (1, 8) with n tiles of width tile starting at
// i*stride (or all at 0 when same), on one counter, then a COPY waits
// (c, threshold).
func tiledGEMV(t testing.TB, n, threshold, tile int, same bool) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8, 8)
	y := b.buf("y", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c, cout := b.ctr(), b.ctr()
	for i := range n {
		off := int64(i * tile)
		if same {
			off = 0
		}
		b.task(ir.OpGEMVTile, ints(x, w), ints(y), c, nil, "tile"+itoa(int64(i)), gemvParams(8, int64(tile), off)...)
	}
	b.task(ir.OpCOPY, ints(y), ints(o), cout, waits(c, threshold), "reader")
	return b.p
}

func twoProducersPartial(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	ha := b.buf("ha", ir.Activation, 1, 8)
	hb := b.buf("hb", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c, cout := b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(ha), c, nil, "pa", rmsParams(8)...)
	b.task(ir.OpRMSNORM, ints(x, w), ints(hb), c, nil, "pb", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(hb), ints(o), cout, waits(c, 1), "reads_hb")
	return b.p
}

func missingHappensBefore(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	a := b.buf("actA", ir.Activation, 1, 8)
	bb := b.buf("actB", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, cout := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(a), c0, nil, "t0", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(x), ints(bb), c1, nil, "t1")
	b.task(ir.OpADD, ints(a, bb), ints(o), cout, waits(c1, 1), "t2")
	return b.p
}

func kvReadBeforeAppend(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	nk := b.buf("newkv", ir.IOInput, 1, 2, 16)
	kv := b.buf("kv", ir.KVCache, 256, 2, 16)
	o := b.buf("o", ir.IOOutput, 1, 2, 16)
	cp, cout := b.ctr(), b.ctr()
	b.task(ir.OpKVAppend, ints(nk, kv), ints(kv), cp, nil, "append", iP("pos", 5))
	b.task(ir.OpCOPY, ints(kv), ints(o), cout, nil, "reads_kv_unordered")
	return b.p
}

func unorderedWriters(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	a := b.buf("a", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, cout := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(a), c0, nil, "wa", rmsParams(8)...)
	b.task(ir.OpRMSNORM, ints(x, w), ints(a), c1, nil, "wb", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(a), ints(o), cout, waits(c0, 1, c1, 1), "reader")
	return b.p
}

// orderedWriters has two whole-buffer writers of a where the second waits on
// the first: WAW is proven by order, and the reader's RAW proof of the first
// writer needs a transitive path (not a direct edge).
func orderedWriters(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	a := b.buf("a", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, cout := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(a), c0, nil, "first", rmsParams(8)...)
	b.task(ir.OpRMSNORM, ints(x, w), ints(a), c1, waits(c0, 1), "second", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(a), ints(o), cout, waits(c1, 1), "reader")
	return b.p
}

func orderedOverlappingTiles(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8, 8)
	y := b.buf("y", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, cout := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpGEMVTile, ints(x, w), ints(y), c0, nil, "wide", gemvParams(8, 6, 0)...)
	b.task(ir.OpGEMVTile, ints(x, w), ints(y), c1, waits(c0, 1), "tail", gemvParams(8, 4, 4)...)
	b.task(ir.OpCOPY, ints(y), ints(o), cout, waits(c1, 1), "reader")
	return b.p
}

func capacityOverflow(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	var ins []int
	for i := 0; i <= ir.MaxInputs; i++ {
		ins = append(ins, b.buf("in"+itoa(int64(i)), ir.Weight, 4))
	}
	o := b.buf("o", ir.IOOutput, 4)
	b.task(ir.OpAllreduceShard, ins, ints(o), b.ctr(), nil, "too_wide")
	return b.p
}

// additiveFields is test 11's program; its file adds unknown target and
// config keys that the decoder must drop.
func additiveFields(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1)
	o := b.buf("o", ir.IOOutput, 1)
	b.task(ir.OpCOPY, ints(x), ints(o), b.ctr(), nil, "x")
	return b.p
}

func addUnknownKeys(v *pyjson.Value) {
	for i := range v.Obj {
		switch v.Obj[i].Key {
		case "target":
			v.Obj[i].Val.Set("future_tensor_mem_kb", pyjson.IntValue(999))
		case "config":
			v.Obj[i].Val = pyjson.ObjectValue(pyjson.M("tiling", pyjson.ObjectValue()), pyjson.M("made_up_search_dim", pyjson.IntValue(7)))
		}
	}
}

// normChain is x -> RMSNORM -> h -> COPY -> out with the given norm params.
func normChain(t testing.TB, params ...ir.Param) *builder {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	h := b.buf("h", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(h), c0, nil, "norm", params...)
	b.task(ir.OpCOPY, ints(h), ints(o), c1, waits(c0, 1), "copy")
	return b
}

func normParam(t testing.TB, key string, v pyjson.Value) *ir.Program {
	params := rmsParams(8)
	for i := range params {
		if params[i].Key == key {
			params[i].Val = v
		}
	}
	return normChain(t, params...).p
}

func unknownParam(t testing.TB) *ir.Program {
	return normChain(t, append(rmsParams(8), iP("alpha", 1))...).p
}

func waitWithoutProducer(t testing.TB) *ir.Program {
	b := normChain(t, rmsParams(8)...)
	idle := b.ctr()
	b.p.Tasks[1].Waits = append(b.p.Tasks[1].Waits, ir.Wait{Counter: idle, Threshold: 1})
	return b.p
}

func buffersShifted(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	for i := range p.Buffers {
		p.Buffers[i].ID = i + 1
	}
	return p
}

func duplicateTaskIDs(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[1].ID = 0
	return p
}

func readsMissing(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[1].Inputs = ints(2, 99)
	p.Tasks[1].Op = ir.OpADD
	return p
}

func incrementsMissing(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[1].OutCounter = 7
	return p
}

func zeroThreshold(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[1].Waits = waits(0, 0)
	return p
}

func selfWait(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[1].Waits = append(p.Tasks[1].Waits, ir.Wait{Counter: 1, Threshold: 1})
	return p
}

func rmsnormOneInput(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[0].Inputs = ints(0)
	return p
}

func rank5(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 1, 1, 2, 4)
	o := b.buf("o", ir.IOOutput, 1, 8)
	b.task(ir.OpCOPY, ints(x), ints(o), b.ctr(), nil, "copy")
	return b.p
}

func readsUnwritten(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	a := b.buf("a", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	b.task(ir.OpCOPY, ints(a), ints(o), b.ctr(), nil, "copy")
	return b.p
}

func inPlaceRead(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	a := b.buf("a", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpADD, ints(x, a), ints(a), c0, nil, "accumulate")
	b.task(ir.OpCOPY, ints(a), ints(o), c1, waits(c0, 1), "copy")
	return b.p
}

func gemvWithoutK(t testing.TB) *ir.Program {
	p := tiledGEMV(t, 1, 1, 8, false)
	p.Tasks[0].Params = ir.Params{iP("N_tile", 8), iP("n_off", 0)}
	return p
}

// gemvTile is one GEMV tile on y (1, n) with the given offsets and K, read by a COPY.
func gemvTile(t testing.TB, n int, nOff, nTile, k int64) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, n, 8)
	y := b.buf("y", ir.Activation, 1, n)
	o := b.buf("o", ir.IOOutput, 1, n)
	c, cout := b.ctr(), b.ctr()
	b.task(ir.OpGEMVTile, ints(x, w), ints(y), c, nil, "tile", gemvParams(k, nTile, nOff)...)
	b.task(ir.OpCOPY, ints(y), ints(o), cout, waits(c, 1), "reader")
	return b.p
}

// gemmBands covers y (4, 8) with a 2x2 grid of GEMM tiles (row bands via m_off).
func gemmBands(t testing.TB) *ir.Program {
	b := newBuilder(t, "h100")
	x := b.buf("x", ir.IOInput, 4, 8)
	w := b.buf("w", ir.Weight, 8, 8)
	y := b.buf("y", ir.Activation, 4, 8)
	o := b.buf("o", ir.IOOutput, 4, 8)
	c, cout := b.ctr(), b.ctr()
	for m := int64(0); m < 4; m += 2 {
		for n := int64(0); n < 8; n += 4 {
			b.task(ir.OpGEMMTile, ints(x, w), ints(y), c, nil, "tile_m"+itoa(m)+"_n"+itoa(n),
				iP("M_tile", 2), iP("K", 8), iP("N_tile", 4), iP("n_off", n), iP("m_off", m))
		}
	}
	b.task(ir.OpCOPY, ints(y), ints(o), cout, waits(c, 4), "reader")
	return b.p
}

// onChip writes an SMEM buffer and reads it back, placing the two tasks.
func onChip(t testing.TB, smA, smB *int) *ir.Program {
	b := normChain(t, rmsParams(8)...)
	b.p.Buffers[2].Space = ir.SMEM
	b.p.Tasks[0].SM, b.p.Tasks[1].SM = smA, smB
	return b.p
}

func queueOrder(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	h := b.buf("h", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpCOPY, ints(h), ints(o), c0, waits(c1, 1), "consumer")
	b.task(ir.OpRMSNORM, ints(x, w), ints(h), c1, nil, "producer", rmsParams(8)...)
	b.p.Tasks[0].SM, b.p.Tasks[1].SM = new(3), new(3)
	return b.p
}

func smOutOfRange(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.Tasks[0].SM, p.Tasks[1].SM = new(999), new(0)
	return p
}

// pagedChain is x -> norm -> h1 -> copy -> h2 -> copy -> h3 -> copy -> out
// with h1 and h3 on page 0 (separated), or, when early, h3's page-mate h1
// still read after h3 is written.
func pagedChain(t testing.TB, early bool) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	h1 := b.buf("h1", ir.Activation, 1, 8)
	h2 := b.buf("h2", ir.Activation, 1, 8)
	h3 := b.buf("h3", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, c2, c3 := b.ctr(), b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(h1), c0, nil, "norm", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(h1), ints(h2), c1, waits(c0, 1), "copy1")
	if early {
		// h3 is written from x while h1 may still be read by copy1.
		b.task(ir.OpCOPY, ints(x), ints(h3), c2, nil, "copy2")
		b.task(ir.OpADD, ints(h2, h3), ints(o), c3, waits(c1, 1, c2, 1), "add")
	} else {
		b.task(ir.OpCOPY, ints(h2), ints(h3), c2, waits(c1, 1), "copy2")
		b.task(ir.OpCOPY, ints(h3), ints(o), c3, waits(c2, 1), "copy3")
	}
	b.p.Pages = &ir.PageAllocation{
		BufferToPage: []ir.PageBinding{{Buffer: h1, Page: 0}, {Buffer: h2, Page: 1}, {Buffer: h3, Page: 0}},
		Pages: []ir.Page{{ID: 0, Space: ir.GlobalScratch, NBytes: 32, LiveStart: -1, LiveEnd: -1},
			{ID: 1, Space: ir.GlobalScratch, NBytes: 32, LiveStart: -1, LiveEnd: -1}},
	}
	return b.p
}

func unorderedPages(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	h1 := b.buf("h1", ir.Activation, 1, 8)
	h2 := b.buf("h2", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1, c2 := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(h1), c0, nil, "n1", rmsParams(8)...)
	b.task(ir.OpRMSNORM, ints(x, w), ints(h2), c1, nil, "n2", rmsParams(8)...)
	b.task(ir.OpADD, ints(h1, h2), ints(o), c2, waits(c0, 1, c1, 1), "add")
	b.p.Pages = &ir.PageAllocation{
		BufferToPage: []ir.PageBinding{{Buffer: h1, Page: 0}, {Buffer: h2, Page: 0}},
		Pages:        []ir.Page{{ID: 0, Space: ir.GlobalScratch, NBytes: 32, LiveStart: -1, LiveEnd: -1}},
	}
	return b.p
}

func pageBindingMissing(t testing.TB) *ir.Program {
	p := pagedChain(t, false)
	p.Pages.BufferToPage = append(p.Pages.BufferToPage, ir.PageBinding{Buffer: 42, Page: 1})
	return p
}

func outputUnproduced(t testing.TB) *ir.Program {
	b := normChain(t, rmsParams(8)...)
	b.buf("logits", ir.IOOutput, 1, 8)
	return b.p
}

func gpuLabel(t testing.TB) *ir.Program {
	p := normChain(t, rmsParams(8)...).p
	p.SetMeta("gpu", pyjson.StringValue("h100"))
	return p
}

// attention is one ATTENTION_TILE over caches (256, 2, 16) that this pass
// does not write (prior-step state), q shaped (4, 16).
func attention(t testing.TB, kvStart, kvLen, nHeads, nKV, headDim int64) *ir.Program {
	b := newBuilder(t, "rtx5090")
	q := b.buf("q", ir.IOInput, 4, 16)
	kc := b.buf("kcache", ir.KVCache, 256, 2, 16)
	vc := b.buf("vcache", ir.KVCache, 256, 2, 16)
	o := b.buf("attn", ir.IOOutput, 1, 64)
	b.task(ir.OpAttentionTile, ints(q, kc, vc), ints(o), b.ctr(), nil, "attention",
		iP("head_dim", headDim), iP("kv_start", kvStart), iP("kv_len", kvLen), fP("scale", 0.25),
		iP("n_heads", nHeads), iP("n_kv_heads", nKV))
	return b.p
}

// kvAppend appends k (1, 2, 16) at pos into a (256, 2, 16) cache, then
// attends over it.
func kvAppend(t testing.TB, pos int64) *ir.Program {
	b := newBuilder(t, "rtx5090")
	q := b.buf("q", ir.IOInput, 4, 16)
	k := b.buf("k", ir.IOInput, 1, 2, 16)
	kc := b.buf("kcache", ir.KVCache, 256, 2, 16)
	vc := b.buf("vcache", ir.KVCache, 256, 2, 16)
	o := b.buf("attn", ir.IOOutput, 1, 64)
	ca, co := b.ctr(), b.ctr()
	b.task(ir.OpKVAppend, ints(k, kc), ints(kc), ca, nil, "k_append", iP("pos", pos))
	b.task(ir.OpAttentionTile, ints(q, kc, vc), ints(o), co, waits(ca, 1), "attention",
		iP("head_dim", 16), iP("kv_start", 0), iP("kv_len", 8), fP("scale", 0.25),
		iP("n_heads", 4), iP("n_kv_heads", 2))
	return b.p
}

func floatEmbedIDs(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	ids := b.buf("token_id", ir.IOInput, 1)
	table := b.buf("embed.weight", ir.Weight, 16, 8)
	o := b.buf("h0", ir.IOOutput, 1, 8)
	b.task(ir.OpEMBED, ints(ids, table), ints(o), b.ctr(), nil, "embed", iP("hidden", 8))
	return b.p
}

func floatRopePositions(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("q", ir.IOInput, 4, 16)
	pos := b.buf("pos", ir.IOInput, 1)
	o := b.buf("qr", ir.IOOutput, 4, 16)
	b.task(ir.OpROPE, ints(x, pos), ints(o), b.ctr(), nil, "rope", iP("head_dim", 16), fP("theta", 10000))
	return b.p
}

func ropeInfiniteTheta(t testing.TB) *ir.Program {
	p := floatRopePositions(t)
	p.Buffers[1].DType = ir.I32
	p.Tasks[0].Params[1] = ir.Param{Key: "theta", Val: pyjson.Value{Kind: pyjson.Float, Num: "Infinity"}}
	return p
}
