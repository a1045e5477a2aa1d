package schedule

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/pyjson"
)

// Names of the IO inputs of a lowered decode step.
const (
	TokenInput   = "token_id"
	PosInput     = "pos"
	ReshapeInput = ir.ReshapeIDInput // the caller supplies [0..B-1]
	LogitsOutput = "logits"
)

// KCacheName and VCacheName name layer's KV cache buffers: [max_seq,
// n_kv, head_dim], or [B, max_seq, n_kv, head_dim] for a batch.
func KCacheName(layer int) string { return "L" + itoa(layer) + ".kcache" }

// VCacheName: see KCacheName.
func VCacheName(layer int) string { return "L" + itoa(layer) + ".vcache" }

// Limits of the lowering: the Python reference's smallest split-KV shard,
// and bounds that keep a hostile config from exhausting memory or
// overflowing element counts.
const (
	minKVPerShard   = 16
	maxLoweredTasks = 2_000_000
	MaxBatch        = 4096
)

// LowerOptions selects the decode step to lower.
type LowerOptions struct {
	Pos int // decode position of this token; kv_len = Pos+1
	B   int // batch: independent sequences decoding one token each (0 means 1)
}

// Lower turns one decode step of a Llama-family model into a program under
// the point's config, in the Python reference's layout (doc.go, Lowering): IO inputs, EMBED, per layer
// RMSNORM, tiled q/k/v GEMVs on all-join counters, the EMBED reshape + ROPE,
// KV_APPEND, whole-window ATTENTION_TILE (or split-KV shards + COMBINE),
// o/gate/up/down GEMVs, SILU_MUL, residual ADDs, then the final RMSNORM and
// the lm_head GEMV into the IO_OUTPUT logits. B > 1 uses GEMM_TILE with
// M_tile = B. Every task gets an SM per the config's sm_assignment.
func Lower(cfg model.Config, t *ir.GpuTarget, p Point, opts LowerOptions) (*ir.Program, error) {
	if t == nil {
		return nil, errors.New("lowering needs a GPU target")
	}
	if t.NumSMs <= 0 {
		return nil, fmt.Errorf("target '%s' has no SMs", t.Name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := opts.B
	if b == 0 {
		b = 1
	}
	if b < 0 || b > MaxBatch {
		return nil, fmt.Errorf("batch B=%d is outside [1, %d]", b, MaxBatch)
	}
	if opts.Pos < 0 || opts.Pos >= cfg.MaxSeq {
		return nil, fmt.Errorf("decode position pos=%d is outside [0, max_seq=%d)", opts.Pos, cfg.MaxSeq)
	}
	n := estimateTasks(&cfg, &p.Config, t.NumSMs, opts.Pos+1, b)
	if n > maxLoweredTasks {
		return nil, fmt.Errorf("model too large to lower: about %d tasks (limit %d)", n, maxLoweredTasks)
	}
	l := newLowerer(&cfg, t, &p.Config, opts.Pos, b, n)
	l.lower()
	prog := l.p
	if err := AssignSMs(prog, p.Config.SMAssignment, t.NumSMs); err != nil {
		return nil, err
	}
	return prog, nil
}

// tensor is a lowered value: its buffer and the (counter, threshold) pair
// that says it is fully written (ctr < 0 for read-only externals).
type tensor struct {
	buf, ctr, thr int
}

type lowerer struct {
	m      *model.Config
	t      *ir.GpuTarget
	cfg    *ir.ScheduleConfig
	p      *ir.Program
	pos    int
	kvLen  int
	b      int
	dbytes int64
	keys   model.Names

	ints   arena[int]
	waits  arena[ir.Wait]
	params arena[ir.Param]

	token, posIn, reshape tensor
	embedW                int
	// quant holds the stored dtype of every quantised weight key (I8 or
	// I4; model.Keys), scales the scales buffer of each quantised weight
	// buffer: a tile reading such a weight also reads its scales
	// (withScales).
	quant  map[string]ir.DType
	scales map[int]int
	// headWaits, when set, is the wait list of KV head h's attention slice
	// (per-KV-head counters, emitHeadPhase); nil: every slice waits for
	// the whole of q, k and v.
	headWaits func(h int) []ir.Wait
}

func newLowerer(m *model.Config, t *ir.GpuTarget, cfg *ir.ScheduleConfig, pos, b, n int) *lowerer {
	p := ir.NewProgram()
	p.Target = t
	p.Config = cfg.Clone()
	l := &lowerer{m: m, t: t, cfg: cfg, p: p, pos: pos, kvLen: pos + 1, b: b,
		dbytes: int64(max(1, m.DType.Bits()/8)), keys: model.KeyNames(*m)}
	if m.Quant.On() {
		l.quant, l.scales = map[string]ir.DType{}, map[int]int{}
		for _, k := range model.Keys(*m) {
			if k.DType == ir.I8 || k.DType == ir.I4 {
				l.quant[k.Key] = k.DType
			}
		}
	}
	p.Tasks = make([]ir.Task, 0, n)
	p.Buffers = make([]ir.Buffer, 0, 4+16*m.NLayers+8)
	p.Counters = make([]ir.Counter, 0, 4+20*m.NLayers+4)
	l.ints.chunk = 6*n + 64
	l.waits.chunk = 2*n + 16
	l.params.chunk = 3*n + 64
	return l
}

// arena hands out capacity-limited sub-slices of large chunks, so that a
// program's thousands of small slices cost a handful of allocations while
// an append to one task's slice can never clobber another's.
type arena[T any] struct {
	buf   []T
	chunk int
}

func (a *arena[T]) take(xs ...T) []T {
	if len(a.buf)+len(xs) > cap(a.buf) {
		a.buf = make([]T, 0, max(a.chunk, len(xs), 64))
	}
	start := len(a.buf)
	a.buf = append(a.buf, xs...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// gemvNTile is the reference's tile width rule (_gemv_n_tile): an explicit
// N_tile clamped to [1, N], else max(16, base_width or 32) clamped to N;
// then widened to ceil(N/64) if that would make more than 64 tiles.
func gemvNTile(c *ir.ScheduleConfig, n int) int {
	w, _ := gemvWidth(c)
	nt := max(1, min(w, n))
	if ceilDiv(n, nt) > maxTiles {
		nt = ceilDiv(n, maxTiles)
	}
	return max(1, nt)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// partitions is the split-KV shard count P (1 = whole-window attention).
// Unlike the Python reference, which splits only at batch 1, amk splits
// every sequence of a batch the same way: shard p covers the same rows of
// each sequence's KV window and writes one partial [B, n_heads, hd+2].
func partitions(c *ir.ScheduleConfig, numSMs, kvLen int) int {
	np, ok := c.Tile("attention", "n_partitions")
	if !ok || np <= 1 {
		return 1
	}
	return max(1, min(maxPartitions, numSMs, np, ceilDiv(kvLen, minKVPerShard)))
}

// kvHeadSplit is the config's tiling.attention.kv_head_split: one
// attention task per KV head.
func (l *lowerer) kvHeadSplit() bool {
	v, ok := l.cfg.Tile("attention", "kv_head_split")
	return ok && v > 0
}

// tilesPerSM is the config's tiling.gemv.tiles_per_sm (0: the reference's
// N_tile rule).
func (l *lowerer) tilesPerSM() int {
	v, _ := l.cfg.Tile("gemv", "tiles_per_sm")
	return max(v, 0)
}

// estimateTasks bounds the tasks the lowering will emit (exact for the
// reference lowering; with tiles_per_sm, each of a layer's four phases and
// the lm_head adds at most tiles_per_sm x num_SMs tiles; per-KV-head
// counters cut each of q, k and v once more per KV head at most).
func estimateTasks(m *model.Config, cfg *ir.ScheduleConfig, numSMs, kvLen, b int) int {
	n := estimateReference(m, cfg, numSMs, kvLen, b)
	if tps, ok := cfg.Tile("gemv", "tiles_per_sm"); ok && tps > 0 {
		n += (4*m.NLayers + 1) * min(tps, maxTilesPerSM) * numSMs
	}
	if v, ok := cfg.Tile("attention", "head_counters"); ok && v > 0 {
		n += 3 * m.NLayers * m.NKVHeads // q|k|v tiles cut at the KV-head groups' boundaries
	}
	return n
}

func estimateReference(m *model.Config, cfg *ir.ScheduleConfig, numSMs, kvLen, b int) int {
	tiles := func(n int) int { return ceilDiv(n, gemvNTile(cfg, n)) }
	qd, kd := m.QDim(), m.KVDim()
	slices := 1
	if v, ok := cfg.Tile("attention", "kv_head_split"); ok && v > 0 {
		slices = m.NKVHeads
	}
	attn := slices
	if p := partitions(cfg, numSMs, kvLen); p > 1 {
		attn = p*slices + 1
	}
	perLayer := 12 + attn - 1 + tiles(qd) + 2*tiles(kd) + tiles(m.Hidden) + 2*tiles(m.Intermediate) + tiles(m.Hidden)
	return 2 + m.NLayers*perLayer + tiles(m.Vocab)
}

func (l *lowerer) lower() {
	m, p := l.m, l.p
	l.token = l.io(TokenInput)
	l.posIn = l.io(PosInput)
	l.reshape = l.io(ReshapeInput)
	h := l.embed()
	if f := fusionsOf(l.cfg); f.any() || l.tilesPerSM() > 0 {
		for layer := 0; layer < m.NLayers; layer++ {
			h = l.deviceLayer(layer, h, f)
		}
		l.deviceHead(h, f)
	} else {
		for layer := 0; layer < m.NLayers; layer++ {
			h = l.layer(layer, h)
		}
		hf := l.rmsnorm("final_norm", "hf", l.keys.FinalNorm, h)
		l.linear("lm_head", LogitsOutput, l.keys.LMHead, hf, m.Hidden, m.Vocab, ir.IOOutput)
	}

	p.SetMeta("model", pyjson.StringValue(modelName(m)))
	p.SetMeta("gpu", pyjson.StringValue(l.t.Name))
	p.SetMeta("regime", pyjson.StringValue("decode"))
	p.SetMeta("pos", intV(l.pos))
	p.SetMeta("kv_len", intV(l.kvLen))
	p.SetMeta("dtype", pyjson.StringValue(m.DType.String()))
	p.SetMeta("n_layers", intV(m.NLayers))
	p.SetMeta("weight_bytes", pyjson.IntValue(p.TotalWeightBytes()))
	if m.Quant.On() { // the reference's quant meta, with amk's scheme name
		p.SetMeta("quantized", pyjson.BoolValue(true))
		p.SetMeta("quant", pyjson.ObjectValue(
			pyjson.M("scheme", pyjson.StringValue(m.Quant.String())),
			pyjson.M("bits", intV(m.Quant.Bits)), pyjson.M("group", intV(m.Quant.Group)),
			pyjson.M("symmetric", pyjson.BoolValue(true)), pyjson.M("n_keys", intV(len(l.quant))),
			pyjson.M("scales_dtype", pyjson.StringValue(model.ScalesDType.String())),
			pyjson.M("lm_head", pyjson.StringValue(lmHeadPrecision(m)))))
	}
}

// lmHeadPrecision says how the lm_head is stored: quantised, or at the
// model dtype.
func lmHeadPrecision(m *model.Config) string {
	if m.Quant.QuantizesRole(model.RoleLMHead) {
		return m.Quant.WeightDType().String()
	}
	return m.DType.String()
}

func modelName(m *model.Config) string {
	if m.Name != "" {
		return m.Name
	}
	return "model"
}

func (l *lowerer) layer(layer int, resid tensor) tensor {
	m, keys := l.m, &l.keys.Layers[layer]
	pre := "L" + itoa(layer)
	H, qd, kd := m.Hidden, m.QDim(), m.KVDim()
	an := l.rmsnorm(pre+".input_norm", pre+".an", keys.InputNorm, resid)
	q := l.linear(pre+".q_proj", pre+".q", keys.Q, an, H, qd, ir.Activation)
	k := l.linear(pre+".k_proj", pre+".k", keys.K, an, H, kd, ir.Activation)
	v := l.linear(pre+".v_proj", pre+".v", keys.V, an, H, kd, ir.Activation)
	qShape := l.shape(m.NHeads, m.HeadDim)
	if l.b > 1 {
		qShape = l.shape(l.b, m.NHeads, m.HeadDim)
	}
	qr := l.rope(pre+".rope_q", pre+".qr", q, qShape, m.NHeads)
	kr := l.rope(pre+".rope_k", pre+".kr", k, l.shape(l.b, m.NKVHeads, m.HeadDim), m.NKVHeads)
	kc := l.kvAppend(pre+".k_append", KCacheName(layer), kr)
	vc := l.kvAppend(pre+".v_append", VCacheName(layer), v)
	attn := l.attention(pre+".attention", pre+".attn", qr, kc, vc)
	o := l.linear(pre+".o_proj", pre+".o", keys.O, attn, qd, H, ir.Activation)
	hAttn := l.elementwise(ir.OpADD, pre+".attn_residual", pre+".h_attn", resid, o, H, 1)
	mn := l.rmsnorm(pre+".post_norm", pre+".mn", keys.PostNorm, hAttn)
	gate := l.linear(pre+".gate_proj", pre+".gate", keys.Gate, mn, H, m.Intermediate, ir.Activation)
	up := l.linear(pre+".up_proj", pre+".up", keys.Up, mn, H, m.Intermediate, ir.Activation)
	act := l.elementwise(ir.OpSiLUMul, pre+".swiglu", pre+".act", gate, up, m.Intermediate, 3)
	d := l.linear(pre+".down_proj", pre+".d", keys.Down, act, m.Intermediate, H, ir.Activation)
	return l.elementwise(ir.OpADD, pre+".mlp_residual", pre+".h_mlp", hAttn, d, H, 1)
}

func (l *lowerer) shape(dims ...int) []int { return l.ints.take(dims...) }

func (l *lowerer) buffer(name string, kind ir.BufferKind, dt ir.DType, shape []int, source *string) int {
	return l.p.AddBuffer(ir.Buffer{Name: name, Kind: kind, DType: dt, Shape: shape, Source: source})
}

func (l *lowerer) activation(name string, shape []int) int {
	return l.buffer(name, ir.Activation, l.m.DType, shape, nil)
}

func (l *lowerer) io(name string) tensor {
	return tensor{buf: l.buffer(name, ir.IOInput, ir.I32, l.shape(l.b), nil), ctr: -1}
}

// weight adds a WEIGHT buffer named and sourced by its state-dict key: a
// quantised projection [N, K] at its stored dtype, followed by its scales
// [N, groups] (source key + ir.ScalesSuffix).
func (l *lowerer) weight(key string, dims ...int) int {
	src := key
	dt, quant := l.quant[key]
	if !quant {
		return l.buffer(key, ir.Weight, l.m.DType, l.shape(dims...), &src)
	}
	w := l.buffer(key, ir.Weight, dt, l.shape(dims...), &src)
	ssrc := key + ir.ScalesSuffix
	groups := int(ir.QuantGroups(int64(dims[1]), int64(l.m.Quant.GroupOf(dims[1]))))
	l.scales[w] = l.buffer(ssrc, ir.Weight, model.ScalesDType, l.shape(dims[0], groups), &ssrc)
	return w
}

// withScales makes a projection tile that reads weight buffer w a
// quantised tile when w is quantised (ir.TileQuant): its scales as the last
// input, params qdtype and group, and its bytes at the stored width plus
// the scales. Other tiles are returned as they are.
func (l *lowerer) withScales(t ir.Task, w int) ir.Task {
	s, ok := l.scales[w]
	if !ok {
		return t
	}
	wb, sb := &l.p.Buffers[w], &l.p.Buffers[s]
	k := wb.Shape[1]
	t.Inputs = l.ints.take(append(append(make([]int, 0, len(t.Inputs)+1), t.Inputs...), s)...)
	t.Params = l.params.take(append(append(make([]ir.Param, 0, len(t.Params)+2), t.Params...),
		ir.IntParam("qdtype", int64(wb.DType)), ir.IntParam("group", int64(l.m.Quant.GroupOf(k))))...)
	rows := t.Params.IntOr("N_tile", 0)
	t.EstBytes = rows * (wb.DType.NBytes(int64(k)) + sb.DType.NBytes(int64(sb.Shape[1])))
	return t
}

// waitsFor is the wait list to read the given tensors (externals add none).
func (l *lowerer) waitsFor(ts ...tensor) []ir.Wait {
	var w [ir.MaxWaits]ir.Wait
	n := 0
	for _, t := range ts {
		if t.ctr < 0 || slices.Contains(w[:n], ir.Wait{Counter: t.ctr, Threshold: t.thr}) {
			continue // an external, or a sibling on the same (shared) counter
		}
		w[n] = ir.Wait{Counter: t.ctr, Threshold: t.thr}
		n++
	}
	return l.waits.take(w[:n]...)
}

func (l *lowerer) task(t ir.Task) { l.p.AddTask(t) }

func (l *lowerer) embed() tensor {
	H := l.m.Hidden
	ob := l.activation("h0", l.shape(l.b, H))
	ctr := l.p.AddCounter("embed")
	l.embedW = l.weight(l.keys.Embed, l.m.Vocab, H)
	l.task(ir.Task{Op: ir.OpEMBED, Inputs: l.ints.take(l.token.buf, l.embedW), Outputs: l.ints.take(ob),
		OutCounter: ctr, Waits: l.waits.take(), Params: l.params.take(ir.IntParam("hidden", int64(H))),
		Label: "embed", EstBytes: int64(l.b*H) * l.dbytes})
	return tensor{ob, ctr, 1}
}

func (l *lowerer) rmsnorm(name, out, key string, x tensor) tensor {
	H := l.m.Hidden
	ob := l.activation(out, l.shape(l.b, H))
	ctr := l.p.AddCounter(name)
	w := l.weight(key, H)
	l.task(ir.Task{Op: ir.OpRMSNORM, Inputs: l.ints.take(x.buf, w), Outputs: l.ints.take(ob), OutCounter: ctr,
		Waits: l.waitsFor(x), Params: l.params.take(ir.FloatParam("eps", l.m.RMSEps), ir.IntParam("hidden", int64(H))),
		Label: name, EstBytes: int64(l.b*H) * l.dbytes, EstFlops: int64(4 * l.b * H)})
	return tensor{ob, ctr, 1}
}

// linear emits the column-tiled projection out = x @ W.T (W is [N, K]) into
// a new (B, N) buffer: GEMV_TILE at B = 1, GEMM_TILE with M_tile = B
// otherwise. All tiles share one counter; readers all-join on it.
func (l *lowerer) linear(name, out, key string, x tensor, K, N int, kind ir.BufferKind) tensor {
	ob := l.buffer(out, kind, l.m.DType, l.shape(l.b, N), nil)
	nt := gemvNTile(l.cfg, N)
	nTiles := ceilDiv(N, nt)
	note := fmt.Sprintf("%s (%d tiles)", name, nTiles)
	op := ir.OpGEMVTile
	if l.b > 1 {
		note = fmt.Sprintf("%s (%d tiles, M=%d)", name, nTiles, l.b)
		op = ir.OpGEMMTile
	}
	ctr := l.p.AddCounter(note)
	var w int
	if kind == ir.IOOutput && l.m.LMHeadShared() {
		w = l.embedW
	} else {
		w = l.weight(key, N, K)
	}
	perCol := int64(K) * l.dbytes
	for i := range nTiles {
		off := i * nt
		width := min(nt, N-off)
		var params []ir.Param
		if op == ir.OpGEMMTile {
			params = l.params.take(ir.IntParam("M_tile", int64(l.b)), ir.IntParam("K", int64(K)),
				ir.IntParam("N_tile", int64(width)), ir.IntParam("n_off", int64(off)))
		} else {
			params = l.params.take(ir.IntParam("K", int64(K)), ir.IntParam("N_tile", int64(width)),
				ir.IntParam("n_off", int64(off)))
		}
		l.task(l.withScales(ir.Task{Op: op, Inputs: l.ints.take(x.buf, w), Outputs: l.ints.take(ob), OutCounter: ctr,
			Waits: l.waitsFor(x), Params: params, Label: tileLabel(name, i),
			EstBytes: perCol * int64(width), EstFlops: int64(2*K*width) * int64(l.b)}, w))
	}
	return tensor{ob, ctr, nTiles}
}

func tileLabel(name string, i int) string {
	return name + "[t" + itoa(i) + "]"
}

// itoa avoids fmt on the per-tile path.
func itoa(i int) string {
	if i >= 0 && i < 10 {
		return string(rune('0' + i))
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// rope reshapes the flat projection into head shape (an EMBED whose ids are
// reshape_id0 and whose table is the flat activation), then rotates it.
func (l *lowerer) rope(name, out string, flat tensor, headShape []int, nHeads int) tensor {
	hd := l.m.HeadDim
	hsName := out + ".hs"
	hs := l.activation(hsName, headShape)
	rctr := l.p.AddCounter(name + ".reshape")
	l.task(ir.Task{Op: ir.OpEMBED, Inputs: l.ints.take(l.reshape.buf, flat.buf), Outputs: l.ints.take(hs),
		OutCounter: rctr, Waits: l.waitsFor(flat), Params: l.params.take(ir.IntParam("hidden", int64(hd))),
		Label: name + ".reshape"})
	ob := l.activation(out, l.ints.take(headShape...))
	ctr := l.p.AddCounter(name)
	l.task(ir.Task{Op: ir.OpROPE, Inputs: l.ints.take(hs, l.posIn.buf), Outputs: l.ints.take(ob), OutCounter: ctr,
		Waits:  l.waitsFor(tensor{hs, rctr, 1}),
		Params: l.params.take(ir.IntParam("head_dim", int64(hd)), ir.FloatParam("theta", l.m.RopeTheta)),
		Label:  name, EstFlops: int64(6 * nHeads * hd)})
	return tensor{ob, ctr, 1}
}

func (l *lowerer) kvAppend(name, cacheName string, src tensor) tensor {
	m := l.m
	shape := l.shape(m.MaxSeq, m.NKVHeads, m.HeadDim)
	if l.b > 1 {
		shape = l.shape(l.b, m.MaxSeq, m.NKVHeads, m.HeadDim)
	}
	cache := l.buffer(cacheName, ir.KVCache, m.DType, shape, nil)
	ctr := l.p.AddCounter(name)
	l.task(ir.Task{Op: ir.OpKVAppend, Inputs: l.ints.take(src.buf, cache), Outputs: l.ints.take(cache),
		OutCounter: ctr, Waits: l.waitsFor(src), Params: l.params.take(ir.IntParam("pos", int64(l.pos))),
		Label: name, EstBytes: int64(l.b*m.NKVHeads*m.HeadDim) * l.dbytes})
	return tensor{cache, ctr, 1}
}

func (l *lowerer) attention(name, out string, q, kc, vc tensor) tensor {
	m := l.m
	hd, nh, nkv := m.HeadDim, m.NHeads, m.NKVHeads
	scale := 1 / math.Sqrt(float64(hd))
	P := partitions(l.cfg, l.t.NumSMs, l.kvLen)
	attnParams := func(kvStart, kvLen int, partial bool) []ir.Param {
		ps := []ir.Param{ir.IntParam("head_dim", int64(hd)), ir.IntParam("kv_start", int64(kvStart)),
			ir.IntParam("kv_len", int64(kvLen)), ir.FloatParam("scale", scale), ir.IntParam("n_heads", int64(nh)),
			ir.IntParam("n_kv_heads", int64(nkv))}
		if partial {
			ps = append(ps, ir.IntParam("flags", ir.FlagPartialWrite))
		}
		return l.params.take(ps...)
	}
	// With tiling.attention.kv_head_split each attention (or split-KV shard)
	// is one task per KV head: the query heads of a GQA group share its K/V
	// rows, the slices run on distinct SMs and signal one counter.
	slices := 1
	if l.kvHeadSplit() {
		slices = nkv
	}
	waits := func(h int) []ir.Wait {
		if l.headWaits != nil && slices == nkv {
			return l.headWaits(h)
		}
		return l.waitsFor(q, kc, vc)
	}
	sliced := func(ps []ir.Param, h int) []ir.Param {
		if slices == 1 {
			return ps
		}
		return l.params.take(append(append([]ir.Param{}, ps...), ir.IntParam("n_off", int64(h)), ir.IntParam("N_tile", 1))...)
	}
	if P <= 1 {
		ob := l.activation(out, l.shape(l.b, m.QDim()))
		ctr := l.p.AddCounter(name)
		for h := 0; h < slices; h++ {
			label := name
			if slices > 1 {
				label = fmt.Sprintf("%s.h%d", name, h)
			}
			l.task(ir.Task{Op: ir.OpAttentionTile, Inputs: l.ints.take(q.buf, kc.buf, vc.buf), Outputs: l.ints.take(ob),
				OutCounter: ctr, Waits: waits(h), Params: sliced(attnParams(0, l.kvLen, false), h), Label: label,
				EstBytes: attentionBytes(l.b, l.kvLen, nkv, hd, l.dbytes) / int64(slices),
				EstFlops: attentionFlops(l.b, nh, hd, l.kvLen) / int64(slices)})
		}
		return tensor{ob, ctr, slices}
	}
	shard := ceilDiv(l.kvLen, P)
	parts := make([]tensor, 0, P)
	for i := range P {
		ks := i * shard
		kl := min(shard, l.kvLen-ks)
		if kl <= 0 {
			break
		}
		partShape := l.shape(nh, hd+2)
		if l.b > 1 {
			partShape = l.shape(l.b, nh, hd+2) // the reference's [n_heads, hd+2] per sequence
		}
		part := l.activation(fmt.Sprintf("%s.part%d", out, i), partShape)
		label := fmt.Sprintf("%s.s%d", name, i)
		pc := l.p.AddCounter(label)
		for h := 0; h < slices; h++ {
			sm := (i*slices + h) % l.t.NumSMs
			tl := label
			if slices > 1 {
				tl = fmt.Sprintf("%s.h%d", label, h)
			}
			l.task(ir.Task{Op: ir.OpAttentionTile, Inputs: l.ints.take(q.buf, kc.buf, vc.buf), Outputs: l.ints.take(part),
				OutCounter: pc, Waits: waits(h), Params: sliced(attnParams(ks, kl, true), h), SM: &sm, Label: tl,
				EstBytes: attentionBytes(l.b, kl, nkv, hd, l.dbytes) / int64(slices),
				EstFlops: attentionFlops(l.b, nh, hd, kl) / int64(slices)})
		}
		parts = append(parts, tensor{part, pc, slices})
	}
	ob := l.activation(out, l.shape(l.b, m.QDim()))
	cc := l.p.AddCounter(name)
	ins := make([]int, len(parts))
	for i, pt := range parts {
		ins[i] = pt.buf
	}
	n := int64(len(parts))
	l.task(ir.Task{Op: ir.OpAttentionCombine, Inputs: l.ints.take(ins...), Outputs: l.ints.take(ob), OutCounter: cc,
		Waits: l.waitsFor(parts...), Params: l.params.take(ir.IntParam("head_dim", int64(hd)),
			ir.IntParam("n_heads", int64(nh)), ir.IntParam("n_kv_heads", int64(nkv))),
		Label: name + ".comb", EstBytes: n * int64(l.b*nh*(hd+2)) * l.dbytes, EstFlops: n * int64(l.b*nh*hd)})
	return tensor{ob, cc, 1}
}

func attentionBytes(b, kvLen, nkv, hd int, dbytes int64) int64 {
	return int64(b) * 2 * int64(kvLen) * int64(nkv*hd) * dbytes
}

func attentionFlops(b, nh, hd, kvLen int) int64 {
	return int64(b) * 4 * int64(nh*hd) * int64(kvLen)
}

// elementwise emits ADD (flops/elem 1) or SILU_MUL (3) over (B, n).
func (l *lowerer) elementwise(op ir.Op, name, out string, a, b tensor, n int, flopsPerElem int) tensor {
	ob := l.activation(out, l.shape(l.b, n))
	ctr := l.p.AddCounter(name)
	l.task(ir.Task{Op: op, Inputs: l.ints.take(a.buf, b.buf), Outputs: l.ints.take(ob), OutCounter: ctr,
		Waits: l.waitsFor(a, b), Params: l.params.take(), Label: name,
		EstBytes: int64(l.b*n) * l.dbytes, EstFlops: int64(flopsPerElem * l.b * n)})
	return tensor{ob, ctr, 1}
}
