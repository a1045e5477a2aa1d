package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/amk-dev/amk/kernels"
)

// Output is what nvcc produces.
type Output string

// Outputs.
const (
	Cubin Output = "cubin"
	PTX   Output = "ptx"
)

// cacheVersion is bumped when the cache layout or key recipe changes.
const cacheVersion = "v1"

// Toolchain is the compiler a worker was configured with. Its fields come
// from the operator (worker configuration), never from a trial.
type Toolchain struct {
	NVCC     string   // nvcc executable (path or name on PATH); exec'd directly, never through a shell
	HostArgs []string // extra trusted arguments, e.g. "-ccbin", "g++-12"
	// CXX is the host C++ compiler of the CPU emulator's builds
	// (BuildEmulator; "" is g++), CXXArgs extra trusted arguments for it,
	// EmulatorOpt the optimisation level of the kernel translation unit
	// ("" is EmulatorKernelOpt).
	CXX         string
	CXXArgs     []string
	EmulatorOpt string
}

// Request is one build: an architecture and a kernel variant.
type Request struct {
	Arch    string          // "sm_90a", "sm_90", "sm_80", ...
	Output  Output          // Cubin (default) or PTX
	Variant kernels.Variant // knob values (names or macros); defaults are filled
	Defines []string        // alternatively/additionally raw "-DAMK_X=N" flags, checked against the allow-list
}

// Artifact is a compiled module in the cache.
type Artifact struct {
	Key   string   // cache key (hex SHA-256)
	Path  string   // the cached PTX or cubin
	Hit   bool     // true when no compiler ran for this call
	Args  []string // the nvcc arguments (without paths) the module was built with
	Log   string   // nvcc's diagnostics (resource usage) from the build that produced it
	Arch  string
	Flags []string // the -D flags, sorted, every knob spelled out
	// Prebuilt is set when the module came from Builder.Prebuilt: "nvcc"
	// and the release of the compiler that built it elsewhere.
	Prebuilt string
}

// Data reads the module bytes.
func (a *Artifact) Data() ([]byte, error) { return os.ReadFile(a.Path) }

// CompileError is a deterministic build failure (not retried).
type CompileError struct {
	Arch  string
	Flags []string
	Log   string
	Err   error
}

func (e *CompileError) Error() string {
	log := strings.TrimSpace(e.Log)
	if len(log) > 4000 {
		log = log[:4000] + "..."
	}
	return fmt.Sprintf("nvcc failed for %s %s: %v\n%s", e.Arch, strings.Join(e.Flags, " "), e.Err, log)
}

// CompileTimeout is a compiler run that outlived Builder.Timeout (or its
// caller's deadline) and was killed: it says nothing about the sources, so
// it is never reported as a compile error (not a *CompileError) and a later
// build of the same variant starts afresh.
type CompileTimeout struct {
	Compiler string
	After    time.Duration
	Log      string // what the compiler printed before it was killed
}

func (e *CompileTimeout) Error() string {
	msg := fmt.Sprintf("%s did not finish within %s and was killed (a compile timeout, not a compile error)", e.Compiler, e.After.Round(time.Second))
	if log := strings.TrimSpace(e.Log); log != "" {
		if len(log) > 1000 {
			log = log[:1000] + "..."
		}
		msg += ": " + log
	}
	return msg
}

// compileFailure is a compiler run's err as a *CompileError (ce, with err
// in it), or as it is when it is a *CompileTimeout.
func compileFailure(err error, ce *CompileError) error {
	var te *CompileTimeout
	if errors.As(err, &te) {
		return err
	}
	return ce
}

// Builder compiles the kernel sources through a content-addressed cache in
// Dir, shared by every worker of a host: a variant compiled once is never
// compiled again (docs/spec/rules.md R8). Safe for concurrent use, also across processes.
type Builder struct {
	Toolchain Toolchain
	Dir       string        // cache directory
	Sources   fs.FS         // nil = kernels.Sources()
	Timeout   time.Duration // per compiler run; 0 = 15 minutes
	// EmulatorSources is the CPU emulator's runtime (nil =
	// kernels.EmulatorSources()).
	EmulatorSources fs.FS
	// Prebuilt is a build cache made elsewhere, read only ("" = none; the
	// operator's $AMK_KERNEL_PREBUILT, PrebuiltFromEnv): Build takes a module
	// from it when one there was built from the same sources, architecture,
	// output kind and nvcc arguments, whichever nvcc built it (its version is
	// in the module's metadata), before asking this host's nvcc for anything.
	// A GPU visit carries cubins compiled on the development machine this way.
	Prebuilt string

	mu         sync.Mutex
	version    string // cached `nvcc --version`
	cxxVersion string // cached `CXX --version`
	prebuilt   map[string]prebuiltModule
	prebuiltOK bool
}

// prebuiltModule is one module of the Prebuilt cache.
type prebuiltModule struct {
	key, ext, log, nvcc string
}

var reArch = regexp.MustCompile(`^sm_[0-9]{2,3}[af]?$`)

// CheckArch validates an architecture name (sm_XY, sm_XYZ, optional a/f suffix).
func CheckArch(arch string) error {
	if !reArch.MatchString(arch) {
		return fmt.Errorf("invalid GPU architecture %q (want e.g. sm_90a)", arch)
	}
	return nil
}

// Flags validates the request's knobs and returns the full sorted -D list.
func (r Request) Flags() ([]string, error) {
	merged := kernels.Variant{}
	add := func(key string, val int64) error {
		k, ok := kernels.LookupKnob(key)
		if !ok {
			return fmt.Errorf("unknown kernel knob %q", key)
		}
		if old, dup := merged[k.Name]; dup && old != val {
			return fmt.Errorf("knob %s given as %d and %d", k.Name, old, val)
		}
		merged[k.Name] = val
		return nil
	}
	for name, val := range r.Variant {
		if err := add(name, val); err != nil {
			return nil, err
		}
	}
	fromDefines, err := kernels.VariantFromDefines(r.Defines)
	if err != nil {
		return nil, err
	}
	for name, val := range fromDefines {
		if err := add(name, val); err != nil {
			return nil, err
		}
	}
	return merged.Defines()
}

func (r Request) output() (Output, error) {
	switch r.Output {
	case "", Cubin:
		return Cubin, nil
	case PTX:
		return PTX, nil
	}
	return "", fmt.Errorf("unknown output kind %q", r.Output)
}

func (b *Builder) sources() fs.FS {
	if b.Sources != nil {
		return b.Sources
	}
	return kernels.Sources()
}

// compilerArgs are the nvcc arguments other than input/output paths.
func (b *Builder) compilerArgs(arch string, out Output, flags []string) []string {
	args := append([]string{}, b.Toolchain.HostArgs...)
	args = append(args, "-std=c++17", "-O3", "-lineinfo", "-arch="+arch)
	if out == PTX {
		args = append(args, "--ptx")
	} else {
		args = append(args, "--cubin", "--resource-usage")
	}
	return append(args, flags...)
}

// ToolchainVersion returns `nvcc --version` (run once per Builder).
func (b *Builder) ToolchainVersion(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.version != "" {
		return b.version, nil
	}
	nvcc := b.Toolchain.NVCC
	if nvcc == "" {
		nvcc = "nvcc"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nvcc, append(append([]string{}, b.Toolchain.HostArgs...), "--version")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", nvcc, err, strings.TrimSpace(out.String()))
	}
	b.version = strings.TrimSpace(out.String())
	if b.version == "" {
		return "", fmt.Errorf("%s --version printed nothing", nvcc)
	}
	return b.version, nil
}

// keyInputs is everything a module depends on.
type keyInputs struct {
	Cache   string   `json:"cache"`
	Sources string   `json:"sources"`
	Arch    string   `json:"arch"`
	Output  Output   `json:"output"`
	Args    []string `json:"args"`
	NVCC    string   `json:"nvcc_version"`
}

func (k keyInputs) key() string {
	data, _ := json.Marshal(k)
	return keyOf(data)
}

// keyOf is the cache key of a build's inputs, as JSON: their SHA-256 in hex.
func keyOf(inputs []byte) string {
	sum := sha256.Sum256(inputs)
	return hex.EncodeToString(sum[:])
}

type plan struct {
	in    keyInputs
	key   string
	flags []string
	out   Output
	src   string // source hash
}

func (b *Builder) plan(ctx context.Context, req Request) (*plan, error) {
	p, err := b.planInputs(req)
	if err != nil {
		return nil, err
	}
	version, err := b.ToolchainVersion(ctx)
	if err != nil {
		return nil, err
	}
	p.in.NVCC = version
	p.key = p.in.key()
	return p, nil
}

// planInputs is a build's plan without the compiler's version (and key).
func (b *Builder) planInputs(req Request) (*plan, error) {
	if err := CheckArch(req.Arch); err != nil {
		return nil, err
	}
	out, err := req.output()
	if err != nil {
		return nil, err
	}
	flags, err := req.Flags()
	if err != nil {
		return nil, err
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
	in := keyInputs{Cache: cacheVersion, Sources: srcHash, Arch: req.Arch, Output: out,
		Args: b.compilerArgs(req.Arch, out, flags)}
	return &plan{in: in, flags: flags, out: out, src: srcHash}, nil
}

// EnvPrebuilt names a build cache made elsewhere that Builder.Prebuilt reads.
const EnvPrebuilt = "AMK_KERNEL_PREBUILT"

// PrebuiltFromEnv is $AMK_KERNEL_PREBUILT ("" when unset).
func PrebuiltFromEnv() string { return strings.TrimSpace(os.Getenv(EnvPrebuilt)) }

// maxPrebuiltMeta bounds one metadata file of the Prebuilt cache.
const maxPrebuiltMeta = 1 << 20

// portableKey is the key of a build's inputs with the compiler's version
// left out: what a Prebuilt module must match.
func portableKey(in keyInputs) string {
	in.NVCC = ""
	return in.key()
}

// fromPrebuilt returns the module of p in the Prebuilt cache, or nil. The
// cache's metadata is indexed once per Builder; unreadable or foreign
// entries are skipped.
func (b *Builder) fromPrebuilt(p *plan) *Artifact {
	if b.Prebuilt == "" {
		return nil
	}
	obj := filepath.Join(b.Prebuilt, cacheVersion, "obj")
	b.mu.Lock()
	if !b.prebuiltOK {
		b.prebuiltOK = true
		b.prebuilt = map[string]prebuiltModule{}
		metas, _ := filepath.Glob(filepath.Join(obj, "*.json"))
		for _, f := range metas {
			if st, err := os.Stat(f); err != nil || st.Size() > maxPrebuiltMeta {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var m meta
			var in keyInputs
			if json.Unmarshal(data, &m) != nil || json.Unmarshal(m.Inputs, &in) != nil || in.key() != m.Key || in.Cache != cacheVersion {
				continue
			}
			ext := string(in.Output)
			if !exists(filepath.Join(obj, m.Key+"."+ext)) {
				continue
			}
			b.prebuilt[portableKey(in)] = prebuiltModule{key: m.Key, ext: ext, log: m.Log, nvcc: "nvcc " + parseRelease(in.NVCC)}
		}
	}
	mod, ok := b.prebuilt[portableKey(p.in)]
	b.mu.Unlock()
	if !ok {
		return nil
	}
	return &Artifact{Key: mod.key, Path: filepath.Join(obj, mod.key+"."+mod.ext), Hit: true, Args: p.in.Args,
		Log: mod.log, Arch: p.in.Arch, Flags: p.flags, Prebuilt: mod.nvcc}
}

// Key returns the cache key of a request without building.
func (b *Builder) Key(ctx context.Context, req Request) (string, error) {
	p, err := b.plan(ctx, req)
	if err != nil {
		return "", err
	}
	return p.key, nil
}

// meta is stored next to each artifact.
type meta struct {
	Key     string          `json:"key"`
	Inputs  json.RawMessage `json:"inputs"`
	Flags   []string        `json:"flags"`
	Log     string          `json:"log"`
	BuiltAt time.Time       `json:"built_at"`
	Seconds float64         `json:"seconds"`
}

func (b *Builder) root() string { return filepath.Join(b.Dir, cacheVersion) }

func (b *Builder) artifact(key, ext string, args []string, arch string, flags []string, hit bool) *Artifact {
	a := &Artifact{Key: key, Path: filepath.Join(b.root(), "obj", key+"."+ext), Hit: hit, Args: args, Arch: arch, Flags: flags}
	if data, err := os.ReadFile(filepath.Join(b.root(), "obj", key+".json")); err == nil {
		var m meta
		if json.Unmarshal(data, &m) == nil {
			a.Log = m.Log
		}
	}
	return a
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Build returns the module for req: from the Prebuilt cache when it holds
// one, else compiling it only if no worker of this host has compiled it
// before. Concurrent builders of one key serialise on a
// lock file; the artifact appears by atomic rename, so readers never see a
// partial file.
func (b *Builder) Build(ctx context.Context, req Request) (*Artifact, error) {
	if b.Dir == "" {
		return nil, errors.New("build cache directory not configured")
	}
	if b.Prebuilt != "" {
		p, err := b.planInputs(req)
		if err != nil {
			return nil, err
		}
		if a := b.fromPrebuilt(p); a != nil {
			return a, nil
		}
	}
	p, err := b.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	hit, err := b.produce(ctx, p.key, string(p.out), p.in, p.flags, func(ctx context.Context, tmpPath string) (string, error) {
		srcDir, err := b.materialize(b.sources(), p.src)
		if err != nil {
			return "", err
		}
		nvcc := b.Toolchain.NVCC
		if nvcc == "" {
			nvcc = "nvcc"
		}
		args := append(append([]string{}, p.in.Args...), "-o", tmpPath, filepath.Join(srcDir, filepath.FromSlash(kernels.EntryFile)))
		log, err := b.run(ctx, srcDir, nvcc, args)
		if err != nil {
			return log, compileFailure(err, &CompileError{Arch: p.in.Arch, Flags: p.flags, Log: log, Err: err})
		}
		return log, nil
	})
	if err != nil {
		return nil, err
	}
	return b.artifact(p.key, string(p.out), p.in.Args, p.in.Arch, p.flags, hit), nil
}

// produce makes the cache entry obj/<key>.<ext> once per host: a hit needs
// no lock; a miss takes the key's lock, re-checks, lets make write the file
// at tmpPath (its log and error are make's), then publishes the metadata
// (inputs, flags, log) and the file by rename. It reports whether the entry
// was already there. A failed make publishes nothing.
func (b *Builder) produce(ctx context.Context, key, ext string, inputs any, flags []string,
	make func(ctx context.Context, tmpPath string) (log string, err error)) (bool, error) {
	final := filepath.Join(b.root(), "obj", key+"."+ext)
	if exists(final) {
		return true, nil
	}
	for _, d := range []string{"obj", "lock", "tmp", "src"} {
		if err := os.MkdirAll(filepath.Join(b.root(), d), 0o755); err != nil {
			return false, err
		}
	}
	unlock, err := lockFile(ctx, filepath.Join(b.root(), "lock", key+".lock"))
	if err != nil {
		return false, fmt.Errorf("locking build %s: %w", key[:12], err)
	}
	defer unlock()
	if exists(final) { // another builder finished while we waited
		return true, nil
	}
	tmp, err := os.CreateTemp(filepath.Join(b.root(), "tmp"), key[:16]+"-*."+ext)
	if err != nil {
		return false, err
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath)
	start := time.Now()
	log, err := make(ctx, tmpPath)
	if err != nil {
		return false, err
	}
	if st, err := os.Stat(tmpPath); err != nil || st.Size() == 0 {
		return false, &CompileError{Flags: flags, Log: log, Err: errors.New("compiler produced no output")}
	}
	raw, _ := json.Marshal(inputs)
	m := meta{Key: key, Inputs: raw, Flags: flags, Log: log, BuiltAt: time.Now().UTC(), Seconds: time.Since(start).Seconds()}
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := writeAtomic(filepath.Join(b.root(), "obj", key+".json"), data, filepath.Join(b.root(), "tmp")); err != nil {
		return false, err
	}
	return false, os.Rename(tmpPath, final)
}

// run executes one compiler command in dir (its process group killed when
// ctx or Builder.Timeout ends, a *CompileTimeout then) and returns its
// combined output.
func (b *Builder) run(ctx context.Context, dir, exe string, args []string) (string, error) {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Minute
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir = dir
	killGroupOnCancel(cmd)
	cmd.WaitDelay = 10 * time.Second
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return log.String(), &CompileTimeout{Compiler: filepath.Base(exe), After: time.Since(start), Log: log.String()}
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", err, ctx.Err())
		}
		return log.String(), err
	}
	return log.String(), nil
}

// materialize writes a source tree under src/<hash> once (atomic rename of
// a fully written temporary directory).
func (b *Builder) materialize(src fs.FS, hash string) (string, error) {
	dir := filepath.Join(b.root(), "src", hash)
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(b.root(), "tmp"), "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(tmp, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("writing sources: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return dir, nil // a concurrent builder of another key won the race
		}
		return "", err
	}
	return dir, nil
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte, tmpDir string) error {
	f, err := os.CreateTemp(tmpDir, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	name := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	return os.Rename(name, path)
}
