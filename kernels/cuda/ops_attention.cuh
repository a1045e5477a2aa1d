/* ==========================================================================================
 * Decode attention: ATTENTION_TILE (GQA over a KV window, batched, or a split-KV partial) and
 * ATTENTION_COMBINE (flash-decoding merge of the partials).
 *
 * One warp owns one (sequence, query head) at a time; its q and accumulator live in registers
 * (lane L holds dims L, L+32, ...; head_dim <= AMK_ATTN_MAX_HEAD_DIM), so no shared memory is
 * needed. Keys are consumed four at a time with an online (flash) softmax in fp32: the four
 * q.k dot products reduce through independent warp butterflies, then one rescale.
 *   scores = (q . k) * scale over keys [kv_start, kv_start + kv_len); GQA: query head h reads
 *   KV head h / (n_heads / n_kv_heads); out = softmax(scores) . V.
 * PARTIAL_WRITE (flags bit 1): per head write [acc = sum exp(s - m) v | m | l] into an
 * [n_heads, head_dim + 2] buffer, [B, n_heads, head_dim + 2] for a batch (an empty window gives
 * acc 0, m -inf, l 0).
 * ========================================================================================== */
#ifndef AMK_OPS_ATTENTION_CUH
#define AMK_OPS_ATTENTION_CUH

#include <math_constants.h>

#include "common.cuh"
#include "ops_gemv.cuh" /* amk_vec<T>::one */

#define AMK_ATTN_SLOTS (AMK_ATTN_MAX_HEAD_DIM / 32)
#define AMK_ATTN_KEYS 4

/* Rescale factor exp(m_old - m_new), 0 while nothing has been accumulated. */
__device__ __forceinline__ float amk_attn_corr(float m_old, float m_new) {
    return m_old == -CUDART_INF_F ? 0.f : expf(m_old - m_new);
}

/* K and Vc are not __restrict__: KV_APPEND (or a fused append) writes the cache in this launch,
 * and a const __restrict__ pointer would let the compiler read it through the non-coherent path. */
template <typename T>
__device__ __forceinline__ void amk_attn_head(const float (&qr)[AMK_ATTN_SLOTS], const T* K,
                                              const T* Vc, int64_t base, int64_t row, int kv_len, int hd,
                                              float scale, float (&acc)[AMK_ATTN_SLOTS], float& m, float& l) {
    const int lane = amk_lane();
#pragma unroll
    for (int i = 0; i < AMK_ATTN_SLOTS; ++i) acc[i] = 0.f;
    m = -CUDART_INF_F;
    l = 0.f;
    int j = 0;
    for (; j + AMK_ATTN_KEYS <= kv_len; j += AMK_ATTN_KEYS) {
        float s[AMK_ATTN_KEYS];
#pragma unroll
        for (int b = 0; b < AMK_ATTN_KEYS; ++b) {
            const T* kr = K + base + (int64_t)(j + b) * row;
            float dot = 0.f;
#pragma unroll
            for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
                const int d = lane + 32 * i;
                if (d < hd) dot = fmaf(qr[i], amk_vec<T>::one(kr, d), dot);
            }
            s[b] = dot;
        }
        float mn = m;
#pragma unroll
        for (int b = 0; b < AMK_ATTN_KEYS; ++b) {
            s[b] = amk_warp_sum(s[b]) * scale;
            mn = fmaxf(mn, s[b]);
        }
        const float corr = amk_attn_corr(m, mn);
        float p[AMK_ATTN_KEYS];
        float ps = 0.f;
#pragma unroll
        for (int b = 0; b < AMK_ATTN_KEYS; ++b) {
            p[b] = expf(s[b] - mn);
            ps += p[b];
        }
        l = fmaf(l, corr, ps);
#pragma unroll
        for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
            const int d = lane + 32 * i;
            if (d < hd) {
                float a = acc[i] * corr;
#pragma unroll
                for (int b = 0; b < AMK_ATTN_KEYS; ++b)
                    a = fmaf(p[b], amk_vec<T>::one(Vc + base + (int64_t)(j + b) * row, d), a);
                acc[i] = a;
            }
        }
        m = mn;
    }
    for (; j < kv_len; ++j) {
        const T* kr = K + base + (int64_t)j * row;
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
            const int d = lane + 32 * i;
            if (d < hd) dot = fmaf(qr[i], amk_vec<T>::one(kr, d), dot);
        }
        const float s = amk_warp_sum(dot) * scale;
        const float mn = fmaxf(m, s);
        const float corr = amk_attn_corr(m, mn);
        const float p = expf(s - mn);
        l = fmaf(l, corr, p);
#pragma unroll
        for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
            const int d = lane + 32 * i;
            if (d < hd) acc[i] = fmaf(p, amk_vec<T>::one(Vc + base + (int64_t)j * row, d), acc[i] * corr);
        }
        m = mn;
    }
}

template <typename T>
__device__ __forceinline__ void amk_attn_all(const amk_buffer_t& q, const amk_buffer_t& kc, const amk_buffer_t& vc,
                                             const amk_buffer_t& out, int64_t B, int nh, int nkv, int hd,
                                             int64_t seq_stride, int kv_start, int kv_len, float scale, bool partial,
                                             int h0, int nsh) {
    const int lane = amk_lane();
    const int rep = nh / nkv;
    const int64_t row = (int64_t)nkv * hd;
    for (int64_t item = amk_warp(); item < B * nsh; item += AMK_WARPS) {
        const int64_t b = item / nsh;
        const int h = h0 + (int)(item % nsh); /* the slice's query heads: whole GQA groups */
        const int64_t qbase = (b * nh + h) * hd;
        float qr[AMK_ATTN_SLOTS], acc[AMK_ATTN_SLOTS];
#pragma unroll
        for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
            const int d = lane + 32 * i;
            qr[i] = d < hd ? amk_ld(q, qbase + d) : 0.f;
        }
        const int64_t base = b * seq_stride + (int64_t)kv_start * row + (int64_t)(h / rep) * hd;
        float m, l;
        amk_attn_head<T>(qr, (const T*)kc.ptr, (const T*)vc.ptr, base, row, kv_len, hd, scale, acc, m, l);
        if (partial) {
            const int64_t pb = (b * nh + h) * (hd + 2);
#pragma unroll
            for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
                const int d = lane + 32 * i;
                if (d < hd) amk_st(out, pb + d, acc[i]);
            }
            if (lane == 0) {
                amk_st(out, pb + hd, m);
                amk_st(out, pb + hd + 1, l);
            }
        } else {
            const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
            for (int i = 0; i < AMK_ATTN_SLOTS; ++i) {
                const int d = lane + 32 * i;
                if (d < hd) amk_st(out, qbase + d, acc[i] * inv);
            }
        }
    }
}

/* ATTENTION_TILE. q [n_heads, hd] with caches [S, n_kv, hd]; or q [B, n_heads, hd] with caches
 * [B, S, n_kv, hd] (B independent decode attentions). With params N_tile > 0 the task is the
 * KV-head slice [n_off, n_off + N_tile) and writes only the query heads of those KV heads. */
__device__ __forceinline__ bool amk_op_attention_tile(const amk_program_t& prog, const amk_instruction_t& inst,
                                                      int32_t task) {
    const amk_buffer_t q = prog.buffers[inst.inputs[0]], kc = prog.buffers[inst.inputs[1]];
    const amk_buffer_t vc = prog.buffers[inst.inputs[2]], out = prog.buffers[inst.outputs[0]];
    const int hd = inst.params.head_dim, nh = inst.params.n_heads, nkv = inst.params.n_kv_heads;
    const int kv_start = inst.params.kv_start, kv_len = inst.params.kv_len;
    const bool partial = (inst.params.flags & AMK_FLAG_PARTIAL_WRITE) != 0;
    if (hd <= 0 || hd > AMK_ATTN_MAX_HEAD_DIM) return amk_trap(prog, AMK_TRAP_HEAD_DIM, task, inst.op, hd);
    const int64_t B = q.rank == 3 ? q.shape[0] : 1;
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || q.numel != B * nh * hd || kc.dtype != vc.dtype ||
        !amk_is_float(kc.dtype) || kc.numel != vc.numel)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, nh);
    int64_t S, seq_stride = 0;
    if (kc.rank == 4) {
        if (kc.shape[0] != B || kc.shape[2] != nkv || kc.shape[3] != hd)
            return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, kc.rank);
        S = kc.shape[1];
        seq_stride = S * nkv * hd;
    } else if (kc.rank == 3 && B == 1) {
        if (kc.shape[1] != nkv || kc.shape[2] != hd) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, kc.rank);
        S = kc.shape[0];
    } else {
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, kc.rank);
    }
    if (kv_start < 0 || kv_len < 0 || (int64_t)kv_start + kv_len > S)
        return amk_trap(prog, AMK_TRAP_KV_POS, task, inst.op, kv_start + kv_len);
    if (out.numel < B * nh * (partial ? hd + 2 : hd))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)out.numel);
    /* KV-head slice (params n_off, N_tile; N_tile 0 = every KV head): its query heads only. */
    const int kv0 = inst.params.N_tile > 0 ? inst.params.n_off : 0;
    const int kvn = inst.params.N_tile > 0 ? inst.params.N_tile : nkv;
    if (kv0 < 0 || kv0 + kvn > nkv) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, kv0);
    const int h0 = kv0 * (nh / nkv), nsh = kvn * (nh / nkv);
    const float scale = inst.params.scale;
    switch (kc.dtype) {
        case AMK_F16:
            amk_attn_all<__half>(q, kc, vc, out, B, nh, nkv, hd, seq_stride, kv_start, kv_len, scale, partial, h0, nsh);
            break;
        case AMK_BF16:
            amk_attn_all<__nv_bfloat16>(q, kc, vc, out, B, nh, nkv, hd, seq_stride, kv_start, kv_len, scale, partial, h0,
                                        nsh);
            break;
        default:
            amk_attn_all<float>(q, kc, vc, out, B, nh, nkv, hd, seq_stride, kv_start, kv_len, scale, partial, h0, nsh);
            break;
    }
    return true;
}

/* ATTENTION_COMBINE: m = max_p m_p; w_p = exp(m_p - m) if l_p > 0 else 0; l = sum l_p w_p;
 * out = sum acc_p w_p / max(l, 1e-20), per row of the partials: n_heads rows, or B x n_heads for
 * a batch. head_dim comes from params or the partials; params n_heads, when set, must divide
 * the rows. */
__device__ __forceinline__ bool amk_op_attention_combine(const amk_program_t& prog, const amk_instruction_t& inst,
                                                         int32_t task) {
    const amk_buffer_t out = prog.buffers[inst.outputs[0]];
    const amk_buffer_t p0 = prog.buffers[inst.inputs[0]];
    const int P = inst.n_inputs;
    const int hd = inst.params.head_dim > 0 ? inst.params.head_dim : (int)(amk_cols(p0) - 2);
    const int stride = hd + 2;
    const int64_t rows = hd > 0 ? p0.numel / stride : 0;
    const int nh = inst.params.n_heads;
    if (hd <= 0 || rows <= 0 || (nh > 0 && rows % nh != 0) || P < 1 || P > AMK_MAX_INPUTS ||
        out.numel < rows * hd)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, hd);
    for (int p = 0; p < P; ++p)
        if (prog.buffers[inst.inputs[p]].numel < rows * stride)
            return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, p);
    for (int64_t h = amk_warp(); h < rows; h += AMK_WARPS) {
        float w[AMK_MAX_INPUTS];
        float mg = -CUDART_INF_F;
        for (int p = 0; p < P; ++p) mg = fmaxf(mg, amk_ld(prog.buffers[inst.inputs[p]], (int64_t)h * stride + hd));
        float l = 0.f;
#pragma unroll
        for (int p = 0; p < AMK_MAX_INPUTS; ++p) {
            w[p] = 0.f;
            if (p < P) {
                const amk_buffer_t& pb = prog.buffers[inst.inputs[p]];
                const float lp = amk_ld(pb, (int64_t)h * stride + hd + 1);
                if (lp > 0.f) w[p] = expf(amk_ld(pb, (int64_t)h * stride + hd) - mg);
                l = fmaf(lp, w[p], l);
            }
        }
        const float inv = 1.f / fmaxf(l, 1e-20f);
        for (int d = amk_lane(); d < hd; d += 32) {
            float a = 0.f;
#pragma unroll
            for (int p = 0; p < AMK_MAX_INPUTS; ++p)
                if (p < P) a = fmaf(amk_ld(prog.buffers[inst.inputs[p]], (int64_t)h * stride + d), w[p], a);
            amk_st(out, (int64_t)h * hd + d, a * inv);
        }
    }
    return true;
}

#endif /* AMK_OPS_ATTENTION_CUH */
