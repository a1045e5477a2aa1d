//go:build cuda

package launch

/*
#cgo LDFLAGS: -lcuda
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo linux LDFLAGS: -L/usr/local/cuda/lib64 -L/usr/lib/x86_64-linux-gnu
#include <cuda.h>

// The VM kernel takes one 8-byte parameter: the device address of its
// amk_program_t. The argument array lives on this C stack frame; the driver
// copies the parameter values when the launch is enqueued.
static CUresult amk_launch_cooperative(CUfunction f, unsigned grid, unsigned threads, unsigned smem,
                                       CUstream s, CUdeviceptr prog) {
	void* args[1] = { &prog };
	return cuLaunchCooperativeKernel(f, grid, 1, 1, threads, 1, 1, smem, s, args);
}

// Loop-1 entry kernels: (const amk_program_t*, long long first, long long count).
static CUresult amk_launch_entry(CUfunction f, unsigned grid, unsigned threads, unsigned smem, CUstream s,
                                 CUdeviceptr prog, long long first, long long count) {
	void* args[3] = { &prog, &first, &count };
	return cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, smem, s, args, NULL);
}

static CUresult amk_set_max_dynamic_smem(CUfunction f, int bytes) {
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

static CUresult amk_driver_version(int* v) { return cuDriverGetVersion(v); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// cuFunction reinterprets cu's handle (a struct of one CUfunction pointer).
func cuFunction(fn cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&fn)) }

// cuStream reinterprets cu's stream handle (a struct of one CUstream pointer).
func cuStream(s cu.Stream) C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&s)) }

// driverError keeps the CUresult code so callers can tell a launch timeout
// (the driver/OS watchdog) from other failures.
type driverError struct {
	call string
	code int
}

// CUDA_ERROR_LAUNCH_TIMEOUT.
const cudaErrorLaunchTimeout = 702

func (e *driverError) Error() string { return fmt.Sprintf("%s: CUresult %d", e.call, e.code) }

func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &driverError{call: call, code: int(r)}
}

func launchCooperative(fn cu.Function, grid, threads, smem int, s cu.Stream, prog cu.DevicePtr) error {
	return check("cuLaunchCooperativeKernel", C.amk_launch_cooperative(cuFunction(fn), C.uint(grid), C.uint(threads),
		C.uint(smem), cuStream(s), C.CUdeviceptr(prog)))
}

func launchEntry(fn cu.Function, grid, threads, smem int, s cu.Stream, prog cu.DevicePtr, first, count int64) error {
	return check("cuLaunchKernel", C.amk_launch_entry(cuFunction(fn), C.uint(grid), C.uint(threads), C.uint(smem),
		cuStream(s), C.CUdeviceptr(prog), C.longlong(first), C.longlong(count)))
}

func setMaxDynamicSmem(fn cu.Function, bytes int) error {
	return check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", C.amk_set_max_dynamic_smem(cuFunction(fn), C.int(bytes)))
}

func driverVersion() int {
	var v C.int
	if C.amk_driver_version(&v) != C.CUDA_SUCCESS {
		return -1
	}
	return int(v)
}
