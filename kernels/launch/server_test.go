package launch

import (
	"context"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/tensor"
)

// tinyProgram: EMBED -> GEMV (2 queues), logits out. label marks a task for
// the fake device ("stuck", "poison").
func tinyProgram(label string) *ir.Program {
	p := ir.NewProgram()
	tok := p.AddBuffer(ir.Buffer{Name: "token_id", Kind: ir.IOInput, DType: ir.I32, Shape: []int{1}})
	emb := p.AddBuffer(ir.Buffer{Name: "emb", Kind: ir.Weight, DType: ir.BF16, Shape: []int{4, 8}, Source: new("emb.weight")})
	h := p.AddBuffer(ir.Buffer{Name: "h", Kind: ir.Activation, DType: ir.BF16, Shape: []int{1, 8}})
	w := p.AddBuffer(ir.Buffer{Name: "w", Kind: ir.Weight, DType: ir.BF16, Shape: []int{4, 8}, Source: new("lm.weight")})
	out := p.AddBuffer(ir.Buffer{Name: "logits", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, 4}})
	c0, c1 := p.AddCounter("embed"), p.AddCounter("lm")
	p.AddTask(ir.Task{Op: ir.OpEMBED, Inputs: []int{tok, emb}, Outputs: []int{h}, OutCounter: c0, SM: new(0),
		Params: ir.Params{ir.IntParam("hidden", 8)}, Label: "embed"})
	p.AddTask(ir.Task{Op: ir.OpGEMVTile, Inputs: []int{h, w}, Outputs: []int{out}, OutCounter: c1, SM: new(1),
		Waits: []ir.Wait{{Counter: c0, Threshold: 1}}, Params: ir.Params{ir.IntParam("K", 8), ir.IntParam("N_tile", 4), ir.IntParam("n_off", 0)},
		Label: label})
	p.Config = &ir.ScheduleConfig{ThreadsPerBlock: 128, PipeliningDepth: 2, Tiling: nil}
	return p
}

func inlineWeights(t *testing.T) WeightSource {
	t.Helper()
	ws := WeightSource{Kind: "inline", Tensors: map[string]WireTensor{}}
	for _, k := range []string{"emb.weight", "lm.weight"} {
		x, err := tensor.FromFloats(ir.F32, []int{4, 8}, make([]float32, 32))
		if err != nil {
			t.Fatal(err)
		}
		w, err := ToWire(x)
		if err != nil {
			t.Fatal(err)
		}
		ws.Tensors[k] = w
	}
	return ws
}

func wireInts(t *testing.T, vals ...int32) WireTensor {
	t.Helper()
	x, err := tensor.FromInts(ir.I32, []int{len(vals)}, vals)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ToWire(x)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestServerOverTheWire(t *testing.T) {
	s := newSup(t, "server")
	cl := Client{S: s}
	ctx := context.Background()
	hello, err := cl.Hello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hello.Protocol != ProtocolVersion || hello.Device.Name != "Fake H200" || hello.Device.Arch() != "sm_90a" || len(hello.Sources) != 64 {
		t.Errorf("hello %+v", hello)
	}
	lr, err := cl.Load(ctx, &LoadRequest{Handle: "cand", Program: ir.Encode(tinyProgram("lm")), Weights: inlineWeights(t)})
	if err != nil {
		t.Fatal(err)
	}
	if lr.Launch.Threads != 128 || lr.Launch.Smem <= 0 || lr.Launch.Grid != 2 || len(lr.Notes) == 0 || !strings.Contains(lr.Notes[0], "sm_90a") {
		t.Errorf("load %+v", lr)
	}
	rr, err := cl.Run(ctx, &RunRequest{Handle: "cand", Inputs: map[string]WireTensor{"token_id": wireInts(t, 0x01020304)}})
	if err != nil {
		t.Fatal(err)
	}
	logits, ok := rr.Outputs["logits"]
	if rr.Status != StatusOK || !ok || logits.DType != "F32" || len(logits.Data) != 16 || logits.Data[0] != 0x04 {
		t.Fatalf("run %+v", rr)
	}
	if _, err := logits.Tensor(); err != nil {
		t.Errorf("logits do not decode: %v", err)
	}
	// Read back what the launch left, without launching.
	back, err := cl.Read(ctx, &ReadRequest{Handle: "cand"})
	if err != nil || back.Status != StatusOK || string(back.Outputs["logits"].Data) != string(logits.Data) {
		t.Fatalf("read %+v %v", back, err)
	}
	for _, bad := range []*ReadRequest{{Handle: "nope"}, {Handle: "cand", Read: []string{"no-such-buffer"}}} {
		if _, err := cl.Read(ctx, bad); err == nil || !strings.Contains(err.Error(), "rejected") {
			t.Errorf("read %+v: %v", bad, err)
		}
	}
	if _, err := cl.Load(ctx, &LoadRequest{Handle: "inc", Program: ir.Encode(tinyProgram("lm")), Weights: inlineWeights(t)}); err != nil {
		t.Fatal(err)
	}
	cmp, err := cl.Time(ctx, &TimeRequest{Candidate: "cand", Incumbent: "inc", Warmup: 2, Samples: 9})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Candidate.N != 9 || cmp.Incumbent == nil || cmp.Ratio <= 0.7 || cmp.Ratio >= 0.9 {
		t.Errorf("time %+v", cmp)
	}
	// Update (a param-only change) and unload.
	p := tinyProgram("lm")
	p.Tasks[1].Params = append(p.Tasks[1].Params, ir.IntParam("pos", 1))
	if err := cl.Update(ctx, &UpdateRequest{Handle: "cand", Program: ir.Encode(p)}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Unload(ctx, "inc"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Time(ctx, &TimeRequest{Candidate: "cand", Incumbent: "inc", Samples: 3}); err == nil {
		t.Error("timing against an unloaded incumbent succeeded")
	}
	if s.Generation() != 1 {
		t.Errorf("child restarted %d times on ordinary requests", s.Generation()-1)
	}
}

func TestServerRejectsBeforeLaunch(t *testing.T) {
	s := newSup(t, "server")
	cl := Client{S: s}
	ctx := context.Background()
	fused := tinyProgram("lm")
	fused.Tasks[1].Op = ir.OpFUSED
	fused.Tasks[1].Inputs = []int{2, 3, 2}
	missing := inlineWeights(t)
	delete(missing.Tensors, "lm.weight")
	wrongShape := inlineWeights(t)
	x, _ := tensor.FromFloats(ir.F32, []int{8, 4}, make([]float32, 32))
	wrongShape.Tensors["lm.weight"], _ = ToWire(x)
	tpb := tinyProgram("lm")
	tpb.Config.ThreadsPerBlock = 100
	cases := []struct {
		name string
		req  *LoadRequest
		want string
	}{
		{"fused", &LoadRequest{Handle: "a", Program: ir.Encode(fused), Weights: inlineWeights(t)}, "opcode FUSED"},
		{"missing weight", &LoadRequest{Handle: "a", Program: ir.Encode(tinyProgram("lm")), Weights: missing}, "not provided"},
		{"weight shape", &LoadRequest{Handle: "a", Program: ir.Encode(tinyProgram("lm")), Weights: wrongShape}, "shape [8 4]"},
		{"tpb", &LoadRequest{Handle: "a", Program: ir.Encode(tpb), Weights: inlineWeights(t)}, "multiple of 32"},
		{"variant contradiction", &LoadRequest{Handle: "a", Program: ir.Encode(tinyProgram("lm")), Weights: inlineWeights(t),
			Variant: map[string]int64{"threads": 256}}, "contradicts"},
		{"bad json", &LoadRequest{Handle: "a", Program: []byte(`{"ir_version": "9.0"}`), Weights: inlineWeights(t)}, "program"},
		{"no provider", &LoadRequest{Handle: "a", Program: ir.Encode(tinyProgram("lm")), Weights: WeightSource{Kind: "seeded", Model: "toy"}}, "weight provider"},
	}
	for _, c := range cases {
		_, err := cl.Load(ctx, c.req)
		re := remoteClass(t, err)
		if re.Class != ClassRejected || !strings.Contains(re.Message, c.want) {
			t.Errorf("%s: %+v, want rejected containing %q", c.name, re, c.want)
		}
	}
	if _, err := cl.Run(ctx, &RunRequest{Handle: "nope"}); remoteClass(t, err).Class != ClassRejected {
		t.Error("run of an unknown handle not rejected")
	}
	if s.Generation() != 1 {
		t.Error("a rejection restarted the child")
	}
}

func TestServerWatchdogAndPoisonedDevice(t *testing.T) {
	s := newSup(t, "server")
	cl := Client{S: s}
	ctx := context.Background()
	if _, err := cl.Load(ctx, &LoadRequest{Handle: "stuck", Program: ir.Encode(tinyProgram("stuck")), Weights: inlineWeights(t)}); err != nil {
		t.Fatal(err)
	}
	rr, err := cl.Run(ctx, &RunRequest{Handle: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status != StatusWatchdog || rr.Status.Class() != ClassTimeout || rr.Diag == nil ||
		!strings.Contains(rr.Message, "1:stuck") || !strings.Contains(rr.Message, "observed 1 < threshold 2") {
		t.Errorf("watchdog run %+v", rr)
	}
	// The watchdog leaves the device usable: the same child serves the next trial.
	if _, err := cl.Load(ctx, &LoadRequest{Handle: "bad", Program: ir.Encode(tinyProgram("poison")), Weights: inlineWeights(t)}); err != nil {
		t.Fatal(err)
	}
	if s.Generation() != 1 {
		t.Fatal("watchdog restarted the child")
	}
	_, err = cl.Run(ctx, &RunRequest{Handle: "bad"})
	if re := remoteClass(t, err); re.Class != ClassCrash || !strings.Contains(re.Message, "IllegalAddress") {
		t.Errorf("poisoned run: %+v", re)
	}
	// A poisoned context ends the child; the next call gets a fresh one (handles are gone).
	if _, err := cl.Hello(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Generation() != 2 {
		t.Errorf("generation %d after a fatal device error", s.Generation())
	}
	if _, err := cl.Run(ctx, &RunRequest{Handle: "stuck"}); remoteClass(t, err).Class != ClassRejected {
		t.Error("handle survived the restart")
	}
}

func TestWireTensorRoundTrip(t *testing.T) {
	x, _ := tensor.FromFloats(ir.BF16, []int{2, 2}, []float32{1, -2, 0.5, 3})
	w, err := ToWire(x)
	if err != nil || w.DType != "BF16" || len(w.Data) != 8 {
		t.Fatalf("%+v %v", w, err)
	}
	y, err := w.Tensor()
	if err != nil || y.F[1] != -2 || y.F[3] != 3 {
		t.Fatalf("%v %v", y, err)
	}
	for _, bad := range []WireTensor{{DType: "F99", Shape: []int{1}, Data: []byte{0}}, {DType: "F32", Shape: []int{-1}}, {DType: "F32", Shape: []int{2}, Data: []byte{1}}} {
		if _, err := bad.Tensor(); err == nil {
			t.Errorf("%+v decoded", bad)
		}
	}
}
