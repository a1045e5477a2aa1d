package kernels

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

func readSource(t *testing.T, path string) string {
	t.Helper()
	data, err := fs.ReadFile(Sources(), path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestSourcesEmbedTheWholeTree(t *testing.T) {
	files := SourceFiles()
	for _, want := range []string{"abi.h", EntryFile, "cuda/sync.cuh", "cuda/ops.cuh", "cuda/common.cuh"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s not embedded (have %v)", want, files)
		}
	}
	// Every .cu/.cuh on disk is embedded (a new header cannot be forgotten).
	onDisk, _ := filepath.Glob(filepath.Join("cuda", "*"))
	for _, f := range onDisk {
		if !slices.Contains(files, filepath.ToSlash(f)) {
			t.Errorf("%s exists but is not embedded", f)
		}
	}
	h := SourceHash()
	if len(h) != 64 || h != SourceHash() {
		t.Errorf("source hash %q unstable or malformed", h)
	}
	// Every include of the tree resolves inside it.
	inc := regexp.MustCompile(`#include "([^"]+)"`)
	for _, f := range files {
		for _, m := range inc.FindAllStringSubmatch(readSource(t, f), -1) {
			target := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), m[1])))
			if !slices.Contains(files, target) {
				t.Errorf("%s includes %q, not in the embedded tree", f, m[1])
			}
		}
	}
}

func TestEntryKernelsCoverEveryOpcode(t *testing.T) {
	src := readSource(t, EntryFile)
	re := regexp.MustCompile(`(?m)^AMK_ENTRY\((\w+), (AMK_OP_\w+)\)`)
	got := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		got["amk_entry_"+m[1]] = m[2]
	}
	for _, op := range ir.Ops() {
		name, ok := EntryKernel(op)
		if op == ir.OpNOP {
			if ok {
				t.Error("NOP has an entry kernel")
			}
			continue
		}
		if got[name] != "AMK_OP_"+op.String() {
			t.Errorf("entry kernel %s for %s: source declares %q", name, op, got[name])
		}
		delete(got, name)
	}
	if len(got) != 0 {
		t.Errorf("entry kernels without an opcode: %v", got)
	}
	if !strings.Contains(src, "void __launch_bounds__(AMK_THREADS, 1) "+MegakernelName+"(") {
		t.Errorf("%s not defined in %s", MegakernelName, EntryFile)
	}
	// The dispatch switch names every opcode.
	ops := readSource(t, "cuda/ops.cuh")
	for _, op := range ir.Ops() {
		if !strings.Contains(ops, "case AMK_OP_"+op.String()+":") {
			t.Errorf("amk_dispatch lacks case AMK_OP_%s", op)
		}
	}
}

// TestKnobDefaultsMatchSources: each knob macro has an #ifndef default in
// common.cuh equal to the Go default, and some kernel source reads it.
func TestKnobDefaultsMatchSources(t *testing.T) {
	common := readSource(t, "cuda/common.cuh")
	var all strings.Builder
	for _, f := range SourceFiles() {
		all.WriteString(readSource(t, f))
	}
	for _, k := range KnobSpace() {
		re := regexp.MustCompile(`#ifndef ` + k.Macro + `\n#define ` + k.Macro + ` ([0-9]+)(?:ull)?\b`)
		m := re.FindStringSubmatch(common)
		if m == nil {
			t.Errorf("common.cuh has no #ifndef default for %s", k.Macro)
			continue
		}
		if v, _ := strconv.ParseInt(m[1], 10, 64); v != k.Default {
			t.Errorf("%s: source default %d, Go default %d", k.Macro, v, k.Default)
		}
		if strings.Count(all.String(), k.Macro) < 3 { // #ifndef, #define, and at least one use
			t.Errorf("%s is defined but never used by the kernels", k.Macro)
		}
	}
	if !strings.Contains(common, "#define AMK_ATTN_MAX_HEAD_DIM "+strconv.Itoa(AttnMaxHeadDim)) {
		t.Errorf("AMK_ATTN_MAX_HEAD_DIM differs from AttnMaxHeadDim %d", AttnMaxHeadDim)
	}
	if !strings.Contains(readSource(t, "cuda/ops_gemv.cuh"), "#define AMK_CPA_CHUNK_BYTES "+strconv.Itoa(cpaChunkBytes)) {
		t.Errorf("AMK_CPA_CHUNK_BYTES differs from %d", cpaChunkBytes)
	}
}

// TestSourcesHaveNoMachinePaths keeps host paths out of the kernel tree.
func TestSourcesHaveNoMachinePaths(t *testing.T) {
	for _, f := range SourceFiles() {
		s := readSource(t, f)
		for _, bad := range []string{"/work/", "/tmp/", "/home/", "/root/"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s mentions %s", f, bad)
			}
		}
	}
	if _, err := os.Stat(EntryFile); err != nil {
		t.Errorf("EntryFile %s is not a path inside the package: %v", EntryFile, err)
	}
}

// The micro-kernels read activations, KV caches and partials that other
// blocks write in the same launch: the read-only data path (__ldg,
// ld.global.nc) is not coherent with those writes, so no op may use it.
// Only the host-written instruction words (megakernel.cu) may.
func TestOpsNeverUseTheReadOnlyPath(t *testing.T) {
	for _, f := range SourceFiles() {
		if !strings.HasPrefix(f, "cuda/ops") {
			continue
		}
		src := readSource(t, f)
		for _, bad := range []string{"__ldg(", `"ld.global.nc`} { // the intrinsic, or the instruction in inline asm
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %s: activations written in the same launch need coherent loads (__ldcg or plain)", f, bad)
			}
		}
	}
}

// TestInlinePTXOnlyInPtxCuh: every asm statement of the kernels lives in
// cuda/ptx.cuh, and every wrapper there has an emulator definition
// (AMK_EMU) beside its device one, so the CPU emulator compiles the same
// sources (kernels/emu).
func TestInlinePTXOnlyInPtxCuh(t *testing.T) {
	asm := regexp.MustCompile(`\basm\s*(volatile\s*)?\(`)
	for _, f := range SourceFiles() {
		if f == "cuda/ptx.cuh" {
			continue
		}
		if loc := asm.FindStringIndex(readSource(t, f)); loc != nil {
			t.Errorf("%s has inline PTX at byte %d: move it into a named wrapper in cuda/ptx.cuh", f, loc[0])
		}
	}
	src := readSource(t, "cuda/ptx.cuh")
	host, device, ok := strings.Cut(src, "#else /* the device */")
	if !ok {
		t.Fatal("cuda/ptx.cuh lacks its '#else /* the device */' split between the emulator and the device definitions")
	}
	def := regexp.MustCompile(`(?m)^(?:inline|__device__ __forceinline__) [\w ]+?\b(amk_\w+)\(`)
	names := func(s string) []string {
		var out []string
		for _, m := range def.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	// Templates put their name on the line after "template <...>".
	tmpl := regexp.MustCompile(`(?m)^template <[^>]*>\n(?:inline|__device__ __forceinline__) [\w ]+?\b(amk_\w+)\(`)
	withTemplates := func(s string) []string {
		out := names(s)
		for _, m := range tmpl.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	h, d := withTemplates(host), withTemplates(device)
	if len(d) < 10 {
		t.Fatalf("found only %d device wrappers in cuda/ptx.cuh (%v): the pattern no longer reads the file", len(d), d)
	}
	if !slices.Equal(h, d) {
		t.Errorf("cuda/ptx.cuh: the emulator defines %v, the device %v: every wrapper needs both", h, d)
	}
	// Two wrappers are no instruction: amk_trace_task (empty on the device)
	// and amk_ptx_smem_addr (the compiler's generic-to-shared conversion).
	const withoutAsm = 2
	if n := len(asm.FindAllString(device, -1)); n < len(d)-withoutAsm {
		t.Errorf("cuda/ptx.cuh: %d asm statements for %d device wrappers", n, len(d))
	}
}

// TestEmulatorSourcesEmbedTheWholeTree: every file of emu/ is embedded, the
// files the emulator build names exist, and the kernel translation unit
// includes the entry file.
func TestEmulatorSourcesEmbedTheWholeTree(t *testing.T) {
	var embedded []string
	_ = fs.WalkDir(EmulatorSources(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			embedded = append(embedded, path)
		}
		return nil
	})
	err := filepath.WalkDir("emu", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("emu", path)
		if !slices.Contains(embedded, filepath.ToSlash(rel)) {
			t.Errorf("%s exists but is not embedded", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{EmulatorRuntimeFile, EmulatorShimFile, EmulatorKernelFile, EmulatorIncludeDir + "/cuda_fp16.h"} {
		if !slices.Contains(embedded, want) {
			t.Errorf("%s is not embedded (have %v)", want, embedded)
		}
	}
	tu, err := fs.ReadFile(EmulatorSources(), EmulatorKernelFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tu), `#include "`+filepath.Base(EntryFile)+`"`) {
		t.Errorf("%s does not include %s", EmulatorKernelFile, EntryFile)
	}
	for _, f := range embedded {
		data, _ := fs.ReadFile(EmulatorSources(), f)
		for _, bad := range []string{"/work/", "/tmp/", "/home/", "/root/"} {
			if strings.Contains(string(data), bad) {
				t.Errorf("emu/%s mentions %s", f, bad)
			}
		}
	}
}

// $AMK_KERNEL_SOURCES replaces the embedded tree: a copy of this directory
// hashes the same, an edited copy is what Sources serves, and a directory
// without the entry file is refused (and never half used).
func TestSourcesOverride(t *testing.T) {
	embedded := SourceHash()
	dir := t.TempDir()
	for _, f := range SourceFiles() {
		data, err := fs.ReadFile(sourceFS, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Files outside the patterns (a checkout's Go files) are not sources.
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte("package kernels\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSources, dir)
	if err := CheckSources(); err != nil || SourceHash() != embedded || SourcesOverridden() != dir {
		t.Fatalf("a copy of the tree: err %v, hash %.12s want %.12s", err, SourceHash(), embedded)
	}
	edited := t.TempDir()
	if err := os.CopyFS(edited, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(edited, "cuda", "common.cuh"), []byte("/* fixed */\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSources, edited)
	if err := CheckSources(); err != nil || SourceHash() == embedded || readSource(t, "cuda/common.cuh") != "/* fixed */\n" {
		t.Fatalf("an edited tree: err %v, hash %.12s (embedded %.12s)", err, SourceHash(), embedded)
	}
	if err := os.Remove(filepath.Join(edited, filepath.FromSlash(EntryFile))); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSources, edited+"/.") // another value: read again
	err := CheckSources()
	if err == nil || !strings.Contains(err.Error(), EntryFile) || !strings.Contains(err.Error(), EnvSources) {
		t.Fatalf("a tree without %s: %v", EntryFile, err)
	}
	if SourceHash() != embedded || SourcesOverridden() != "" {
		t.Errorf("a refused override is in use")
	}
}

// The grid barrier's header is included only where the barrier is compiled
// in (AMK_ENTRY_GRID_SYNC): the default build must not depend on it.
func TestCooperativeGroupsOnlyWithTheGridBarrier(t *testing.T) {
	for _, f := range SourceFiles() {
		depth, guarded := 0, false
		for n, line := range strings.Split(readSource(t, f), "\n") {
			l := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(l, "#if"):
				depth++
				if l == "#if AMK_ENTRY_GRID_SYNC" {
					guarded = true
				}
			case strings.HasPrefix(l, "#endif"):
				depth--
				if depth == 0 {
					guarded = false
				}
			case strings.Contains(l, "cooperative_groups") && !strings.HasPrefix(l, "/*") && !strings.HasPrefix(l, "*"):
				if !guarded {
					t.Errorf("%s:%d: %q outside #if AMK_ENTRY_GRID_SYNC", f, n+1, l)
				}
			}
		}
	}
}
