package validate

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// decodeShape sizes a program shaped like the reference's lowering of one
// Llama decode step: per layer RMSNORM -> q/k/v GEMV tiles (one all-join
// counter per projection) -> EMBED reshape + ROPE (q, k) -> KV_APPEND (k, v)
// -> ATTENTION_TILE -> o tiles -> ADD -> RMSNORM -> gate/up tiles ->
// SILU_MUL -> down tiles -> ADD; then final RMSNORM and lm_head tiles.
type decodeShape struct {
	layers, tiles                        int // tiles per projection
	hidden, heads, kvHeads, headDim, ffn int
	vocab, maxSeq, pos                   int
	pages                                bool // bind activations to pages, alternating by layer parity
}

// llama8B at 32 layers is the reference's 14,786-task 8B-shape program.
func llama8B(layers int) decodeShape {
	return decodeShape{layers: layers, tiles: 64, hidden: 4096, heads: 32, kvHeads: 8, headDim: 128, ffn: 14336,
		vocab: 128256, maxSeq: 4096, pos: 100}
}

type decodeBuilder struct {
	s     decodeShape
	p     *ir.Program
	ready map[int]ir.Wait // buffer -> the wait that says it is fully written
	layer []int           // activation buffer -> layer (-1 outside layers)
}

func buildDecode(s decodeShape) *ir.Program {
	p := ir.NewProgram()
	p.Target, _ = ir.Target("h100")
	p.SetMeta("model", pyjson.StringValue("bench"))
	p.SetMeta("gpu", pyjson.StringValue("h100"))
	d := &decodeBuilder{s: s, p: p, ready: map[int]ir.Wait{}}
	d.emit()
	return p
}

func (d *decodeBuilder) buf(name string, kind ir.BufferKind, dt ir.DType, layer int, shape ...int) int {
	b := ir.Buffer{Name: name, Kind: kind, DType: dt, Shape: shape, Space: ir.HBM}
	if kind == ir.Weight {
		b.Source = &b.Name
	}
	id := d.p.AddBuffer(b)
	d.layer = append(d.layer, layer)
	return id
}

func (d *decodeBuilder) act(name string, layer int, shape ...int) int {
	return d.buf(name, ir.Activation, ir.BF16, layer, shape...)
}

func (d *decodeBuilder) waitsFor(bufs ...int) []ir.Wait {
	var ws []ir.Wait
	for _, b := range bufs {
		if w, ok := d.ready[b]; ok {
			ws = append(ws, w)
		}
	}
	return ws
}

// task adds one task with its own counter; the output becomes ready at 1.
func (d *decodeBuilder) task(op ir.Op, in []int, out int, label string, params ...ir.Param) {
	c := d.p.AddCounter(label)
	d.p.AddTask(ir.Task{Op: op, Inputs: in, Outputs: []int{out}, OutCounter: c, Waits: d.waitsFor(in...),
		Params: params, Label: label})
	d.ready[out] = ir.Wait{Counter: c, Threshold: 1}
}

// linear tiles out = x @ W.T (W [n, k]) into out [1, n] on one counter.
func (d *decodeBuilder) linear(x, out int, k, n int, label string) {
	w := d.buf(label+".weight", ir.Weight, ir.BF16, -1, n, k)
	width := (n + d.s.tiles - 1) / d.s.tiles
	c := d.p.AddCounter(label)
	ws := d.waitsFor(x)
	count := 0
	for off := 0; off < n; off += width {
		d.p.AddTask(ir.Task{Op: ir.OpGEMVTile, Inputs: []int{x, w}, Outputs: []int{out}, OutCounter: c, Waits: ws,
			Params:   ir.Params{ir.IntParam("K", int64(k)), ir.IntParam("N_tile", int64(min(width, n-off))), ir.IntParam("n_off", int64(off))},
			EstBytes: int64(2 * k * min(width, n-off)), Label: fmt.Sprintf("%s[t%d]", label, count)})
		count++
	}
	d.ready[out] = ir.Wait{Counter: c, Threshold: count}
}

func (d *decodeBuilder) emit() {
	s := d.s
	qd, kd := s.heads*s.headDim, s.kvHeads*s.headDim
	tok := d.buf("token_id", ir.IOInput, ir.I32, -1, 1)
	pos := d.buf("pos", ir.IOInput, ir.I32, -1, 1)
	rid := d.buf("reshape_id0", ir.IOInput, ir.I32, -1, 1)
	resid := d.act("h0", -1, 1, s.hidden)
	d.task(ir.OpEMBED, []int{tok, d.buf("embed.weight", ir.Weight, ir.BF16, -1, s.vocab, s.hidden)}, resid, "embed", ir.IntParam("hidden", int64(s.hidden)))
	norm := func(x int, name string, layer int) int {
		out := d.act(name, layer, 1, s.hidden)
		d.task(ir.OpRMSNORM, []int{x, d.buf(name+".weight", ir.Weight, ir.BF16, -1, s.hidden)}, out, name,
			ir.FloatParam("eps", 1e-5), ir.IntParam("hidden", int64(s.hidden)))
		return out
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("L%d", l)
		an := norm(resid, p+".input_norm", l)
		q, k, v := d.act(p+".q", l, 1, qd), d.act(p+".k", l, 1, kd), d.act(p+".v", l, 1, kd)
		d.linear(an, q, s.hidden, qd, p+".q_proj")
		d.linear(an, k, s.hidden, kd, p+".k_proj")
		d.linear(an, v, s.hidden, kd, p+".v_proj")
		rope := func(flat int, name string, shape ...int) int {
			hs := d.act(name+".hs", l, shape...)
			d.task(ir.OpEMBED, []int{rid, flat}, hs, name+".reshape", ir.IntParam("hidden", int64(s.headDim)))
			out := d.act(name, l, shape...)
			d.task(ir.OpROPE, []int{hs, pos}, out, name, ir.IntParam("head_dim", int64(s.headDim)), ir.FloatParam("theta", 500000))
			return out
		}
		qr := rope(q, p+".rope_q", s.heads, s.headDim)
		kr := rope(k, p+".rope_k", 1, s.kvHeads, s.headDim)
		kc := d.buf(p+".kcache", ir.KVCache, ir.BF16, -1, s.maxSeq, s.kvHeads, s.headDim)
		vc := d.buf(p+".vcache", ir.KVCache, ir.BF16, -1, s.maxSeq, s.kvHeads, s.headDim)
		d.task(ir.OpKVAppend, []int{kr, kc}, kc, p+".k_append", ir.IntParam("pos", int64(s.pos)))
		d.task(ir.OpKVAppend, []int{v, vc}, vc, p+".v_append", ir.IntParam("pos", int64(s.pos)))
		attn := d.act(p+".attn", l, 1, qd)
		d.task(ir.OpAttentionTile, []int{qr, kc, vc}, attn, p+".attention",
			ir.IntParam("head_dim", int64(s.headDim)), ir.IntParam("kv_start", 0), ir.IntParam("kv_len", int64(s.pos+1)),
			ir.FloatParam("scale", 0.08838834764831845), ir.IntParam("n_heads", int64(s.heads)), ir.IntParam("n_kv_heads", int64(s.kvHeads)))
		o := d.act(p+".o", l, 1, s.hidden)
		d.linear(attn, o, qd, s.hidden, p+".o_proj")
		hAttn := d.act(p+".h_attn", l, 1, s.hidden)
		d.task(ir.OpADD, []int{resid, o}, hAttn, p+".attn_residual")
		mn := norm(hAttn, p+".post_norm", l)
		gate, up := d.act(p+".gate", l, 1, s.ffn), d.act(p+".up", l, 1, s.ffn)
		d.linear(mn, gate, s.hidden, s.ffn, p+".gate_proj")
		d.linear(mn, up, s.hidden, s.ffn, p+".up_proj")
		act := d.act(p+".act", l, 1, s.ffn)
		d.task(ir.OpSiLUMul, []int{gate, up}, act, p+".swiglu")
		down := d.act(p+".d", l, 1, s.hidden)
		d.linear(act, down, s.ffn, s.hidden, p+".down_proj")
		hMLP := d.act(p+".h_mlp", l, 1, s.hidden)
		d.task(ir.OpADD, []int{hAttn, down}, hMLP, p+".mlp_residual")
		resid = hMLP
	}
	hf := norm(resid, "final_norm", -1)
	logits := d.buf("logits", ir.IOOutput, ir.BF16, -1, 1, s.vocab)
	d.linear(hf, logits, s.hidden, s.vocab, "lm_head")
	if s.pages {
		d.bindPages()
	}
}

// bindPages puts the k-th activation of layer l on page (l%2)*perLayer + k:
// every use of layer l's activations precedes layer l+2's first writer, so
// the reuse is ordered (the residual stream leaves layer l through
// h_mlp, whose last reader is in layer l+1).
func (d *decodeBuilder) bindPages() {
	pa := &ir.PageAllocation{}
	idx := map[int]int{}
	for b := range d.p.Buffers {
		l := d.layer[b]
		if l < 0 || d.p.Buffers[b].Kind != ir.Activation {
			continue
		}
		k := idx[l]
		idx[l]++
		pa.BufferToPage = append(pa.BufferToPage, ir.PageBinding{Buffer: b, Page: (l%2)*64 + k})
	}
	for pg := range 128 {
		pa.Pages = append(pa.Pages, ir.Page{ID: pg, Space: ir.GlobalScratch, NBytes: 1 << 16, LiveStart: -1, LiveEnd: -1})
	}
	d.p.Pages = pa
}
