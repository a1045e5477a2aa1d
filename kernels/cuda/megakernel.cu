/* ==========================================================================================
 * amk persistent megakernel VM and the per-op Loop-1 entry kernels: one module, one build.
 *
 * amk_megakernel (cooperative launch, gridDim.x == prog.num_queues <= proven co-residency, one
 * block per SM, blockDim.x == AMK_THREADS):
 *   1. no entry barrier: the cooperative launch already guarantees every block is resident and
 *      the host zeroes the counters before it, so a grid.sync() would only cost a grid-wide
 *      round trip (AMK_ENTRY_GRID_SYNC=1 restores it for a comparison);
 *   2. block q walks queue q (task-list order, the order the validator proves) and for each
 *      instruction:
 *        a. weight prefetch: with prog.prefetch_depth = d > 0 the block keeps the weight rows of
 *           the next d GEMV/GEMM/FUSED instructions of its queue (this one included), at most
 *           AMK_PREFETCH_WINDOW_BYTES of them ahead, streaming into L2. Weights never wait on a
 *           counter, so issuing them before the wait overlaps HBM with the dependency spin and
 *           with the previous instruction's compute;
 *        b. copy the 224-byte instruction into shared memory and bounds-check its ids;
 *        c. wait (acquire poll, backoff, abort poll, device watchdog; sync.cuh);
 *        d. dispatch (ops.cuh; pure compute, the whole block);
 *        e. signal (release reduction: counter += 1);
 *      a trap, an abort seen while waiting, or the watchdog ends the block's queue.
 *   3. no exit barrier: the end of the kernel is the barrier.
 *
 * amk_entry_<op>(prog, first, count): block b runs instructions first + b, first + b + gridDim.x,
 * ... (all of that opcode) without counters, through the same amk_op_<op> the VM dispatches:
 * what Loop 1 verifies and times in isolation (R29).
 * ========================================================================================== */
#include "common.cuh"
#include "sync.cuh"
#include "ops.cuh"

#ifndef AMK_ENTRY_GRID_SYNC
#define AMK_ENTRY_GRID_SYNC 0
#endif
#if AMK_ENTRY_GRID_SYNC
/* The grid barrier's header only where the barrier is compiled in: the default build needs
 * none of it, and a device toolkit's header cannot break a build that does not use it. */
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#endif
#ifndef AMK_PREFETCH_WINDOW_BYTES
/* Weight bytes one block keeps prefetched ahead into L2: 132 SMs x 256 KiB = 33 MiB, inside the
 * 50 MiB L2 of an H100/H200. */
#define AMK_PREFETCH_WINDOW_BYTES 262144
#endif

/* Copy one instruction into shared memory; ends with a barrier. */
__device__ __forceinline__ void amk_load_inst(amk_instruction_t& dst, const amk_instruction_t* src) {
    const int32_t* s = reinterpret_cast<const int32_t*>(src);
    int32_t* d = reinterpret_cast<int32_t*>(&dst);
    for (int i = threadIdx.x; i < (int)(sizeof(amk_instruction_t) / 4); i += AMK_THREADS) d[i] = __ldg(s + i);
    __syncthreads();
}

/* Every id of an instruction is inside the tables (evaluated by every thread: uniform). */
__device__ __forceinline__ bool amk_inst_ok(const amk_program_t& prog, const amk_instruction_t& inst) {
    if (inst.op < 0 || inst.op >= AMK_OP__COUNT) return false;
    if (inst.n_inputs < 0 || inst.n_inputs > AMK_MAX_INPUTS || inst.n_outputs < 0 ||
        inst.n_outputs > AMK_MAX_OUTPUTS || inst.n_waits < 0 || inst.n_waits > AMK_MAX_WAITS)
        return false;
    bool ok = inst.out_counter >= 0 && inst.out_counter < prog.n_counters;
    for (int k = 0; k < inst.n_inputs; ++k) ok = ok && inst.inputs[k] >= 0 && inst.inputs[k] < prog.n_buffers;
    for (int k = 0; k < inst.n_outputs; ++k) ok = ok && inst.outputs[k] >= 0 && inst.outputs[k] < prog.n_buffers;
    for (int k = 0; k < inst.n_waits; ++k)
        ok = ok && inst.wait_counter[k] >= 0 && inst.wait_counter[k] < prog.n_counters;
    return ok;
}

/* The weight rows a projection instruction will stream, as byte ranges of its weight buffer
 * (W is input 1, or input 2 after a fused pattern's norm weight / up): [begin, end), and for a
 * paired q|k|v tile also [begin + second, end + second), second > 0 (amk_tile_weight_bytes);
 * false if there is none. Inlined into amk_prefetch_weights: as a call of its own, its pointer
 * outputs cost a 160-byte stack frame (measured). */
__device__ __forceinline__ bool amk_weight_range(const amk_program_t& prog, int32_t task, const char** base,
                                                 int64_t* begin, int64_t* end, int64_t* second) {
    if (task < 0 || task >= prog.n_instructions) return false;
    const amk_instruction_t* inst = prog.instructions + task;
    const int32_t op = __ldg(&inst->op);
    if (op != AMK_OP_GEMV_TILE && op != AMK_OP_GEMM_TILE && op != AMK_OP_FUSED) return false;
    int wi = 1;
    bool paired = false;
    if (op == AMK_OP_FUSED) {
        const int32_t flags = __ldg(&inst->params.flags);
        const amk_fused_shape f = amk_fused_pattern_shape((flags >> AMK_FUSED_PATTERN_SHIFT) & 0xFFFF);
        if (f.staging < 0) return false;
        wi = f.staging == 0 ? 1 : 2;
        paired = (flags & AMK_FLAG_PAIRED_TILE) != 0;
    }
    if (__ldg(&inst->n_inputs) <= wi) return false;
    const int32_t wid = __ldg(&inst->inputs[wi]);
    if (wid < 0 || wid >= prog.n_buffers) return false;
    const amk_buffer_t& W = prog.buffers[wid];
    const int32_t dtype = W.dtype;
    const int64_t bits = dtype == AMK_F32 ? 32 : (dtype == AMK_F16 || dtype == AMK_BF16) ? 16
                       : dtype == AMK_I8 ? 8 : dtype == AMK_I4 ? 4 : 0;
    if (bits == 0 || W.rank < 1 || W.shape[0] <= 0) return false;
    *base = (const char*)W.ptr;
    return amk_tile_weight_bytes(paired, __ldg(&inst->params.n_off), __ldg(&inst->params.N_tile),
                                 paired ? __ldg(&inst->params.head_dim) : 0, (W.numel / W.shape[0]) * bits,
                                 (W.numel * bits + 7) / 8, begin, end, second);
}

/* Non-binding L2 prefetch (issue: true) of the weight rows a projection instruction will stream,
 * both ranges of a paired tile; returns the bytes it covers (0 for an instruction without
 * weights), also with issue false (what an earlier call covered for it). Out of line: it runs
 * once or twice per task, and inlined its range arithmetic weighed 4 registers on the largest
 * variant's streaming loops. */
__device__ __noinline__ int64_t amk_prefetch_weights(const amk_program_t& prog, int32_t task, bool issue) {
    const char* p;
    int64_t begin, end, second;
    if (!amk_weight_range(prog, task, &p, &begin, &end, &second)) return 0;
    if (issue) {
        /* two ranges: the upper half of the block prefetches the second */
        const int nt = second > 0 ? AMK_THREADS / 2 : AMK_THREADS, tid = (int)threadIdx.x % nt;
        if ((int)threadIdx.x >= nt) p += second;
        for (int64_t off = begin + (int64_t)tid * 128; off < end; off += (int64_t)nt * 128)
            amk_ptx_prefetch_l2(p + off);
    }
    return (end - begin) * (second > 0 ? 2 : 1);
}

extern "C" __global__ void __launch_bounds__(AMK_THREADS, 1) amk_megakernel(const amk_program_t* __restrict__ pp) {
    /* The record (and below the queue, its length, the prefetch depth) is read where it is used
     * (L1 hits), not copied into registers at entry: a copy stays live across the whole
     * persistent loop, on top of the largest op, and the highest GEMV knobs spilled with it. */
    const amk_program_t& prog = *pp;
    __shared__ amk_instruction_t s_inst;
    /* Launch-shape errors are uniform across blocks: every block traps and returns before its
     * queue (and before the optional grid barrier), so nothing waits on a block that is gone. */
    if (blockDim.x != AMK_THREADS) {
        amk_trap(prog, AMK_TRAP_LAUNCH, -1, -1, (int32_t)blockDim.x);
        return;
    }
    if ((int32_t)gridDim.x != prog.num_queues) {
        amk_trap(prog, AMK_TRAP_LAUNCH, -1, -1, (int32_t)gridDim.x);
        return;
    }
#if AMK_ENTRY_GRID_SYNC
    cg::this_grid().sync();
#endif

    auto len = [&] { return prog.queue_len[blockIdx.x]; };
    auto slot = [&](int32_t s) { return prog.queue_flat[prog.queue_off[blockIdx.x] + s]; };
    const int32_t& depth = prog.prefetch_depth;
    int32_t prefetched = 0; /* queue slots [0, prefetched) have had their weights prefetched */
    int64_t ahead = 0;      /* weight bytes prefetched for slots [i, prefetched)               */
#if AMK_RING_ON
    /* the first tiles' weights go before the first wait */
    amk_ring_start(prog, prog.queue_flat + prog.queue_off[blockIdx.x], len());
#endif
    for (int32_t i = 0; i < len(); ++i) {
        const int32_t task = slot(i);
        if (task < 0 || task >= prog.n_instructions) {
            amk_trap(prog, AMK_TRAP_INDEX, task, -1, task);
            break;
        }
        /* The look-ahead is d instructions AND at most AMK_PREFETCH_WINDOW_BYTES of weights (the
         * current instruction's always goes): a window in bytes keeps the SMs' prefetches inside
         * the L2 whatever the tile sizes. */
        for (; depth > 0 && prefetched < len() && prefetched < i + depth &&
               (prefetched == i || ahead < (int64_t)AMK_PREFETCH_WINDOW_BYTES);
             ++prefetched)
            ahead += amk_prefetch_weights(prog, slot(prefetched), true);
        if (i < prefetched) ahead -= amk_prefetch_weights(prog, task, false);
#if AMK_RING_ON
        amk_ring_begin(task);
#endif
        amk_load_inst(s_inst, prog.instructions + task);
        if (!amk_inst_ok(prog, s_inst)) {
            amk_trap(prog, AMK_TRAP_INDEX, task, s_inst.op, -1);
            break;
        }
        amk_trace_task(task, s_inst.op); /* the emulator's reports name it (ptx.cuh; nothing on a GPU) */
        if (!amk_wait_all(prog, s_inst, task)) break;
        if (!amk_dispatch(prog, s_inst, task)) break;
        amk_signal(prog, s_inst.out_counter);
    }
#if AMK_RING_ON
    amk_ring_finish(prog);
#endif
}

#if AMK_RING_ON
#define AMK_ENTRY_RING_OFF() amk_ring_off()
#else
#define AMK_ENTRY_RING_OFF() ((void)0)
#endif

/* ---- Loop-1 entry kernels ----------------------------------------------------------------------- */
#define AMK_ENTRY(name, OPCODE)                                                                            \
    extern "C" __global__ void __launch_bounds__(AMK_THREADS, 1)                                          \
        amk_entry_##name(const amk_program_t* __restrict__ pp, long long first, long long count) {        \
        const amk_program_t prog = *pp;                                                                    \
        __shared__ amk_instruction_t s_inst;                                                               \
        if (blockDim.x != AMK_THREADS) {                                                                   \
            amk_trap(prog, AMK_TRAP_LAUNCH, -1, OPCODE, (int32_t)blockDim.x);                              \
            return;                                                                                        \
        }                                                                                                  \
        AMK_ENTRY_RING_OFF();                                                                              \
        for (long long k = blockIdx.x; k < count; k += gridDim.x) {                                        \
            const long long t = first + k;                                                                 \
            if (t < 0 || t >= prog.n_instructions) {                                                       \
                amk_trap(prog, AMK_TRAP_INDEX, -1, OPCODE, (int32_t)t);                                    \
                return;                                                                                    \
            }                                                                                              \
            amk_load_inst(s_inst, prog.instructions + t);                                                  \
            if (s_inst.op != (OPCODE) || !amk_inst_ok(prog, s_inst)) {                                     \
                amk_trap(prog, AMK_TRAP_OPERAND, (int32_t)t, s_inst.op, OPCODE);                           \
                return;                                                                                    \
            }                                                                                              \
            if (!amk_op_##name(prog, s_inst, (int32_t)t)) return;                                          \
            __syncthreads();                                                                               \
        }                                                                                                  \
    }

AMK_ENTRY(copy, AMK_OP_COPY)
AMK_ENTRY(embed, AMK_OP_EMBED)
AMK_ENTRY(rmsnorm, AMK_OP_RMSNORM)
AMK_ENTRY(layernorm, AMK_OP_LAYERNORM)
AMK_ENTRY(gemv_tile, AMK_OP_GEMV_TILE)
AMK_ENTRY(gemm_tile, AMK_OP_GEMM_TILE)
AMK_ENTRY(attention_tile, AMK_OP_ATTENTION_TILE)
AMK_ENTRY(rope, AMK_OP_ROPE)
AMK_ENTRY(silu_mul, AMK_OP_SILU_MUL)
AMK_ENTRY(gelu, AMK_OP_GELU)
AMK_ENTRY(add, AMK_OP_ADD)
AMK_ENTRY(mul, AMK_OP_MUL)
AMK_ENTRY(dequant, AMK_OP_DEQUANT)
AMK_ENTRY(softmax, AMK_OP_SOFTMAX)
AMK_ENTRY(allreduce_shard, AMK_OP_ALLREDUCE_SHARD)
AMK_ENTRY(kv_append, AMK_OP_KV_APPEND)
AMK_ENTRY(sample_argmax, AMK_OP_SAMPLE_ARGMAX)
AMK_ENTRY(attention_combine, AMK_OP_ATTENTION_COMBINE)
AMK_ENTRY(fused, AMK_OP_FUSED)
