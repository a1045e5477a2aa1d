package schedule

import (
	"slices"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/validate"
)

func TestLowerWorkedExample(t *testing.T) {
	prog := mustLower(t, mustPreset(t, "toy"), mustTarget(t, "rtx5090"), Default(), LowerOptions{Pos: 3})
	if len(prog.Buffers) != 37 || len(prog.Counters) != 22 || len(prog.Tasks) != 27 {
		t.Fatalf("toy 1L: %d buffers, %d counters, %d tasks; want 37, 22, 27",
			len(prog.Buffers), len(prog.Counters), len(prog.Tasks))
	}
	var labels []string
	for _, task := range prog.Tasks {
		labels = append(labels, task.Label)
	}
	want := "embed L0.input_norm L0.q_proj[t0] L0.k_proj[t0] L0.v_proj[t0] L0.rope_q.reshape L0.rope_q " +
		"L0.rope_k.reshape L0.rope_k L0.k_append L0.v_append L0.attention L0.o_proj[t0] L0.attn_residual " +
		"L0.post_norm L0.gate_proj[t0] L0.gate_proj[t1] L0.up_proj[t0] L0.up_proj[t1] L0.swiglu " +
		"L0.down_proj[t0] L0.mlp_residual final_norm lm_head[t0] lm_head[t1] lm_head[t2] lm_head[t3]"
	if got := strings.Join(labels, " "); got != want {
		t.Fatalf("labels:\n got %s\nwant %s", got, want)
	}
	byLabel := map[string]*ir.Task{}
	for i := range prog.Tasks {
		byLabel[prog.Tasks[i].Label] = &prog.Tasks[i]
	}
	attn := byLabel["L0.attention"]
	if kv, _ := attn.Params.Int("kv_len"); kv != 4 {
		t.Errorf("attention kv_len = %d, want 4", kv)
	}
	if s, _ := attn.Params.Float("scale"); s != 0.25 {
		t.Errorf("attention scale = %v, want 0.25", s)
	}
	if len(attn.Waits) != 3 {
		t.Errorf("attention waits = %v, want rope_q, k_append, v_append", attn.Waits)
	}
	if pos, _ := byLabel["L0.k_append"].Params.Int("pos"); pos != 3 {
		t.Errorf("k_append pos = %d, want 3", pos)
	}
	silu := byLabel["L0.swiglu"]
	if len(silu.Waits) != 2 || silu.Waits[0].Threshold != 2 || silu.Waits[1].Threshold != 2 {
		t.Errorf("swiglu waits = %v, want all-joins of 2 tiles each", silu.Waits)
	}
	if add := byLabel["L0.attn_residual"]; len(add.Waits) != 2 {
		t.Errorf("attn_residual waits = %v, want embed and o counters", add.Waits)
	}
	logits := prog.Buffers[prog.Tasks[len(prog.Tasks)-1].Outputs[0]]
	if logits.Name != "logits" || logits.Kind != ir.IOOutput || logits.Shape[1] != 256 {
		t.Errorf("lm_head output = %+v, want IO_OUTPUT logits (1,256)", logits)
	}
	for _, name := range []string{TokenInput, PosInput, ReshapeInput} {
		b := findBuffer(prog, name)
		if b == nil || b.Kind != ir.IOInput || b.DType != ir.I32 || len(b.Shape) != 1 || b.Shape[0] != 1 {
			t.Errorf("IO input %s = %+v, want I32 (1,)", name, b)
		}
	}
	if note := prog.Counters[prog.Tasks[2].OutCounter].Note; note != "L0.q_proj (1 tiles)" {
		t.Errorf("q counter note = %q", note)
	}
	for _, key := range []string{"model", "gpu", "regime", "pos", "kv_len", "dtype", "n_layers", "weight_bytes"} {
		if _, ok := prog.Meta.Get(key); !ok {
			t.Errorf("meta lacks %q", key)
		}
	}
	if wb, _ := prog.Meta.Get("weight_bytes"); wb.Num != "279296" {
		t.Errorf("meta weight_bytes = %s, want 279296", wb.Num)
	}
	if order, stuck := ir.SimulateCounters(prog); len(stuck) > 0 || len(order) != 27 {
		t.Errorf("simulation: %d fired, stuck %v", len(order), stuck)
	}
}

func findBuffer(p *ir.Program, name string) *ir.Buffer {
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return &p.Buffers[i]
		}
	}
	return nil
}

func TestLowerTaskCounts(t *testing.T) {
	tg := mustTarget(t, "rtx5090")
	for _, c := range []struct {
		model          string
		fixed, autoCnt int
	}{{"toy", 27, 38}, {"toy-2L", 48, 66}, {"small", 1074, 1522}} {
		cfg := mustPreset(t, c.model)
		if n := len(mustLower(t, cfg, tg, Default(), LowerOptions{}).Tasks); n != c.fixed {
			t.Errorf("%s N_tile 64: %d tasks, want %d", c.model, n, c.fixed)
		}
		if n := len(mustLower(t, cfg, tg, autoPoint(), LowerOptions{}).Tasks); n != c.autoCnt {
			t.Errorf("%s auto N_tile: %d tasks, want %d", c.model, n, c.autoCnt)
		}
		// The pre-sizing estimate is exact.
		for _, p := range []Point{with(PathNTile, 16), splitPoint(8), splitPoint(2)} {
			for _, pos := range []int{0, 40, 255} {
				got := len(mustLower(t, cfg, tg, p, LowerOptions{Pos: pos}).Tasks)
				if est := estimateTasks(&cfg, &p.Config, tg.NumSMs, pos+1, 1); est != got {
					t.Errorf("%s pos %d: estimated %d tasks, lowered %d", c.model, pos, est, got)
				}
			}
		}
	}
}

func splitPoint(n int) Point {
	p := Default()
	p.Config.SetTile("attention", "n_partitions", n)
	return p
}

func TestLowerSplitKV(t *testing.T) {
	tg := mustTarget(t, "h100")
	prog := mustLower(t, mustPreset(t, "toy-2L"), tg, splitPoint(4), LowerOptions{Pos: 100})
	var shards, combines int
	unpinnedOnZero, unpinned := 0, 0
	for i := range prog.Tasks {
		task := &prog.Tasks[i]
		switch {
		case task.Op == ir.OpAttentionTile:
			shards++
			p := task.Label[strings.LastIndex(task.Label, ".s")+2:]
			if task.Params.IntOr("flags", 0) != ir.FlagPartialWrite {
				t.Errorf("%s: flags = %d, want PARTIAL_WRITE", task.Label, task.Params.IntOr("flags", 0))
			}
			if want := map[string]int{"0": 0, "1": 1, "2": 2, "3": 3}[p]; task.SM == nil || *task.SM != want {
				t.Errorf("%s pinned to %v, want SM %d", task.Label, task.SM, want)
			}
			if kl, _ := task.Params.Int("kv_len"); kl != 26 && kl != 23 {
				t.Errorf("%s kv_len = %d, want 26 (last shard 23)", task.Label, kl)
			}
		case task.Op == ir.OpAttentionCombine:
			combines++
			if len(task.Inputs) != 4 || len(task.Waits) != 4 {
				t.Errorf("combine reads %d partials with %d waits, want 4 and 4", len(task.Inputs), len(task.Waits))
			}
		default:
			unpinned++
			if *task.SM == 0 {
				unpinnedOnZero++
			}
		}
	}
	if shards != 8 || combines != 2 {
		t.Errorf("%d shards and %d combines, want 8 and 2", shards, combines)
	}
	// docs/spec/rules.md R17: the other tasks are spread by the policy, not sent to SM 0.
	if unpinnedOnZero*4 > unpinned {
		t.Errorf("%d of %d unpinned tasks on SM 0", unpinnedOnZero, unpinned)
	}
	if rep := validate.Validate(prog); !rep.OK {
		t.Fatal(rep.Reason(4))
	}
	// A short window is not split: P = min(8, SMs, n, ceil(kv_len/16)).
	short := mustLower(t, mustPreset(t, "toy"), tg, splitPoint(4), LowerOptions{Pos: 15})
	if len(short.Tasks) != 27 {
		t.Errorf("kv_len 16 with n_partitions 4: %d tasks, want the unsplit 27", len(short.Tasks))
	}
}

func TestLowerBatch(t *testing.T) {
	cfg := mustPreset(t, "toy")
	prog := mustLower(t, cfg, mustTarget(t, "a100"), splitPoint(4), LowerOptions{Pos: 40, B: 3})
	combines := 0
	for i := range prog.Tasks {
		task := &prog.Tasks[i]
		switch task.Op {
		case ir.OpGEMVTile:
			t.Fatalf("B=3 emitted %s", task.Op)
		case ir.OpAttentionCombine:
			// split-KV at a batch (unlike the reference, which splits only at
			// B=1): each shard's partial holds every sequence's heads
			combines++
			if len(task.Inputs) != 3 { // P = min(8, SMs, 4, ceil(41/16))
				t.Errorf("%s combines %d partials, want 3", task.Label, len(task.Inputs))
			}
			for _, in := range task.Inputs {
				if b := prog.Buffer(in); !slices.Equal(b.Shape, []int{3, cfg.NHeads, cfg.HeadDim + 2}) {
					t.Errorf("partial %s shape %v, want (3, n_heads, hd+2)", b.Name, b.Shape)
				}
			}
			if b := prog.Buffer(task.Outputs[0]); !slices.Equal(b.Shape, []int{3, cfg.QDim()}) {
				t.Errorf("combine output %s shape %v, want (3, q_dim)", b.Name, b.Shape)
			}
		case ir.OpGEMMTile:
			if m, _ := task.Params.Int("M_tile"); m != 3 {
				t.Errorf("%s M_tile = %d, want 3", task.Label, m)
			}
		}
	}
	if b := findBuffer(prog, TokenInput); b.Shape[0] != 3 {
		t.Errorf("token_id shape %v, want (3,)", b.Shape)
	}
	if b := findBuffer(prog, "L0.kcache"); len(b.Shape) != 4 || b.Shape[0] != 3 {
		t.Errorf("kcache shape %v, want (3, max_seq, n_kv, hd)", b.Shape)
	}
	if b := findBuffer(prog, "L0.qr"); len(b.Shape) != 3 {
		t.Errorf("qr shape %v, want (B, heads, hd)", b.Shape)
	}
	if combines != cfg.NLayers {
		t.Errorf("%d ATTENTION_COMBINE tasks, want one per layer (%d)", combines, cfg.NLayers)
	}
	if note := prog.Counters[prog.Tasks[2].OutCounter].Note; note != "L0.q_proj (1 tiles, M=3)" {
		t.Errorf("GEMM counter note %q", note)
	}
	if rep := validate.Validate(prog); !rep.OK {
		t.Fatal(rep.Reason(4))
	}
}

// Split-KV at a batch with one task per KV head: each shard's KV-head slices
// write the same heads of every sequence of the shared partial, which the
// validator proves disjoint; two slices writing the same heads are a race.
func TestLowerBatchSplitKVPerKVHead(t *testing.T) {
	cfg := mustPreset(t, "toy-2L")
	p := splitPoint(4)
	p.Config.SetTile("attention", "kv_head_split", 1)
	prog := mustLower(t, cfg, mustTarget(t, "h100"), p, LowerOptions{Pos: 100, B: 4})
	if rep := validate.Validate(prog); !rep.OK {
		t.Fatal(rep.Reason(4))
	}
	slice := -1
	for i := range prog.Tasks {
		task := &prog.Tasks[i]
		if task.Op == ir.OpAttentionTile && task.Params.IntOr("flags", 0) == ir.FlagPartialWrite && task.Params.IntOr("n_off", 0) == 1 {
			slice = i
			break
		}
	}
	if slice < 0 || cfg.NKVHeads < 2 {
		t.Fatalf("no second KV head's slice of a shard at batch 4 (n_kv_heads %d)", cfg.NKVHeads)
	}
	setParam(&prog.Tasks[slice], "n_off", 0) // now it writes KV head 0's query heads, as its neighbour does
	if rep := validate.Validate(prog); rep.OK {
		t.Fatalf("two KV-head slices writing the same heads of a batch's partial passed the validator")
	} else {
		t.Log(rep.Reason(2))
	}
}

func TestLowerKeysAndTiedEmbeddings(t *testing.T) {
	tg := mustTarget(t, "h200")
	cfg := mustPreset(t, "toy")
	cfg.KeyScheme, cfg.TiedEmbeddings = "hf", true
	prog := mustLower(t, cfg, tg, Default(), LowerOptions{})
	if findBuffer(prog, "lm_head.weight") != nil {
		t.Error("tied model has an lm_head.weight buffer")
	}
	embed := findBuffer(prog, "model.embed_tokens.weight")
	if embed == nil || *embed.Source != "model.embed_tokens.weight" {
		t.Fatalf("embedding buffer = %+v", embed)
	}
	last := prog.Tasks[len(prog.Tasks)-1]
	if last.Inputs[1] != embed.ID {
		t.Errorf("lm_head reads buffer %d, want the embedding %d", last.Inputs[1], embed.ID)
	}
	if findBuffer(prog, "model.layers.0.self_attn.q_proj.weight") == nil ||
		findBuffer(prog, "model.layers.0.post_attention_layernorm.weight") == nil {
		t.Error("HF key names missing")
	}
	if prog.TotalWeightBytes() != cfg.WeightBytes() {
		t.Errorf("weights %d bytes, model says %d", prog.TotalWeightBytes(), cfg.WeightBytes())
	}
}

func TestLowerRejects(t *testing.T) {
	tg := mustTarget(t, "h100")
	cfg := mustPreset(t, "toy")
	for _, pos := range []int{-1, 256, 1000} {
		if _, err := Lower(cfg, tg, Default(), LowerOptions{Pos: pos}); err == nil ||
			!strings.Contains(err.Error(), "outside [0, max_seq=256)") {
			t.Errorf("pos %d: %v", pos, err)
		}
	}
	if _, err := Lower(cfg, nil, Default(), LowerOptions{}); err == nil {
		t.Error("nil target accepted")
	}
	bad := cfg
	bad.NHeads, bad.HeadDim = 3, 15
	if _, err := Lower(bad, tg, Default(), LowerOptions{}); err == nil {
		t.Error("invalid model accepted")
	}
	if _, err := Lower(cfg, tg, Default(), LowerOptions{B: -2}); err == nil {
		t.Error("B=-2 accepted")
	}
}

// The lowering is deterministic and the program's config is the point's.
func TestLowerDeterministic(t *testing.T) {
	tg := mustTarget(t, "l4")
	cfg := mustPreset(t, "small")
	a := ir.Encode(mustLower(t, cfg, tg, Default(), LowerOptions{Pos: 7}))
	b := ir.Encode(mustLower(t, cfg, tg, Default(), LowerOptions{Pos: 7}))
	if string(a) != string(b) {
		t.Fatal("two lowerings differ")
	}
	prog, err := ir.Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	if ConfigID(*prog.Config) != ConfigID(DefaultConfig()) {
		t.Error("program config is not the point's")
	}
}
