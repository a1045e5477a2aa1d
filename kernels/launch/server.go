package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/tensor"
)

// ModuleSource compiles (or fetches) the module of a variant for an arch.
type ModuleSource interface {
	Module(ctx context.Context, arch string, v kernels.Variant) (image []byte, note string, err error)
}

// BuilderModules adapts the shared build cache to ModuleSource.
type BuilderModules struct{ Builder *build.Builder }

// Module builds through the cache.
func (m BuilderModules) Module(ctx context.Context, arch string, v kernels.Variant) ([]byte, string, error) {
	a, err := m.Builder.Build(ctx, build.Request{Arch: arch, Variant: v})
	if err != nil {
		return nil, "", err
	}
	data, err := a.Data()
	note := fmt.Sprintf("module %s (%s, cache %s)", a.Key[:12], arch, map[bool]string{true: "hit", false: "miss"}[a.Hit])
	if a.Prebuilt != "" {
		note = fmt.Sprintf("module %s (%s, prebuilt by %s)", a.Key[:12], arch, a.Prebuilt)
	}
	return data, note, err
}

// WeightProvider resolves "seeded" and "safetensors" weight sources into
// tensors keyed by buffer source (or name). The command that runs the child
// wires it to the model package; inline weights need none.
type WeightProvider interface {
	Weights(ctx context.Context, src WeightSource, p *ir.Program) (map[string]*tensor.Tensor, error)
}

// Server is the child-side Handler: it turns protocol requests into Device
// calls, checking everything it can before touching the device (docs/spec/rules.md R24-R26).
type Server struct {
	Device  Device
	Modules ModuleSource
	Weights WeightProvider // optional

	handles map[string]*loaded
}

type loaded struct {
	h      Handle
	prog   *ir.Program
	byName map[string]int
}

func rejected(phase, format string, args ...any) error {
	return &RemoteError{Class: ClassRejected, Phase: phase, Message: fmt.Sprintf(format, args...)}
}

// Handle implements Handler.
func (s *Server) Handle(ctx context.Context, op string, body json.RawMessage) (any, error) {
	if s.handles == nil {
		s.handles = map[string]*loaded{}
	}
	switch op {
	case OpHello:
		return &HelloResponse{Protocol: ProtocolVersion, PID: os.Getpid(), Device: s.Device.Info(), Sources: kernels.SourceHash()}, nil
	case OpLoad:
		var req LoadRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed load request: %v", err)
		}
		return s.load(ctx, &req)
	case OpUpdate:
		var req UpdateRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed update request: %v", err)
		}
		return struct{}{}, s.update(&req)
	case OpRun:
		var req RunRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed run request: %v", err)
		}
		return s.run(&req)
	case OpTime:
		var req TimeRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed time request: %v", err)
		}
		return s.time(&req)
	case OpRead:
		var req ReadRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed read request: %v", err)
		}
		return s.read(&req)
	case OpUnload:
		var req UnloadRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return nil, rejected(op, "malformed unload request: %v", err)
		}
		l, ok := s.handles[req.Handle]
		if !ok {
			return struct{}{}, nil
		}
		delete(s.handles, req.Handle)
		return struct{}{}, s.Device.Unload(l.h)
	}
	return nil, rejected(op, "unknown op %q", op)
}

// variantFor fills the block size from the program's config (the VM is
// compiled for its block size) and checks the request does not contradict it.
func variantFor(p *ir.Program, v kernels.Variant) (kernels.Variant, error) {
	n, err := v.Normalize()
	if err != nil {
		return nil, err
	}
	if p.Config != nil && p.Config.ThreadsPerBlock > 0 {
		_, explicit := v["threads"]
		_, explicitMacro := v["AMK_THREADS"]
		if (explicit || explicitMacro) && n.Threads() != p.Config.ThreadsPerBlock {
			return nil, fmt.Errorf("variant threads=%d contradicts the program's threads_per_block=%d", n.Threads(), p.Config.ThreadsPerBlock)
		}
		k, _ := kernels.LookupKnob("threads")
		if err := k.Check(int64(p.Config.ThreadsPerBlock)); err != nil {
			return nil, fmt.Errorf("threads_per_block: %w", err)
		}
		n["threads"] = int64(p.Config.ThreadsPerBlock)
	}
	return n, nil
}

func (s *Server) load(ctx context.Context, req *LoadRequest) (*LoadResponse, error) {
	if req.Handle == "" {
		return nil, rejected(OpLoad, "load without a handle name")
	}
	p, err := ir.Decode(req.Program)
	if err != nil {
		return nil, rejected(OpLoad, "program: %v", err)
	}
	if err := kernels.CheckDevice(p); err != nil {
		return nil, rejected(OpLoad, "%v", err)
	}
	v, err := variantFor(p, req.Variant)
	if err != nil {
		return nil, rejected(OpLoad, "%v", err)
	}
	info := s.Device.Info()
	plan, err := kernels.PlanSmem(p, v, info.SmemOptinBytes)
	if err != nil {
		return nil, rejected(OpLoad, "%v", err)
	}
	bindings, err := s.bindWeights(ctx, req.Weights, p)
	if err != nil {
		return nil, err
	}
	image, note, err := s.Modules.Module(ctx, info.Arch(), v)
	if err != nil {
		var ce *build.CompileError
		if errors.As(err, &ce) {
			return nil, &RemoteError{Class: ClassCrash, Phase: "build", Message: err.Error()}
		}
		return nil, &RemoteError{Class: ClassInfra, Phase: "build", Message: err.Error()}
	}
	if old, ok := s.handles[req.Handle]; ok {
		_ = s.Device.Unload(old.h)
		delete(s.handles, req.Handle)
	}
	h, li, err := s.Device.Load(&LoadSpec{Program: p, Image: image, Variant: v, Smem: plan.Bytes, Bindings: bindings,
		WatchdogNS: req.WatchdogNS, Unchecked: req.Unchecked})
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) {
			return nil, re
		}
		return nil, &RemoteError{Class: ClassCrash, Phase: OpLoad, Message: err.Error()}
	}
	l := &loaded{h: h, prog: p, byName: map[string]int{}}
	for i := range p.Buffers {
		l.byName[p.Buffers[i].Name] = i
	}
	s.handles[req.Handle] = l
	notes := append([]string{note}, plan.Notes...)
	return &LoadResponse{Handle: req.Handle, Launch: li, Notes: notes}, nil
}

// bindWeights encodes every WEIGHT/CONST buffer (docs/spec/rules.md R26: shape and dtype checked).
func (s *Server) bindWeights(ctx context.Context, src WeightSource, p *ir.Program) (map[int][]byte, error) {
	var byKey map[string]*tensor.Tensor
	switch src.Kind {
	case "inline":
		byKey = map[string]*tensor.Tensor{}
		for k, w := range src.Tensors {
			t, err := w.Tensor()
			if err != nil {
				return nil, rejected(OpLoad, "inline weight %s: %v", k, err)
			}
			byKey[k] = t
		}
	default:
		if s.Weights == nil {
			return nil, rejected(OpLoad, "weight source %q needs a weight provider in the launcher child", src.Kind)
		}
		var err error
		if byKey, err = s.Weights.Weights(ctx, src, p); err != nil {
			return nil, &RemoteError{Class: ClassInfra, Phase: "weights", Message: err.Error()}
		}
	}
	out := map[int][]byte{}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind != ir.Weight && b.Kind != ir.Const {
			continue
		}
		key := b.Name
		if b.Source != nil {
			key = *b.Source
		}
		t, ok := byKey[key]
		if !ok {
			return nil, rejected(OpLoad, "weight buffer %s (source %q) not provided", b.Name, key)
		}
		data, err := kernels.EncodeTensor(b, t)
		if err != nil {
			return nil, rejected(OpLoad, "%v", err)
		}
		out[i] = data
	}
	return out, nil
}

func (s *Server) update(req *UpdateRequest) error {
	l, ok := s.handles[req.Handle]
	if !ok {
		return rejected(OpUpdate, "unknown handle %q", req.Handle)
	}
	p, err := ir.Decode(req.Program)
	if err != nil {
		return rejected(OpUpdate, "program: %v", err)
	}
	if err := s.Device.Update(l.h, p); err != nil {
		return rejected(OpUpdate, "%v", err)
	}
	l.prog = p
	return nil
}

func (s *Server) run(req *RunRequest) (*RunResponse, error) {
	l, ok := s.handles[req.Handle]
	if !ok {
		return nil, rejected(OpRun, "unknown handle %q", req.Handle)
	}
	inputs := map[int][]byte{}
	for name, w := range req.Inputs {
		id, ok := l.byName[name]
		if !ok {
			return nil, rejected(OpRun, "input %q names no buffer of the program", name)
		}
		b := &l.prog.Buffers[id]
		if b.Kind != ir.IOInput && b.Kind != ir.KVCache {
			return nil, rejected(OpRun, "input %q is a %s buffer; only IO inputs and KV caches are bound per run", name, b.Kind)
		}
		t, err := w.Tensor()
		if err != nil {
			return nil, rejected(OpRun, "input %q: %v", name, err)
		}
		data, err := kernels.EncodeTensor(b, t)
		if err != nil {
			return nil, rejected(OpRun, "%v", err)
		}
		inputs[id] = data
	}
	var read []int
	for i := range l.prog.Buffers {
		if l.prog.Buffers[i].Kind == ir.IOOutput {
			read = append(read, i)
		}
	}
	for _, name := range req.Read {
		id, ok := l.byName[name]
		if !ok {
			return nil, rejected(OpRun, "read %q names no buffer of the program", name)
		}
		read = append(read, id)
	}
	res, err := s.Device.Run(l.h, inputs, read)
	if err != nil {
		// A failed launch or copy leaves the CUDA context unusable: answer, then exit.
		var re *RemoteError
		if !errors.As(err, &re) {
			re = &RemoteError{Class: ClassCrash, Phase: OpRun, Message: err.Error()}
		}
		return nil, &Fatal{Err: re}
	}
	resp := &RunResponse{Status: res.Status, Message: res.Message, Outputs: map[string]WireTensor{}}
	if res.Status == StatusTrap || res.Status == StatusWatchdog {
		d := res.Diag
		resp.Diag = &d
		if resp.Message == "" {
			resp.Message = d.Describe(l.prog)
		}
	}
	ids := make([]int, 0, len(res.Outputs))
	for id := range res.Outputs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		b := &l.prog.Buffers[id]
		resp.Outputs[b.Name] = WireTensor{DType: b.DType.String(), Shape: append([]int(nil), b.Shape...), Data: res.Outputs[id]}
	}
	return resp, nil
}

// read answers a ReadRequest from the device's BufferReader.
func (s *Server) read(req *ReadRequest) (*RunResponse, error) {
	l, ok := s.handles[req.Handle]
	if !ok {
		return nil, rejected(OpRead, "unknown handle %q", req.Handle)
	}
	br, ok := s.Device.(BufferReader)
	if !ok {
		return nil, rejected(OpRead, "this device cannot read buffers back without a launch")
	}
	var ids []int
	for _, name := range req.Read {
		id, ok := l.byName[name]
		if !ok {
			return nil, rejected(OpRead, "read %q names no buffer of the program", name)
		}
		ids = append(ids, id)
	}
	if len(req.Read) == 0 {
		for i := range l.prog.Buffers {
			if l.prog.Buffers[i].Kind == ir.IOOutput {
				ids = append(ids, i)
			}
		}
	}
	data, err := br.ReadBuffers(l.h, ids)
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			re = &RemoteError{Class: ClassCrash, Phase: OpRead, Message: err.Error()}
		}
		return nil, &Fatal{Err: re}
	}
	resp := &RunResponse{Status: StatusOK, Outputs: map[string]WireTensor{}}
	for _, id := range ids {
		b := &l.prog.Buffers[id]
		resp.Outputs[b.Name] = WireTensor{DType: b.DType.String(), Shape: append([]int(nil), b.Shape...), Data: data[id]}
	}
	return resp, nil
}

func (s *Server) time(req *TimeRequest) (*Comparison, error) {
	c, ok := s.handles[req.Candidate]
	if !ok {
		return nil, rejected(OpTime, "unknown candidate handle %q", req.Candidate)
	}
	inc := NoHandle
	if req.Incumbent != "" {
		l, ok := s.handles[req.Incumbent]
		if !ok {
			return nil, rejected(OpTime, "unknown incumbent handle %q", req.Incumbent)
		}
		inc = l.h
	}
	if req.Samples <= 0 || req.Warmup < 0 {
		return nil, rejected(OpTime, "need samples > 0 and warmup >= 0, got %d and %d", req.Samples, req.Warmup)
	}
	cmp, err := s.Device.TimeInterleaved(c.h, inc, req.Warmup, req.Samples)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) {
			return nil, re
		}
		return nil, &Fatal{Err: &RemoteError{Class: ClassCrash, Phase: OpTime, Message: err.Error()}}
	}
	return cmp, nil
}

// ChildConfig configures the launcher child process of one device.
type ChildConfig struct {
	Ordinal   int             // CUDA device ordinal
	Toolchain build.Toolchain // nvcc for the device's architecture (the C++ compiler for the emulator's)
	CacheDir  string          // the host's shared build cache
	Weights   WeightProvider  // resolves seeded / safetensors weights (optional)
	Stdin     io.Reader       // request frames
	Stdout    io.Writer       // response frames (nothing else may write here)
	// Emulator, when set, serves the CPU emulator (OpenEmulator) instead
	// of CUDA device Ordinal, with modules from EmulatorModules.
	Emulator *EmulatorConfig
}

// RunChild is the body of the launcher child (a hidden subcommand of the
// gpuworker): it opens the device and serves frames until shutdown or EOF.
// For a CUDA device, a build without the cuda tag returns ErrNoCUDA at once.
func RunChild(ctx context.Context, cfg ChildConfig) error {
	builder := &build.Builder{Toolchain: cfg.Toolchain, Dir: cfg.CacheDir, Prebuilt: build.PrebuiltFromEnv()}
	var dev Device
	var mods ModuleSource = BuilderModules{Builder: builder}
	var err error
	if cfg.Emulator != nil {
		dev, err = OpenEmulator(*cfg.Emulator)
		mods = EmulatorModules{Builder: builder}
	} else {
		dev, err = Open(cfg.Ordinal)
	}
	if err != nil {
		return err
	}
	defer dev.Close()
	return Serve(ctx, cfg.Stdin, cfg.Stdout, &Server{Device: dev, Weights: cfg.Weights, Modules: mods})
}
