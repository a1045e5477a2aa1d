package vm

import (
	"fmt"
	"math"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// toyCfg shapes a hand-built Llama-style decode program, lowered the way
// schedule.Lower produces (tiled GEMVs on all-join counters, the EMBED
// reshape, ROPE, KV_APPEND, attention), so that the VM is exercised on the
// program shape it will run in earnest.
type toyCfg struct {
	layers, hidden, heads, kvHeads, headDim, ffn, vocab, maxSeq, nTile int
	dt                                                                 ir.DType
}

var toySmall = toyCfg{layers: 2, hidden: 32, heads: 4, kvHeads: 2, headDim: 8, ffn: 48, vocab: 40, maxSeq: 8, nTile: 16, dt: ir.F32}

// ready is a tensor's buffer and the (counter, threshold) that says it is
// written; external tensors have no counter.
type ready struct {
	buf, ctr, thr int
}

type toyBuilder struct {
	*builder
	cfg toyCfg
	pos int
}

func (tb *toyBuilder) waits(rs ...ready) []ir.Wait {
	var ws []ir.Wait
	for _, r := range rs {
		if r.ctr >= 0 {
			ws = append(ws, w(r.ctr, r.thr))
		}
	}
	return ws
}

func (tb *toyBuilder) ext(buf int) ready { return ready{buf, -1, 0} }

// op emits one single-task op into a fresh activation (or the given buffer).
func (tb *toyBuilder) op(label string, op ir.Op, out int, in []ready, ps ...ir.Param) ready {
	c := tb.counter(label)
	bufs := make([]int, len(in))
	for i, r := range in {
		bufs[i] = r.buf
	}
	tb.task(label, op, bufs, []int{out}, c, tb.waits(in...), ps...)
	return ready{out, c, 1}
}

func (tb *toyBuilder) act(name string, shape ...int) int {
	return tb.buf(name, ir.Activation, tb.cfg.dt, shape...)
}

// linear emits the GEMV tiles of x @ W.T into out, all on one counter.
func (tb *toyBuilder) linear(name string, x ready, wkey string, n, k, out int) ready {
	wb := tb.weight(wkey, tb.cfg.dt, n, k)
	tiles := (n + tb.cfg.nTile - 1) / tb.cfg.nTile
	c := tb.counter(fmt.Sprintf("%s (%d tiles)", name, tiles))
	for i := range tiles {
		off := i * tb.cfg.nTile
		width := min(tb.cfg.nTile, n-off)
		tb.task(fmt.Sprintf("%s[t%d]", name, i), ir.OpGEMVTile, []int{x.buf, wb}, []int{out}, c, tb.waits(x),
			ip("K", int64(k)), ip("N_tile", int64(width)), ip("n_off", int64(off)))
	}
	return ready{out, c, tiles}
}

// toyProgram builds the decode step at position pos.
func toyProgram(cfg toyCfg, pos int) *ir.Program {
	tb := &toyBuilder{builder: newBuilder(), cfg: cfg, pos: pos}
	H, qd, kd := cfg.hidden, cfg.heads*cfg.headDim, cfg.kvHeads*cfg.headDim
	tok := tb.ext(tb.buf("token_id", ir.IOInput, ir.I32, 1))
	posb := tb.ext(tb.buf("pos", ir.IOInput, ir.I32, 1))
	rid := tb.ext(tb.buf("reshape_id0", ir.IOInput, ir.I32, 1))
	emb := tb.ext(tb.weight("embed.weight", cfg.dt, cfg.vocab, H))
	resid := tb.op("embed", ir.OpEMBED, tb.act("h0", 1, H), []ready{tok, emb}, ip("hidden", int64(H)))
	norm := func(label, wkey string, x ready, out string) ready {
		wb := tb.ext(tb.weight(wkey, cfg.dt, H))
		return tb.op(label, ir.OpRMSNORM, tb.act(out, 1, H), []ready{x, wb}, fp("eps", 1e-6), ip("hidden", int64(H)))
	}
	for l := 0; l < cfg.layers; l++ {
		p := fmt.Sprintf("L%d.", l)
		wk := fmt.Sprintf("layers.%d.", l)
		an := norm(p+"input_norm", wk+"input_norm", resid, p+"an")
		q := tb.linear(p+"q_proj", an, wk+"attn.q_proj.weight", qd, H, tb.act(p+"q", 1, qd))
		k := tb.linear(p+"k_proj", an, wk+"attn.k_proj.weight", kd, H, tb.act(p+"k", 1, kd))
		v := tb.linear(p+"v_proj", an, wk+"attn.v_proj.weight", kd, H, tb.act(p+"v", 1, kd))
		rope := func(name string, x ready, heads int, shape ...int) ready {
			hs := tb.op(p+name+".reshape", ir.OpEMBED, tb.act(p+name+".hs", shape...), []ready{rid, x}, ip("hidden", int64(cfg.headDim)))
			return tb.op(p+name, ir.OpROPE, tb.act(p+name+".r", shape...), []ready{hs, posb}, ip("head_dim", int64(cfg.headDim)), fp("theta", 10000))
		}
		qr := rope("rope_q", q, cfg.heads, cfg.heads, cfg.headDim)
		kr := rope("rope_k", k, cfg.kvHeads, 1, cfg.kvHeads, cfg.headDim)
		kc := tb.buf(p+"kcache", ir.KVCache, cfg.dt, cfg.maxSeq, cfg.kvHeads, cfg.headDim)
		vc := tb.buf(p+"vcache", ir.KVCache, cfg.dt, cfg.maxSeq, cfg.kvHeads, cfg.headDim)
		ka := tb.op(p+"k_append", ir.OpKVAppend, kc, []ready{kr, tb.ext(kc)}, ip("pos", int64(pos)))
		va := tb.op(p+"v_append", ir.OpKVAppend, vc, []ready{v, tb.ext(vc)}, ip("pos", int64(pos)))
		ac := tb.counter(p + "attention")
		attn := tb.act(p+"attn", 1, qd)
		tb.task(p+"attention", ir.OpAttentionTile, []int{qr.buf, kc, vc}, []int{attn}, ac, tb.waits(qr, ka, va),
			attnParams(cfg.headDim, 0, pos+1, cfg.heads, cfg.kvHeads)...)
		o := tb.linear(p+"o_proj", ready{attn, ac, 1}, wk+"attn.o_proj.weight", H, qd, tb.act(p+"o", 1, H))
		hAttn := tb.op(p+"attn_residual", ir.OpADD, tb.act(p+"h_attn", 1, H), []ready{resid, o})
		mn := norm(p+"post_norm", wk+"post_norm", hAttn, p+"mn")
		g := tb.linear(p+"gate_proj", mn, wk+"mlp.gate_proj.weight", cfg.ffn, H, tb.act(p+"gate", 1, cfg.ffn))
		u := tb.linear(p+"up_proj", mn, wk+"mlp.up_proj.weight", cfg.ffn, H, tb.act(p+"up", 1, cfg.ffn))
		a := tb.op(p+"swiglu", ir.OpSiLUMul, tb.act(p+"act", 1, cfg.ffn), []ready{g, u})
		d := tb.linear(p+"down_proj", a, wk+"mlp.down_proj.weight", H, cfg.ffn, tb.act(p+"down", 1, H))
		resid = tb.op(p+"mlp_residual", ir.OpADD, tb.act(p+"h_mlp", 1, H), []ready{hAttn, d})
	}
	hf := norm("final_norm", "final_norm", resid, "hf")
	logits := tb.linear("lm_head", hf, "lm_head.weight", cfg.vocab, H, tb.buf("logits", ir.IOOutput, cfg.dt, 1, cfg.vocab))
	tb.op("argmax", ir.OpSampleArgmax, tb.buf("next_token", ir.IOOutput, ir.I32, 1), []ready{logits})
	return tb.p
}

// toyWeights returns deterministic weights for every WEIGHT buffer of p.
func toyWeights(t testing.TB, p *ir.Program) map[string]*tensor.Tensor {
	ws := map[string]*tensor.Tensor{}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != ir.Weight {
			continue
		}
		n := tensor.Numel(b.Shape)
		vals := make([]float32, n)
		for j := range vals {
			vals[j] = float32(0.3 * math.Sin(float64(j)*0.731+float64(i)*1.37))
		}
		if len(b.Shape) == 1 { // norm weights around 1
			for j := range vals {
				vals[j] += 1
			}
		}
		ws[*b.Source] = ft(t, b.DType, b.Shape, vals...)
	}
	return ws
}

// bindStep binds the inputs of one decode step.
func bindStep(t testing.TB, v *VM, token, pos int) {
	t.Helper()
	for name, val := range map[string]int32{"token_id": int32(token), "pos": int32(pos), "reshape_id0": 0} {
		if err := v.Bind(name, it(t, ir.I32, shp(1), val)); err != nil {
			t.Fatal(err)
		}
	}
}

// eagerToy is an independent float64 forward pass of the toy model with
// its own KV cache: the oracle the VM's program must match.
type eagerToy struct {
	cfg    toyCfg
	w      map[string][]float64
	kc, vc [][][]float64 // [layer][pos] -> kv_dim values
}

func newEagerToy(cfg toyCfg, ws map[string]*tensor.Tensor) *eagerToy {
	e := &eagerToy{cfg: cfg, w: map[string][]float64{}, kc: make([][][]float64, cfg.layers), vc: make([][][]float64, cfg.layers)}
	for k, t := range ws {
		vals := make([]float64, len(t.F))
		for i, v := range t.F {
			vals[i] = float64(v)
		}
		e.w[k] = vals
	}
	return e
}

func (e *eagerToy) matvec(key string, x []float64, n int) []float64 {
	w, k := e.w[key], len(x)
	out := make([]float64, n)
	for i := range out {
		for j := range k {
			out[i] += w[i*k+j] * x[j]
		}
	}
	return out
}

func (e *eagerToy) rms(key string, x []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	r := 1 / math.Sqrt(ss/float64(len(x))+1e-6)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * r * e.w[key][i]
	}
	return out
}

func (e *eagerToy) rope(x []float64, pos int) {
	hd := e.cfg.headDim
	half := hd / 2
	for h := 0; h < len(x)/hd; h++ {
		for i := range half {
			ang := float64(pos) / math.Pow(10000, float64(i)/float64(half))
			a, b := x[h*hd+i], x[h*hd+half+i]
			x[h*hd+i] = a*math.Cos(ang) - b*math.Sin(ang)
			x[h*hd+half+i] = b*math.Cos(ang) + a*math.Sin(ang)
		}
	}
}

func (e *eagerToy) step(token, pos int) []float64 {
	c := e.cfg
	H, hd := c.hidden, c.headDim
	x := append([]float64(nil), e.w["embed.weight"][token*H:(token+1)*H]...)
	for l := 0; l < c.layers; l++ {
		wk := fmt.Sprintf("layers.%d.", l)
		an := e.rms(wk+"input_norm", x)
		q := e.matvec(wk+"attn.q_proj.weight", an, c.heads*hd)
		k := e.matvec(wk+"attn.k_proj.weight", an, c.kvHeads*hd)
		v := e.matvec(wk+"attn.v_proj.weight", an, c.kvHeads*hd)
		e.rope(q, pos)
		e.rope(k, pos)
		e.kc[l] = append(e.kc[l][:pos], k)
		e.vc[l] = append(e.vc[l][:pos], v)
		attn := make([]float64, c.heads*hd)
		rep := c.heads / c.kvHeads
		for h := 0; h < c.heads; h++ {
			kvh := h / rep
			s := make([]float64, pos+1)
			m := math.Inf(-1)
			for j := range s {
				for d := range hd {
					s[j] += q[h*hd+d] * e.kc[l][j][kvh*hd+d]
				}
				s[j] /= math.Sqrt(float64(hd))
				m = math.Max(m, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			for j := range s {
				for d := range hd {
					attn[h*hd+d] += s[j] / sum * e.vc[l][j][kvh*hd+d]
				}
			}
		}
		o := e.matvec(wk+"attn.o_proj.weight", attn, H)
		for i := range x {
			x[i] += o[i]
		}
		mn := e.rms(wk+"post_norm", x)
		g := e.matvec(wk+"mlp.gate_proj.weight", mn, c.ffn)
		u := e.matvec(wk+"mlp.up_proj.weight", mn, c.ffn)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		d := e.matvec(wk+"mlp.down_proj.weight", g, H)
		for i := range x {
			x[i] += d[i]
		}
	}
	return e.matvec("lm_head.weight", e.rms("final_norm", x), c.vocab)
}
