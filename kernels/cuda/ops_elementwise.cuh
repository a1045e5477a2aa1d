/* ==========================================================================================
 * Elementwise and data-movement instructions: COPY, ADD, MUL, GELU, SILU_MUL, ALLREDUCE_SHARD,
 * EMBED, KV_APPEND, DEQUANT.
 *
 * COPY, EMBED and KV_APPEND move rows with amk_move and ADD adds 16-byte vectors (vec.cuh): the
 * dtype resolved once, all loads of a thread before its stores.
 *
 * Every instruction is `bool amk_op_<name>(prog, inst, task)`: pure compute over its declared
 * buffers, the whole block cooperating; it returns false only after raising a trap. Math is fp32,
 * stored with round-to-nearest-even into the output dtype (seed 000 §7).
 * ========================================================================================== */
#ifndef AMK_OPS_ELEMENTWISE_CUH
#define AMK_OPS_ELEMENTWISE_CUH

#include "common.cuh"
#include "vec.cuh"

#define AMK_IN(k)  (prog.buffers[inst.inputs[(k)]])
#define AMK_OUT(k) (prog.buffers[inst.outputs[(k)]])

/* COPY: out = in (cast). */
__device__ __forceinline__ bool amk_op_copy(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t in = AMK_IN(0), out = AMK_OUT(0);
    const int64_t n = out.numel;
    if (in.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)in.numel);
    amk_move(out, 0, in, 0, n);
    return true;
}

/* ADD: out = a + b. */
__device__ __forceinline__ bool amk_op_add(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t a = AMK_IN(0), b = AMK_IN(1), out = AMK_OUT(0);
    const int64_t n = out.numel;
    if (a.numel < n || b.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)n);
    int64_t done = 0; /* dtype resolved once: one float dtype on all three sides goes by vectors */
    if (a.dtype == out.dtype && b.dtype == out.dtype) {
        switch (out.dtype) {
            case AMK_F32:  done = amk_add_typed<float>((const float*)a.ptr, (const float*)b.ptr, (float*)out.ptr, n); break;
            case AMK_F16:  done = amk_add_typed<__half>((const __half*)a.ptr, (const __half*)b.ptr, (__half*)out.ptr, n); break;
            case AMK_BF16:
                done = amk_add_typed<__nv_bfloat16>((const __nv_bfloat16*)a.ptr, (const __nv_bfloat16*)b.ptr,
                                                    (__nv_bfloat16*)out.ptr, n);
                break;
            default: break;
        }
    }
    for (int64_t i = done + threadIdx.x; i < n; i += AMK_THREADS) amk_st(out, i, amk_ld(a, i) + amk_ld(b, i));
    return true;
}

/* MUL: out = a * b, or a * params.scale with one input (the marshaller writes scale 1.0 when
 * the param is absent, the reference default). */
__device__ __forceinline__ bool amk_op_mul(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t a = AMK_IN(0), out = AMK_OUT(0);
    const int64_t n = out.numel;
    if (a.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)n);
    if (inst.n_inputs >= 2) {
        const amk_buffer_t b = AMK_IN(1);
        if (b.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)n);
        for (int64_t i = threadIdx.x; i < n; i += AMK_THREADS) amk_st(out, i, amk_ld(a, i) * amk_ld(b, i));
    } else {
        const float s = inst.params.scale;
        for (int64_t i = threadIdx.x; i < n; i += AMK_THREADS) amk_st(out, i, amk_ld(a, i) * s);
    }
    return true;
}

/* GELU (exact, erf form). */
__device__ __forceinline__ bool amk_op_gelu(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t a = AMK_IN(0), out = AMK_OUT(0);
    const int64_t n = out.numel;
    if (a.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)n);
    for (int64_t i = threadIdx.x; i < n; i += AMK_THREADS) {
        const float x = amk_ld(a, i);
        amk_st(out, i, 0.5f * x * (1.f + erff(x * 0.70710678118654752f)));
    }
    return true;
}

/* SILU_MUL (SwiGLU): out = gate * sigmoid(gate) * up. */
__device__ __forceinline__ bool amk_op_silu_mul(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t g = AMK_IN(0), u = AMK_IN(1), out = AMK_OUT(0);
    const int64_t n = out.numel;
    if (g.numel < n || u.numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)n);
    for (int64_t i = threadIdx.x; i < n; i += AMK_THREADS) {
        const float x = amk_ld(g, i);
        amk_st(out, i, x / (1.f + expf(-x)) * amk_ld(u, i));
    }
    return true;
}

/* ALLREDUCE_SHARD on one device: out = sum of the shards. */
__device__ __forceinline__ bool amk_op_allreduce_shard(const amk_program_t& prog, const amk_instruction_t& inst,
                                                       int32_t task) {
    const amk_buffer_t out = AMK_OUT(0);
    const int64_t n = out.numel;
    for (int k = 0; k < inst.n_inputs; ++k)
        if (AMK_IN(k).numel < n) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, k);
    for (int64_t i = threadIdx.x; i < n; i += AMK_THREADS) {
        float s = 0.f;
        for (int k = 0; k < inst.n_inputs; ++k) s += amk_ld(AMK_IN(k), i);
        amk_st(out, i, s);
    }
    return true;
}

/* EMBED: out = table[ids] rows, viewed as out's shape (also the flat -> head "reshape" with
 * ids = [0..B-1]). An id outside [0, V) traps (the reference would raise), never clamps. */
__device__ __forceinline__ bool amk_op_embed(const amk_program_t& prog, const amk_instruction_t& inst, int32_t task) {
    const amk_buffer_t ids = AMK_IN(0), table = AMK_IN(1), out = AMK_OUT(0);
    const int64_t V = table.rank > 0 ? table.shape[0] : 1;
    const int64_t row = V > 0 ? table.numel / V : 0;
    const int64_t S = ids.numel;
    if (V <= 0 || S * row != out.numel) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)row);
    for (int64_t r = 0; r < S; ++r) {
        const int64_t id = amk_ld_int(ids, r);
        if (id < 0 || id >= V) return amk_trap(prog, AMK_TRAP_TOKEN, task, inst.op, (int32_t)id);
        const int64_t src = id * row, dst = r * row;
        amk_move(out, dst, table, src, row);
    }
    return true;
}

/* KV_APPEND: write this step's k or v into the cache at params.pos (in place).
 *   rank-3 cache [S, n_kv, hd]: cache[pos : pos+rows] = new viewed as (rows, n_kv, hd);
 *   rank-4 cache [B, S, n_kv, hd]: cache[:, pos] = new viewed as (B, n_kv, hd).
 * pos is bounds-checked against the cache (R28): out of range traps AMK_TRAP_KV_POS. */
__device__ __forceinline__ bool amk_op_kv_append(const amk_program_t& prog, const amk_instruction_t& inst,
                                                 int32_t task) {
    const amk_buffer_t nw = AMK_IN(0), cache = AMK_OUT(0);
    const int64_t pos = inst.params.pos;
    if (cache.rank == 4) {
        const int64_t B = cache.shape[0], S = cache.shape[1], kv = cache.shape[2] * cache.shape[3];
        if (pos < 0 || pos >= S) return amk_trap(prog, AMK_TRAP_KV_POS, task, inst.op, (int32_t)pos);
        if (nw.numel != B * kv) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)nw.numel);
        for (int64_t b = 0; b < B; ++b) {
            const int64_t dst = (b * S + pos) * kv, src = b * kv;
            amk_move(cache, dst, nw, src, kv);
        }
        return true;
    }
    if (cache.rank < 1) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, cache.rank);
    const int64_t S = cache.shape[0];
    const int64_t row = S > 0 ? cache.numel / S : 0;
    if (row <= 0 || nw.numel % row != 0) return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)nw.numel);
    const int64_t rows = nw.numel / row;
    if (pos < 0 || pos + rows > S) return amk_trap(prog, AMK_TRAP_KV_POS, task, inst.op, (int32_t)pos);
    const int64_t dst = pos * row;
    amk_move(cache, dst, nw, 0, nw.numel);
    return true;
}

/* DEQUANT: out = (q - zeros) * scales, grouped along q's last dim (q holds unpacked integers). */
__device__ __forceinline__ bool amk_op_dequant(const amk_program_t& prog, const amk_instruction_t& inst,
                                               int32_t task) {
    const amk_buffer_t q = AMK_IN(0), s = AMK_IN(1), out = AMK_OUT(0);
    const bool has_z = inst.n_inputs > 2;
    const amk_buffer_t z = AMK_IN(has_z ? 2 : 1); /* select the index, not the record (no local copy) */
    const int64_t K = amk_cols(q);
    const int64_t group = inst.params.group > 0 ? inst.params.group : K;
    if (q.dtype == AMK_I4 || K <= 0 || K % group != 0 || out.numel != q.numel)
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)group);
    const int64_t ng = K / group;
    if (s.numel < (q.numel / K) * ng || (has_z && z.numel < s.numel))
        return amk_trap(prog, AMK_TRAP_OPERAND, task, inst.op, (int32_t)s.numel);
    for (int64_t i = threadIdx.x; i < q.numel; i += AMK_THREADS) {
        const int64_t r = i / K, g = (i % K) / group, si = r * ng + g;
        const float zero = has_z ? amk_ld(z, si) : 0.f;
        amk_st(out, i, (amk_ld(q, i) - zero) * amk_ld(s, si));
    }
    return true;
}

#endif /* AMK_OPS_ELEMENTWISE_CUH */
