//go:build cuda

package launch

// GPU tests: they need the cuda build tag, a CUDA device and AMK_NVCC (an
// nvcc for the device's architecture). Run on the GPU machine:
//
//	AMK_NVCC=$(which nvcc) go test -tags cuda -run CUDA ./kernels/launch
//
// AMK_NVCC_HOST_ARGS is honoured, and AMK_KERNEL_CACHE, when set, is the
// build cache (shared with the other tests and verbs of a GPU visit).

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/tensor"
)

func openCUDA(t *testing.T) (Device, ModuleSource) {
	t.Helper()
	if os.Getenv(build.EnvNVCC) == "" {
		t.Skip("AMK_NVCC not set")
	}
	cache := os.Getenv(build.EnvCache)
	if cache == "" {
		cache = t.TempDir()
	}
	dev, err := Open(0)
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { dev.Close() })
	t.Logf("device: %s", dev.Info())
	return dev, BuilderModules{Builder: &build.Builder{Toolchain: build.ToolchainFromEnv(), Dir: cache}}
}

// projProgram: EMBED -> RMSNORM -> 3 GEMV tiles -> SAMPLE_ARGMAX in dtype dt.
func projProgram(dt ir.DType, hidden, vocab int) *ir.Program {
	p := ir.NewProgram()
	tok := p.AddBuffer(ir.Buffer{Name: "token_id", Kind: ir.IOInput, DType: ir.I32, Shape: []int{1}})
	emb := p.AddBuffer(ir.Buffer{Name: "emb", Kind: ir.Weight, DType: dt, Shape: []int{16, hidden}, Source: new("emb")})
	h0 := p.AddBuffer(ir.Buffer{Name: "h0", Kind: ir.Activation, DType: dt, Shape: []int{1, hidden}})
	nw := p.AddBuffer(ir.Buffer{Name: "norm", Kind: ir.Weight, DType: dt, Shape: []int{hidden}, Source: new("norm")})
	hn := p.AddBuffer(ir.Buffer{Name: "hn", Kind: ir.Activation, DType: dt, Shape: []int{1, hidden}})
	w := p.AddBuffer(ir.Buffer{Name: "w", Kind: ir.Weight, DType: dt, Shape: []int{vocab, hidden}, Source: new("w")})
	lg := p.AddBuffer(ir.Buffer{Name: "logits", Kind: ir.IOOutput, DType: ir.F32, Shape: []int{1, vocab}})
	nx := p.AddBuffer(ir.Buffer{Name: "next", Kind: ir.IOOutput, DType: ir.I32, Shape: []int{1}})
	c0, c1, c2, c3 := p.AddCounter("embed"), p.AddCounter("norm"), p.AddCounter("lm"), p.AddCounter("argmax")
	p.AddTask(ir.Task{Op: ir.OpEMBED, Inputs: []int{tok, emb}, Outputs: []int{h0}, OutCounter: c0, SM: new(0),
		Params: ir.Params{ir.IntParam("hidden", int64(hidden))}})
	p.AddTask(ir.Task{Op: ir.OpRMSNORM, Inputs: []int{h0, nw}, Outputs: []int{hn}, OutCounter: c1, SM: new(1),
		Waits: []ir.Wait{{Counter: c0, Threshold: 1}}, Params: ir.Params{ir.FloatParam("eps", 1e-6), ir.IntParam("hidden", int64(hidden))}})
	tile := vocab / 3
	for i := 0; i < 3; i++ {
		p.AddTask(ir.Task{Op: ir.OpGEMVTile, Inputs: []int{hn, w}, Outputs: []int{lg}, OutCounter: c2, SM: new(i),
			Waits:  []ir.Wait{{Counter: c1, Threshold: 1}},
			Params: ir.Params{ir.IntParam("K", int64(hidden)), ir.IntParam("N_tile", int64(tile)), ir.IntParam("n_off", int64(i*tile))}})
	}
	p.AddTask(ir.Task{Op: ir.OpSampleArgmax, Inputs: []int{lg}, Outputs: []int{nx}, OutCounter: c3, SM: new(2),
		Waits: []ir.Wait{{Counter: c2, Threshold: 3}}, Label: "argmax"})
	p.Config = &ir.ScheduleConfig{ThreadsPerBlock: 256, PipeliningDepth: 2}
	return p
}

func randTensor(rng *rand.Rand, dt ir.DType, shape ...int) *tensor.Tensor {
	v := make([]float32, tensor.Numel(shape))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	t, _ := tensor.FromFloats(dt, shape, v)
	return t
}

func loadCUDA(t *testing.T, dev Device, mods ModuleSource, p *ir.Program, weights map[string]*tensor.Tensor, watchdog uint64, unchecked bool) Handle {
	t.Helper()
	v, err := variantFor(p, kernels.Variant{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := kernels.PlanSmem(p, v, dev.Info().SmemOptinBytes)
	if err != nil {
		t.Fatal(err)
	}
	img, note, err := mods.Module(context.Background(), dev.Info().Arch(), v)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(note)
	bind := map[int][]byte{}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Source != nil {
			data, err := kernels.EncodeTensor(b, weights[*b.Source])
			if err != nil {
				t.Fatal(err)
			}
			bind[i] = data
		}
	}
	h, li, err := dev.Load(&LoadSpec{Program: p, Image: img, Variant: v, Smem: plan.Bytes, Bindings: bind, WatchdogNS: watchdog, Unchecked: unchecked})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("launch: %+v", li)
	return h
}

func TestCUDAProjectionMatchesHostMath(t *testing.T) {
	dev, mods := openCUDA(t)
	for _, dt := range []ir.DType{ir.F32, ir.BF16} {
		const hidden, vocab = 1024, 96
		rng := rand.New(rand.NewPCG(1, uint64(dt)))
		ws := map[string]*tensor.Tensor{"emb": randTensor(rng, dt, 16, hidden), "norm": randTensor(rng, dt, hidden),
			"w": randTensor(rng, dt, vocab, hidden)}
		p := projProgram(dt, hidden, vocab)
		h := loadCUDA(t, dev, mods, p, ws, 0, false)
		tok := make([]byte, 4)
		binary.LittleEndian.PutUint32(tok, 5)
		res, err := dev.Run(h, map[int][]byte{0: tok}, []int{6, 7})
		if err != nil || res.Status != StatusOK {
			t.Fatalf("%s: %v %+v", dt, err, res)
		}
		// Host math: fp32, rounding activations to dt where the device stores them.
		x := ws["emb"].F[5*hidden : 6*hidden]
		ss := 0.0
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		r := 1 / math.Sqrt(ss/hidden+1e-6)
		hn := make([]float32, hidden)
		for j := range hn {
			hn[j] = tensor.Round(dt, float32(float64(x[j])*r*float64(ws["norm"].F[j])))
		}
		best, bestI := math.Inf(-1), 0
		for n := 0; n < vocab; n++ {
			want := 0.0
			for k := 0; k < hidden; k++ {
				want += float64(hn[k]) * float64(ws["w"].F[n*hidden+k])
			}
			got := float64(math.Float32frombits(binary.LittleEndian.Uint32(res.Outputs[6][4*n:])))
			tol := 2e-3 * (1 + math.Abs(want))
			if dt == ir.BF16 {
				tol = 3e-2 * (1 + math.Abs(want))
			}
			if math.Abs(got-want) > tol {
				t.Errorf("%s logit %d: got %v want %v", dt, n, got, want)
			}
			if got > best {
				best, bestI = got, n
			}
		}
		if next := int(binary.LittleEndian.Uint32(res.Outputs[7])); next != bestI {
			t.Errorf("%s argmax %d, logits say %d", dt, next, bestI)
		}
		cmp, err := dev.TimeInterleaved(h, h, 3, 11)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: median %.2f us (p10 %.2f, p90 %.2f), ratio %.3f", dt, cmp.Candidate.MedianUS, cmp.Candidate.P10US, cmp.Candidate.P90US, cmp.Ratio)
		_ = dev.Unload(h)
	}
}

func TestCUDAWatchdogEndsADeadlock(t *testing.T) {
	dev, mods := openCUDA(t)
	p := projProgram(ir.F32, 64, 48)
	p.Tasks[5].Waits[0].Threshold = 4 // three producers: never reached
	rng := rand.New(rand.NewPCG(2, 2))
	ws := map[string]*tensor.Tensor{"emb": randTensor(rng, ir.F32, 16, 64), "norm": randTensor(rng, ir.F32, 64),
		"w": randTensor(rng, ir.F32, 48, 64)}
	h := loadCUDA(t, dev, mods, p, ws, 50_000_000, true) // 50 ms budget
	res, err := dev.Run(h, map[int][]byte{0: make([]byte, 4)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusWatchdog || res.Diag.Task != 5 || res.Diag.Counter != 2 || res.Diag.Observed != 3 || res.Diag.Threshold != 4 {
		t.Fatalf("watchdog: %+v", res)
	}
	t.Log(res.Message)
	// The device serves the next program.
	ok := loadCUDA(t, dev, mods, projProgram(ir.F32, 64, 48), ws, 0, false)
	if res, err := dev.Run(ok, map[int][]byte{0: make([]byte, 4)}, nil); err != nil || res.Status != StatusOK {
		t.Fatalf("after the watchdog: %v %+v", err, res)
	}
}
