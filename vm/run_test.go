package vm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

func loadToy(t testing.TB, cfg toyCfg, pos int, opts Options) *VM {
	t.Helper()
	p := toyProgram(cfg, pos)
	v, err := New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.BindWeights(toyWeights(t, p)); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestToyDecodeMatchesEager runs three decode steps of a two-layer program,
// reusing one validated program and carrying the KV cache, against an
// independent float64 forward pass.
func TestToyDecodeMatchesEager(t *testing.T) {
	cfg := toySmall
	v := loadToy(t, cfg, 0, Options{Workers: 2})
	eager := newEagerToy(cfg, toyWeights(t, v.Program()))
	tokens := []int{3, 17, 29}
	for pos, tok := range tokens {
		if err := v.SetPosition(pos); err != nil {
			t.Fatal(err)
		}
		bindStep(t, v, tok, pos)
		res, err := v.Run()
		if err != nil {
			t.Fatal(err)
		}
		want := eager.step(tok, pos)
		got := res.Outputs["logits"].F
		ref := make([]float32, len(want))
		for i, x := range want {
			ref[i] = float32(x)
		}
		if c := Compare(got, ref, cfg.vocab, ir.F32); !c.Pass {
			t.Fatalf("pos %d: %s (max abs %.3g)", pos, c.Reason, c.MaxAbsErr)
		}
		if next := res.Outputs["next_token"]; next.DType != ir.I32 || int(next.I[0]) != argmax(ref) {
			t.Errorf("pos %d: next_token %v, want %d", pos, next.I, argmax(ref))
		}
		if len(res.Order) != len(v.Program().Tasks) {
			t.Errorf("pos %d: %d tasks ran of %d", pos, len(res.Order), len(v.Program().Tasks))
		}
		if err := v.BindKV(res.KV); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdversarialEqualsNormal(t *testing.T) {
	cfg := toySmall
	run := func(opts Options) *Result {
		v := loadToy(t, cfg, 2, opts)
		bindStep(t, v, 5, 2)
		kv := map[string]*tensor.Tensor{}
		for i := range v.Program().Buffers {
			b := &v.Program().Buffers[i]
			if b.Kind == ir.KVCache {
				kv[b.Name] = ft(t, b.DType, b.Shape, wave(tensor.Numel(b.Shape), 0.11*float64(i))...)
			}
		}
		if err := v.BindKV(kv); err != nil {
			t.Fatal(err)
		}
		res, err := v.Run()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	base := run(Options{Workers: 1})
	orders := map[string]bool{}
	for _, opts := range []Options{{Workers: 2}, {Workers: 4}, {Adversarial: true, Seed: 1}, {Adversarial: true, Seed: 2}, {Adversarial: true, Seed: 99}} {
		res := run(opts)
		same(t, "logits", res.Outputs["logits"].F, base.Outputs["logits"].F)
		for name, kv := range base.KV {
			same(t, name, res.KV[name].F, kv.F)
		}
		if opts.Adversarial {
			orders[fmt.Sprint(res.Order)] = true
		}
	}
	if len(orders) < 2 {
		t.Error("three adversarial seeds produced one execution order")
	}
}

func TestRunDoesNotModifyBoundKV(t *testing.T) {
	cfg := toySmall
	v := loadToy(t, cfg, 1, Options{})
	bindStep(t, v, 1, 1)
	kc := tensor.New(cfg.dt, cfg.maxSeq, cfg.kvHeads, cfg.headDim)
	if err := v.Bind("L0.kcache", kc); err != nil {
		t.Fatal(err)
	}
	res, err := v.Run()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(kc.F, func(f float32) bool { return f != 0 }) {
		t.Error("Run wrote into the caller's KV tensor")
	}
	row := cfg.kvHeads * cfg.headDim
	got := res.KV["L0.kcache"].F
	if !slices.ContainsFunc(got[row:2*row], func(f float32) bool { return f != 0 }) {
		t.Error("the result's cache has no row at pos 1")
	}
	if slices.ContainsFunc(got[2*row:], func(f float32) bool { return f != 0 }) {
		t.Error("the result's cache was written past pos 1")
	}
}

// neverProgram: task 1 waits for two signals from a counter with one
// producer.
func neverProgram() *ir.Program {
	b := newBuilder()
	c0, c1 := b.counter("first"), b.counter("second")
	b.task("first", ir.OpNOP, nil, nil, c0, nil)
	b.task("never", ir.OpNOP, nil, nil, c1, []ir.Wait{w(c0, 2)})
	b.task("after", ir.OpNOP, nil, nil, b.counter("third"), []ir.Wait{w(c1, 1)})
	return b.p
}

func TestDeadlockNamesStuckTasks(t *testing.T) {
	p := neverProgram()
	if _, err := New(p, Options{}); !errors.Is(err, ErrRejected) {
		t.Fatalf("New accepted an unsatisfiable wait: %v", err)
	}
	for _, opts := range []Options{{Workers: 1}, {Workers: 3}, {Adversarial: true, Seed: 7}} {
		v, err := newVM(p, opts)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Run()
		var dl *DeadlockError
		if !errors.As(err, &dl) {
			t.Fatalf("%+v: err = %v, want a deadlock", opts, err)
		}
		if len(dl.Stuck) != 2 || dl.Stuck[0].Label != "1:never" || dl.Stuck[1].Label != "2:after" {
			t.Fatalf("stuck = %+v", dl.Stuck)
		}
		if ws := dl.Stuck[0].Waits; len(ws) != 1 || ws[0] != (WaitState{Counter: 0, Value: 1, Threshold: 2}) {
			t.Errorf("waits of the stuck task = %+v", ws)
		}
		if msg := err.Error(); !strings.Contains(msg, "no progress with 2 tasks stuck") || !strings.Contains(msg, "1:never waits c0=1<2") {
			t.Errorf("message: %s", msg)
		}
	}
}

func TestCycleIsADeadlock(t *testing.T) {
	b := newBuilder()
	ca, cb := b.counter("a"), b.counter("b")
	b.task("a", ir.OpNOP, nil, nil, ca, []ir.Wait{w(cb, 1)})
	b.task("b", ir.OpNOP, nil, nil, cb, []ir.Wait{w(ca, 1)})
	if _, err := New(b.p, Options{}); err == nil {
		t.Fatal("New accepted a cycle")
	}
	v, err := newVM(b.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var dl *DeadlockError
	if _, err := v.Run(); !errors.As(err, &dl) || len(dl.Stuck) != 2 {
		t.Fatalf("err = %v", err)
	}
}

// TestDroppedWaitRefused drops one wait from a valid program (the o_proj
// join before the residual add): New must refuse the racy result.
func TestDroppedWaitRefused(t *testing.T) {
	p := toyProgram(toySmall, 0)
	if _, err := New(p, Options{}); err != nil {
		t.Fatalf("the intact program is refused: %v", err)
	}
	for i := range p.Tasks {
		if p.Tasks[i].Label == "L0.attn_residual" {
			p.Tasks[i].Waits = p.Tasks[i].Waits[:1]
		}
	}
	_, err := New(p, Options{})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("a program with a dropped wait was loaded: %v", err)
	}
}

func TestBindChecks(t *testing.T) {
	cfg := toySmall
	p := toyProgram(cfg, 0)
	v, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ws := toyWeights(t, p)
	ws["lm_head.weight"] = tensor.New(ir.BF16, cfg.vocab, cfg.hidden)
	ws["final_norm"] = tensor.New(ir.F32, cfg.hidden+1)
	err = v.BindWeights(ws)
	for _, want := range []string{`"lm_head.weight" is F32[40 32], got a BF16[40 32] tensor`, `"final_norm" is F32[32], got a F32[33] tensor`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("BindWeights: err = %v, want %q", err, want)
		}
	}
	short := &tensor.Tensor{DType: ir.I32, Shape: []int{1}}
	if err := v.Bind("token_id", short); err == nil || !strings.Contains(err.Error(), "needs 1 integer values, it holds 0") {
		t.Errorf("short tensor: %v", err)
	}
	if err := v.Bind("embed.weight", ws["embed.weight"]); err == nil || !strings.Contains(err.Error(), "is a WEIGHT") {
		t.Errorf("binding a weight by name: %v", err)
	}
	if err := v.Bind("nope", short); err == nil {
		t.Error("binding an unknown name succeeded")
	}
	if err := v.Bind("L0.kcache", tensor.New(cfg.dt, cfg.maxSeq+1, cfg.kvHeads, cfg.headDim)); err == nil {
		t.Error("binding a KV cache of the wrong shape succeeded")
	}
	_, err = v.Run()
	if err == nil || !strings.Contains(err.Error(), `unbound buffers: `) || !strings.Contains(err.Error(), `WEIGHT "lm_head.weight"`) ||
		!strings.Contains(err.Error(), `IO_INPUT "token_id"`) {
		t.Errorf("Run with unbound buffers: %v", err)
	}
}

func TestTimeoutIsNotALivelock(t *testing.T) {
	v := loadToy(t, toySmall, 0, Options{Workers: 1, Timeout: time.Nanosecond})
	bindStep(t, v, 1, 0)
	_, err := v.Run()
	var te *TimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "not a deadlock") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	var dl *DeadlockError
	if errors.As(err, &dl) {
		t.Error("a timeout reported as a deadlock")
	}
}

func TestTaskErrorNamesTheTask(t *testing.T) {
	b := newBuilder()
	src := b.buf("src", ir.IOInput, ir.F32, 1, 1, 2)
	cache := b.buf("cache", ir.KVCache, ir.F32, 4, 1, 2)
	b.task("bad_append", ir.OpKVAppend, []int{src, cache}, []int{cache}, b.counter("append"), nil, ip("pos", 4))
	v, err := newVM(b.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("src", ft(t, ir.F32, shp(1, 1, 2), 1, 2)); err != nil {
		t.Fatal(err)
	}
	_, err = v.Run()
	var te *TaskError
	if !errors.As(err, &te) || te.Label != "0:bad_append" || !strings.Contains(err.Error(), "outside the cache's 4 positions") {
		t.Fatalf("err = %v", err)
	}
}

func TestSetIntParam(t *testing.T) {
	v := loadToy(t, toySmall, 0, Options{})
	var appendID, attnID int
	for i := range v.Program().Tasks {
		switch v.Program().Tasks[i].Label {
		case "L0.k_append":
			appendID = i
		case "L0.attention":
			attnID = i
		}
	}
	if err := v.SetIntParam(appendID, "pos", 7); err != nil {
		t.Errorf("pos 7 of 8: %v", err)
	}
	for _, c := range []struct {
		id  int
		key string
		val int64
	}{{appendID, "pos", 8}, {appendID, "pos", -1}, {attnID, "kv_len", 9}, {attnID, "kv_len", 0}, {attnID, "kv_start", -1}, {attnID, "head_dim", 4}, {0, "pos", 1}, {-1, "pos", 0}} {
		if err := v.SetIntParam(c.id, c.key, c.val); err == nil {
			t.Errorf("SetIntParam(%d, %s, %d) succeeded", c.id, c.key, c.val)
		}
	}
	if v.Program().Tasks[appendID].Params.IntOr("pos", -1) != 0 {
		t.Error("SetIntParam edited the caller's program")
	}
	if err := v.SetPosition(8); err == nil {
		t.Error("SetPosition past max_seq succeeded")
	}
	if got := v.tasks[appendID].params.IntOr("pos", -1); got != 7 {
		t.Errorf("a failed SetPosition left pos = %d, want 7", got)
	}
}

func TestFusedTaskInAProgram(t *testing.T) {
	build := func(fused bool) *ir.Program {
		b := newBuilder()
		a := b.buf("a", ir.IOInput, ir.BF16, 1, 8)
		c := b.buf("b", ir.IOInput, ir.BF16, 1, 8)
		wt := b.weight("norm", ir.BF16, 8)
		out := b.buf("out", ir.IOOutput, ir.BF16, 1, 8)
		if fused {
			b.task("add_norm", ir.OpFUSED, []int{a, c, wt}, []int{out}, b.counter("fused"), nil, recipeParam(t, addNormRecipe))
			return b.p
		}
		h := b.buf("h", ir.Activation, ir.BF16, 1, 8)
		c0 := b.counter("add")
		b.task("add", ir.OpADD, []int{a, c}, []int{h}, c0, nil)
		b.task("norm", ir.OpRMSNORM, []int{h, wt}, []int{out}, b.counter("norm"), []ir.Wait{w(c0, 1)}, fp("eps", 1e-6), ip("hidden", 8))
		return b.p
	}
	var outs [][]float32
	for _, fused := range []bool{false, true} {
		v, err := New(build(fused), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.BindWeights(map[string]*tensor.Tensor{"norm": ft(t, ir.BF16, shp(8), wave(8, 2.1)...)}); err != nil {
			t.Fatal(err)
		}
		for name, f := range map[string]float64{"a": 1.3, "b": 0.7} {
			if err := v.Bind(name, ft(t, ir.BF16, shp(1, 8), wave(8, f)...)); err != nil {
				t.Fatal(err)
			}
		}
		res, err := v.Run()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, res.Outputs["out"].F)
	}
	same(t, "fused program", outs[1], outs[0])

	bad := build(true)
	bad.Tasks[0].Params[0] = recipeParam(t, `{"steps": [{"op": 19, "args": [{"in": 0}], "out": "final"}]}`)
	if _, err := New(bad, Options{}); err == nil {
		t.Error("New accepted a nested FUSED recipe")
	}
}

func TestSetPositionRefusesSplitKV(t *testing.T) {
	b := newBuilder()
	q := b.buf("q", ir.IOInput, ir.F32, 2, 2)
	k := b.buf("k", ir.KVCache, ir.F32, 4, 1, 2)
	part := b.buf("part", ir.IOOutput, ir.F32, 2, 4)
	b.task("shard", ir.OpAttentionTile, []int{q, k, k}, []int{part}, b.counter("shard"), nil,
		attnParams(2, 0, 2, 2, 1, ip("flags", ir.FlagPartialWrite))...)
	v, err := newVM(b.p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SetPosition(1); err == nil || !strings.Contains(err.Error(), "split-KV") {
		t.Errorf("err = %v", err)
	}
}
