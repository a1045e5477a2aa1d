// Package build compiles the kernel sources (package kernels) with nvcc for
// one GPU architecture and one knob variant, through a content-addressed
// cache shared by every worker of a host (docs/spec/rules.md R8).
//
// Inputs are validated before anything runs: the architecture must look like
// sm_XY[a|f]; knobs come as a kernels.Variant or as "-DAMK_X=N" flags checked
// against kernels.KnobSpace (macro allow-list, integer values in range). nvcc
// is exec'd directly with an argv (never a shell); its path and any host
// arguments (Toolchain) come from the operator's configuration, never from a
// trial.
//
// Cache key: SHA-256 over the cache layout version, the hash of the source
// tree, the architecture, the output kind (cubin or PTX), the full nvcc
// argument list (every knob spelled out with defaults filled, host args
// included) and the output of `nvcc --version`. Layout under Dir/v1:
// src/<source hash>/ (the sources, written once), obj/<key>.<cubin|ptx> and
// obj/<key>.json (the build's log and inputs), lock/<key>.lock, tmp/.
//
// The CPU emulator's builds (BuildEmulator) share the cache: the kernel
// translation unit (kernels.EmulatorSources' kernel.cc including the kernel
// sources, the emu.h shim force-included, -D__CUDA_ARCH__ for the emulated
// architecture and the variant's knobs) is compiled by the toolchain's host
// C++ compiler (Toolchain.CXX, AMK_CXX; its level Toolchain.EmulatorOpt,
// AMK_EMU_OPT) and linked with the emulator's runtime object, compiled once
// per host and compiler: obj/<key>.o (the runtime) and obj/<key>.emu (an
// executable per architecture, variant, kernel tree and compiler). A mutated
// kernel tree recompiles the kernel translation unit only. A missing C++
// compiler is an error that says how to get one.
//
// Concurrency: a hit needs no lock. A miss takes an exclusive flock on the
// key's lock file (cancellable by the context; released by the kernel when a
// builder dies), re-checks the cache, compiles into tmp/ and publishes by
// rename, metadata first, so concurrent builders of one key — goroutines or
// processes — compile once and readers never see a partial module. A failed
// compile (*CompileError, deterministic) is not cached; a compile that
// outlives Builder.Timeout is killed with its whole process group and is a
// *CompileTimeout, never a compile error. On Linux the compiler also dies
// with the process that started it.
//
// Builder.Prebuilt ($AMK_KERNEL_PREBUILT) is a cache of the same layout made
// elsewhere, read only: a module there built from the same sources,
// architecture, output kind and nvcc arguments is used whichever nvcc built
// it, before this host's nvcc is asked for anything (a GPU visit carries the
// cubins nvcc 12.4 compiled on the development machine this way).
package build
