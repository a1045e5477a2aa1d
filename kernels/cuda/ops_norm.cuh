/* ==========================================================================================
 * Row-wise instructions: RMSNORM, LAYERNORM, SOFTMAX (last dim), SAMPLE_ARGMAX, ROPE.
 * One block reduces one row at a time (decode has one row; batch B has B).
 * ========================================================================================== */
#ifndef AMK_OPS_NORM_CUH
#define AMK_OPS_NORM_CUH

#include <math_constants.h>

#include "common.cuh"

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

/* ROPE (Llama rotate-half): half = hd/2, inv_freq[i] = 1 / theta^(i/half), angle = pos * inv_freq;
 * out = [x1*cos - x2*sin, x2*cos + x1*sin]. Rank-2 x [heads, hd] uses pos[0]; rank-3 x
 * [S, heads, hd], or a flat rank-2 x [S, heads*hd], uses pos[s] per row when positions has S
 * entries (else pos[0]). Precise
 * powf/sincosf, fp32 like the reference tables. */
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
    for (int64_t e = threadIdx.x; e < nvec * half; e += AMK_THREADS) {
        const int64_t v = e / half;
        const int i = (int)(e % half);
        const float pos = (float)amk_ld_int(pb, per_row > 0 ? v / per_row : 0);
        const float inv = 1.f / powf(theta, (float)i / (float)half);
        float sn, cs;
        sincosf(pos * inv, &sn, &cs);
        const int64_t base = v * hd;
        const float x1 = amk_ld(x, base + i), x2 = amk_ld(x, base + i + half);
        amk_st(out, base + i, x1 * cs - x2 * sn);
        amk_st(out, base + i + half, x2 * cs + x1 * sn);
    }
    return true;
}

#endif /* AMK_OPS_NORM_CUH */
