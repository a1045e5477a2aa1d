package gpu

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/tensor"
	"github.com/amk-dev/amk/trial"
	"github.com/amk-dev/amk/validate"
	"github.com/amk-dev/amk/vm"
)

// The megakernel's CUDA source on the CPU emulator (kernels/emu), checked
// buffer by buffer against the reference VM. The emulator builds of one test
// run share a build cache ($AMK_EMU_TEST_CACHE keeps one across runs) so
// that a variant compiles once however many tests use it. With
// AMK_EMU_SANITIZE=address,undefined (and AMK_CXX=clang++ or g++) every
// emulator is built with those sanitizers.

var emuCache struct {
	once    sync.Once
	dir     string
	temp    bool
	err     error
	builder *build.Builder
}

// emuBuilder is the build cache of this test binary's emulator builds.
func emuBuilder(t *testing.T) *build.Builder {
	t.Helper()
	emuCache.once.Do(func() {
		emuCache.dir = os.Getenv("AMK_EMU_TEST_CACHE")
		if emuCache.dir == "" {
			emuCache.dir, emuCache.err = os.MkdirTemp("", "amk-emu-test-")
			emuCache.temp = true
		}
		tc := build.ToolchainFromEnv()
		if tc.EmulatorOpt == "" {
			tc.EmulatorOpt = "-O0" // compiles in less than half the time of -O1; these shapes run as fast
		}
		emuCache.builder = &build.Builder{Toolchain: tc, Dir: emuCache.dir}
	})
	if emuCache.err != nil {
		t.Fatal(emuCache.err)
	}
	if _, err := emuCache.builder.CompilerVersion(context.Background()); err != nil {
		t.Fatalf("the CPU emulator tests need a C++ compiler: %v", err)
	}
	return emuCache.builder
}

// removeEmuCache deletes a temporary build cache (TestMain, after the tests).
func removeEmuCache() {
	if emuCache.temp && emuCache.dir != "" {
		_ = os.RemoveAll(emuCache.dir)
	}
}

// emuExecutable builds (or finds in the cache) the emulator of a variant
// for an architecture, with src as the kernel sources (nil: the embedded
// ones).
func emuExecutable(t *testing.T, arch string, v kernels.Variant, src fs.FS) string {
	t.Helper()
	b := emuBuilder(t)
	if src != nil {
		b = &build.Builder{Toolchain: b.Toolchain, Dir: b.Dir, Sources: src}
	}
	return emuBuildWith(t, b, arch, v)
}

func emuBuildWith(t *testing.T, b *build.Builder, arch string, v kernels.Variant) string {
	t.Helper()
	start := time.Now()
	a, err := b.BuildEmulator(context.Background(), build.EmulatorRequest{Arch: arch, Variant: v, Sanitize: os.Getenv("AMK_EMU_SANITIZE")})
	if err != nil {
		t.Fatalf("building the emulator (%s %s): %v", arch, v, err)
	}
	if !a.Hit {
		t.Logf("built the emulator for %s %s in %.1f s", arch, v, time.Since(start).Seconds())
	}
	return a.Path
}

// prebuild builds the emulators of cases two at a time (a test then finds
// them in the cache), so that compiles overlap.
func prebuild(t *testing.T, cases []emuCase) {
	t.Helper()
	b := emuBuilder(t)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			bb := b
			if c.src != nil {
				bb = &build.Builder{Toolchain: b.Toolchain, Dir: b.Dir, Sources: c.src}
			}
			// errors surface again (and fail) when the case builds
			_, _ = bb.BuildEmulator(context.Background(), build.EmulatorRequest{Arch: c.arch, Variant: c.variant,
				Sanitize: os.Getenv("AMK_EMU_SANITIZE")})
		})
	}
	wg.Wait()
}

// emuTarget is the h100 record with sms SMs (0: its own).
func emuTarget(t *testing.T, sms int) *ir.GpuTarget {
	t.Helper()
	base, err := ir.Target("h100")
	if err != nil {
		t.Fatal(err)
	}
	tg := *base
	if sms > 0 {
		tg.NumSMs = sms
	}
	return &tg
}

// emuBF16 is a 2-layer, 512-wide bf16 Llama: rows long enough for the
// 16-byte vector paths, the per-tile cp.async ring (1 KiB rows: two 512-byte
// chunks) and the streaming ring (two chunks per row at ring_tile 512).
func emuBF16() model.Config {
	c, err := model.Preset("toy")
	if err != nil {
		panic(err)
	}
	c.Name, c.DType = "emu-bf16 (2 layers, 512 wide)", ir.BF16
	c.Hidden, c.NHeads, c.NKVHeads, c.HeadDim, c.Intermediate, c.Vocab, c.NLayers = 512, 8, 2, 64, 1024, 1024, 2
	return c
}

var emuWeights struct {
	mu sync.Mutex
	w  map[string]model.Weights
}

func weightsOf(t *testing.T, cfg model.Config) model.Weights {
	t.Helper()
	emuWeights.mu.Lock()
	defer emuWeights.mu.Unlock()
	key := cfg.Name + cfg.DType.String()
	if w, ok := emuWeights.w[key]; ok {
		return w
	}
	w, err := model.InitWeights(cfg, trial.WeightSeed)
	if err != nil {
		t.Fatal(err)
	}
	if emuWeights.w == nil {
		emuWeights.w = map[string]model.Weights{}
	}
	emuWeights.w[key] = w
	return w
}

// emuCase is one program family checked on the emulator.
type emuCase struct {
	name    string
	cfg     model.Config
	point   schedule.Point
	sms     int    // SMs of the target the program is lowered for
	arch    string // the code paths the emulator runs
	variant kernels.Variant
	pos     []int // decode positions, each one step with a seeded KV cache
	runs    int   // launches at the last position: schedule seeds 0 (round robin), 1, 2, ...
	src     fs.FS // mutated kernel sources (nil: the real ones)
	// mutate edits the program the emulator runs (loaded unchecked).
	mutate   func(*ir.Program) *ir.Program
	watchdog uint64 // the kernel's per-wait budget (0: the emulator's default)
	timeout  time.Duration
	// check inspects each position's program and its last launch's report
	// (that the case reached the path it is about).
	check func(t *testing.T, p *ir.Program, r *launch.EmulatorReport)
}

// kvNoise is the KV caches for a step at pos (batch 1, [max_seq, n_kv,
// head_dim]): every position before pos holds deterministic values in
// [-1, 1) rounded to the cache's dtype, the rest zeros: what a history would
// have left there, as far as the step can tell.
func kvNoise(t *testing.T, p *ir.Program, pos int) map[string]*tensor.Tensor {
	t.Helper()
	out := map[string]*tensor.Tensor{}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != ir.KVCache {
			continue
		}
		n := tensor.Numel(b.Shape)
		row := n / b.Shape[0]
		vals := make([]float32, n)
		rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(pos)+7))
		for e := 0; e < pos*row && e < n; e++ {
			vals[e] = rng.Float32()*2 - 1
		}
		x, err := tensor.FromFloats(b.DType, b.Shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		out[b.Name] = x
	}
	return out
}

// emuStepInputs are the IO inputs of one decode step (batch 1).
func emuStepInputs(t *testing.T, p *ir.Program, token int32, pos int) map[string]*tensor.Tensor {
	t.Helper()
	out := map[string]*tensor.Tensor{}
	names := map[string]bool{}
	for i := range p.Buffers {
		names[p.Buffers[i].Name] = p.Buffers[i].Kind == ir.IOInput
	}
	for name, val := range map[string]int32{schedule.TokenInput: token, schedule.PosInput: int32(pos), schedule.ReshapeInput: 0} {
		if !names[name] {
			continue
		}
		x, err := tensor.FromInts(ir.I32, []int{1}, []int32{val})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = x
	}
	return out
}

// emuCheck runs c and returns its first failure: a launch that does not end
// OK, or a buffer the kernels wrote that differs from the VM's beyond the
// model dtype's tolerance (or, between two launches under different
// schedule seeds, in any bit).
func emuCheck(t *testing.T, c emuCase) error {
	t.Helper()
	exe := emuExecutable(t, c.arch, c.variant, c.src)
	tg := emuTarget(t, c.sms)
	w := weightsOf(t, c.cfg)
	v, err := c.variant.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	for pi, pos := range c.pos {
		runs := 1
		if pi == len(c.pos)-1 {
			runs = max(c.runs, 1)
		}
		prog, err := schedule.Lower(c.cfg, tg, c.point, schedule.LowerOptions{Pos: pos})
		if err != nil {
			t.Fatalf("%s: lowering at pos %d: %v", c.name, pos, err)
		}
		if rep := validate.Validate(prog); !rep.OK {
			t.Fatalf("%s: pos %d: %s", c.name, pos, rep.Reason(3))
		}
		if err := kernels.CheckDevice(prog); err != nil {
			t.Fatalf("%s: pos %d: %v", c.name, pos, err)
		}
		token := trial.HistoryToken(trial.DefaultToken, pos, c.cfg.Vocab)
		kv := kvNoise(t, prog, pos)
		inputs := emuStepInputs(t, prog, token, pos)
		// the reference
		machine, err := vm.New(prog, vm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := machine.BindWeights(w); err != nil {
			t.Fatal(err)
		}
		for name, x := range inputs {
			if err := machine.Bind(name, x); err != nil {
				t.Fatal(err)
			}
		}
		if err := machine.BindKV(kv); err != nil {
			t.Fatal(err)
		}
		ref, err := machine.Run()
		if err != nil {
			t.Fatalf("%s: the reference VM at pos %d: %v", c.name, pos, err)
		}
		// the emulator
		dev, err := launch.OpenEmulator(launch.EmulatorConfig{Target: "h100", Timeout: timeout, WatchdogNS: c.watchdog})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		plan, err := kernels.PlanSmem(prog, v, dev.Info().SmemOptinBytes)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bindings := map[int][]byte{}
		step := map[int][]byte{}
		var all []int
		for id := range prog.Buffers {
			b := &prog.Buffers[id]
			all = append(all, id)
			var x *tensor.Tensor
			switch b.Kind {
			case ir.Weight, ir.Const:
				key := b.Name
				if b.Source != nil {
					key = *b.Source
				}
				x = w[key]
			case ir.KVCache:
				x = kv[b.Name]
			case ir.IOInput:
				x = inputs[b.Name]
			default:
				continue
			}
			if x == nil {
				t.Fatalf("%s: nothing to bind to %s %s", c.name, b.Kind, b.Name)
			}
			data, err := kernels.EncodeTensor(b, x)
			if err != nil {
				t.Fatal(err)
			}
			if b.Kind == ir.Weight || b.Kind == ir.Const {
				bindings[id] = data
			} else {
				step[id] = data
			}
		}
		run := prog
		if c.mutate != nil {
			run = c.mutate(prog)
		}
		h, _, err := dev.Load(&launch.LoadSpec{Program: run, Image: []byte(exe), Variant: v, Smem: plan.Bytes, Bindings: bindings,
			WatchdogNS: c.watchdog, Unchecked: c.mutate != nil})
		if err != nil {
			return fmt.Errorf("%s: pos %d: load: %v", c.name, pos, err)
		}
		var first map[int][]byte
		for k := 0; k < runs; k++ {
			start := time.Now()
			res, err := dev.Run(h, step, all)
			if err != nil {
				return fmt.Errorf("%s: pos %d, schedule seed %d: %v", c.name, pos, k, err)
			}
			if res.Status != launch.StatusOK {
				return fmt.Errorf("%s: pos %d, schedule seed %d: %s: %s", c.name, pos, k, res.Status, res.Message)
			}
			if err := compareWithVM(prog, c.cfg, res.Outputs, ref.Buffers); err != nil {
				return fmt.Errorf("%s: pos %d, schedule seed %d: %v", c.name, pos, k, err)
			}
			if first == nil {
				first = res.Outputs
			} else if err := sameBits(prog, first, res.Outputs); err != nil {
				return fmt.Errorf("%s: pos %d: schedule seed %d against seed 0: %v", c.name, pos, k, err)
			}
			rep := dev.(interface{ LastReport() *launch.EmulatorReport }).LastReport()
			t.Logf("%s: pos %d, schedule seed %d: %d tasks on %d blocks x %d threads, %d B shared: every buffer matches the VM "+
				"(%.2f s; %d barriers, %d warp collectives, %d cp.async, %d bulk copies, %d preemptions)",
				c.name, pos, k, len(prog.Tasks), res.Grid, v.Threads(), plan.Bytes, time.Since(start).Seconds(),
				rep.Stats.Barriers, rep.Stats.Collectives, rep.Stats.CPAsync, rep.Stats.BulkCopies, rep.Stats.Preemptions)
			if c.check != nil {
				c.check(t, prog, rep)
			}
		}
	}
	return nil
}

// compareWithVM compares every buffer the program's tasks write (the
// logits, the KV caches, every activation) with the VM's: floats within the
// model dtype's tolerance, integers exactly; the logits also by vm.Compare.
func compareWithVM(p *ir.Program, cfg model.Config, got map[int][]byte, ref []*tensor.Tensor) error {
	atol, rtol := vm.Tolerance(cfg.DType)
	written := map[int][]string{}
	for i := range p.Tasks {
		for _, o := range p.Tasks[i].Outputs {
			written[o] = append(written[o], p.Tasks[i].Describe())
		}
	}
	for id := range p.Buffers {
		b := &p.Buffers[id]
		if len(written[id]) == 0 {
			continue
		}
		dev, err := kernels.DecodeTensor(b, got[id])
		if err != nil {
			return fmt.Errorf("buffer %s: %v", b.Name, err)
		}
		if b.Name == schedule.LogitsOutput {
			if cmp := vm.Compare(dev.Floats(), ref[id].Floats(), cfg.Vocab, cfg.DType); !cmp.Pass {
				return fmt.Errorf("the logits differ from the VM's: %s", cmp.Reason)
			}
		}
		a, r := dev.Floats(), ref[id].Floats()
		bad, first, worst := 0, -1, 0.0
		for i := range r {
			x, y := float64(a[i]), float64(r[i])
			ok := x == y
			if b.DType.IsFloat() {
				ok = math.Abs(x-y) <= atol+rtol*math.Abs(y)
			}
			if !ok {
				if bad++; first < 0 {
					first = i
				}
				if d := math.Abs(x - y); !(d <= worst) {
					worst = d
				}
			}
		}
		if bad > 0 {
			writers := written[id]
			if len(writers) > 3 {
				writers = append(writers[:3:3], fmt.Sprintf("and %d more", len(written[id])-3))
			}
			return fmt.Errorf("%s %s (%s %v) differs from the VM's in %d of %d values (first at %d: %g, VM %g; worst |diff| %.3g); written by %s",
				b.Kind, b.Name, b.DType, b.Shape, bad, len(r), first, a[first], r[first], worst, strings.Join(writers, "; "))
		}
	}
	return nil
}

// sameBits requires two launches to have left every written buffer
// identical.
func sameBits(p *ir.Program, a, b map[int][]byte) error {
	for id := range p.Buffers {
		x, y := a[id], b[id]
		for i := range x {
			if i >= len(y) || x[i] != y[i] {
				return fmt.Errorf("%s %s differs from byte %d on", p.Buffers[id].Kind, p.Buffers[id].Name, i)
			}
		}
	}
	return nil
}

// mutant is the embedded kernel sources with old replaced by new in file
// (old must occur exactly once).
func mutant(t *testing.T, file, old, new string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(kernels.Sources(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(kernels.Sources(), path)
		if err != nil {
			return err
		}
		if path == file {
			if n := strings.Count(string(data), old); n != 1 {
				t.Fatalf("mutant of %s: %q occurs %d times", file, old, n)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
		}
		out[path] = &fstest.MapFile{Data: data, Mode: 0o644}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out[file]; !ok {
		t.Fatalf("mutant: no source file %s", file)
	}
	return out
}

// Kernel variants of the emulator tests: the four GEMV engines, and the
// default at 128 threads.
func emuVariants() (register, perTile, ring, t128 kernels.Variant) {
	register = kernels.DefaultVariant()
	register["cpasync"] = 0
	perTile = kernels.DefaultVariant()
	ring = kernels.DefaultVariant()
	ring["ring_stages"], ring["ring_tile"] = 8, 512 // two chunks per 512-wide bf16 row
	t128 = kernels.DefaultVariant()
	t128["threads"] = 128
	return
}

func expectEngine(copies, bulk bool) func(t *testing.T, p *ir.Program, r *launch.EmulatorReport) {
	return func(t *testing.T, p *ir.Program, r *launch.EmulatorReport) {
		t.Helper()
		if (r.Stats.CPAsync > 0) != copies || (r.Stats.BulkCopies > 0) != bulk {
			t.Errorf("the launch made %d cp.async and %d bulk copies: not the engine the case is about (cp.async %v, bulk %v)",
				r.Stats.CPAsync, r.Stats.BulkCopies, copies, bulk)
		}
	}
}

func both(checks ...func(*testing.T, *ir.Program, *launch.EmulatorReport)) func(*testing.T, *ir.Program, *launch.EmulatorReport) {
	return func(t *testing.T, p *ir.Program, r *launch.EmulatorReport) {
		t.Helper()
		for _, c := range checks {
			c(t, p, r)
		}
	}
}

func expectPaired(t *testing.T, p *ir.Program, _ *launch.EmulatorReport) {
	t.Helper()
	if pairedTiles(p) == 0 {
		t.Error("no paired q|k|v tile in the program: the case does not reach them")
	}
}

func expectSplitKV(t *testing.T, p *ir.Program, _ *launch.EmulatorReport) {
	t.Helper()
	for i := range p.Tasks {
		if p.Tasks[i].Op == ir.OpAttentionCombine {
			return
		}
	}
	t.Error("no ATTENTION_COMBINE in the program: the case does not split the KV window")
}

// TestEmulatorMatchesTheVM runs the megakernel's own CUDA source on the CPU
// emulator and requires every buffer its tasks write — the logits, the KV
// caches, every activation — to match the reference VM: toy, toy-2L and a
// 2-layer 512-wide bf16 model; the register GEMV, the per-tile cp.async
// ring, the streaming ring with the sm_80 cp.async engine and with the
// sm_90 bulk-copy (TMA) engine; the device default and the fully fused
// point with paired q|k|v tiles (24 SMs); split-KV attention at 128
// threads; positions 0 and 20 (the KV cache seeded); the TMA ring at
// position 20 under schedule seeds 0 to 3, bit-identical across them.
func TestEmulatorMatchesTheVM(t *testing.T) {
	toy, _ := model.Preset("toy")
	toy2, _ := model.Preset("toy-2L")
	bf := emuBF16()
	register, perTile, ring, t128 := emuVariants()
	split := schedule.DeviceDefault()
	split.Config.SetTile("attention", "n_partitions", 4)
	split.Config.ThreadsPerBlock = 128
	cases := []emuCase{
		{name: "toy, default point", cfg: toy, point: schedule.Default(), arch: "sm_90a", variant: perTile, pos: []int{0, 20}},
		{name: "toy-2L, fully fused", cfg: toy2, point: schedule.FullyFused(), sms: 24, arch: "sm_90a", variant: perTile, pos: []int{0, 20}},
		{name: "bf16, device default, register GEMV", cfg: bf, point: schedule.DeviceDefault(), sms: 8, arch: "sm_90a", variant: register,
			pos: []int{0, 20}, check: expectEngine(false, false)},
		{name: "bf16, device default, per-tile cp.async", cfg: bf, point: schedule.DeviceDefault(), sms: 8, arch: "sm_90a", variant: perTile,
			pos: []int{0, 20}, check: expectEngine(true, false)},
		{name: "bf16, fully fused, streaming ring, sm_80 cp.async engine", cfg: bf, point: schedule.FullyFused(), sms: 24, arch: "sm_80",
			variant: ring, pos: []int{0, 20}, check: both(expectEngine(true, false), expectPaired)},
		{name: "bf16, fully fused, streaming ring, sm_90 TMA engine", cfg: bf, point: schedule.FullyFused(), sms: 24, arch: "sm_90a",
			variant: ring, pos: []int{0, 20}, runs: 4, check: both(expectEngine(false, true), expectPaired)},
		{name: "bf16, split-KV, 128 threads", cfg: bf, point: split, sms: 8, arch: "sm_90a", variant: t128, pos: []int{40},
			check: both(expectEngine(true, false), expectSplitKV)},
	}
	prebuild(t, cases)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := emuCheck(t, c); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestEmulatorCatchesSeededKernelBugs: each of these bugs, seeded into the
// real kernel sources (only the kernel translation unit recompiles), fails
// the emulator's check — by a mismatch with the VM, by the kernel's own
// watchdog, or by the emulator's report — and the reason is logged.
func TestEmulatorCatchesSeededKernelBugs(t *testing.T) {
	bf := emuBF16()
	_, perTile, ring, _ := emuVariants()
	type mutation struct {
		c emuCase
		// want must appear in the failure: the reason it is caught for.
		want string
	}
	base := func(name string, point schedule.Point, sms int, v kernels.Variant, src fs.FS) emuCase {
		return emuCase{name: name, cfg: bf, point: point, sms: sms, arch: "sm_90a", variant: v, pos: []int{20}, src: src,
			timeout: 2 * time.Minute}
	}
	// The bugs that hang get a short watchdog, so that they end in seconds;
	// the others keep the emulator's default, so that a slow legitimate wait
	// on a loaded machine is not mistaken for their catch (want names the
	// reason each is caught for).
	hangs := func(c emuCase) emuCase {
		c.watchdog = uint64(2 * time.Second)
		return c
	}
	muts := []mutation{
		{c: hangs(base("a wait on the wrong counter value (threshold + 1)", schedule.DeviceDefault(), 8, perTile,
			mutant(t, "cuda/sync.cuh", "const uint32_t need = (uint32_t)inst.wait_threshold[w];",
				"const uint32_t need = (uint32_t)inst.wait_threshold[w] + 1u;"))), want: "WATCHDOG: watchdog: task"},
		{c: base("a missing __syncthreads after the x staging", schedule.DeviceDefault(), 8, perTile,
			mutant(t, "cuda/ops_gemv.cuh", "        amk_stage_x(x, m * K, K, xs);\n        __syncthreads();\n",
				"        amk_stage_x(x, m * K, K, xs);\n")), want: "differs from the VM's"},
		{c: base("a cp.async wait one group short", schedule.DeviceDefault(), 8, perTile,
			mutant(t, "cuda/ops_gemv.cuh", "amk_ptx_cp_async_wait<STAGES - 1>();", "amk_ptx_cp_async_wait<STAGES>();")), want: "cp.async"},
		{c: hangs(base("a wrong mbarrier phase parity", schedule.FullyFused(), 24, ring,
			mutant(t, "cuda/ring.cuh", "const uint32_t parity = (c / AMK_RING_STAGES) & 1u;",
				"const uint32_t parity = (c / AMK_RING_STAGES + 1) & 1u;"))), want: "streaming ring wait"},
		{c: hangs(base("the end-of-kernel ring wait on a chunk never issued", schedule.FullyFused(), 24, ring,
			mutant(t, "cuda/ring.cuh", "for (uint32_t c = w.consumed; c < w.issued; ++c)",
				"for (uint32_t c = w.consumed; c <= w.issued; ++c)"))), want: "streaming ring wait"},
		{c: base("an off-by-one in a paired tile's rotation partner row", schedule.FullyFused(), 24, ring,
			mutant(t, "cuda/ops_gemv.cuh", "ob = paired ? half + e : b;", "ob = paired ? half + e + 1 : b;")), want: "differs from the VM's"},
		{c: base("barrier divergence (the last warp skips the instruction load's barrier)", schedule.DeviceDefault(), 8, perTile,
			mutant(t, "cuda/megakernel.cu", "__ldg(s + i);\n    __syncthreads();",
				"__ldg(s + i);\n    if (threadIdx.x < AMK_THREADS - 32) __syncthreads();")), want: "barrier divergence"},
		{c: base("a missing __syncwarp after the ring's consume cursor", schedule.FullyFused(), 24, ring,
			mutant(t, "cuda/ring.cuh", "if (amk_lane() == 0) ++amk_ring_state[amk_warp()].consumed;\n    __syncwarp();",
				"if (amk_lane() == 0) ++amk_ring_state[amk_warp()].consumed;")), want: "differ"},
	}
	// the missing __syncwarp is a race between lanes: it shows under shuffled schedules
	muts[len(muts)-1].c.runs = 4
	cases := make([]emuCase, len(muts))
	for i, m := range muts {
		cases[i] = m.c
	}
	prebuild(t, cases)
	for _, m := range muts {
		t.Run(m.c.name, func(t *testing.T) {
			start := time.Now()
			err := emuCheck(t, m.c)
			if err == nil {
				t.Fatalf("not caught: the emulator ran the bug to a match with the VM (%.1f s)", time.Since(start).Seconds())
			}
			if !strings.Contains(err.Error(), m.want) {
				t.Errorf("caught, but without %q in the reason: %v", m.want, err)
			}
			t.Logf("caught in %.1f s: %v", time.Since(start).Seconds(), err)
		})
	}
}

type emuLog struct{ t *testing.T }

func (w emuLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// openEmulated starts this test binary as a supervised launcher child
// serving the CPU emulator of h100, with this run's build cache.
func openEmulated(t *testing.T) *Launcher {
	t.Helper()
	b := emuBuilder(t)
	t.Setenv("AMK_GPU_CUDA_CHILD", "1") // the child inherits it: TestMain runs ChildMain
	l, err := Open(context.Background(), ChildConfig{Executable: os.Args[0], Subcommand: []string{"-test.run=^$"},
		Toolchain: b.Toolchain, CacheDir: b.Dir, Log: emuLog{t}, Emulate: "h100"}, Options{})
	if err != nil {
		t.Fatalf("opening the emulated launcher: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestEmulatedTrialThroughTheChild: trial.Evaluate with the Launcher of a
// supervised child serving the emulator — the same Launcher, child and
// protocol as a GPU's — walks the history (position 1: a load, a run, an
// update, a run), checks the emulator's logits against the reference VM,
// relaunches the step under another schedule, and labels the latency
// predicted, naming the emulator.
func TestEmulatedTrialThroughTheChild(t *testing.T) {
	l := openEmulated(t)
	if !l.Device().Emulator || l.Target().Name != "h100" {
		t.Fatalf("device %+v, target %s", l.Device(), l.Target().Name)
	}
	spec := trial.Spec{Model: "toy", GPU: "h100", Device: schedule.DeviceEmu, Point: []byte(`{}`), Token: trial.DefaultToken, Pos: 1}
	out := trial.Evaluate(context.Background(), spec, trial.Options{Launcher: l, Models: trial.NewModelCache(0)})
	v := out.Verdict
	if out.Failure != nil || v == nil || !v.Valid || v.Correct == nil || !*v.Correct || v.LatencyUS == nil || v.LatencyKind == nil {
		t.Fatalf("failure %+v verdict %+v", out.Failure, v)
	}
	if *v.LatencyKind != trial.KindPredicted || v.Device != "emu CPU emulator of h100" {
		t.Errorf("latency kind %s on device %q: want predicted on the emulator", *v.LatencyKind, v.Device)
	}
	notes := strings.Join(v.Notes, "\n")
	for _, want := range []string{"emulator logits match the reference VM at pos 1", "a second emulated launch of the step",
		"latency predicted by the cost model", "CPU emulator build"} {
		if !strings.Contains(notes, want) {
			t.Errorf("the verdict's notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "measured-gpu") {
		t.Errorf("an emulated verdict mentions a GPU measurement:\n%s", notes)
	}
	t.Logf("%.3f us (%s) on %s; notes:\n%s", *v.LatencyUS, *v.LatencyKind, v.Device, notes)
}

// TestEmulatedSplitKVAtABatch: split-KV attention at batch 4 — each shard's
// partial holds every sequence's heads [B, n_heads, hd+2], and the combine
// merges B x n_heads rows — runs through the kernels on the emulator and
// matches the reference VM for every sequence, at KV length 201 from the
// seeded caches (4 shards), whole KV heads per task and one task per KV head.
func TestEmulatedSplitKVAtABatch(t *testing.T) {
	l := openEmulated(t)
	toy, _ := model.Preset("toy")
	w := trial.Workload{PromptLens: []int{200}, GenLen: 1, Batch: 4}
	for _, point := range []string{`{"tiling": {"attention": {"n_partitions": 4}}}`,
		`{"tiling": {"attention": {"n_partitions": 4, "kv_head_split": 1}}}`} {
		// the case is about batched partials: the lowering must split
		p, err := schedule.ParsePoint([]byte(point))
		if err != nil {
			t.Fatal(err)
		}
		prog, err := schedule.Lower(toy, l.Target(), p, schedule.LowerOptions{Pos: 200, B: 4})
		if err != nil {
			t.Fatal(err)
		}
		combines := 0
		for i := range prog.Tasks {
			if prog.Tasks[i].Op == ir.OpAttentionCombine && len(prog.Tasks[i].Inputs) == 4 {
				combines++
			}
		}
		if combines != toy.NLayers {
			t.Fatalf("%s at batch 4: %d four-shard ATTENTION_COMBINE tasks, want %d", point, combines, toy.NLayers)
		}
		spec := trial.Spec{Model: "toy", GPU: "h100", Device: schedule.DeviceEmu, Point: []byte(point),
			Token: trial.DefaultToken, Workload: &w}
		out := trial.Evaluate(context.Background(), spec, trial.Options{Launcher: l, Models: trial.NewModelCache(0)})
		v := out.Verdict
		if out.Failure != nil || v == nil || !v.Valid || v.Correct == nil || !*v.Correct {
			t.Fatalf("%s: want a correct verdict: failure %+v verdict %+v", point, out.Failure, v)
		}
		if notes := strings.Join(v.Notes, "\n"); !strings.Contains(notes, "emulator logits match the reference VM at pos 200") {
			t.Errorf("%s: no emulator check at pos 200 in the notes:\n%s", point, notes)
		}
	}
}
