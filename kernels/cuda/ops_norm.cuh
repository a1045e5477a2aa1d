/* ==========================================================================================
 * Row-wise instructions: RMSNORM, LAYERNORM, SOFTMAX (last dim), SAMPLE_ARGMAX, ROPE.
 * One block reduces one row at a time (decode has one row; batch B has B).
 * ========================================================================================== */
#ifndef AMK_OPS_NORM_CUH
#define AMK_OPS_NORM_CUH

#include <math_constants.h>

#include "common.cuh"
#include "ops_gemv.cuh" /* amk_vec, amk_ops_smem_bytes */

/* RMSNORM: out = x * rsqrt(mean(x^2) + eps) * w over rows of params.hidden (fp32, the weight
 * multiplied in fp32 as the reference does). */
__device__ __forceinline__ bool amk_op_rmsnorm(const amk_program_t& prog, const amk_instruction_t& inst,
                                               int32_t task) {
    __shared__ float s_red[AMK_WARPS];
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], w = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const int64_t H = inst.params.hidden > 0 ? inst.params.hidden : amk_cols(x);
    if (H <= 0 || out.numel % H != 0 || x.numel < out.numel || w.numel < H)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)H);
    const float eps = inst.params.eps;
    for (int64_t base = 0; base < out.numel; base += H) {
        float ss = 0.f;
        for (int64_t j = threadIdx.x; j < H; j += AMK_THREADS) {
            const float v = amk_ld(x, base + j);
            ss = fmaf(v, v, ss);
        }
        const float r = rsqrtf(amk_block_sum(ss, s_red) / (float)H + eps);
        for (int64_t j = threadIdx.x; j < H; j += AMK_THREADS)
            amk_st(out, base + j, amk_ld(x, base + j) * r * amk_ld(w, j));
    }
    return true;
}

/* LAYERNORM over rows of params.hidden: (x - mean) * rsqrt(var + eps) * w (+ b), biased var. */
__device__ __forceinline__ bool amk_op_layernorm(const amk_program_t& prog, const amk_instruction_t& inst,
                                                 int32_t task) {
    __shared__ float s_red[AMK_WARPS];
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], w = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const bool has_b = inst.n_inputs > 2;
    const amk_buffer_t bias = prog.buffers[inst.inputs[has_b ? 2 : 1]]; /* index select: no local copy */
    const int64_t H = inst.params.hidden > 0 ? inst.params.hidden : amk_cols(x);
    if (H <= 0 || out.numel % H != 0 || x.numel < out.numel || w.numel < H || bias.numel < H)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)H);
    const float eps = inst.params.eps;
    for (int64_t base = 0; base < out.numel; base += H) {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < H; j += AMK_THREADS) s += amk_ld(x, base + j);
        const float mean = amk_block_sum(s, s_red) / (float)H;
        float v = 0.f;
        for (int64_t j = threadIdx.x; j < H; j += AMK_THREADS) {
            const float d = amk_ld(x, base + j) - mean;
            v = fmaf(d, d, v);
        }
        const float r = rsqrtf(amk_block_sum(v, s_red) / (float)H + eps);
        for (int64_t j = threadIdx.x; j < H; j += AMK_THREADS) {
            float y = (amk_ld(x, base + j) - mean) * r * amk_ld(w, j);
            if (has_b) y += amk_ld(bias, j);
            amk_st(out, base + j, y);
        }
    }
    return true;
}

/* SOFTMAX over the last dimension (the marshaller writes dim = -1 when absent; the Go side
 * rejects any other axis before launch). */
__device__ __forceinline__ bool amk_op_softmax(const amk_program_t& prog, const amk_instruction_t& inst,
                                               int32_t task) {
    __shared__ float s_red[AMK_WARPS];
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], out = prog.buffers[inst.outputs[0]];
    const int64_t C = amk_cols(x);
    const int32_t dim = inst.params.dim;
    if (C <= 0 || x.numel != out.numel || x.numel % C != 0 || !(dim == -1 || dim == x.rank - 1))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, dim);
    for (int64_t base = 0; base < x.numel; base += C) {
        float m = -CUDART_INF_F;
        for (int64_t j = threadIdx.x; j < C; j += AMK_THREADS) m = fmaxf(m, amk_ld(x, base + j));
        m = amk_block_max(m, s_red);
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < C; j += AMK_THREADS) s += expf(amk_ld(x, base + j) - m);
        const float inv = 1.f / amk_block_sum(s, s_red);
        for (int64_t j = threadIdx.x; j < C; j += AMK_THREADS) amk_st(out, base + j, expf(amk_ld(x, base + j) - m) * inv);
    }
    return true;
}

/* SAMPLE_ARGMAX: index of the max of each row of the last dim, ties to the lowest index, stored
 * as an integer into integer outputs (R27). */
__device__ __forceinline__ bool amk_op_sample_argmax(const amk_program_t& prog, const amk_instruction_t& inst,
                                                     int32_t task) {
    __shared__ float s_val[AMK_WARPS];
    __shared__ int64_t s_idx[AMK_WARPS];
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], out = prog.buffers[inst.outputs[0]];
    const int64_t V = amk_cols(x);
    if (V <= 0 || x.numel % V != 0 || out.numel < x.numel / V)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)V);
    const int64_t rows = x.numel / V;
    for (int64_t r = 0; r < rows; ++r) {
        float bv = -CUDART_INF_F;
        int64_t bi = V; /* sentinel: larger than any index */
        for (int64_t j = threadIdx.x; j < V; j += AMK_THREADS) {
            const float v = amk_ld(x, r * V + j);
            if (v > bv || (bi == V && !(v < bv))) {
                bv = v;
                bi = j;
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(AMK_FULL_MASK, bv, o);
            const int64_t oi = __shfl_xor_sync(AMK_FULL_MASK, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (amk_lane() == 0) {
            s_val[amk_warp()] = bv;
            s_idx[amk_warp()] = bi;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            float v = s_val[0];
            int64_t i = s_idx[0];
            for (int w = 1; w < AMK_WARPS; ++w)
                if (s_val[w] > v || (s_val[w] == v && s_idx[w] < i)) {
                    v = s_val[w];
                    i = s_idx[w];
                }
            amk_st_int(out, r, i < V ? i : 0);
        }
        __syncthreads();
    }
    return true;
}

/* ROPE over the heads [h0, h0 + nh) of one position (x and out one float dtype T, 16-byte aligned,
 * half a multiple of the vector width): the angle table cs/sn (half entries, built once per
 * position) pairs with each head's x1 and x2 vectors; a thread loads every vector of its
 * AMK_GLUE_UNROLL items before its first store. */
template <typename T>
__device__ __forceinline__ void amk_rope_typed(const T* x, T* out, int64_t h0, int64_t nh, int hd, const float* cs,
                                               const float* sn) {
    constexpr int V = amk_vec<T>::N;
    const int half = hd / 2, per_head = half / V;
    const int64_t items = nh * per_head;
    const uint4* vx = reinterpret_cast<const uint4*>(x);
    uint4* vo = reinterpret_cast<uint4*>(out);
    for (int64_t e0 = threadIdx.x; e0 < items; e0 += (int64_t)AMK_THREADS * AMK_GLUE_UNROLL) {
        uint4 r1[AMK_GLUE_UNROLL], r2[AMK_GLUE_UNROLL];
#pragma unroll
        for (int u = 0; u < AMK_GLUE_UNROLL; ++u) {
            const int64_t e = e0 + u * AMK_THREADS;
            if (e < items) {
                const int64_t at = ((h0 + e / per_head) * hd) / V + e % per_head; /* the x1 vector */
                r1[u] = vx[at];
                r2[u] = vx[at + per_head];
            }
        }
#pragma unroll
        for (int u = 0; u < AMK_GLUE_UNROLL; ++u) {
            const int64_t e = e0 + u * AMK_THREADS;
            if (e < items) {
                const int i0 = (int)(e % per_head) * V;
                float f1[V], f2[V];
                amk_vec<T>::cvt(r1[u], f1);
                amk_vec<T>::cvt(r2[u], f2);
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    const float a = f1[j], b = f2[j];
                    amk_rotate(a, b, cs[i0 + j], sn[i0 + j], &f1[j], &f2[j]);
                }
                const int64_t at = ((h0 + e / per_head) * hd) / V + e % per_head;
                vo[at] = amk_vec<T>::pack(f1);
                vo[at + per_head] = amk_vec<T>::pack(f2);
            }
        }
    }
}

/* ROPE (Llama rotate-half): half = hd/2, inv_freq[i] = 1 / theta^(i/half), angle = pos * inv_freq;
 * out = [x1*cos - x2*sin, x2*cos + x1*sin], each product rounded on its own (amk_rotate, the VM's
 * order). Rank-2 x [heads, hd] uses pos[0]; rank-3 x [S, heads, hd], or a flat rank-2 x
 * [S, heads*hd], uses pos[s] per row when positions has S entries (else pos[0]). Precise
 * powf/sincosf, fp32 like the reference tables. The dtype is resolved once per op: with x and out
 * of one float dtype, aligned, and room for the table in the dynamic shared memory, each
 * position's table is built once and the heads move as 16-byte vectors (amk_rope_typed);
 * otherwise element by element. */
__device__ __forceinline__ bool amk_op_rope(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t x = prog.buffers[inst.inputs[0]], pb = prog.buffers[inst.inputs[1]];
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const int hd = inst.params.head_dim;
    if (hd <= 0 || (hd & 1) || x.numel % hd != 0 || out.numel < x.numel || pb.numel < 1)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, hd);
    const int half = hd / 2;
    const int64_t nvec = x.numel / hd;
    /* heads per position: rank 3 [S, heads, hd] or a flat projection [S, heads*hd] read as a view
     * (one position per row), else every head at pos[0] */
    const int64_t per_row = (x.rank == 3 && pb.numel == x.shape[0] && x.shape[0] > 0) ? x.shape[1]
                            : (x.rank == 2 && x.shape[1] > hd && pb.numel == x.shape[0]) ? x.shape[1] / hd
                                                                                         : nvec;
    const float theta = inst.params.theta;
    const int V = x.dtype == AMK_F32 ? 4 : 8;
    const bool vec = x.dtype == out.dtype && (x.dtype == AMK_F32 || x.dtype == AMK_F16 || x.dtype == AMK_BF16) &&
                     half % V == 0 && (((uintptr_t)x.ptr | (uintptr_t)out.ptr) & 15) == 0 && per_row > 0 &&
                     (uint32_t)hd * 4 <= amk_ops_smem_bytes();
    if (vec) {
        float* cs = reinterpret_cast<float*>(amk_dyn_smem);
        float* sn = cs + half;
        for (int64_t h0 = 0; h0 < nvec; h0 += per_row) {
            const float pos = (float)amk_ld_int(pb, h0 / per_row);
            for (int i = threadIdx.x; i < half; i += AMK_THREADS) amk_rope_angle(pos, i, half, theta, &sn[i], &cs[i]);
            __syncthreads();
            const int64_t nh = min(per_row, nvec - h0);
            switch (x.dtype) {
                case AMK_F16:  amk_rope_typed<__half>((const __half*)x.ptr, (__half*)out.ptr, h0, nh, hd, cs, sn); break;
                case AMK_BF16:
                    amk_rope_typed<__nv_bfloat16>((const __nv_bfloat16*)x.ptr, (__nv_bfloat16*)out.ptr, h0, nh, hd, cs, sn);
                    break;
                default:       amk_rope_typed<float>((const float*)x.ptr, (float*)out.ptr, h0, nh, hd, cs, sn); break;
            }
            __syncthreads(); /* the table is rebuilt for the next position */
        }
        return true;
    }
    for (int64_t e = threadIdx.x; e < nvec * half; e += AMK_THREADS) {
        const int64_t v = e / half;
        const int i = (int)(e % half);
        const float pos = (float)amk_ld_int(pb, per_row > 0 ? v / per_row : 0);
        float sn, cs;
        amk_rope_angle(pos, i, half, theta, &sn, &cs);
        const int64_t base = v * hd;
        const float x1 = amk_ld(x, base + i), x2 = amk_ld(x, base + i + half);
        float o1, o2;
        amk_rotate(x1, x2, cs, sn, &o1, &o2);
        amk_st(out, base + i, o1);
        amk_st(out, base + i + half, o2);
    }
    return true;
}

#endif /* AMK_OPS_NORM_CUH */
