//go:build !cuda

package launch

// Open opens CUDA device ordinal. This build has no CUDA support: it always
// returns ErrNoCUDA (rebuild with -tags cuda on a machine with the CUDA
// driver headers and libcuda).
func Open(ordinal int) (Device, error) { return nil, ErrNoCUDA }

// CUDAEnabled reports whether this binary was built with -tags cuda.
const CUDAEnabled = false
