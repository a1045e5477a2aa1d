package build

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/kernels"
)

// The CPU emulator's builds (the sources and the model: kernels/emu/emu.h).
// An emulator executable is the kernel sources compiled for the host by the
// toolchain's C++ compiler with the emulator's shim, one per architecture
// and knob variant like an nvcc module, linked with the emulator's runtime
// object, which every variant shares. Both go through the cache of Build
// (obj/<key>.o for the runtime, obj/<key>.emu for the executable), so a
// variant is compiled once per host and a changed kernel source recompiles
// only the kernel translation unit.

// Optimisation levels of the emulator builds. An emulated launch spends most
// of its time in the runtime (thread switches, barriers, warp collectives),
// compiled once at -O2; the kernel translation unit, compiled once per
// variant, takes -O1 by default (Toolchain.EmulatorOpt overrides it: -O0
// compiles in less than half the time and runs small models about as fast,
// which is what the tests use; docs/results/emu.md has the measurements).
const (
	EmulatorKernelOpt  = "-O1"
	EmulatorRuntimeOpt = "-O2"
)

var reOpt = regexp.MustCompile(`^-O[0-3gs]$`)

// EmulatorRequest is one emulator build.
type EmulatorRequest struct {
	// Arch selects the kernels' code paths the emulator runs, as nvcc's
	// -arch would: sm_70 and newer (sm_80: cp.async; sm_90 and later with
	// CUDAMajor >= 12: the bulk copies and mbarriers of the streaming ring).
	Arch    string
	Variant kernels.Variant
	// CUDAMajor is the nvcc major version the build stands in for
	// (__CUDACC_VER_MAJOR__; 0: 12).
	CUDAMajor int
	// Sanitize adds -fsanitize=<list> to every compile and the link (e.g.
	// "address,undefined"); "" builds without.
	Sanitize string
}

// EmulatorArchCode is the __CUDA_ARCH__ value of an architecture the
// emulator runs (sm_90a: 900); the emulator refuses the architectures before
// sm_70 (their counter polls cannot yield).
func EmulatorArchCode(arch string) (int, error) {
	if err := CheckArch(arch); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimRight(strings.TrimPrefix(arch, "sm_"), "af"))
	if err != nil {
		return 0, fmt.Errorf("invalid GPU architecture %q", arch)
	}
	if n < 70 {
		return 0, fmt.Errorf("the CPU emulator runs sm_70 and newer code paths, not %s", arch)
	}
	return n * 10, nil
}

// CompilerVersion returns `CXX --version` of the toolchain's host C++
// compiler (run once per Builder).
func (b *Builder) CompilerVersion(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cxxVersion != "" {
		return b.cxxVersion, nil
	}
	out, err := b.run(ctx, "", b.cxx(), []string{"--version"})
	if err != nil {
		return "", fmt.Errorf("the emulator needs a C++ compiler: %s --version: %v: %s (install g++, or set %s)",
			b.cxx(), err, strings.TrimSpace(out), EnvCXX)
	}
	b.cxxVersion = strings.TrimSpace(out)
	if b.cxxVersion == "" {
		return "", fmt.Errorf("%s --version printed nothing", b.cxx())
	}
	return b.cxxVersion, nil
}

func (b *Builder) cxx() string {
	if b.Toolchain.CXX != "" {
		return b.Toolchain.CXX
	}
	return "g++"
}

func (b *Builder) emulatorSources() fs.FS {
	if b.EmulatorSources != nil {
		return b.EmulatorSources
	}
	return kernels.EmulatorSources()
}

// emulatorInputs is everything an emulator build depends on.
type emulatorInputs struct {
	Cache    string   `json:"cache"`
	Kind     string   `json:"kind"` // "emulator-runtime" or "emulator"
	Runtime  string   `json:"runtime_sources"`
	Sources  string   `json:"sources,omitempty"`
	Arch     string   `json:"arch,omitempty"`
	Args     []string `json:"args"`
	LinkArgs []string `json:"link_args,omitempty"`
	CXX      string   `json:"cxx_version"`
}

func (in emulatorInputs) key() string {
	data, _ := json.Marshal(in)
	return keyOf(data)
}

// BuildEmulator returns the emulator executable of req (Artifact.Path, mode
// 0755), building the runtime object and the executable only if no builder
// of this host has before. A C++ error is a *CompileError.
func (b *Builder) BuildEmulator(ctx context.Context, req EmulatorRequest) (*Artifact, error) {
	if b.Dir == "" {
		return nil, fmt.Errorf("build cache directory not configured")
	}
	code, err := EmulatorArchCode(req.Arch)
	if err != nil {
		return nil, err
	}
	flags, err := Request{Variant: req.Variant}.Flags()
	if err != nil {
		return nil, err
	}
	if req.CUDAMajor == 0 {
		req.CUDAMajor = 12
	}
	if req.CUDAMajor < 9 || req.CUDAMajor > 99 {
		return nil, fmt.Errorf("emulated nvcc major version %d out of range", req.CUDAMajor)
	}
	for s := range strings.SplitSeq(req.Sanitize, ",") {
		if s != "" && s != "address" && s != "undefined" {
			return nil, fmt.Errorf("sanitizer %q: the emulator builds with address and undefined only", s)
		}
	}
	opt := EmulatorKernelOpt
	if b.Toolchain.EmulatorOpt != "" {
		if !reOpt.MatchString(b.Toolchain.EmulatorOpt) {
			return nil, fmt.Errorf("emulator optimisation level %q: want -O0, -O1, -O2, -O3, -Og or -Os", b.Toolchain.EmulatorOpt)
		}
		opt = b.Toolchain.EmulatorOpt
	}
	version, err := b.CompilerVersion(ctx)
	if err != nil {
		return nil, err
	}
	runtimeHash, err := kernels.HashSources(b.emulatorSources())
	if err != nil {
		return nil, fmt.Errorf("hashing the emulator sources: %w", err)
	}
	if b.Sources == nil {
		if err := kernels.CheckSources(); err != nil {
			return nil, err
		}
	}
	srcHash, err := kernels.HashSources(b.sources())
	if err != nil {
		return nil, fmt.Errorf("hashing kernel sources: %w", err)
	}
	var san []string
	if req.Sanitize != "" {
		san = []string{"-fsanitize=" + req.Sanitize, "-fno-omit-frame-pointer", "-g"}
	}
	clang := strings.Contains(strings.ToLower(version), "clang")

	// The runtime object, shared by every variant.
	rtIn := emulatorInputs{Cache: cacheVersion, Kind: "emulator-runtime", Runtime: runtimeHash, CXX: version,
		Args: append(append([]string{"-std=c++17", EmulatorRuntimeOpt, "-pthread", "-fno-strict-aliasing", "-Wall", "-Wextra"},
			b.Toolchain.CXXArgs...), san...)}
	rtKey := rtIn.key()
	if _, err := b.produce(ctx, rtKey, "o", rtIn, nil, func(ctx context.Context, tmp string) (string, error) {
		dir, err := b.materialize(b.emulatorSources(), "emu-"+runtimeHash)
		if err != nil {
			return "", err
		}
		args := append(append([]string{}, rtIn.Args...), "-c", filepath.Join(dir, kernels.EmulatorRuntimeFile), "-o", tmp)
		log, err := b.run(ctx, dir, b.cxx(), args)
		if err != nil {
			return log, compileFailure(err, &CompileError{Arch: "emulator runtime", Log: log, Err: err})
		}
		return log, nil
	}); err != nil {
		return nil, err
	}
	rtObj := filepath.Join(b.root(), "obj", rtKey+".o")

	// The executable of this variant.
	kernelArgs := []string{"-std=c++17", opt, "-pthread", "-ffp-contract=off", "-fno-strict-aliasing",
		"-Wall", "-Wno-unknown-pragmas", "-DAMK_EMU=1", fmt.Sprintf("-D__CUDA_ARCH__=%d", code),
		fmt.Sprintf("-D__CUDACC_VER_MAJOR__=%d", req.CUDAMajor)}
	if !clang {
		kernelArgs = append(kernelArgs, "-fno-extern-tls-init") // direct access to the shared-memory variables
	}
	kernelArgs = append(append(append(kernelArgs, b.Toolchain.CXXArgs...), san...), flags...)
	in := emulatorInputs{Cache: cacheVersion, Kind: "emulator", Runtime: runtimeHash, Sources: srcHash, Arch: req.Arch,
		Args: kernelArgs, LinkArgs: append([]string{"-pthread"}, san...), CXX: version}
	key := in.key()
	hit, err := b.produce(ctx, key, "emu", in, flags, func(ctx context.Context, tmp string) (string, error) {
		emuDir, err := b.materialize(b.emulatorSources(), "emu-"+runtimeHash)
		if err != nil {
			return "", err
		}
		srcDir, err := b.materialize(b.sources(), srcHash)
		if err != nil {
			return "", err
		}
		obj := tmp + ".kernel.o"
		defer os.Remove(obj)
		args := append(append([]string{}, in.Args...), "-include", filepath.Join(emuDir, kernels.EmulatorShimFile),
			"-I", filepath.Join(emuDir, kernels.EmulatorIncludeDir), "-I", filepath.Join(srcDir, filepath.Dir(filepath.FromSlash(kernels.EntryFile))),
			"-c", filepath.Join(emuDir, kernels.EmulatorKernelFile), "-o", obj)
		log, err := b.run(ctx, srcDir, b.cxx(), args)
		if err != nil {
			return log, compileFailure(err, &CompileError{Arch: req.Arch + " (emulator)", Flags: flags, Log: log, Err: err})
		}
		link := append(append([]string{}, in.LinkArgs...), "-o", tmp, rtObj, obj)
		more, err := b.run(ctx, srcDir, b.cxx(), link)
		log += more
		if err != nil {
			return log, compileFailure(err, &CompileError{Arch: req.Arch + " (emulator link)", Flags: flags, Log: log, Err: err})
		}
		return log, os.Chmod(tmp, 0o755)
	})
	if err != nil {
		return nil, err
	}
	return b.artifact(key, "emu", in.Args, req.Arch, flags, hit), nil
}
