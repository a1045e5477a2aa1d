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
// Concurrency: a hit needs no lock. A miss takes an exclusive flock on the
// key's lock file (cancellable by the context; released by the kernel when a
// builder dies), re-checks the cache, compiles into tmp/ and publishes by
// rename, metadata first, so concurrent builders of one key — goroutines or
// processes — compile once and readers never see a partial module. A failed
// compile (*CompileError, deterministic) is not cached; a compile that
// outlives Builder.Timeout is killed with its whole process group.
package build
