// Package doctor checks that this machine can run amk: the Go runtime and
// amk build, CPUs and available memory, the workspace (writable, free disk),
// the CUDA toolchain (nvcc from AMK_NVCC or PATH) and whether this binary
// can evaluate on a GPU (a probe the caller supplies, since only a cuda
// build can open a device), and an end-to-end check that the reference VM
// reproduces the eager oracle on the toy model. Each check is OK, WARN or
// FAIL with one line of detail; Ready is false on any FAIL. It is the
// counterpart of the reference's `amk doctor`.
package doctor
