package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/amk-dev/amk/kernels"
)

// fakeNVCC writes a shell script standing in for nvcc: it answers --version
// with `version`, counts compilations in <dir>/count, checks that its input
// file exists, sleeps `sleep` seconds, and writes a module to the -o path (or
// fails when fail is set).
func fakeNVCC(t *testing.T, version string, sleep float64, fail bool) (script, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "count")
	failLine := ""
	if fail {
		failLine = `echo "megakernel.cu(1): error: boom" >&2; exit 2`
	}
	body := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do [ "$a" = "--version" ] && { echo "%s"; exit 0; }; done
echo x >> '%s'
out=""; prev=""; last=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"; last="$a"
done
[ -f "$last" ] || { echo "no input $last" >&2; exit 3; }
sleep %g
%s
printf 'FAKE-MODULE %%s\n' "$*" > "$out"
echo "ptxas info    : Used 42 registers" >&2
`, version, counter, sleep, failLine)
	script = filepath.Join(dir, "nvcc")
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, counter
}

func compilations(t *testing.T, counter string) int {
	t.Helper()
	data, err := os.ReadFile(counter)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "x")
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no /bin/sh for the fake compiler")
	}
}

func TestBuildMissThenHit(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0, false)
	dir := t.TempDir()
	b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: dir}
	ctx := context.Background()
	a, err := b.Build(ctx, Request{Arch: "sm_90a", Variant: kernels.Variant{"cols_per_warp": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hit || compilations(t, counter) != 1 {
		t.Fatalf("first build: hit=%v compilations=%d", a.Hit, compilations(t, counter))
	}
	data, err := a.Data()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAKE-MODULE", "-arch=sm_90a", "--cubin", "-DAMK_GEMV_COLS_PER_WARP=2", "-DAMK_THREADS=256", "cuda/megakernel.cu"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("module %q lacks %q", data, want)
		}
	}
	if !strings.Contains(a.Log, "Used 42 registers") || len(a.Flags) != len(kernels.KnobSpace()) {
		t.Errorf("log %q flags %v", a.Log, a.Flags)
	}
	// The materialised source tree is the embedded one.
	got, err := os.ReadFile(filepath.Join(dir, cacheVersion, "src", kernels.SourceHash(), "cuda", "megakernel.cu"))
	want, _ := fs.ReadFile(kernels.Sources(), kernels.EntryFile)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("materialised sources differ: %v", err)
	}
	// Same request again, and from another builder on the same directory: cache hits.
	for _, bb := range []*Builder{b, {Toolchain: Toolchain{NVCC: script}, Dir: dir}} {
		h, err := bb.Build(ctx, Request{Arch: "sm_90a", Defines: []string{"-DAMK_GEMV_COLS_PER_WARP=2"}})
		if err != nil {
			t.Fatal(err)
		}
		if !h.Hit || h.Path != a.Path || h.Key != a.Key || !strings.Contains(h.Log, "42 registers") {
			t.Errorf("second build: %+v", h)
		}
	}
	if n := compilations(t, counter); n != 1 {
		t.Errorf("compiler ran %d times for one variant", n)
	}
}

func TestKeyStabilityAndSensitivity(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0, false)
	script2, _ := fakeNVCC(t, "fake nvcc 2.0", 0, false)
	ctx := context.Background()
	key := func(b *Builder, r Request) string {
		t.Helper()
		k, err := b.Key(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir()}
	k0 := key(base, Request{Arch: "sm_90a"})
	if len(k0) != 64 {
		t.Fatalf("key %q", k0)
	}
	same := []Request{
		{Arch: "sm_90a", Output: Cubin},
		{Arch: "sm_90a", Variant: kernels.Variant{"threads": 256}},
		{Arch: "sm_90a", Variant: kernels.Variant{"AMK_GEMV_CPA_STAGES": 4}},
		{Arch: "sm_90a", Defines: []string{"-DAMK_THREADS=256", "-DAMK_GEMV_CPASYNC=1"}},
	}
	for _, r := range same {
		if k := key(base, r); k != k0 {
			t.Errorf("%+v: key %s differs from the default %s (defaults must be filled)", r, k[:12], k0[:12])
		}
	}
	if k := key(&Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir()}, Request{Arch: "sm_90a"}); k != k0 {
		t.Error("key depends on the builder instance or cache directory")
	}
	differ := map[string]string{
		"arch":     key(base, Request{Arch: "sm_80"}),
		"ptx":      key(base, Request{Arch: "sm_90a", Output: PTX}),
		"knob":     key(base, Request{Arch: "sm_90a", Variant: kernels.Variant{"cpa_stages": 3}}),
		"threads":  key(base, Request{Arch: "sm_90a", Defines: []string{"-DAMK_THREADS=128"}}),
		"nvcc":     key(&Builder{Toolchain: Toolchain{NVCC: script2}, Dir: t.TempDir()}, Request{Arch: "sm_90a"}),
		"hostargs": key(&Builder{Toolchain: Toolchain{NVCC: script, HostArgs: []string{"-ccbin", "g++-12"}}, Dir: t.TempDir()}, Request{Arch: "sm_90a"}),
	}
	srcs := fstest.MapFS{}
	for _, f := range kernels.SourceFiles() {
		data, _ := fs.ReadFile(kernels.Sources(), f)
		srcs[f] = &fstest.MapFile{Data: data}
	}
	srcs["cuda/ops.cuh"] = &fstest.MapFile{Data: append(append([]byte{}, srcs["cuda/ops.cuh"].Data...), "\n// edited\n"...)}
	differ["sources"] = key(&Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir(), Sources: srcs}, Request{Arch: "sm_90a"})
	seen := map[string]string{k0: "default"}
	for what, k := range differ {
		if prev, dup := seen[k]; dup {
			t.Errorf("changing %s gives the same key as %s", what, prev)
		}
		seen[k] = what
	}
	if compilations(t, counter) != 0 {
		t.Error("Key compiled something")
	}
}

func TestBuildRejectsBadInputWithoutRunningTheCompiler(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0, false)
	b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir()}
	bad := []Request{
		{Arch: "sm_90a; rm -rf /"},
		{Arch: "compute_90"},
		{Arch: ""},
		{Arch: "sm_90a", Defines: []string{"-DFOO;rm -rf /"}},
		{Arch: "sm_90a", Defines: []string{"-DAMK_UNKNOWN=1"}},
		{Arch: "sm_90a", Defines: []string{"-DAMK_THREADS=4096"}},
		{Arch: "sm_90a", Variant: kernels.Variant{"cols_per_warp": 99}},
		{Arch: "sm_90a", Variant: kernels.Variant{"rm -rf /": 1}},
		{Arch: "sm_90a", Variant: kernels.Variant{"threads": 128}, Defines: []string{"-DAMK_THREADS=256"}},
		{Arch: "sm_90a", Output: "exe"},
	}
	for _, r := range bad {
		if _, err := b.Build(context.Background(), r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if n := compilations(t, counter); n != 0 {
		t.Errorf("compiler ran %d times on rejected requests", n)
	}
	if _, err := (&Builder{Toolchain: Toolchain{NVCC: script}}).Build(context.Background(), Request{Arch: "sm_90"}); err == nil {
		t.Error("builder without a cache directory accepted")
	}
}

func TestConcurrentBuildersCompileOnce(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0.3, false)
	dir := t.TempDir()
	const n = 6
	var wg sync.WaitGroup
	arts := make([]*Artifact, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: dir} // one builder per "worker"
			arts[i], errs[i] = b.Build(context.Background(), Request{Arch: "sm_90a"})
		}(i)
	}
	wg.Wait()
	misses := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !arts[i].Hit {
			misses++
		}
		if arts[i].Path != arts[0].Path {
			t.Errorf("builders disagree on the artifact path")
		}
	}
	if c := compilations(t, counter); c != 1 || misses != 1 {
		t.Errorf("%d compilations, %d misses; want 1 and 1", c, misses)
	}
	data, _ := arts[0].Data()
	if !bytes.HasPrefix(data, []byte("FAKE-MODULE")) {
		t.Errorf("artifact corrupted: %q", data)
	}
}

// TestHelperProcessBuild is the body of the cross-process test's children.
func TestHelperProcessBuild(t *testing.T) {
	dir, script := os.Getenv("AMK_BUILD_HELPER_DIR"), os.Getenv("AMK_BUILD_HELPER_NVCC")
	if dir == "" {
		t.Skip("helper process only")
	}
	b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: dir}
	if _, err := b.Build(context.Background(), Request{Arch: "sm_90"}); err != nil {
		t.Fatal(err)
	}
}

func TestCrossProcessBuildersCompileOnce(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0.3, false)
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessBuild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AMK_BUILD_HELPER_DIR="+dir, "AMK_BUILD_HELPER_NVCC="+script)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	if c := compilations(t, counter); c != 1 {
		t.Errorf("%d compilations across processes, want 1", c)
	}
}

func TestCompileErrorIsNotCached(t *testing.T) {
	needSh(t)
	script, counter := fakeNVCC(t, "fake nvcc 1.0", 0, true)
	b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir()}
	for i := 1; i <= 2; i++ {
		_, err := b.Build(context.Background(), Request{Arch: "sm_90"})
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.Contains(ce.Log, "boom") || !strings.Contains(err.Error(), "sm_90") {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if c := compilations(t, counter); c != i {
			t.Errorf("attempt %d: %d compilations", i, c)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(b.Dir, cacheVersion, "obj"))
	if len(entries) != 0 {
		t.Errorf("failed build left %d entries in the cache", len(entries))
	}
}

func TestCompileTimeout(t *testing.T) {
	needSh(t)
	script, _ := fakeNVCC(t, "fake nvcc 1.0", 30, false)
	b := &Builder{Toolchain: Toolchain{NVCC: script}, Dir: t.TempDir(), Timeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := b.Build(context.Background(), Request{Arch: "sm_90"})
	// A timeout is told apart from a compile error: it says nothing of the sources.
	var ce *CompileError
	var te *CompileTimeout
	if errors.As(err, &ce) || !errors.As(err, &te) || !strings.Contains(err.Error(), "not a compile error") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the compiler was not killed at the timeout")
	}
}

func TestMissingCompiler(t *testing.T) {
	b := &Builder{Toolchain: Toolchain{NVCC: filepath.Join(t.TempDir(), "no-nvcc")}, Dir: t.TempDir()}
	if _, err := b.Build(context.Background(), Request{Arch: "sm_90"}); err == nil || !strings.Contains(err.Error(), "--version") {
		t.Errorf("err = %v", err)
	}
}

// A module in the Prebuilt cache, built by another nvcc, is used without
// running this host's nvcc; a variant the cache lacks is compiled here.
func TestBuildTakesPrebuiltModules(t *testing.T) {
	needSh(t)
	elsewhere, _ := fakeNVCC(t, "Cuda compilation tools, release 12.4, V12.4.131", 0, false)
	prebuilt := t.TempDir()
	ctx := context.Background()
	made, err := (&Builder{Toolchain: Toolchain{NVCC: elsewhere}, Dir: prebuilt}).Build(ctx, Request{Arch: "sm_90a"})
	if err != nil {
		t.Fatal(err)
	}
	here, counter := fakeNVCC(t, "Cuda compilation tools, release 13.0, V13.0.48", 0, false)
	b := &Builder{Toolchain: Toolchain{NVCC: here}, Dir: t.TempDir(), Prebuilt: prebuilt}
	a, err := b.Build(ctx, Request{Arch: "sm_90a"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Prebuilt != "nvcc 12.4" || !a.Hit || a.Path != made.Path || compilations(t, counter) != 0 {
		t.Fatalf("prebuilt module not used: %+v, %d compilations here", a, compilations(t, counter))
	}
	// Another architecture or variant is not in the prebuilt cache.
	for _, req := range []Request{{Arch: "sm_90"}, {Arch: "sm_90a", Variant: kernels.Variant{"ring_stages": 8}}} {
		a, err := b.Build(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.Prebuilt != "" || a.Hit {
			t.Errorf("%+v: taken from the prebuilt cache: %+v", req, a)
		}
	}
	if n := compilations(t, counter); n != 2 {
		t.Errorf("%d compilations here, want 2", n)
	}
}
