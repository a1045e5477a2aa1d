package kernels

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing/fstest"

	"github.com/amk-dev/amk/ir"
)

//go:embed abi.h cuda/*.cuh cuda/*.cu
var sourceFS embed.FS

//go:embed emu/*.h emu/*.cc emu/include/*.h
var emulatorFS embed.FS

// EntryFile is the translation unit nvcc compiles (relative to Sources()):
// it includes every other source and defines every kernel.
const EntryFile = "cuda/megakernel.cu"

// MegakernelName is the persistent VM kernel (one parameter: the device
// address of an amk_program_t; cooperative launch).
const MegakernelName = "amk_megakernel"

// EnvSources names a directory whose abi.h, cuda/*.cuh and cuda/*.cu (the
// layout of this package's directory: AMK_KERNEL_SOURCES=kernels in a
// checkout) replace the embedded kernel sources at run time, so that a CUDA
// fix reaches a machine without Go (a GPU visit) without rebuilding the
// binaries. The files are read once per process, at first use; the launcher
// and its child must see the same value (the child inherits it).
const EnvSources = "AMK_KERNEL_SOURCES"

// Bounds of an override tree: a file, and the whole tree.
const (
	maxSourceFile  = 4 << 20
	maxSourceBytes = 16 << 20
)

// sourcePatterns are the files of a kernel source tree (the embed patterns).
var sourcePatterns = []string{"abi.h", "cuda/*.cuh", "cuda/*.cu"}

var override struct {
	sync.Mutex
	dir string
	fs  fs.FS
	err error
}

// Sources is the CUDA source tree (abi.h and cuda/): the directory named by
// $AMK_KERNEL_SOURCES when it is set and readable (CheckSources says why
// not), else the tree embedded in the binary, so that a worker compiles
// exactly the sources it was built with.
func Sources() fs.FS {
	if f, err := sourceOverride(); f != nil && err == nil {
		return f
	}
	return sourceFS
}

// CheckSources reports a $AMK_KERNEL_SOURCES that cannot replace the embedded
// sources (missing, unreadable, too large, lacking abi.h or the entry file);
// nil when it is unset or usable. A build refuses to run past it rather
// than compile the embedded sources in its place.
func CheckSources() error {
	_, err := sourceOverride()
	return err
}

// SourcesOverridden is the override directory in use, or "" for the embedded tree.
func SourcesOverridden() string {
	if f, err := sourceOverride(); f != nil && err == nil {
		return os.Getenv(EnvSources)
	}
	return ""
}

func sourceOverride() (fs.FS, error) {
	dir := strings.TrimSpace(os.Getenv(EnvSources))
	if dir == "" {
		return nil, nil
	}
	override.Lock()
	defer override.Unlock()
	if override.dir != dir || (override.fs == nil && override.err == nil) {
		override.dir = dir
		override.fs, override.err = readSourceTree(dir)
		if override.err != nil {
			override.err = fmt.Errorf("%s=%s: %w", EnvSources, dir, override.err)
		}
	}
	return override.fs, override.err
}

// readSourceTree reads a kernel source tree from dir into memory.
func readSourceTree(dir string) (fs.FS, error) {
	tree := fstest.MapFS{}
	total := 0
	for _, pat := range sourcePatterns {
		matches, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pat)))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			st, err := os.Stat(m)
			if err != nil {
				return nil, err
			}
			if !st.Mode().IsRegular() {
				continue
			}
			if st.Size() > maxSourceFile {
				return nil, fmt.Errorf("%s is %d bytes, more than the %d a kernel source may have", m, st.Size(), maxSourceFile)
			}
			data, err := os.ReadFile(m)
			if err != nil {
				return nil, err
			}
			if total += len(data); total > maxSourceBytes {
				return nil, fmt.Errorf("the kernel sources come to more than %d bytes", maxSourceBytes)
			}
			rel, _ := filepath.Rel(dir, m)
			tree[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
	}
	for _, need := range []string{"abi.h", EntryFile} {
		if _, ok := tree[need]; !ok {
			return nil, fmt.Errorf("no %s there (want the layout of amk's kernels/ directory: abi.h, cuda/*.cuh, cuda/*.cu)", need)
		}
	}
	return tree, nil
}

// The CPU emulator's own sources (emu/, relative to EmulatorSources()): the
// runtime (fibers, schedulers, copy engine, reports and the command line),
// the shim every kernel translation unit is compiled with (force-included),
// the fake CUDA headers of include/, and the kernel translation unit, which
// includes EntryFile. kernels/build compiles them with a host C++ compiler
// (BuildEmulator); kernels/launch runs the result (the emulator device).
const (
	EmulatorRuntimeFile = "runtime.cc"
	EmulatorShimFile    = "emu.h"
	EmulatorKernelFile  = "kernel.cc"
	EmulatorIncludeDir  = "include"
)

// EmulatorSources is the CPU emulator's source tree (emu/), embedded like
// Sources so that a fresh checkout builds the emulator it was built with.
func EmulatorSources() fs.FS {
	sub, err := fs.Sub(emulatorFS, "emu")
	if err != nil {
		panic(err) // a constant, valid path
	}
	return sub
}

// SourceFiles lists the source paths (Sources) in sorted order.
func SourceFiles() []string {
	var out []string
	_ = fs.WalkDir(Sources(), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// SourceHash is HashSources of Sources(): the source part of the build
// cache key, and what a launcher and its child compare at greeting.
func SourceHash() string {
	h, _ := HashSources(Sources())
	return h
}

// HashSources is the SHA-256 (hex) of every file path and content of a
// source tree, in path order.
func HashSources(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// EntryKernel names the standalone Loop-1 kernel of an opcode:
// amk_entry_<op>(const amk_program_t*, long long first, long long count)
// runs instructions [first, first+count) of that opcode, one per block, with
// the same device function the VM dispatches (docs/spec/rules.md R29). NOP has none.
func EntryKernel(op ir.Op) (string, bool) {
	if !op.Valid() || op == ir.OpNOP {
		return "", false
	}
	return "amk_entry_" + strings.ToLower(op.String()), true
}
