/* ==========================================================================================
 * amk device common: build knobs, typed loads/stores, reductions, the abort/trap path.
 *
 * Every knob is a -D macro with the default below; kernels.KnobSpace() in Go holds the same
 * names, defaults and validated ranges, and the build refuses any other -D.
 * ========================================================================================== */
#ifndef AMK_COMMON_CUH
#define AMK_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "../abi.h"
#include "ptx.cuh"

/* ---- knobs (defaults == kernels.KnobSpace defaults) ---------------------------------------- */
#ifndef AMK_THREADS
#define AMK_THREADS 256 /* block size every entry kernel is built for */
#endif
#ifndef AMK_GEMV_COLS_PER_WARP
#define AMK_GEMV_COLS_PER_WARP 1
#endif
#ifndef AMK_GEMV_KUNROLL
#define AMK_GEMV_KUNROLL 2
#endif
#ifndef AMK_GEMV_CPASYNC
#define AMK_GEMV_CPASYNC 1
#endif
#ifndef AMK_GEMV_CPA_STAGES
#define AMK_GEMV_CPA_STAGES 4
#endif
#ifndef AMK_GEMV_CPASYNC_COLS
#define AMK_GEMV_CPASYNC_COLS 2
#endif
#ifndef AMK_QGEMV_COLS
#define AMK_QGEMV_COLS 2
#endif
#ifndef AMK_RING_STAGES
#define AMK_RING_STAGES 0 /* streaming weight ring (ring.cuh): slots per warp; 0 = off */
#endif
#ifndef AMK_RING_TILE_BYTES
#define AMK_RING_TILE_BYTES 2048 /* bytes of one ring slot (a piece of one weight row) */
#endif
#ifndef AMK_RING_BULK
#define AMK_RING_BULK 1 /* sm_90 + nvcc >= 12: the ring copies with cp.async.bulk + mbarrier */
#endif
#ifndef AMK_WATCHDOG_NS
#define AMK_WATCHDOG_NS 1000000000ull
#endif

#if (AMK_THREADS % 32) != 0 || AMK_THREADS < 64 || AMK_THREADS > 1024
#error "AMK_THREADS must be a multiple of 32 in [64, 1024]"
#endif

#define AMK_WARPS (AMK_THREADS / 32)
#define AMK_FULL_MASK 0xffffffffu

/* Fixed limits of the device kernels (kernels.CheckDevice rejects programs beyond them). */
#define AMK_ATTN_MAX_HEAD_DIM 256 /* q/acc live in registers: head_dim/32 floats per lane */
#define AMK_GEMM_MMAX 8           /* GEMM_TILE rows per register tile                    */

/* ---- thread geometry -------------------------------------------------------------------------- */
__device__ __forceinline__ int amk_lane() { return threadIdx.x & 31; }
__device__ __forceinline__ int amk_warp() { return threadIdx.x >> 5; }

/* Bytes of dynamic shared memory this launch provides. */
__device__ __forceinline__ uint32_t amk_dyn_smem_bytes() { return amk_ptx_dynamic_smem_size(); }

extern __shared__ __align__(16) unsigned char amk_dyn_smem[];

/* ---- abort / trap ----------------------------------------------------------------------------- */

/* Volatile read of the abort flag: another block (or the host) sets it asynchronously. */
__device__ __forceinline__ bool amk_aborted(const amk_program_t& prog) {
    return *((volatile int32_t*)prog.abort_flag) != AMK_ABORT_NONE;
}

/* Thread-level: the first caller grid-wide wins the flag and writes the diagnostics. */
__device__ __forceinline__ void amk_raise(const amk_program_t& prog, int32_t code, int32_t task, int32_t op,
                                          int32_t counter, uint32_t observed, uint32_t threshold,
                                          int32_t detail, uint64_t waited_ns) {
    if (atomicCAS(prog.abort_flag, AMK_ABORT_NONE, code) == AMK_ABORT_NONE) {
        amk_diag_t* d = prog.diag;
        d->code = code;
        d->block = (int32_t)blockIdx.x;
        d->task = task;
        d->op = op;
        d->counter = counter;
        d->observed = observed;
        d->threshold = threshold;
        d->detail = detail;
        d->waited_ns = waited_ns;
    }
    __threadfence();
}

/* Block-level trap: every thread of the block calls it (trap conditions are block-uniform);
 * thread 0 raises. Returns false so an op can `return amk_trap(...)`. */
__device__ __forceinline__ bool amk_trap(const amk_program_t& prog, int32_t code, int32_t task, int32_t op,
                                         int32_t detail) {
    if (threadIdx.x == 0) amk_raise(prog, code, task, op, -1, 0u, 0u, detail, 0ull);
    return false;
}

/* ---- typed element access ---------------------------------------------------------------------- */
__host__ __device__ __forceinline__ bool amk_is_float(int32_t dt) {
    return dt == AMK_F32 || dt == AMK_F16 || dt == AMK_BF16;
}
__device__ __forceinline__ bool amk_is_int(int32_t dt) {
    return dt == AMK_I32 || dt == AMK_I8 || dt == AMK_U8 || dt == AMK_BOOL;
}
__device__ __forceinline__ bool amk_is_scalar_dtype(int32_t dt) { return amk_is_float(dt) || amk_is_int(dt); }

/* Element i of a buffer as fp32 (integers converted). */
__device__ __forceinline__ float amk_ld(const amk_buffer_t& b, int64_t i) {
    switch (b.dtype) {
        case AMK_F32:  return ((const float*)b.ptr)[i];
        case AMK_F16:  return __half2float(((const __half*)b.ptr)[i]);
        case AMK_BF16: return __bfloat162float(((const __nv_bfloat16*)b.ptr)[i]);
        case AMK_I32:  return (float)((const int32_t*)b.ptr)[i];
        case AMK_I8:   return (float)((const int8_t*)b.ptr)[i];
        case AMK_U8:
        case AMK_BOOL: return (float)((const uint8_t*)b.ptr)[i];
        default:       return 0.f;
    }
}

/* Element i of an integer buffer (float storage truncates toward zero, like torch .long()). */
__device__ __forceinline__ int64_t amk_ld_int(const amk_buffer_t& b, int64_t i) {
    switch (b.dtype) {
        case AMK_I32:  return ((const int32_t*)b.ptr)[i];
        case AMK_I8:   return ((const int8_t*)b.ptr)[i];
        case AMK_U8:
        case AMK_BOOL: return ((const uint8_t*)b.ptr)[i];
        default:       return (int64_t)amk_ld(b, i);
    }
}

/* Store fp32 v as element i, rounding to the buffer dtype (RNE for bf16/fp16). Integer
 * buffers receive the value truncated toward zero (torch's float -> int cast). */
__device__ __forceinline__ void amk_st(const amk_buffer_t& b, int64_t i, float v) {
    switch (b.dtype) {
        case AMK_F32:  ((float*)b.ptr)[i] = v; break;
        case AMK_F16:  ((__half*)b.ptr)[i] = __float2half_rn(v); break;
        case AMK_BF16: ((__nv_bfloat16*)b.ptr)[i] = __float2bfloat16_rn(v); break;
        case AMK_I32:  ((int32_t*)b.ptr)[i] = (int32_t)v; break;
        case AMK_I8:   ((int8_t*)b.ptr)[i] = (int8_t)(int32_t)v; break;
        case AMK_U8:
        case AMK_BOOL: ((uint8_t*)b.ptr)[i] = (uint8_t)(int32_t)v; break;
        default: break;
    }
}

/* v rounded to a float dtype and back (RNE), as a store then a load would leave it: the fused
 * epilogues round the sums to the unfused projection's dtype before adding or rotating. */
__device__ __forceinline__ float amk_round_to(int32_t dtype, float v) {
    switch (dtype) {
        case AMK_F16:  return __half2float(__float2half_rn(v));
        case AMK_BF16: return __bfloat162float(__float2bfloat16_rn(v));
        default:       return v;
    }
}

/* Store an integer as element i (float buffers receive it converted). */
__device__ __forceinline__ void amk_st_int(const amk_buffer_t& b, int64_t i, int64_t v) {
    switch (b.dtype) {
        case AMK_I32:  ((int32_t*)b.ptr)[i] = (int32_t)v; break;
        case AMK_I8:   ((int8_t*)b.ptr)[i] = (int8_t)v; break;
        case AMK_U8:
        case AMK_BOOL: ((uint8_t*)b.ptr)[i] = (uint8_t)v; break;
        default:       amk_st(b, i, (float)v); break;
    }
}

/* Last dimension of a buffer (1 for rank 0). Constant indices only: a dynamic index into
 * shape[] would force the whole record into local memory. */
__device__ __forceinline__ int64_t amk_cols(const amk_buffer_t& b) {
    switch (b.rank) {
        case 1: return b.shape[0];
        case 2: return b.shape[1];
        case 3: return b.shape[2];
        case 4: return b.shape[3];
        default: return 1;
    }
}

/* ---- reductions --------------------------------------------------------------------------------- */
__device__ __forceinline__ float amk_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(AMK_FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ float amk_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(AMK_FULL_MASK, v, o));
    return v;
}

/* Block-wide sum; every thread gets the result. `scratch` holds AMK_WARPS floats and may be
 * reused right after the call returns (the trailing barrier protects it). */
__device__ __forceinline__ float amk_block_sum(float v, float* scratch) {
    v = amk_warp_sum(v);
    if (amk_lane() == 0) scratch[amk_warp()] = v;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < AMK_WARPS; ++w) t += scratch[w];
    __syncthreads();
    return t;
}
__device__ __forceinline__ float amk_block_max(float v, float* scratch) {
    v = amk_warp_max(v);
    if (amk_lane() == 0) scratch[amk_warp()] = v;
    __syncthreads();
    float t = scratch[0];
#pragma unroll
    for (int w = 1; w < AMK_WARPS; ++w) t = fmaxf(t, scratch[w]);
    __syncthreads();
    return t;
}

#endif /* AMK_COMMON_CUH */
