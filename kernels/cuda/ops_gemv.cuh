/* ==========================================================================================
 * Projection instructions: GEMV_TILE (fp32/fp16/bf16, int8/int4 dequant-fused), GEMM_TILE and
 * the FUSED layer patterns (staging + GEMV tile + epilogue).
 *
 *   out[m, n_off : n_off + N_tile] = x[m, :K] @ W[n_off : n_off + N_tile, :K]^T  (+ bias / residual)
 *
 * Decode is bound by HBM bandwidth, so the weights are the only large stream and every design
 * choice serves it:
 *   - one warp owns a group of consecutive weight rows (AMK_GEMV_COLS_PER_WARP, or
 *     AMK_GEMV_CPASYNC_COLS on the cp.async path); its 32 lanes read 16-byte vectors of a row
 *     (4 fp32 / 8 bf16 or fp16 / 16 int8 / 32 int4), so each warp step is one contiguous
 *     512-byte burst per row;
 *   - the activation row x is cached once per tile in dynamic shared memory as fp32 and reused
 *     by every row;
 *   - memory-level parallelism: the register path keeps COLS x KUNROLL 16-byte loads in flight
 *     per lane (streaming, evict-first); the cp.async path (sm_80+) streams the warp's whole
 *     share of the tile through a private ring of AMK_GEMV_CPA_STAGES chunks per row, without
 *     draining between row groups, decoupling the loads from the FMAs;
 *   - accumulation in fp32, a warp butterfly reduction, one rounded store per output.
 *
 * Dynamic shared memory layout: [x: round16(K * 4) bytes][cp.async ring: AMK_WARPS * STAGES *
 * CPASYNC_COLS * 512 bytes]. kernels.DynamicSmemBytes (Go) provisions the same formula; a tile
 * whose x or ring does not fit what the launch provides falls back to a slower path, never to
 * an out-of-bounds access.
 * ========================================================================================== */
#ifndef AMK_OPS_GEMV_CUH
#define AMK_OPS_GEMV_CUH

#include "common.cuh"

/* The per-tile cp.async ring; the streaming ring (ring.cuh, AMK_RING_STAGES > 0) replaces it, and
 * the tiles the streaming ring cannot take then use the register path. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && AMK_GEMV_CPASYNC && AMK_RING_STAGES == 0
#define AMK_HAVE_CPASYNC 1
#else
#define AMK_HAVE_CPASYNC 0
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* cp.async (sm_80+) for both rings: one 16-byte global -> shared copy that bypasses L1, the
 * commit of the thread's copies so far as one group, and the wait until at most N of its groups
 * are pending. The PTX <cuda_pipeline.h> emits for 16-byte copies, written here with memory
 * clobbers (the header's commit and wait have none, so the compiler could move shared loads
 * across them) and without the header, which newer toolkits need not ship. */
__device__ __forceinline__ void amk_cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void amk_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void amk_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

#define AMK_CPA_CHUNK_BYTES 512 /* one 16-byte vector per lane */

#include "vec.cuh"

/* acc += dot(x[kb : kb+N], f[0:N]) with x read from shared memory as float4s. */
template <int N>
__device__ __forceinline__ float amk_dot_smem(const float* __restrict__ xs, const float* f, float acc) {
    const float4* x4 = reinterpret_cast<const float4*>(xs);
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
        const float4 xv = x4[q];
        acc = fmaf(xv.x, f[4 * q + 0], acc);
        acc = fmaf(xv.y, f[4 * q + 1], acc);
        acc = fmaf(xv.z, f[4 * q + 2], acc);
        acc = fmaf(xv.w, f[4 * q + 3], acc);
    }
    return acc;
}

/* Vector-index range [kv0, nvec) of rows w0 + c*ldw, C rows at once, U vectors per lane in flight.
 * Adds into acc (per-lane partial sums). */
template <typename T, int C, int U>
__device__ __forceinline__ void amk_rows_reg(const float* __restrict__ xs, const T* __restrict__ w0, int64_t ldw,
                                             int kv0, int nvec, float (&acc)[C]) {
    constexpr int V = amk_vec<T>::N;
    int kv = kv0 + amk_lane();
    for (; kv + 32 * (U - 1) < nvec; kv += 32 * U) {
        uint4 r[C][U];
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
            for (int u = 0; u < U; ++u)
                r[c][u] = __ldcs(reinterpret_cast<const uint4*>(w0 + (int64_t)c * ldw) + kv + 32 * u);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int c = 0; c < C; ++c) {
                float f[V];
                amk_vec<T>::cvt(r[c][u], f);
                acc[c] = amk_dot_smem<V>(xs + (int64_t)(kv + 32 * u) * V, f, acc[c]);
            }
    }
    for (; kv < nvec; kv += 32) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            float f[V];
            amk_vec<T>::cvt(__ldcs(reinterpret_cast<const uint4*>(w0 + (int64_t)c * ldw) + kv), f);
            acc[c] = amk_dot_smem<V>(xs + (int64_t)kv * V, f, acc[c]);
        }
    }
}

/* Scalar tail k in [k0, K) (K not a multiple of the vector width). */
template <typename T, int C>
__device__ __forceinline__ void amk_rows_tail(const float* __restrict__ xs, const T* __restrict__ w0, int64_t ldw,
                                              int k0, int K, float (&acc)[C]) {
    for (int k = k0 + amk_lane(); k < K; k += 32)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[c] = fmaf(xs[k], amk_vec<T>::one(w0 + (int64_t)c * ldw, k), acc[c]);
}

/* Output epilogue for row n of one x row m: the warp's partial sums are reduced and lane 0 stores
 * acc (+ bias[n]), or round(acc) + residual[m, n] rounded again (ir.FusedGEMVAdd's numerics). */
__device__ __forceinline__ void amk_gemv_store(const amk_buffer_t& out, int64_t o, float acc, const amk_buffer_t* bias,
                                               int64_t n, const amk_buffer_t* res) {
    acc = amk_warp_sum(acc);
    if (amk_lane() == 0) {
        if (bias) acc += amk_ld(*bias, n);
        if (res) acc = amk_round_to(out.dtype, acc) + amk_ld(*res, o); /* GEMV then ADD, bit for bit */
        amk_st(out, o, acc);
    }
}

/* Shape of a FUSED pattern (ir.FusedPatterns): its staging, epilogue and input count. */
struct amk_fused_shape {
    int staging;  /* 0 none, 1 rmsnorm, 2 silu_mul */
    int epilogue; /* 0 none, 1 add, 2 rope, 3 rope+append, 4 append */
    int n_in;     /* inputs: [x | gate, up][, norm_w], W[, residual][, pos] */
};

__host__ __device__ __forceinline__ amk_fused_shape amk_fused_pattern_shape(int32_t pat) {
    switch (pat) {
        case AMK_FUSED_GEMV_ADD:              return {0, 1, 3};
        case AMK_FUSED_NORM_GEMV:             return {1, 0, 3};
        case AMK_FUSED_NORM_GEMV_ROPE:        return {1, 2, 4};
        case AMK_FUSED_NORM_GEMV_ROPE_APPEND: return {1, 3, 4};
        case AMK_FUSED_NORM_GEMV_APPEND:      return {1, 4, 3};
        case AMK_FUSED_SILU_GEMV:             return {2, 0, 3};
        case AMK_FUSED_SILU_GEMV_ADD:         return {2, 1, 4};
        case AMK_FUSED_GEMV_ROPE:             return {0, 2, 3};
        case AMK_FUSED_GEMV_ROPE_APPEND:      return {0, 3, 3};
        case AMK_FUSED_GEMV_APPEND:           return {0, 4, 2};
        default:                              return {-1, -1, 0};
    }
}

/* The bytes of its weight buffer a projection tile streams (ir.TileRanges): [*begin, *end), and
 * for a paired q|k|v tile (AMK_FLAG_PAIRED_TILE: N_tile/2 rows at n_off and at n_off +
 * head_dim/2) also [*begin + *second, *end + *second), *second > 0 (0: one range); both inside
 * the buffer's w_bytes; false when nothing is left. row_bits: the bits of one weight row. The
 * megakernel's L2 prefetch (amk_weight_range) calls it; the host ring test checks it. */
__host__ __device__ __forceinline__ bool amk_tile_weight_bytes(bool paired, int32_t n_off, int32_t N_tile,
                                                               int32_t head_dim, int64_t row_bits, int64_t w_bytes,
                                                               int64_t* begin, int64_t* end, int64_t* second) {
    const int64_t rows = paired ? N_tile / 2 : N_tile;
    *second = paired && head_dim > 0 ? (int64_t)(head_dim / 2) * row_bits / 8 : 0;
    *begin = (int64_t)n_off * row_bits / 8;
    const int64_t stop = *begin + rows * row_bits / 8;
    *end = stop < w_bytes - *second ? stop : w_bytes - *second;
    return *end > *begin;
}

/* Bytes of the fp32 x cache of a K-long row (kernels.gemvXBytes in Go). */
__host__ __device__ __forceinline__ uint32_t amk_gemv_x_bytes(int K) { return (uint32_t)(((int64_t)K * 4 + 15) / 16 * 16); }

/* ---- quantised weights (ir.TileQuant, docs/spec/quantization.md) ----------------------------
 * A quantised tile's weight is int8 [N, K] or packed int4 [N, K/2 bytes] (column 2b in the low
 * nibble of byte b, stored as q + 8), with scales [N, ceil(K/group)] (F16 as amk lowers them;
 * any float dtype is read). The tile streams the stored bytes with 16-byte loads (16 int8 or 32
 * int4 weights, inside one group when the group is a multiple of that) and dequantises in
 * registers: per vector, p = sum x[k] * (q[k] - z), then acc += p * scale; z is the zero point
 * when given, else 8 for int4 and 0 for int8 (docs/spec/rules.md R27). */
struct amk_qtile {
    const uint8_t* w;       /* the stored weight bytes                                    */
    const amk_buffer_t* S;  /* scales [N, ng]                                             */
    const amk_buffer_t* Z;  /* zero points [N, ng], or nullptr                            */
    int64_t row_bytes;      /* stored bytes of one weight row (K, or K/2 for int4)         */
    int32_t group, ng;      /* input columns per scale, scales per row                     */
    int32_t gshift;         /* log2(group) when group is a power of two, else -1           */
    bool i4;
    float zdef;             /* the implicit zero point: 8 (int4) or 0 (int8)               */
};

/* Scale (or zero point) i: an F16 buffer read directly, any other float dtype through amk_ld. */
__device__ __forceinline__ float amk_qscale(const amk_buffer_t& S, int64_t i) {
    return S.dtype == AMK_F16 ? __half2float(((const __half*)S.ptr)[i]) : amk_ld(S, i);
}

/* The group of column k. */
__device__ __forceinline__ int amk_qgroup(const amk_qtile& q, int k) {
    return q.gshift >= 0 ? k >> q.gshift : k / q.group;
}

/* One 16-byte vector of a quantised row against x[0 .. 16) (int8) or x[0 .. 32) (int4): the
 * sum of x[k] * (q[k] - z), not yet scaled. */
__device__ __forceinline__ float amk_qdot16(const uint4 r, const float* __restrict__ xs, bool i4, float z) {
    const uint32_t wd[4] = {r.x, r.y, r.z, r.w};
    float p = 0.f;
    if (i4) {
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            const uint32_t b = (wd[e >> 2] >> (8 * (e & 3))) & 0xFFu;
            p = fmaf(xs[2 * e], (float)(b & 0xFu) - z, p);
            p = fmaf(xs[2 * e + 1], (float)(b >> 4) - z, p);
        }
    } else {
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            const int32_t v = (int32_t)(int8_t)((wd[e >> 2] >> (8 * (e & 3))) & 0xFFu);
            p = fmaf(xs[e], (float)v - z, p);
        }
    }
    return p;
}

#include "ring.cuh"

/* Whether the streaming ring carries a task's weights (its issuer planned its chunks,
 * amk_ring_plan_for); `have` is amk_ops_smem_bytes(). False without the ring. */
__device__ __forceinline__ bool amk_on_ring(const amk_program_t& prog, const amk_instruction_t& inst, uint32_t have) {
#if AMK_RING_ON
    if (amk_ring_active) {
        amk_ring_plan plan;
        return amk_ring_plan_of(prog.buffers, prog.n_buffers, inst, have, &plan);
    }
#else
    (void)prog;
    (void)inst;
    (void)have;
#endif
    return false;
}

#if AMK_HAVE_CPASYNC
/* cp.async path. The warp's work is its row groups t = warp*C, warp*C + WARPS*C, ... (C rows
 * each, the last possibly fewer) times the nchunks 512-byte chunks of a row, streamed as ONE
 * sequence through the warp's private ring of STAGES stages: the pipeline never drains between
 * row groups, so STAGES-1 chunks per row stay in flight for the whole tile. Each lane copies and
 * later consumes the same 16 bytes of every chunk, so no cross-lane synchronisation is needed;
 * commit groups complete in order (an empty group is committed when nothing is left to issue). */
template <typename T, int C, int STAGES>
__device__ __forceinline__ void amk_gemv_cpasync(const float* __restrict__ xs, const T* __restrict__ W, int64_t ldw,
                                                 int K, int n_off, int N_tile, int nvec, unsigned char* __restrict__ ring,
                                                 const amk_buffer_t& out, int64_t obase, const amk_buffer_t* bias,
                                                 const amk_buffer_t* res) {
    constexpr int V = amk_vec<T>::N;
    const int lane = amk_lane();
    const int first = amk_warp() * C, step = AMK_WARPS * C;
    const int ngroups = first < N_tile ? (N_tile - first + step - 1) / step : 0;
    const int nchunks = nvec / 32;
    const int total = ngroups * nchunks;
    auto issue = [&](int j) {
        const int t = first + (j / nchunks) * step, ci = j % nchunks;
        const int cols = min(C, N_tile - t);
        unsigned char* st = ring + (size_t)(j % STAGES) * C * AMK_CPA_CHUNK_BYTES;
#pragma unroll
        for (int c = 0; c < C; ++c)
            if (c < cols) {
                const uint4* src = reinterpret_cast<const uint4*>(W + (int64_t)(n_off + t + c) * ldw) + (int64_t)ci * 32 + lane;
                amk_cp_async16(st + (c * 32 + lane) * 16, src);
            }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < total) issue(s);
        amk_cp_async_commit();
    }
    float acc[C];
#pragma unroll
    for (int c = 0; c < C; ++c) acc[c] = 0.f;
    for (int j = 0; j < total; ++j) {
        if (j + STAGES - 1 < total) issue(j + STAGES - 1);
        amk_cp_async_commit();
        amk_cp_async_wait<STAGES - 1>();
        const int t = first + (j / nchunks) * step, ci = j % nchunks;
        const int cols = min(C, N_tile - t);
        const unsigned char* st = ring + (size_t)(j % STAGES) * C * AMK_CPA_CHUNK_BYTES;
#pragma unroll
        for (int c = 0; c < C; ++c)
            if (c < cols) {
                float f[V];
                amk_vec<T>::cvt(*reinterpret_cast<const uint4*>(st + (c * 32 + lane) * 16), f);
                acc[c] = amk_dot_smem<V>(xs + (int64_t)(ci * 32 + lane) * V, f, acc[c]);
            }
        if (ci == nchunks - 1) { /* the group's last chunk: leftover vectors, the scalar tail, store */
            const int64_t n0 = n_off + t;
            /* One row at a time (each acc[c] sees the same sequence as row-interleaved): C rows'
             * leftover vectors in flight at once pushed the highest knobs past 255 registers. */
#pragma unroll
            for (int c = 0; c < C; ++c)
                if (c < cols) {
                    const T* w = W + (n0 + c) * ldw;
                    for (int kv = nchunks * 32 + lane; kv < nvec; kv += 32) {
                        float f[V];
                        amk_vec<T>::cvt(__ldcs(reinterpret_cast<const uint4*>(w) + kv), f);
                        acc[c] = amk_dot_smem<V>(xs + (int64_t)kv * V, f, acc[c]);
                    }
                    for (int k = nvec * V + lane; k < K; k += 32) acc[c] = fmaf(xs[k], amk_vec<T>::one(w, k), acc[c]);
                }
#pragma unroll
            for (int c = 0; c < C; ++c) {
                if (c < cols) amk_gemv_store(out, obase + n0 + c, acc[c], bias, n0 + c, res);
                acc[c] = 0.f;
            }
        }
    }
    amk_cp_async_wait<0>();
}
#endif

/* Typed body of an fp GEMV tile for one x row (x already cached in xs). */
template <typename T>
__device__ __forceinline__ void amk_gemv_fp_row(const float* __restrict__ xs, const T* __restrict__ W, int64_t ldw,
                                                int K, int n_off, int N_tile, const amk_buffer_t& out, int64_t obase,
                                                const amk_buffer_t* bias, const amk_buffer_t* res,
                                                unsigned char* ring, bool vec_ok, const amk_program_t& prog,
                                                bool rp) {
    constexpr int V = amk_vec<T>::N;
    const int nvec = vec_ok ? K / V : 0;
    const int k_tail = nvec * V;
#if AMK_RING_ON
    if (rp) { /* the streaming ring: the chunks were issued ahead, maybe before the task's wait */
        amk_gemv_ring_row<T>(prog, xs, W, ldw, K, n_off, N_tile, out, obase, bias, res);
        return;
    }
#else
    (void)prog;
    (void)rp;
#endif
#if AMK_HAVE_CPASYNC
    if (ring && nvec >= 32) { /* at least one whole chunk per row: stream through the ring */
        unsigned char* my = ring + (size_t)amk_warp() * AMK_GEMV_CPA_STAGES * AMK_GEMV_CPASYNC_COLS * AMK_CPA_CHUNK_BYTES;
        amk_gemv_cpasync<T, AMK_GEMV_CPASYNC_COLS, AMK_GEMV_CPA_STAGES>(xs, W, ldw, K, n_off, N_tile, nvec, my, out,
                                                                         obase, bias, res);
        return;
    }
#endif
    constexpr int C = AMK_GEMV_COLS_PER_WARP;
    for (int t = amk_warp() * C; t < N_tile; t += AMK_WARPS * C) {
        const int64_t n0 = n_off + t;
        if (t + C <= N_tile) {
            float acc[C];
#pragma unroll
            for (int c = 0; c < C; ++c) acc[c] = 0.f;
            amk_rows_reg<T, C, AMK_GEMV_KUNROLL>(xs, W + n0 * ldw, ldw, 0, nvec, acc);
            amk_rows_tail<T, C>(xs, W + n0 * ldw, ldw, k_tail, K, acc);
#pragma unroll
            for (int c = 0; c < C; ++c) amk_gemv_store(out, obase + n0 + c, acc[c], bias, n0 + c, res);
        } else {
            for (int c = 0; t + c < N_tile; ++c) {
                float acc[1] = {0.f};
                amk_rows_reg<T, 1, AMK_GEMV_KUNROLL>(xs, W + (n0 + c) * ldw, ldw, 0, nvec, acc);
                amk_rows_tail<T, 1>(xs, W + (n0 + c) * ldw, ldw, k_tail, K, acc);
                amk_gemv_store(out, obase + n0 + c, acc[0], bias, n0 + c, res);
            }
        }
    }
}

/* Slow but general row dot when x does not fit in shared memory: x and W through amk_ld. */
__device__ __forceinline__ void amk_gemv_generic_row(const amk_buffer_t& x, int64_t xbase, const amk_buffer_t& W,
                                                     int64_t ldw, int K, int n_off, int N_tile, const amk_buffer_t& out,
                                                     int64_t obase, const amk_buffer_t* bias, const amk_buffer_t* res) {
    for (int t = amk_warp(); t < N_tile; t += AMK_WARPS) {
        const int64_t n = n_off + t;
        float acc = 0.f;
        for (int k = amk_lane(); k < K; k += 32) acc = fmaf(amk_ld(x, xbase + k), amk_ld(W, n * ldw + k), acc);
        amk_gemv_store(out, obase + n, acc, bias, n, res);
    }
}

/* ---- activation staging ------------------------------------------------------------------
 * One x row into the fp32 x cache. The dtype is resolved once per row (not per element); an
 * aligned row moves in 16-byte vectors, each thread issuing AMK_STAGE_UNROLL loads before its
 * first store, so several loads per thread are in flight. Activations are written by other SMs
 * in this launch: plain (coherent) loads after the wait's acquire, never the read-only path. So
 * the source is not __restrict__: a const __restrict__ pointer lets the compiler load through the
 * non-coherent path (ld.global.nc), which may return a line cached before the producer's store. */
#define AMK_STAGE_UNROLL 2

template <typename T>
__device__ __forceinline__ void amk_stage_typed(const T* src, int K, float* __restrict__ xs) {
    constexpr int V = amk_vec<T>::N;
    const int nvec = ((uintptr_t)src & 15) == 0 ? K / V : 0;
    const uint4* vsrc = reinterpret_cast<const uint4*>(src);
    for (int v0 = threadIdx.x; v0 < nvec; v0 += AMK_THREADS * AMK_STAGE_UNROLL) {
        uint4 r[AMK_STAGE_UNROLL];
#pragma unroll
        for (int u = 0; u < AMK_STAGE_UNROLL; ++u) {
            const int v = v0 + u * AMK_THREADS;
            if (v < nvec) r[u] = vsrc[v];
        }
#pragma unroll
        for (int u = 0; u < AMK_STAGE_UNROLL; ++u) {
            const int v = v0 + u * AMK_THREADS;
            if (v < nvec) {
                float f[V];
                amk_vec<T>::cvt(r[u], f);
#pragma unroll
                for (int i = 0; i < V; ++i) xs[v * V + i] = f[i];
            }
        }
    }
    for (int k = nvec * V + threadIdx.x; k < K; k += AMK_THREADS) xs[k] = amk_vec<T>::one(src, k);
}

/* xs[0:K] = x[base : base + K] as fp32 (no barrier: the caller syncs). */
__device__ __forceinline__ void amk_stage_x(const amk_buffer_t& x, int64_t base, int K, float* __restrict__ xs) {
    switch (x.dtype) {
        case AMK_F32:  amk_stage_typed<float>((const float*)x.ptr + base, K, xs); break;
        case AMK_F16:  amk_stage_typed<__half>((const __half*)x.ptr + base, K, xs); break;
        case AMK_BF16: amk_stage_typed<__nv_bfloat16>((const __nv_bfloat16*)x.ptr + base, K, xs); break;
        default:
            for (int k = threadIdx.x; k < K; k += AMK_THREADS) xs[k] = amk_ld(x, base + k);
            break;
    }
}

/* Bytes of the per-tile cp.async ring of a block (kernels.gemvRingBytes in Go). */
__device__ __forceinline__ uint32_t amk_gemv_ring_bytes() {
    return (uint32_t)AMK_WARPS * AMK_GEMV_CPA_STAGES * AMK_GEMV_CPASYNC_COLS * AMK_CPA_CHUNK_BYTES;
}

/* Checks shared by the fp and quantized tiles; returns the number of x rows M, or -1. */
__device__ __forceinline__ int64_t amk_gemv_shape(const amk_buffer_t& x, const amk_buffer_t& W, const amk_buffer_t& out,
                                                  int K, int n_off, int N_tile) {
    const int64_t N = amk_cols(out);
    if (K <= 0 || N_tile <= 0 || n_off < 0 || N <= 0 || n_off + N_tile > N) return -1;
    if (x.numel % K != 0 || W.rank < 1 || W.shape[0] < n_off + N_tile) return -1;
    const int64_t M = x.numel / K;
    if (M <= 0 || out.numel != M * N) return -1;
    return M;
}

/* Element e of a quantised weight as stored: the int8 value, or the int4 nibble (q + 8); the
 * caller subtracts the zero point (amk_qtile.zdef without zeros) and scales (R27). */
__device__ __forceinline__ float amk_qw(const uint8_t* __restrict__ wq, bool i4, int64_t e) {
    if (i4) {
        const uint8_t b = wq[e >> 1];
        return (float)((e & 1) ? (b >> 4) : (b & 0xF));
    }
    return (float)(int8_t)wq[e];
}

/* Rows [n_off, n_off + N_tile) of a quantised tile against one staged x row xs, stored at obase +
 * n (+ residual, amk_gemv_store). The streaming ring's chunks when the task rides it (rp: the
 * issuer planned them, amk_ring_plan_for), else 16-byte streaming loads of AMK_QGEMV_COLS rows
 * per warp (vec: every row a whole number of vectors, 16-byte aligned, groups a multiple of a
 * vector), else element by element. Out of line, so that the fp paths' register allocation is
 * what it was before quantised tiles existed. */
__device__ __noinline__ void amk_gemv_q_row(const amk_program_t& prog, const float* __restrict__ xs, const amk_qtile& q,
                                            int K, int n_off, int N_tile, const amk_buffer_t& out, int64_t obase,
                                            const amk_buffer_t* res, bool vec, bool rp) {
#if AMK_RING_ON
    if (rp) {
        amk_gemv_ring_row_q(prog, xs, q, K, n_off, N_tile, out, obase, res);
        return;
    }
#else
    (void)prog;
    (void)rp;
#endif
    const int per_vec = q.i4 ? 32 : 16;
    const int nvec = vec ? K / per_vec : 0;
    constexpr int QC = AMK_QGEMV_COLS;
    for (int t = amk_warp() * QC; t < N_tile; t += AMK_WARPS * QC) {
        const int cols = min(QC, N_tile - t);
        const int64_t n0 = n_off + t;
        float acc[QC];
#pragma unroll
        for (int c = 0; c < QC; ++c) acc[c] = 0.f;
        for (int kv = amk_lane(); kv < nvec; kv += 32) {
            const int k0 = kv * per_vec;
            const int g = amk_qgroup(q, k0);
#pragma unroll
            for (int c = 0; c < QC; ++c) {
                if (c >= cols) break;
                const int64_t n = n0 + c;
                const uint4 r = __ldcs(reinterpret_cast<const uint4*>(q.w + n * q.row_bytes) + kv);
                const float z = q.Z ? amk_qscale(*q.Z, n * q.ng + g) : q.zdef;
                acc[c] = fmaf(amk_qdot16(r, xs + k0, q.i4, z), amk_qscale(*q.S, n * q.ng + g), acc[c]);
            }
        }
        for (int k = nvec * per_vec + amk_lane(); k < K; k += 32) {
            const int g = amk_qgroup(q, k);
#pragma unroll
            for (int c = 0; c < QC; ++c) {
                if (c >= cols) break;
                const int64_t n = n0 + c;
                const float z = q.Z ? amk_qscale(*q.Z, n * q.ng + g) : q.zdef;
                acc[c] = fmaf(xs[k], (amk_qw(q.w, q.i4, n * K + k) - z) * amk_qscale(*q.S, n * q.ng + g), acc[c]);
            }
        }
#pragma unroll
        for (int c = 0; c < QC; ++c)
            if (c < cols) amk_gemv_store(out, obase + n0 + c, acc[c], nullptr, n0 + c, res);
    }
}

/* The quantised tile of a task: weight input 1, scales input si, zero points (GEMV_TILE's fourth
 * input) when zi >= 0. False when the operands do not cover the tile (the caller traps). */
__device__ __forceinline__ bool amk_qtile_of(const amk_program_t& prog, const amk_instruction_t& inst, int wi, int si, int zi,
                                             int64_t last, amk_qtile* q) {
    const amk_buffer_t& W = prog.buffers[inst.inputs[wi]];
    const int K = inst.params.K;
    q->i4 = inst.params.qdtype == AMK_I4;
    q->group = inst.params.group > 0 ? inst.params.group : K;
    q->ng = K > 0 ? (K + q->group - 1) / q->group : 0;
    q->gshift = (q->group & (q->group - 1)) == 0 ? __ffs(q->group) - 1 : -1;
    q->row_bytes = q->i4 ? K / 2 : K;
    q->zdef = q->i4 ? 8.f : 0.f;
    q->w = (const uint8_t*)W.ptr;
    q->S = &prog.buffers[inst.inputs[si]];
    q->Z = zi >= 0 ? &prog.buffers[inst.inputs[zi]] : nullptr;
    return K > 0 && W.dtype == (q->i4 ? AMK_I4 : AMK_I8) && W.numel >= last * K && amk_is_float(q->S->dtype) &&
           q->S->numel >= last * q->ng && (!q->Z || q->Z->numel >= q->S->numel) && (!q->i4 || K % 2 == 0);
}

/* Whether a quantised tile's rows stream as 16-byte vectors inside one group each. */
__device__ __forceinline__ bool amk_qvec_ok(const amk_qtile& q, int K) {
    const int per_vec = q.i4 ? 32 : 16;
    return K % per_vec == 0 && q.group % per_vec == 0 && ((uintptr_t)q.w & 15) == 0;
}

/* Weight-only quantized GEMV_TILE: inputs [x, qW (I8 [N,K] or packed I4), scales [N,
 * ceil(K/group)] (, zeros)], or FUSED GEMV_ADD's [x, qW, residual, scales] (res set, si 3). */
__device__ __forceinline__ bool amk_gemv_quant(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task,
                                               const amk_buffer_t* res, int si) {
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], W = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const int K = inst.params.K, N_tile = inst.params.N_tile, n_off = inst.params.n_off;
    const int64_t M = amk_gemv_shape(x, W, out, K, n_off, N_tile);
    amk_qtile q;
    if (M < 0 || !amk_qtile_of(prog, inst, 1, si, !res && inst.n_inputs > 3 ? 3 : -1, (int64_t)n_off + N_tile, &q) ||
        (res && res->numel < out.numel))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, K);
    const int64_t N = amk_cols(out);
    const uint32_t have = amk_ops_smem_bytes();
    const bool use_smem = amk_gemv_x_bytes(K) <= have;
    float* xs = reinterpret_cast<float*>(amk_dyn_smem);
    const bool rp = amk_on_ring(prog, inst, have); /* the streaming ring carries this tile's weights */
    for (int64_t m = 0; m < M; ++m) {
        if (use_smem) {
            amk_stage_x(x, m * K, K, xs);
            __syncthreads();
            amk_gemv_q_row(prog, xs, q, K, n_off, N_tile, out, m * N, res, amk_qvec_ok(q, K), rp);
        } else { /* x beyond the shared memory: element by element from global memory */
            for (int t = amk_warp(); t < N_tile; t += AMK_WARPS) {
                const int64_t n = n_off + t;
                float acc = 0.f;
                for (int k = amk_lane(); k < K; k += 32) {
                    const int g = amk_qgroup(q, k);
                    const float z = q.Z ? amk_qscale(*q.Z, n * q.ng + g) : q.zdef;
                    acc = fmaf(amk_ld(x, m * K + k), (amk_qw(q.w, q.i4, n * K + k) - z) * amk_qscale(*q.S, n * q.ng + g), acc);
                }
                amk_gemv_store(out, m * N + n, acc, nullptr, n, res);
            }
        }
        __syncthreads(); /* xs is rewritten for the next row */
    }
    return true;
}

/* fp GEMV tile; `res` is the residual of FUSED GEMV_ADD (nullptr for a plain tile). */
__device__ __forceinline__ bool amk_gemv_fp(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task,
                                            const amk_buffer_t* res) {
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], W = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const int K = inst.params.K, N_tile = inst.params.N_tile, n_off = inst.params.n_off;
    const int64_t M = amk_gemv_shape(x, W, out, K, n_off, N_tile);
    const int64_t ldw = W.rank >= 2 ? W.stride[0] : K;
    if (M < 0 || !amk_is_float(W.dtype) || ldw < K || W.numel < (int64_t)(n_off + N_tile) * ldw ||
        (res && res->numel < out.numel))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, K);
    /* bias / residual are read through pointers into the global buffer table (a pointer to a
     * local copy would force the record into local memory). */
    const amk_buffer_t* bias = (!res && inst.n_inputs > 2) ? &prog.buffers[inst.inputs[2]] : nullptr;
    if (bias && bias->numel < n_off + N_tile) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, 2);
    const int64_t N = amk_cols(out);
    const uint32_t have = amk_ops_smem_bytes();
    const uint32_t xb = amk_gemv_x_bytes(K);
    const int esz = W.dtype == AMK_F32 ? 4 : 2;
    const bool vec_ok = ((uintptr_t)W.ptr & 15) == 0 && ((ldw * esz) & 15) == 0;
    if (xb > have) {
        for (int64_t m = 0; m < M; ++m) amk_gemv_generic_row(x, m * K, W, ldw, K, n_off, N_tile, out, m * N, bias, res);
        return true;
    }
    float* xs = reinterpret_cast<float*>(amk_dyn_smem);
    unsigned char* ring = nullptr;
#if AMK_HAVE_CPASYNC
    if (vec_ok && xb + amk_gemv_ring_bytes() <= have) ring = amk_dyn_smem + xb;
#endif
    const bool rp = amk_on_ring(prog, inst, have); /* the streaming ring carries this tile's weights */
    for (int64_t m = 0; m < M; ++m) {
        amk_stage_x(x, m * K, K, xs);
        __syncthreads();
        switch (W.dtype) {
            case AMK_F16:
                amk_gemv_fp_row<__half>(xs, (const __half*)W.ptr, ldw, K, n_off, N_tile, out, m * N, bias, res, ring,
                                        vec_ok, prog, rp);
                break;
            case AMK_BF16:
                amk_gemv_fp_row<__nv_bfloat16>(xs, (const __nv_bfloat16*)W.ptr, ldw, K, n_off, N_tile, out, m * N,
                                               bias, res, ring, vec_ok, prog, rp);
                break;
            default:
                amk_gemv_fp_row<float>(xs, (const float*)W.ptr, ldw, K, n_off, N_tile, out, m * N, bias, res, ring,
                                       vec_ok, prog, rp);
                break;
        }
        __syncthreads(); /* xs is rewritten for the next row */
    }
    return true;
}

/* GEMV_TILE: quantized iff params.qdtype is I8/I4 and a scales input is present. */
__device__ __forceinline__ bool amk_op_gemv_tile(const amk_program_t& prog, const amk_instruction_t& inst,
                                                 int32_t task) {
    const int32_t q = inst.params.qdtype;
    if ((q == AMK_I8 || q == AMK_I4) && inst.n_inputs >= 3) return amk_gemv_quant(prog, inst, task, nullptr, 2);
    return amk_gemv_fp(prog, inst, task, nullptr);
}

/* ---- FUSED layer patterns (ir.FusedPatterns, abi.h amk_fused_pattern_t) ---------------------
 * One projection tile with a staging step before the dot products and an epilogue after them:
 *   staging  none | RMSNORM (x * rsqrt(mean(x^2) + eps) * norm_w) | SILU_MUL (silu(gate) * up),
 *            written to the x cache in fp32, rounded to the activation dtype as the unfused op
 *            would store it;
 *   epilogue none | ADD residual | ROPE | ROPE + KV append | KV append: the sums are rounded to
 *            the activation dtype first (the unfused projection's output), then added or rotated.
 * A RoPE/append tile collects its N_tile sums in shared memory ([x cache][tile][ring]) and
 * finishes them as whole heads, or, a paired tile (AMK_FLAG_PAIRED_TILE), as the pairs of its two
 * half-head ranges. The dtype switch happens once per tile, never per element. */
/* The staging step after x is in the x cache, for an auxiliary input a (the norm weight, or `up`
 * at the row's offset) of x's dtype T: xs[k] = round_T(xs[k] * r * a[k]) (RMSNORM, silu false) or
 * round_T(silu(xs[k]) * a[k]) (SILU_MUL), the unfused op's fp32 order and its rounding at the
 * store. The aligned vectors of `a` move as 16-byte loads, a thread issuing all AMK_STAGE_UNROLL
 * of them before its first store; the scalar tail finishes the row. */
template <typename T>
__device__ __forceinline__ void amk_stage_aux_typed(float* __restrict__ xs, const T* a, int K, float r, bool silu) {
    constexpr int V = amk_vec<T>::N;
    const int nvec = ((uintptr_t)a & 15) == 0 ? K / V : 0;
    const uint4* va = reinterpret_cast<const uint4*>(a);
    auto apply = [&](float x, float w) {
        return amk_vec<T>::round(silu ? x / (1.f + expf(-x)) * w : x * r * w);
    };
    for (int v0 = threadIdx.x; v0 < nvec; v0 += AMK_THREADS * AMK_STAGE_UNROLL) {
        uint4 ra[AMK_STAGE_UNROLL];
#pragma unroll
        for (int u = 0; u < AMK_STAGE_UNROLL; ++u) {
            const int v = v0 + u * AMK_THREADS;
            if (v < nvec) ra[u] = va[v];
        }
#pragma unroll
        for (int u = 0; u < AMK_STAGE_UNROLL; ++u) {
            const int v = v0 + u * AMK_THREADS;
            if (v < nvec) {
                float f[V];
                amk_vec<T>::cvt(ra[u], f);
#pragma unroll
                for (int i = 0; i < V; ++i) xs[v * V + i] = apply(xs[v * V + i], f[i]);
            }
        }
    }
    for (int k = nvec * V + threadIdx.x; k < K; k += AMK_THREADS) xs[k] = apply(xs[k], amk_vec<T>::one(a, k));
}

/* Stage x row m into xs (fp32), applying the pattern's staging. The dtype is resolved once per
 * row: an auxiliary input of x's float dtype takes the typed vector path, any other pair the
 * per-element one. */
__device__ __forceinline__ void amk_fused_stage(const amk_program_t& prog, const amk_instruction_t& inst,
                                                const amk_fused_shape& f, int64_t m, int K, float* xs) {
    __shared__ float s_red[AMK_WARPS];
    const amk_buffer_t x = prog.buffers[inst.inputs[0]];
    const amk_buffer_t aux = prog.buffers[inst.inputs[1]]; /* norm_w or up */
    const int64_t base = m * K;
    amk_stage_x(x, base, K, xs);
    if (f.staging != 0) {
        __syncthreads(); /* vector staging wrote elements other threads read below */
        const bool silu = f.staging == 2;
        float r = 0.f;
        if (!silu) {
            float ss = 0.f;
            for (int k = threadIdx.x; k < K; k += AMK_THREADS) ss = fmaf(xs[k], xs[k], ss);
            r = rsqrtf(amk_block_sum(ss, s_red) / (float)K + inst.params.eps);
        }
        const int64_t ab = silu ? base : 0; /* up is read at the row's offset, the norm weight at 0 */
        switch (aux.dtype == x.dtype ? x.dtype : -1) {
            case AMK_F32:  amk_stage_aux_typed<float>(xs, (const float*)aux.ptr + ab, K, r, silu); break;
            case AMK_F16:  amk_stage_aux_typed<__half>(xs, (const __half*)aux.ptr + ab, K, r, silu); break;
            case AMK_BF16: amk_stage_aux_typed<__nv_bfloat16>(xs, (const __nv_bfloat16*)aux.ptr + ab, K, r, silu); break;
            default:
                for (int k = threadIdx.x; k < K; k += AMK_THREADS) {
                    const float g = xs[k], w = amk_ld(aux, ab + k);
                    xs[k] = amk_round_to(x.dtype, silu ? g / (1.f + expf(-g)) * w : g * r * w);
                }
                break;
        }
    }
    __syncthreads();
}

/* RoPE and/or append epilogue of row m. Contiguous tile: tile[j] holds the fp32 sums of columns
 * n_off + j, whole heads. Paired tile (AMK_FLAG_PAIRED_TILE, w = N_tile / 2 columns per range):
 * tile[e] holds column n_off + e and tile[w + e] its rotation partner n_off + head_dim/2 + e. */
__device__ __forceinline__ void amk_fused_finish(const amk_program_t& prog, const amk_instruction_t& inst,
                                                 const amk_fused_shape& f, int32_t act_dtype, const float* tile,
                                                 const amk_buffer_t& out, int64_t dst, int64_t m, bool paired) {
    const int N_tile = inst.params.N_tile, hd = inst.params.head_dim;
    const int half = hd / 2, w = N_tile / 2;
    if (f.epilogue == 4) {
        for (int j = threadIdx.x; j < N_tile; j += AMK_THREADS)
            amk_st(out, dst + (paired && j >= w ? j - w + half : j), amk_round_to(act_dtype, tile[j]));
        return;
    }
    const amk_buffer_t pb = prog.buffers[inst.inputs[f.n_in - 1]];
    const float pos = (float)amk_ld_int(pb, pb.numel > m ? m : 0);
    const int i0 = paired ? inst.params.n_off % hd : 0;
    for (int e = threadIdx.x; e < N_tile / 2; e += AMK_THREADS) {
        /* a: the pair's first column in the tile, b its partner; i: the frequency index */
        const int i = paired ? i0 + e : e % half;
        const int a = paired ? e : (e / half) * hd + i, b = paired ? w + e : a + half;
        const int oa = a, ob = paired ? half + e : b; /* the columns from n_off */
        float sn, cs, o1, o2;
        amk_rope_angle(pos, i, half, inst.params.theta, &sn, &cs);
        amk_rotate(amk_round_to(act_dtype, tile[a]), amk_round_to(act_dtype, tile[b]), cs, sn, &o1, &o2);
        amk_st(out, dst + oa, amk_round_to(act_dtype, o1));
        amk_st(out, dst + ob, amk_round_to(act_dtype, o2));
    }
}

/* FUSED: a pattern of ir.FusedPatterns; an unknown id traps (the Go side rejects such programs
 * before launch, R25). */
__device__ __forceinline__ bool amk_op_fused(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const int32_t pat = (inst.params.flags >> AMK_FUSED_PATTERN_SHIFT) & 0xFFFF;
    const amk_fused_shape f = amk_fused_pattern_shape(pat);
    /* a quantised tile (ir.TileQuant) carries its weight's scales after the pattern's inputs */
    const bool quant = inst.params.qdtype == AMK_I8 || inst.params.qdtype == AMK_I4;
    if (f.staging < 0 || inst.n_inputs != f.n_in + (quant ? 1 : 0))
        return amk_trap(prog, AMK_TRAP_FUSED_PATTERN, task, inst.op, pat);
    if (pat == AMK_FUSED_GEMV_ADD)
        return quant ? amk_gemv_quant(prog, inst, task, &prog.buffers[inst.inputs[2]], f.n_in)
                     : amk_gemv_fp(prog, inst, task, &prog.buffers[inst.inputs[2]]);
    const int wi = f.staging == 0 ? 1 : 2; /* W follows x, or x and (norm_w | up) */
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], W = prog.buffers[inst.inputs[wi]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const amk_buffer_t* res = f.epilogue == 1 ? &prog.buffers[inst.inputs[wi + 1]] : nullptr;
    const int K = inst.params.K, N_tile = inst.params.N_tile, n_off = inst.params.n_off, hd = inst.params.head_dim;
    const bool append = f.epilogue >= 3, collect = f.epilogue >= 2;
    /* A paired tile (ir.PairStride): w = N_tile/2 columns at n_off and at n_off + head_dim/2, one head. */
    const bool paired = (inst.params.flags & AMK_FLAG_PAIRED_TILE) != 0;
    const int w = paired ? N_tile / 2 : N_tile, stride = hd / 2;
    const int64_t last = paired ? (int64_t)n_off + stride + w : (int64_t)n_off + N_tile; /* one past the last column */
    const int64_t M = K > 0 ? x.numel / K : 0;
    const int64_t N = append ? inst.params.N : (M > 0 ? out.numel / M : 0);
    const int64_t ldw = W.rank >= 2 ? W.stride[0] : K;
    const uint32_t xb = amk_gemv_x_bytes(K), tb = collect ? amk_gemv_x_bytes(N_tile) : 0, have = amk_ops_smem_bytes();
    const int rank = out.rank;
    /* a dynamic index into a local copy of the record would put it in local memory: read the table */
    const int64_t seq = append && rank >= 3 ? prog.buffers[inst.outputs[0]].shape[rank - 3] : 0;
    amk_qtile q;
    if (M <= 0 || x.numel != M * K || N <= 0 || n_off < 0 || N_tile <= 0 || last > N ||
        (quant ? !amk_qtile_of(prog, inst, wi, f.n_in, -1, last, &q) : !amk_is_float(W.dtype)) || ldw < K ||
        W.numel < last * ldw || xb + tb > have ||
        (res && res->numel < out.numel) || (paired && !collect) ||
        (collect && (hd <= 0 || (hd & 1) ||
                     (paired ? ((N_tile & 1) || n_off % hd + w > stride) : (n_off % hd || N_tile % hd)))) ||
        (append && (seq <= 0 || inst.params.pos < 0 || inst.params.pos >= seq || out.numel < M * seq * N)) ||
        (!append && out.numel != M * N))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, pat);
    float* xs = reinterpret_cast<float*>(amk_dyn_smem);
    float* tile = reinterpret_cast<float*>(amk_dyn_smem + xb);
    const int esz = W.dtype == AMK_F32 ? 4 : 2;
    const bool vec_ok = quant ? amk_qvec_ok(q, K) && ldw == K : ((uintptr_t)W.ptr & 15) == 0 && ((ldw * esz) & 15) == 0;
    unsigned char* ring = nullptr;
#if AMK_HAVE_CPASYNC
    if (!quant && vec_ok && xb + tb + amk_gemv_ring_bytes() <= have) ring = amk_dyn_smem + xb + tb;
#endif
    const bool rp = amk_on_ring(prog, inst, have); /* the streaming ring carries this tile's weights */
    /* The sums land in the output (obase = m*N), or in the tile (obase = r*w - off: column n of range r
     * -> r*w + n - off, so a paired tile's second range follows its first). */
    amk_buffer_t dst = out;
    if (collect) {
        dst.ptr = tile;
        dst.dtype = AMK_F32;
        dst.numel = N_tile;
    }
    /* x is staged once per row m; a paired tile then streams its two weight row ranges (r = 0, 1)
     * against it. One flat loop over (m, r): a nested range loop kept more state live across the
     * GEMV and spilled the largest knobs (nvcc 11.8, sm_90). */
    const int nr = paired ? 2 : 1;
    for (int64_t mr = 0; mr < M * nr; ++mr) {
        const int64_t m = paired ? mr >> 1 : mr;
        const int r = paired ? (int)(mr & 1) : 0;
        if (r == 0) amk_fused_stage(prog, inst, f, m, K, xs);
        const int off = n_off + r * stride;
        const int64_t obase = collect ? (int64_t)r * w - off : m * N;
        switch (W.dtype) {
            case AMK_I8:
            case AMK_I4:
                amk_gemv_q_row(prog, xs, q, K, off, w, dst, obase, res, vec_ok, rp);
                break;
            case AMK_F16:
                amk_gemv_fp_row<__half>(xs, (const __half*)W.ptr, ldw, K, off, w, dst, obase, nullptr, res, ring, vec_ok, prog, rp);
                break;
            case AMK_BF16:
                amk_gemv_fp_row<__nv_bfloat16>(xs, (const __nv_bfloat16*)W.ptr, ldw, K, off, w, dst, obase, nullptr, res, ring,
                                               vec_ok, prog, rp);
                break;
            default:
                amk_gemv_fp_row<float>(xs, (const float*)W.ptr, ldw, K, off, w, dst, obase, nullptr, res, ring, vec_ok, prog, rp);
                break;
        }
        if (r + 1 < nr) continue; /* the second range reads the same staged x */
        __syncthreads(); /* the tile is complete; xs is rewritten for the next row */
        if (collect) {
            const int64_t row = append ? (m * seq + inst.params.pos) * N : m * N;
            amk_fused_finish(prog, inst, f, x.dtype, tile, out, row + n_off, m, paired);
            __syncthreads();
        }
    }
    return true;
}

/* GEMM_TILE: every row of x (batch decode, M = x.numel / K) times the weight tile. A warp owns
 * one weight row and AMK_GEMM_MMAX x rows at a time, so each weight vector is read once per
 * register tile. x rows come from global memory through coherent L2 loads (__ldcg): other blocks
 * write x in the same launch, so the read-only path (__ldg, ld.global.nc, which a const
 * __restrict__ pointer also lets the compiler pick) may return stale data; X is therefore not
 * __restrict__. */
template <typename T>
__device__ __forceinline__ void amk_gemm_typed(const T* X, const T* __restrict__ W, int64_t ldw, int K,
                                               int64_t M, int n_off, int N_tile, const amk_buffer_t& out, int64_t N,
                                               const amk_buffer_t* bias, bool vec_ok) {
    constexpr int V = amk_vec<T>::N;
    const int nvec = vec_ok ? K / V : 0;
    for (int t = amk_warp(); t < N_tile; t += AMK_WARPS) {
        const int64_t n = n_off + t;
        const T* wrow = W + n * ldw;
        for (int64_t m0 = 0; m0 < M; m0 += AMK_GEMM_MMAX) {
            const int mt = (int)min((int64_t)AMK_GEMM_MMAX, M - m0);
            float acc[AMK_GEMM_MMAX];
#pragma unroll
            for (int i = 0; i < AMK_GEMM_MMAX; ++i) acc[i] = 0.f;
            for (int kv = amk_lane(); kv < nvec; kv += 32) {
                float wf[V];
                amk_vec<T>::cvt(__ldcs(reinterpret_cast<const uint4*>(wrow) + kv), wf);
#pragma unroll
                for (int i = 0; i < AMK_GEMM_MMAX; ++i) {
                    if (i >= mt) break;
                    float xf[V];
                    amk_vec<T>::cvt(__ldcg(reinterpret_cast<const uint4*>(X + (m0 + i) * K) + kv), xf);
#pragma unroll
                    for (int e = 0; e < V; ++e) acc[i] = fmaf(xf[e], wf[e], acc[i]);
                }
            }
            for (int k = nvec * V + amk_lane(); k < K; k += 32) {
                const float w = amk_vec<T>::one(wrow, k);
#pragma unroll
                for (int i = 0; i < AMK_GEMM_MMAX; ++i) {
                    if (i >= mt) break;
                    acc[i] = fmaf(amk_vec<T>::one(X + (m0 + i) * K, k), w, acc[i]);
                }
            }
#pragma unroll
            for (int i = 0; i < AMK_GEMM_MMAX; ++i)
                if (i < mt) amk_gemv_store(out, (m0 + i) * N + n, acc[i], bias, n, nullptr);
        }
    }
}

__device__ __forceinline__ bool amk_op_gemm_tile(const amk_program_t& prog, const amk_instruction_t& inst,
                                                 int32_t task) {
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], W = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const int K = inst.params.K, N_tile = inst.params.N_tile, n_off = inst.params.n_off;
    const int64_t M = amk_gemv_shape(x, W, out, K, n_off, N_tile);
    const int64_t ldw = W.rank >= 2 ? W.stride[0] : K;
    if (M < 0 || !amk_is_float(W.dtype) || ldw < K || W.numel < (int64_t)(n_off + N_tile) * ldw)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, K);
    const amk_buffer_t* bias = inst.n_inputs > 2 ? &prog.buffers[inst.inputs[2]] : nullptr;
    if (bias && bias->numel < n_off + N_tile) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, 2);
    const int64_t N = amk_cols(out);
    if (x.dtype != W.dtype) { /* mixed dtypes: the general per-element path */
        for (int64_t m = 0; m < M; ++m) amk_gemv_generic_row(x, m * K, W, ldw, K, n_off, N_tile, out, m * N, bias, nullptr);
        return true;
    }
    const int esz = W.dtype == AMK_F32 ? 4 : 2;
    const bool vec_ok = ((uintptr_t)W.ptr & 15) == 0 && ((uintptr_t)x.ptr & 15) == 0 && ((ldw * esz) & 15) == 0 &&
                        (((int64_t)K * esz) & 15) == 0;
    switch (W.dtype) {
        case AMK_F16:
            amk_gemm_typed<__half>((const __half*)x.ptr, (const __half*)W.ptr, ldw, K, M, n_off, N_tile, out, N, bias,
                                   vec_ok);
            break;
        case AMK_BF16:
            amk_gemm_typed<__nv_bfloat16>((const __nv_bfloat16*)x.ptr, (const __nv_bfloat16*)W.ptr, ldw, K, M, n_off,
                                          N_tile, out, N, bias, vec_ok);
            break;
        default:
            amk_gemm_typed<float>((const float*)x.ptr, (const float*)W.ptr, ldw, K, M, n_off, N_tile, out, N, bias,
                                  vec_ok);
            break;
    }
    return true;
}

#endif /* AMK_OPS_GEMV_CUH */
