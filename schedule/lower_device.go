package schedule

import (
	"github.com/amk-dev/amk/ir"
)

// The device lowering: taken when the config sets tiling.gemv.tiles_per_sm
// or turns on a fused lowering (schedule.Fusions); otherwise Lower is the
// Python reference's lowering, unchanged. Per layer it emits
//
//	[input RMSNORM]            unless norm_staging
//	q|k|v tiles                one counter with qkv; NORM_GEMV* patterns with
//	                           norm_staging; *_ROPE / *_APPEND with rope_epilogue
//	[ROPE, KV_APPEND]          unless rope_epilogue (ROPE reads the flat
//	                           projection with reshape_view, else the reshape EMBED)
//	attention                  as the reference (whole window or split-KV)
//	o tiles [+ ADD]            GEMV_ADD with residual_epilogue
//	[post RMSNORM]             unless norm_staging
//	gate|up tiles              interleaved, one counter with gate_up
//	[SILU_MUL] down tiles [+ ADD]   SILU_GEMV[_ADD] with silu_staging
//
// and the lm_head folds the final norm with norm_staging. With every fusion
// on, a layer is five dependent hops: qkv, attention, o, gate|up, down.

// phase is one projection phase: projections that read the same activation
// and run at the same time, sharing one tile width.
type phase struct {
	projs []projection
	align int // tile widths are multiples of align (head_dim for RoPE epilogues)
	// paired: the phase's tiles may be paired tiles (ir.PairStride) of
	// head_dim align: the q|k|v phase with the RoPE epilogue.
	paired bool
}

// projection is one weight's tiles within a phase.
type projection struct {
	name, key string
	n, k      int
	// task builds the tile [off, off+w) as a task without waits, counter or
	// SM (the phase adds them).
	task func(off, w int) ir.Task
}

// phaseWidth is the phase's tile width: with tiles_per_sm, the phase's
// columns split into tiles_per_sm x num_SMs tiles (rounded up to align);
// otherwise the reference's per-projection rule (gemvNTile) rounded up.
func (l *lowerer) phaseWidth(ph *phase, pr *projection) int {
	align := max(ph.align, 1)
	if tps := l.tilesPerSM(); tps > 0 {
		w := ceilDiv(phaseColumns(ph), tps*l.t.NumSMs)
		return min(ceilDiv(w, align)*align, ceilDiv(pr.n, align)*align)
	}
	return ceilDiv(gemvNTile(l.cfg, pr.n), align) * align
}

func phaseColumns(ph *phase) int {
	total := 0
	for _, p := range ph.projs {
		total += p.n
	}
	return total
}

// pairWidth is the width of each half of a paired phase's tiles, 0 when its
// tiles are whole heads. A RoPE epilogue needs every rotation pair (column
// i and i + head_dim/2 of a head) in its tile; a paired tile covers columns
// [i, i+w) and [i+head_dim/2, i+head_dim/2+w) of one head, so with
// tiles_per_sm the phase's heads split into T = tiles_per_sm x num_SMs /
// heads tiles each (at least one), w = ceil(head_dim/2 / T), and no tile
// straddles a head (the per-KV-head counters stay exact). One tile per head
// is a whole head, emitted as a contiguous tile.
func (l *lowerer) pairWidth(ph *phase) int {
	hd, tps := ph.align, l.tilesPerSM()
	if !ph.paired || tps == 0 || hd < 2 || hd%2 != 0 {
		return 0
	}
	heads := max(phaseColumns(ph)/hd, 1)
	perHead := max(tps*l.t.NumSMs/heads, 1)
	w := ceilDiv(hd/2, perHead)
	if w >= hd/2 {
		return 0
	}
	return w
}

// tileSpan is one tile of a projection: columns [off, off+w), or a paired
// tile of w columns in two halves (n_off = off, N_tile = w).
type tileSpan struct {
	off, w int
	paired bool
}

// tilesOf lists projection pr's tiles over its columns [lo, hi): paired
// tiles head by head (pairWidth), else tiles of the phase's width.
func (l *lowerer) tilesOf(ph *phase, pr *projection, lo, hi int) []tileSpan {
	var ts []tileSpan
	if pw := l.pairWidth(ph); pw > 0 {
		hd := ph.align
		for h := lo; h < hi; h += hd {
			for i := 0; i < hd/2; i += pw {
				ts = append(ts, tileSpan{off: h + i, w: 2 * min(pw, hd/2-i), paired: true})
			}
		}
		return ts
	}
	w := l.phaseWidth(ph, pr)
	for off := lo; off < hi; off += w {
		ts = append(ts, tileSpan{off: off, w: min(w, hi-off)})
	}
	return ts
}

// tile builds tile ts of projection pr with its counter, waits and label.
func (l *lowerer) tile(pr *projection, ts tileSpan, ctr int, waits []ir.Wait, label string) {
	task := pr.task(ts.off, ts.w)
	if ts.paired {
		for i := range task.Params {
			if task.Params[i].Key == "flags" {
				task.Params[i] = ir.IntParam("flags", task.Params.IntOr("flags", 0)|ir.FlagPairedTile)
			}
		}
	}
	task.OutCounter, task.Waits, task.Label = ctr, waits, label
	l.task(task)
}

// emitPhase emits the phase's tiles (interleaved across its projections
// when interleave, else one projection after the other) waiting on waits.
// shared puts every tile on one counter; otherwise each projection gets its
// own. It returns, per projection, the counter and threshold of its output.
func (l *lowerer) emitPhase(name string, ph *phase, waits []ir.Wait, shared, interleave bool) []tensor {
	tl := make([][]tileSpan, len(ph.projs))
	total := 0
	for i := range ph.projs {
		tl[i] = l.tilesOf(ph, &ph.projs[i], 0, ph.projs[i].n)
		total += len(tl[i])
	}
	ctrs := make([]int, len(ph.projs))
	if shared {
		c := l.p.AddCounter(name + " (" + itoa(total) + " tiles, one counter)")
		for i := range ctrs {
			ctrs[i] = c
		}
	} else {
		for i, pr := range ph.projs {
			ctrs[i] = l.p.AddCounter(pr.name + " (" + itoa(len(tl[i])) + " tiles)")
		}
	}
	emit := func(i, t int) {
		pr := &ph.projs[i]
		l.tile(pr, tl[i][t], ctrs[i], waits, tileLabel(pr.name, t))
	}
	if interleave {
		for t := 0; ; t++ {
			done := true
			for i := range ph.projs {
				if t < len(tl[i]) {
					emit(i, t)
					done = false
				}
			}
			if done {
				break
			}
		}
	} else {
		for i := range ph.projs {
			for t := range tl[i] {
				emit(i, t)
			}
		}
	}
	out := make([]tensor, len(ph.projs))
	for i := range ph.projs {
		thr := len(tl[i])
		if shared {
			thr = total
		}
		out[i] = tensor{ctr: ctrs[i], thr: thr}
	}
	return out
}

// headCounters reports whether the q|k|v phase signals one counter per KV
// head (tiling.attention.head_counters): only with the RoPE epilogue (the
// tiles write the roped q and the KV rows the attention reads; otherwise
// one ROPE / KV_APPEND task over every head sits between them) and with the
// attention split per KV head (a consumer per head).
func (l *lowerer) headCounters() bool {
	v, _ := l.cfg.Tile("attention", "head_counters")
	return v > 0 && l.kvHeadSplit() && fusionsOf(l.cfg)[FuseRoPEEpi]
}

// emitHeadPhase emits a q|k|v phase of head-aligned tiles (whole heads or
// paired tiles) on one counter per KV head g (per projection and KV head
// when not shared): g's counter counts the q tiles of its query heads
// [g·rep, (g+1)·rep) and the k and v tiles of head g, so that a consumer of
// head g's slice waits for those tiles only. Tiles are cut at the group
// boundaries (a tile signals one counter, so it must not straddle two
// groups). It returns, per KV head, the tensors to wait on (one per counter).
func (l *lowerer) emitHeadPhase(name string, ph *phase, waits []ir.Wait, shared bool) [][]tensor {
	nkv := l.m.NKVHeads
	heads := make([][]tensor, nkv)
	next := make([]int, len(ph.projs)) // tile labels count on across the groups
	for g := range nkv {
		// KV head g's columns of each projection: q rep heads, k and v one.
		tiles := make([][]tileSpan, len(ph.projs))
		total := 0
		for i := range ph.projs {
			group := ph.projs[i].n / nkv
			tiles[i] = l.tilesOf(ph, &ph.projs[i], g*group, (g+1)*group)
			total += len(tiles[i])
		}
		ctrs := make([]int, len(ph.projs))
		for i, ts := range tiles {
			switch {
			case shared && i > 0:
				ctrs[i] = ctrs[0]
			case shared:
				ctrs[i] = l.p.AddCounter(name + ".kv" + itoa(g) + " (" + itoa(total) + " tiles, KV head " + itoa(g) + ")")
			default:
				ctrs[i] = l.p.AddCounter(ph.projs[i].name + ".kv" + itoa(g) + " (" + itoa(len(ts)) + " tiles, KV head " + itoa(g) + ")")
			}
		}
		for i, ts := range tiles {
			pr := &ph.projs[i]
			for _, t := range ts {
				l.tile(pr, t, ctrs[i], waits, tileLabel(pr.name, next[i]))
				next[i]++
			}
			thr := len(ts)
			if shared {
				thr = total
			}
			if !shared || i == 0 {
				heads[g] = append(heads[g], tensor{-1, ctrs[i], thr})
			}
		}
	}
	return heads
}

// tileParams are a GEMV/GEMM tile's params plus extra.
func (l *lowerer) tileParams(op ir.Op, K, off, w int, extra ...ir.Param) []ir.Param {
	ps := make([]ir.Param, 0, 4+len(extra))
	if op == ir.OpGEMMTile {
		ps = append(ps, ir.IntParam("M_tile", int64(l.b)))
	}
	ps = append(ps, ir.IntParam("K", int64(K)), ir.IntParam("N_tile", int64(w)), ir.IntParam("n_off", int64(off)))
	return l.params.take(append(ps, extra...)...)
}

// tileTask is a projection tile: GEMV_TILE/GEMM_TILE when pattern is
// FusedNone, else a FUSED task of that pattern. extraFlops counts the
// staging work every tile repeats.
func (l *lowerer) tileTask(pattern int, ins []int, out, K, off, w int, extraFlops int64, extra ...ir.Param) ir.Task {
	op := ir.OpGEMVTile
	if l.b > 1 {
		op = ir.OpGEMMTile
	}
	if pattern != ir.FusedNone {
		extra = append(extra, ir.IntParam("flags", ir.FusedPatternFlags(pattern)))
		op = ir.OpFUSED
	}
	return ir.Task{Op: op, Inputs: l.ints.take(ins...), Outputs: l.ints.take(out),
		Params: l.tileParams(op, K, off, w, extra...), EstBytes: int64(K) * l.dbytes * int64(w),
		EstFlops: int64(2*K*w)*int64(l.b) + extraFlops}
}

// staging is how a phase's tiles read their activation.
type staging struct {
	x      tensor
	normW  int // -1: no norm staging
	params []ir.Param
}

func (l *lowerer) normStaging(resid tensor, key string, fused bool, name, out string) staging {
	if !fused {
		return staging{x: l.rmsnorm(name, out, key, resid), normW: -1}
	}
	return staging{x: resid, normW: l.weight(key, l.m.Hidden),
		params: []ir.Param{ir.FloatParam("eps", l.m.RMSEps), ir.IntParam("hidden", int64(l.m.Hidden))}}
}

// inputs are the tile's leading inputs [x(, norm_w)].
func (s staging) inputs() []int {
	if s.normW >= 0 {
		return []int{s.x.buf, s.normW}
	}
	return []int{s.x.buf}
}

// pattern picks the norm-staged or plain variant of a pattern.
func (s staging) pattern(normed, plain int) int {
	if s.normW >= 0 {
		return normed
	}
	return plain
}

func (s staging) flops(l *lowerer) int64 {
	if s.normW >= 0 {
		return int64(4 * l.b * l.m.Hidden)
	}
	return 0
}

func (l *lowerer) deviceLayer(layer int, resid tensor, f fusionSet) tensor {
	m, keys := l.m, &l.keys.Layers[layer]
	pre := "L" + itoa(layer)
	H, qd, kd, hd := m.Hidden, m.QDim(), m.KVDim(), m.HeadDim
	st := l.normStaging(resid, keys.InputNorm, f[FuseNormStaging], pre+".input_norm", pre+".an")
	waits := l.waitsFor(st.x)

	qShape := l.shape(m.NHeads, hd)
	if l.b > 1 {
		qShape = l.shape(l.b, m.NHeads, hd)
	}
	var q, k, v, kc, vc tensor
	if f[FuseRoPEEpi] {
		qb := l.activation(pre+".qr", qShape)
		kc, vc = l.cache(pre+".kcache"), l.cache(pre+".vcache")
		rope := []ir.Param{ir.IntParam("head_dim", int64(hd)), ir.FloatParam("theta", m.RopeTheta)}
		app := func(extra ...ir.Param) []ir.Param {
			return append(append(append([]ir.Param{}, st.params...), extra...),
				ir.IntParam("N", int64(kd)), ir.IntParam("pos", int64(l.pos)))
		}
		ph := &phase{align: hd, paired: true, projs: []projection{
			l.proj(pre+".q_proj", keys.Q, qd, H, func(off, w int, wb int) ir.Task {
				return l.tileTask(st.pattern(ir.FusedNormGEMVRoPE, ir.FusedGEMVRoPE), append(st.inputs(), wb, l.posIn.buf),
					qb, H, off, w, st.flops(l), append(append([]ir.Param{}, st.params...), rope...)...)
			}),
			l.proj(pre+".k_proj", keys.K, kd, H, func(off, w int, wb int) ir.Task {
				return l.tileTask(st.pattern(ir.FusedNormGEMVRoPEApp, ir.FusedGEMVRoPEAppend),
					append(st.inputs(), wb, l.posIn.buf), kc.buf, H, off, w, st.flops(l), app(rope...)...)
			}),
			l.proj(pre+".v_proj", keys.V, kd, H, func(off, w int, wb int) ir.Task {
				return l.tileTask(st.pattern(ir.FusedNormGEMVAppend, ir.FusedGEMVAppend),
					append(st.inputs(), wb), vc.buf, H, off, w, st.flops(l),
					app(ir.IntParam("head_dim", int64(hd)))...)
			}),
		}}
		if l.headCounters() {
			heads := l.emitHeadPhase(pre+".qkv", ph, waits, f[FuseQKV])
			q, kc, vc = tensor{qb, -1, 0}, tensor{kc.buf, -1, 0}, tensor{vc.buf, -1, 0}
			l.headWaits = func(h int) []ir.Wait { return l.waitsFor(heads[h]...) }
		} else {
			outs := l.emitPhase(pre+".qkv", ph, waits, f[FuseQKV], false)
			q, kc, vc = tensor{qb, outs[0].ctr, outs[0].thr}, tensor{kc.buf, outs[1].ctr, outs[1].thr}, tensor{vc.buf, outs[2].ctr, outs[2].thr}
		}
	} else {
		bufs := []int{l.activation(pre+".q", l.shape(l.b, qd)), l.activation(pre+".k", l.shape(l.b, kd)),
			l.activation(pre+".v", l.shape(l.b, kd))}
		plain := func(name, key string, n, i int) projection {
			return l.proj(name, key, n, H, func(off, w int, wb int) ir.Task {
				return l.tileTask(st.pattern(ir.FusedNormGEMV, ir.FusedNone), append(st.inputs(), wb), bufs[i], H, off, w,
					st.flops(l), st.params...)
			})
		}
		ph := &phase{projs: []projection{plain(pre+".q_proj", keys.Q, qd, 0), plain(pre+".k_proj", keys.K, kd, 1),
			plain(pre+".v_proj", keys.V, kd, 2)}}
		outs := l.emitPhase(pre+".qkv", ph, waits, f[FuseQKV], false)
		q, k, v = tensor{bufs[0], outs[0].ctr, outs[0].thr}, tensor{bufs[1], outs[1].ctr, outs[1].thr}, tensor{bufs[2], outs[2].ctr, outs[2].thr}
		var kr tensor
		if f[FuseReshapeView] {
			q = l.ropeView(pre+".rope_q", pre+".qr", q, qShape, m.NHeads)
			kr = l.ropeView(pre+".rope_k", pre+".kr", k, l.shape(l.b, kd), m.NKVHeads)
		} else {
			q = l.rope(pre+".rope_q", pre+".qr", q, qShape, m.NHeads)
			kr = l.rope(pre+".rope_k", pre+".kr", k, l.shape(l.b, m.NKVHeads, hd), m.NKVHeads)
		}
		kc = l.kvAppend(pre+".k_append", pre+".kcache", kr)
		vc = l.kvAppend(pre+".v_append", pre+".vcache", v)
	}
	attn := l.attention(pre+".attention", pre+".attn", q, kc, vc)
	l.headWaits = nil

	hAttn := l.residualProjection(pre+".o_proj", pre+".o", pre+".attn_residual", pre+".h_attn", keys.O, attn, resid, qd, f)

	st2 := l.normStaging(hAttn, keys.PostNorm, f[FuseNormStaging], pre+".post_norm", pre+".mn")
	I := m.Intermediate
	gb, ub := l.activation(pre+".gate", l.shape(l.b, I)), l.activation(pre+".up", l.shape(l.b, I))
	gu := func(name, key string, out int) projection {
		return l.proj(name, key, I, H, func(off, w int, wb int) ir.Task {
			return l.tileTask(st2.pattern(ir.FusedNormGEMV, ir.FusedNone), append(st2.inputs(), wb), out, H, off, w,
				st2.flops(l), st2.params...)
		})
	}
	ph := &phase{projs: []projection{gu(pre+".gate_proj", keys.Gate, gb), gu(pre+".up_proj", keys.Up, ub)}}
	outs := l.emitPhase(pre+".gate_up", ph, l.waitsFor(st2.x), f[FuseGateUp], f[FuseGateUp])
	gate, up := tensor{gb, outs[0].ctr, outs[0].thr}, tensor{ub, outs[1].ctr, outs[1].thr}

	if f[FuseSiLUStaging] {
		return l.siluDown(pre, keys.Down, gate, up, hAttn, f)
	}
	act := l.elementwise(ir.OpSiLUMul, pre+".swiglu", pre+".act", gate, up, I, 3)
	return l.residualProjection(pre+".down_proj", pre+".d", pre+".mlp_residual", pre+".h_mlp", keys.Down, act, hAttn, I, f)
}

// proj adds the projection's weight and binds it into its tile builder (a
// quantised weight's tiles read its scales too, withScales).
func (l *lowerer) proj(name, key string, n, k int, build func(off, w, weight int) ir.Task) projection {
	wb := l.weight(key, n, k)
	return projection{name: name, key: key, n: n, k: k, task: func(off, w int) ir.Task { return l.withScales(build(off, w, wb), wb) }}
}

// residualProjection is out = resid + x @ W.T: GEMV_ADD tiles with
// residual_epilogue, else the projection's tiles then an ADD task.
func (l *lowerer) residualProjection(name, out, addName, sumName, key string, x, resid tensor, K int, f fusionSet) tensor {
	H := l.m.Hidden
	epi := f[FuseResidualEpi]
	ob := l.activation(out, l.shape(l.b, H))
	if epi {
		ob = l.activation(sumName, l.shape(l.b, H))
	}
	ph := &phase{projs: []projection{l.proj(name, key, H, K, func(off, w int, wb int) ir.Task {
		if epi {
			return l.tileTask(ir.FusedGEMVAdd, []int{x.buf, wb, resid.buf}, ob, K, off, w, int64(l.b*w))
		}
		return l.tileTask(ir.FusedNone, []int{x.buf, wb}, ob, K, off, w, 0)
	})}}
	waits := l.waitsFor(x)
	if epi {
		waits = l.waitsFor(x, resid)
	}
	outs := l.emitPhase(name, ph, waits, false, false)
	o := tensor{ob, outs[0].ctr, outs[0].thr}
	if epi {
		return o
	}
	return l.elementwise(ir.OpADD, addName, sumName, resid, o, H, 1)
}

// siluDown is the down projection with silu(gate)*up staging (and the
// residual add in its epilogue with residual_epilogue).
func (l *lowerer) siluDown(pre, key string, gate, up, resid tensor, f fusionSet) tensor {
	H, I := l.m.Hidden, l.m.Intermediate
	sumName := pre + ".h_mlp"
	if !f[FuseResidualEpi] {
		sumName = pre + ".d"
	}
	out := l.activation(sumName, l.shape(l.b, H))
	ph := &phase{projs: []projection{l.proj(pre+".down_proj", key, H, I, func(off, w int, wb int) ir.Task {
		if f[FuseResidualEpi] {
			return l.tileTask(ir.FusedSiLUGEMVAdd, []int{gate.buf, up.buf, wb, resid.buf}, out, I, off, w, int64(3*l.b*I+l.b*w))
		}
		return l.tileTask(ir.FusedSiLUGEMV, []int{gate.buf, up.buf, wb}, out, I, off, w, int64(3*l.b*I))
	})}}
	waits := l.waitsFor(gate, up)
	if f[FuseResidualEpi] {
		waits = l.waitsFor(gate, up, resid)
	}
	outs := l.emitPhase(pre+".down_proj", ph, waits, false, false)
	d := tensor{out, outs[0].ctr, outs[0].thr}
	if f[FuseResidualEpi] {
		return d
	}
	return l.elementwise(ir.OpADD, pre+".mlp_residual", pre+".h_mlp", resid, d, H, 1)
}

// ropeView rotates the flat projection output in place of the reshape:
// ROPE reads [B, heads x head_dim] as a view (one position per row).
func (l *lowerer) ropeView(name, out string, flat tensor, outShape []int, nHeads int) tensor {
	hd := l.m.HeadDim
	ob := l.activation(out, outShape)
	ctr := l.p.AddCounter(name)
	l.task(ir.Task{Op: ir.OpROPE, Inputs: l.ints.take(flat.buf, l.posIn.buf), Outputs: l.ints.take(ob), OutCounter: ctr,
		Waits:  l.waitsFor(flat),
		Params: l.params.take(ir.IntParam("head_dim", int64(hd)), ir.FloatParam("theta", l.m.RopeTheta)),
		Label:  name, EstFlops: int64(6 * l.b * nHeads * hd)})
	return tensor{ob, ctr, 1}
}

// cache adds a KV cache buffer.
func (l *lowerer) cache(name string) tensor {
	m := l.m
	shape := l.shape(m.MaxSeq, m.NKVHeads, m.HeadDim)
	if l.b > 1 {
		shape = l.shape(l.b, m.MaxSeq, m.NKVHeads, m.HeadDim)
	}
	return tensor{buf: l.buffer(name, ir.KVCache, m.DType, shape, nil), ctr: -1}
}

// deviceHead is the final norm + lm_head: NORM_GEMV tiles with
// norm_staging, else the reference's RMSNORM + projection, tiled per phase.
func (l *lowerer) deviceHead(h tensor, f fusionSet) {
	m := l.m
	st := l.normStaging(h, l.keys.FinalNorm, f[FuseNormStaging], "final_norm", "hf")
	logits := l.buffer(LogitsOutput, ir.IOOutput, m.DType, l.shape(l.b, m.Vocab), nil)
	build := func(off, w int, wb int) ir.Task {
		return l.tileTask(st.pattern(ir.FusedNormGEMV, ir.FusedNone), append(st.inputs(), wb), logits, m.Hidden, off, w,
			st.flops(l), st.params...)
	}
	var pr projection
	if m.LMHeadShared() {
		pr = projection{name: "lm_head", n: m.Vocab, k: m.Hidden, task: func(off, w int) ir.Task { return build(off, w, l.embedW) }}
	} else {
		pr = l.proj("lm_head", l.keys.LMHead, m.Vocab, m.Hidden, build)
	}
	l.emitPhase("lm_head", &phase{projs: []projection{pr}}, l.waitsFor(st.x), false, false)
}
