package kernels

import (
	"errors"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func TestCheckDeviceAcceptsMini(t *testing.T) {
	if err := CheckDevice(miniProgram()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckDeviceRejectsNamingTheOpcode(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *ir.Program)
		want   []string
	}{
		{"fused pattern", func(p *ir.Program) {
			p.Tasks[2].Op = ir.OpFUSED
			p.Tasks[2].Inputs = []int{4, 5, 4}
		}, []string{"opcode FUSED", "2:lm_head", "pattern 0"}},
		{"fp8 buffer", func(p *ir.Program) { p.Buffers[2].DType = ir.F8E4M3 }, []string{"F8E4M3"}},
		{"quant qdtype bogus", func(p *ir.Program) {
			p.Tasks[2].Params = append(p.Tasks[2].Params, ir.IntParam("qdtype", 3))
		}, []string{"opcode GEMV_TILE", "qdtype 3"}},
		{"tile out of range", func(p *ir.Program) { p.Tasks[3].Params[2] = ir.IntParam("n_off", 12) }, []string{"does not fit"}},
		{"int weight", func(p *ir.Program) { p.Buffers[5].DType = ir.I32 }, []string{"fp projections"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := miniProgram()
			c.mutate(p)
			err := CheckDevice(p)
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want *UnsupportedError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// attentionProgram is a rope'd q plus caches feeding one ATTENTION_TILE.
func attentionProgram(hd, nh, nkv int, flags int64) *ir.Program {
	p := ir.NewProgram()
	q := p.AddBuffer(ir.Buffer{Name: "q", Kind: ir.IOInput, DType: ir.F32, Shape: []int{nh, hd}})
	k := p.AddBuffer(ir.Buffer{Name: "k", Kind: ir.KVCache, DType: ir.BF16, Shape: []int{16, nkv, hd}})
	v := p.AddBuffer(ir.Buffer{Name: "v", Kind: ir.KVCache, DType: ir.BF16, Shape: []int{16, nkv, hd}})
	o := p.AddBuffer(ir.Buffer{Name: "o", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, nh * hd}})
	c := p.AddCounter("attn")
	p.AddTask(ir.Task{Op: ir.OpAttentionTile, Inputs: []int{q, k, v}, Outputs: []int{o}, OutCounter: c, SM: new(0),
		Params: ir.Params{ir.IntParam("head_dim", int64(hd)), ir.IntParam("kv_start", 0), ir.IntParam("kv_len", 4),
			ir.FloatParam("scale", 0.125), ir.IntParam("n_heads", int64(nh)), ir.IntParam("n_kv_heads", int64(nkv)),
			ir.IntParam("flags", flags)}})
	return p
}

func TestCheckDeviceAttention(t *testing.T) {
	if err := CheckDevice(attentionProgram(128, 8, 2, 0)); err != nil {
		t.Fatalf("llama-shaped attention refused: %v", err)
	}
	if err := CheckDevice(attentionProgram(512, 2, 1, 0)); err == nil || !strings.Contains(err.Error(), "head_dim 512") {
		t.Errorf("head_dim 512: %v", err)
	}
	if err := CheckDevice(attentionProgram(64, 6, 4, 0)); err == nil || !strings.Contains(err.Error(), "multiple") {
		t.Errorf("6 heads over 4 kv heads: %v", err)
	}
}

func TestCheckDeviceSoftmaxAndGemm(t *testing.T) {
	p := miniProgram()
	a := p.AddBuffer(ir.Buffer{Name: "probs", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, 16}})
	c := p.AddCounter("softmax")
	p.AddTask(ir.Task{Op: ir.OpSOFTMAX, Inputs: []int{6}, Outputs: []int{a}, OutCounter: c, SM: new(0),
		Waits: []ir.Wait{{Counter: 2, Threshold: 2}}, Params: ir.Params{ir.IntParam("dim", 0)}})
	if err := CheckDevice(p); err == nil || !strings.Contains(err.Error(), "softmax over dim 0") {
		t.Errorf("softmax dim 0: %v", err)
	}
	p.Tasks[5].Params = ir.Params{ir.IntParam("dim", 1)}
	if err := CheckDevice(p); err != nil {
		t.Errorf("softmax over the last dim refused: %v", err)
	}
	p.Tasks[2].Op = ir.OpGEMMTile
	p.Tasks[2].Params = append(p.Tasks[2].Params, ir.IntParam("M_tile", 1), ir.IntParam("qdtype", int64(ir.I8)))
	if err := CheckDevice(p); err == nil || !strings.Contains(err.Error(), "quantized GEMM_TILE") {
		t.Errorf("quant gemm: %v", err)
	}
}

func TestPlanSmem(t *testing.T) {
	p := miniProgram() // K = 8: x cache 32 bytes
	ring := int64(256/32) * 4 * 2 * 512
	plan, err := PlanSmem(p, DefaultVariant(), 232448)
	if err != nil || int64(plan.Bytes) != 32+ring || len(plan.Notes) != 0 {
		t.Fatalf("default plan %+v %v", plan, err)
	}
	plan, _ = PlanSmem(p, Variant{"cpasync": 0}, 232448)
	if plan.Bytes != 32 {
		t.Errorf("register path plan %+v", plan)
	}
	plan, _ = PlanSmem(p, Variant{"threads": 128, "cpa_stages": 2}, 232448)
	if int64(plan.Bytes) != 32+4*2*2*512 {
		t.Errorf("128-thread plan %+v", plan)
	}
	plan, _ = PlanSmem(p, DefaultVariant(), 1000) // ring does not fit: register path
	if plan.Bytes != 32 || len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], "register path") {
		t.Errorf("small cap plan %+v", plan)
	}
	plan, _ = PlanSmem(p, DefaultVariant(), 16) // x does not fit either: generic path
	if plan.Bytes != 0 || len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], "generic path") {
		t.Errorf("tiny cap plan %+v", plan)
	}
	p.Config.SmemBytesPerBlock = 100000
	plan, _ = PlanSmem(p, DefaultVariant(), 232448)
	if plan.Bytes != 100000 {
		t.Errorf("config floor ignored: %+v", plan)
	}
	if _, err := PlanSmem(p, DefaultVariant(), 65536); err == nil || !strings.Contains(err.Error(), "opt-in cap") {
		t.Errorf("floor above cap: %v", err)
	}
	if _, err := PlanSmem(p, Variant{"bogus": 1}, 65536); err == nil {
		t.Error("bad variant accepted")
	}
}

// The streaming ring sits on top of the ops' area (x cache, no per-tile
// ring); a ring beyond the cap is refused.
func TestPlanSmemStreamingRing(t *testing.T) {
	p := miniProgram() // K = 8: x cache 32 bytes
	v := Variant{"ring_stages": 12, "ring_tile": 2048}
	if got := RingBytes(v); got != 8*12*2048 {
		t.Fatalf("RingBytes = %d, want %d", got, 8*12*2048)
	}
	if RingBytes(DefaultVariant()) != 0 {
		t.Fatal("the default variant has a streaming ring")
	}
	plan, err := PlanSmem(p, v, 232448)
	if err != nil || int64(plan.Bytes) != 32+8*12*2048 {
		t.Fatalf("ring plan %+v %v", plan, err)
	}
	if _, err := PlanSmem(p, v, 100000); err == nil || !strings.Contains(err.Error(), "streaming ring") {
		t.Errorf("a ring above the cap: %v", err)
	}
	p.Config.SmemBytesPerBlock = 220000
	plan, _ = PlanSmem(p, v, 232448)
	if plan.Bytes != 220000 {
		t.Errorf("config floor with the ring: %+v", plan)
	}
}
