package kernels

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"

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

// Sources is the CUDA source tree (abi.h and cuda/), embedded in the binary so
// that a worker compiles exactly the sources it was built with.
func Sources() fs.FS { return sourceFS }

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

// SourceFiles lists the embedded source paths in sorted order.
func SourceFiles() []string {
	var out []string
	_ = fs.WalkDir(sourceFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// SourceHash is HashSources of the embedded tree: the source part of the
// build cache key.
func SourceHash() string {
	h, _ := HashSources(sourceFS)
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
