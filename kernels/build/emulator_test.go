package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/amk-dev/amk/kernels"
)

// fakeCXX writes a shell script standing in for the emulator's C++
// compiler: it answers --version, appends each run's arguments to <dir>/log
// (one line per run), fails a kernel compile when fail is set, and writes
// the -o file.
func fakeCXX(t *testing.T, fail bool) (script, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	failLine := ""
	if fail {
		failLine = `case "$*" in *kernel.cc*) echo "kernel.cc:1: error: boom" >&2; exit 1;; esac`
	}
	body := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do [ "$a" = "--version" ] && { echo "fake-c++ 1.0"; exit 0; }; done
echo "$*" >> '%s'
%s
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
printf 'FAKE %%s\n' "$*" > "$out"
`, log, failLine)
	script = filepath.Join(dir, "c++")
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, log
}

// runs returns the compiler runs logged so far.
func runs(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// An emulator build compiles the runtime once per host and the kernel
// translation unit once per variant and source tree: a second variant, a
// mutated source tree or another optimisation level recompile only the
// kernel and relink; the same request is a hit; the executable is
// executable and the architecture reaches the compiler as __CUDA_ARCH__.
func TestBuildEmulatorCachesTheRuntimeAndEachVariant(t *testing.T) {
	cxx, log := fakeCXX(t, false)
	dir := t.TempDir()
	b := &Builder{Toolchain: Toolchain{CXX: cxx}, Dir: dir}
	ctx := context.Background()
	a, err := b.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a", Variant: kernels.DefaultVariant()})
	if err != nil {
		t.Fatal(err)
	}
	first := runs(t, log)
	if len(first) != 3 || !strings.Contains(first[0], "runtime.cc") || !strings.Contains(first[1], "kernel.cc") ||
		!strings.Contains(first[1], "-D__CUDA_ARCH__=900") || !strings.Contains(first[1], "-D__CUDACC_VER_MAJOR__=12") ||
		!strings.Contains(first[1], "-include") || !strings.Contains(first[1], EmulatorKernelOpt) {
		t.Fatalf("first build ran %q", first)
	}
	if st, err := os.Stat(a.Path); err != nil || st.Mode()&0o111 == 0 || a.Hit || !strings.HasSuffix(a.Path, ".emu") {
		t.Fatalf("artifact %+v: %v", a, err)
	}
	again, err := b.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a", Variant: kernels.DefaultVariant()})
	if err != nil || !again.Hit || again.Path != a.Path || len(runs(t, log)) != 3 {
		t.Fatalf("the same request: %+v %v, %d runs", again, err, len(runs(t, log)))
	}
	v := kernels.DefaultVariant()
	v["ring_stages"] = 8
	other, err := b.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_80", Variant: v})
	if err != nil || other.Hit || other.Path == a.Path {
		t.Fatalf("another variant: %+v %v", other, err)
	}
	now := runs(t, log)
	if len(now) != 5 || strings.Contains(now[3], "runtime.cc") || !strings.Contains(now[3], "-D__CUDA_ARCH__=800") ||
		!strings.Contains(now[3], "-DAMK_RING_STAGES=8") {
		t.Fatalf("another variant ran %q", now[3:])
	}
	// a mutated kernel tree: the kernel translation unit and the link only
	mut := fstest.MapFS{}
	_ = fs.WalkDir(kernels.Sources(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := fs.ReadFile(kernels.Sources(), path)
			if path == "cuda/sync.cuh" {
				data = append(data, []byte("\n/* mutated */\n")...)
			}
			mut[path] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
		return nil
	})
	mb := &Builder{Toolchain: Toolchain{CXX: cxx}, Dir: dir, Sources: mut}
	if m, err := mb.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a", Variant: kernels.DefaultVariant()}); err != nil || m.Hit || m.Path == a.Path {
		t.Fatalf("a mutated tree: %+v %v", m, err)
	}
	if now := runs(t, log); len(now) != 7 || strings.Contains(strings.Join(now[5:], " "), "runtime.cc") {
		t.Fatalf("a mutated tree ran %q", now[5:])
	}
	ob := &Builder{Toolchain: Toolchain{CXX: cxx, EmulatorOpt: "-O0"}, Dir: dir}
	if o, err := ob.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a", Variant: kernels.DefaultVariant()}); err != nil || o.Hit {
		t.Fatalf("-O0: %+v %v", o, err)
	}
	if now := runs(t, log); len(now) != 9 || !strings.Contains(now[7], "-O0") || strings.Contains(now[7], "runtime.cc") {
		t.Fatalf("-O0 ran %q", now[7:])
	}
}

// Bad requests are refused before the compiler runs; a C++ error is a
// CompileError and is not cached; a missing compiler says how to get one.
func TestBuildEmulatorRefusals(t *testing.T) {
	cxx, log := fakeCXX(t, false)
	b := &Builder{Toolchain: Toolchain{CXX: cxx}, Dir: t.TempDir()}
	ctx := context.Background()
	for _, r := range []EmulatorRequest{
		{Arch: "sm_60", Variant: kernels.DefaultVariant()},
		{Arch: "gfx942", Variant: kernels.DefaultVariant()},
		{Arch: "sm_90a", Variant: kernels.Variant{"bogus": 1}},
		{Arch: "sm_90a", Variant: kernels.Variant{"threads": 100}},
		{Arch: "sm_90a", Sanitize: "thread"},
		{Arch: "sm_90a", CUDAMajor: 400},
	} {
		if _, err := b.BuildEmulator(ctx, r); err == nil {
			t.Errorf("%+v: built", r)
		}
	}
	bad := &Builder{Toolchain: Toolchain{CXX: cxx, EmulatorOpt: "-O9 -march=native"}, Dir: t.TempDir()}
	if _, err := bad.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a"}); err == nil || !strings.Contains(err.Error(), "optimisation level") {
		t.Errorf("a bad optimisation level: %v", err)
	}
	if n := len(runs(t, log)); n != 0 {
		t.Errorf("the compiler ran %d times for refused requests", n)
	}

	failing, flog := fakeCXX(t, true)
	fb := &Builder{Toolchain: Toolchain{CXX: failing}, Dir: t.TempDir()}
	for i := range 2 {
		_, err := fb.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a"})
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.Contains(ce.Log, "boom") {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if got := runs(t, flog); len(got) != 3 { // the runtime once, the failing kernel twice: not cached
		t.Errorf("two failing builds ran %q", got)
	}

	missing := &Builder{Toolchain: Toolchain{CXX: filepath.Join(t.TempDir(), "no-such-c++")}, Dir: t.TempDir()}
	if _, err := missing.BuildEmulator(ctx, EmulatorRequest{Arch: "sm_90a"}); err == nil ||
		!strings.Contains(err.Error(), "needs a C++ compiler") || !strings.Contains(err.Error(), EnvCXX) {
		t.Errorf("a missing compiler: %v", err)
	}
}

func TestEmulatorArchCode(t *testing.T) {
	for arch, want := range map[string]int{"sm_70": 700, "sm_80": 800, "sm_90a": 900, "sm_100a": 1000, "sm_120": 1200} {
		if got, err := EmulatorArchCode(arch); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", arch, got, err, want)
		}
	}
	for _, arch := range []string{"sm_61", "sm_5", "90", "sm_90x"} {
		if _, err := EmulatorArchCode(arch); err == nil {
			t.Errorf("%s: accepted", arch)
		}
	}
}
