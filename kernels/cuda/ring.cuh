/* ==========================================================================================
 * The streaming weight ring (AMK_RING_STAGES > 0; off by default): a deep per-SM shared-memory
 * ring through which the megakernel streams the weights of every fp GEMV / FUSED tile of its
 * queue, ACROSS task boundaries and dependency waits.
 *
 * Weights never depend on activations, so a block may load the weights of its next projection
 * tasks before it polls their counters. Each warp owns a private ring of AMK_RING_STAGES slots of
 * AMK_RING_TILE_BYTES (a slot is one contiguous piece of one weight row) and walks ONE chunk
 * stream: for every ring-eligible task of its queue, in queue order, for every x row m, for every
 * row range of the tile (one; two for a paired q|k|v tile, AMK_FLAG_PAIRED_TILE), for every
 * weight row t = warp, warp + AMK_WARPS, ... of the range, the row's whole chunks. The issuer runs
 * AMK_RING_STAGES - 1 chunks ahead of the consumer and never drains at a task end: when a tile's
 * last chunk is consumed, the first chunks of the next eligible task (possibly several tasks
 * ahead, past attention and glue tasks) are already in flight, and stay in flight during that
 * task's dependency wait. Per SM: AMK_WARPS x (AMK_RING_STAGES - 1) x AMK_RING_TILE_BYTES bytes
 * in flight (8 x 11 x 2 KiB = 176 KiB at 256 threads, 12 stages, 2 KiB tiles).
 *
 * Issuer and consumer agree because both derive a task's chunks from amk_ring_plan_of, a pure
 * function of the instruction, the buffer table and the launch's shared memory. The ring lives
 * at the top of the dynamic shared memory (kernels.PlanSmem provisions it above the x cache);
 * amk_ops_smem_bytes() is what the ops may use below it.
 *
 * Copy engine: on sm_90 built with nvcc >= 12 (and AMK_RING_BULK, default 1), lane 0 of the warp
 * issues each chunk as one cp.async.bulk (TMA) completing on the slot's mbarrier; elsewhere every
 * lane copies its 16-byte vectors of the chunk with cp.async (sm_80+), one commit group per
 * chunk. Quantised tiles (int8 / packed int4, ir.TileQuant) ride it too: a chunk is a piece of a
 * stored row, dequantised in registers by amk_gemv_ring_row_q. Tiles the ring cannot take
 * (misaligned, a row shorter than one chunk, an x cache that does not fit, quantised with zero
 * points or with groups that cut a 16-byte vector) keep the per-tile paths of ops_gemv.cuh.
 * ========================================================================================== */
#ifndef AMK_RING_CUH
#define AMK_RING_CUH

#include "common.cuh"
#include "sync.cuh"

#if AMK_RING_STAGES > 0 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define AMK_RING_ON 1
#else
#define AMK_RING_ON 0
#endif
#if AMK_RING_ON && __CUDA_ARCH__ >= 900 && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12 && AMK_RING_BULK
#define AMK_RING_TMA 1 /* cp.async.bulk + mbarrier (PTX 8.0, sm_90) */
#else
#define AMK_RING_TMA 0 /* per-lane cp.async */
#endif

#if (AMK_RING_TILE_BYTES % 512) != 0 || AMK_RING_TILE_BYTES <= 0
#error "AMK_RING_TILE_BYTES must be a positive multiple of 512"
#endif
#if AMK_RING_STAGES > 32
#error "AMK_RING_STAGES must be at most 32 (one thread per warp slot initialises the slot mbarriers)"
#endif
#define AMK_RING_VPL (AMK_RING_TILE_BYTES / 512) /* 16-byte vectors per lane per chunk */

/* Bytes of the ring of one block (0 when it is off). Mirrors kernels.RingBytes in Go. */
__host__ __device__ constexpr uint32_t amk_ring_bytes() {
    return AMK_RING_STAGES > 0 ? (uint32_t)AMK_WARPS * AMK_RING_STAGES * AMK_RING_TILE_BYTES : 0u;
}

/* The chunks one task streams through the ring (the same for every warp but `total`). */
struct amk_ring_plan {
    const char* w;    /* weight buffer base                                              */
    int64_t ldb;      /* bytes between consecutive weight rows                          */
    int32_t n_off;    /* first weight row of the tile                                   */
    int32_t rows;     /* weight rows of this warp per x row, both ranges                */
    int32_t split;    /* of them in the first range (t = warp + r * AMK_WARPS, r < split) */
    int32_t second;   /* weight rows from the first range's start to the second's       */
    int32_t nchunks;  /* whole chunks per row                                            */
    int32_t total;    /* chunks of this warp: M x rows x nchunks (0: none)              */
};

/* Per-warp stream state, in shared memory between the tasks of a queue. */
struct amk_ring_warp {
    amk_ring_plan plan; /* plan of the task being issued                           */
    int32_t slot;       /* its queue slot (>= the queue length: stream exhausted)   */
    int32_t j;          /* next chunk of it to issue                                */
    uint32_t issued;    /* chunks issued so far (the whole stream)                  */
    uint32_t consumed;  /* chunks consumed so far                                   */
    int32_t broken;     /* a TMA wait timed out: issue nothing more, wait for nothing */
    int32_t task;       /* the task the warp runs now (consumes for): the watchdog's diagnosis;
                         * it fills the struct's padding, so the static smem does not grow */
};

#if AMK_RING_ON
__shared__ amk_ring_warp amk_ring_state[AMK_WARPS];
__shared__ int32_t amk_ring_active; /* 1 in the megakernel when the launch provides the ring */
__shared__ const int32_t* amk_ring_queue;
__shared__ int32_t amk_ring_len;
#if AMK_RING_TMA
__shared__ __align__(8) uint64_t amk_ring_bar[AMK_WARPS][AMK_RING_STAGES];
#endif
#endif

/* ---- the ring's plan: pure functions of the launch and the instruction, __host__ __device__ so
 * that kernels/gpu's host test runs them on the marshalled tables of real programs. ---------- */

/* The ring is active when the launch's dynamic shared memory holds it (and 16 bytes below it). */
__host__ __device__ __forceinline__ bool amk_ring_fits(uint32_t dyn_smem) {
    return amk_ring_bytes() > 0u && dyn_smem >= amk_ring_bytes() + 16u;
}

/* Offset of the ring in the dynamic shared memory: everything below it is the ops' share. */
__host__ __device__ __forceinline__ uint32_t amk_ring_offset(uint32_t dyn_smem) {
    return (dyn_smem - amk_ring_bytes()) & ~15u;
}

/* The ring plan of instruction `inst` for warp `warp`; false when the task does not stream
 * through the ring. Every condition the consumer needs is checked here (and bounds, so that no
 * copy ever reads outside the weight buffer, even for a task that will trap). `ops_smem` is
 * amk_ops_smem_bytes() of the launch.
 *
 * Row ranges: a contiguous tile streams weight rows [n_off, n_off + N_tile); a paired tile
 * (AMK_FLAG_PAIRED_TILE, ir.TileRanges) w = N_tile / 2 rows [n_off, n_off + w), then w rows
 * [n_off + head_dim/2, n_off + head_dim/2 + w), the order amk_op_fused streams them in (per x
 * row: range 0, then range 1, each through amk_gemv_fp_row). The RoPE/append tile the fused
 * epilogue collects is N_tile floats either way. */
__host__ __device__ __forceinline__ bool amk_ring_plan_for(const amk_buffer_t* bufs, int32_t n_bufs,
                                                           const amk_instruction_t& inst, uint32_t ops_smem, int warp,
                                                           amk_ring_plan* plan) {
    plan->total = 0;
    const int32_t op = inst.op;
    int wi = 1, collect = 0, paired = 0;
    const int32_t qt = inst.params.qdtype;
    const bool quant = qt == AMK_I8 || qt == AMK_I4; /* a quantised tile (ir.TileQuant) */
    if (op == AMK_OP_GEMV_TILE) {
        if (quant && inst.n_inputs != 3) return false; /* zero points (or no scales): off the ring */
    } else if (op == AMK_OP_FUSED) {
        const int32_t pat = (inst.params.flags >> AMK_FUSED_PATTERN_SHIFT) & 0xFFFF;
        const amk_fused_shape f = amk_fused_pattern_shape(pat);
        if (f.staging < 0 || inst.n_inputs != f.n_in + (quant ? 1 : 0)) return false;
        wi = (f.staging == 0 || pat == AMK_FUSED_GEMV_ADD) ? 1 : 2;
        collect = f.epilogue >= 2;
        paired = (inst.params.flags & AMK_FLAG_PAIRED_TILE) != 0;
    } else {
        return false;
    }
    if (inst.n_inputs <= wi || inst.inputs[0] < 0 || inst.inputs[0] >= n_bufs || inst.inputs[wi] < 0 ||
        inst.inputs[wi] >= n_bufs)
        return false;
    const amk_buffer_t& W = bufs[inst.inputs[wi]];
    const int64_t xnumel = bufs[inst.inputs[0]].numel;
    const int K = inst.params.K, N_tile = inst.params.N_tile, n_off = inst.params.n_off, hd = inst.params.head_dim;
    if ((quant ? W.dtype != qt : !amk_is_float(W.dtype)) || K <= 0 || N_tile <= 0 || n_off < 0 || xnumel <= 0 ||
        xnumel % K != 0)
        return false;
    /* a paired tile as amk_op_fused accepts it (a malformed one traps there, off the ring) */
    if (paired && (!collect || hd <= 0 || (hd & 1) || (N_tile & 1) || n_off % hd + N_tile / 2 > hd / 2)) return false;
    const int w = paired ? N_tile / 2 : N_tile, second = paired ? hd / 2 : 0; /* rows per range, range 1 - range 0 */
    const int64_t ldw = W.rank >= 2 ? W.stride[0] : K;
    /* bytes of one row's data and from one row to the next: esz per element, or the stored width
     * of a dense quantised row, whose 16-byte vectors must each lie in one scale group */
    int64_t rowb, ldb;
    if (quant) {
        const int per_vec = qt == AMK_I4 ? 32 : 16, group = inst.params.group > 0 ? inst.params.group : K;
        if (ldw != K || K % per_vec != 0 || group % per_vec != 0) return false;
        rowb = ldb = qt == AMK_I4 ? K / 2 : K;
    } else {
        const int esz = W.dtype == AMK_F32 ? 4 : 2;
        rowb = (int64_t)K * esz;
        ldb = ldw * esz;
    }
    if (ldw < K || W.numel < ((int64_t)n_off + second + w) * ldw || ((uintptr_t)W.ptr & 15) || (ldb & 15))
        return false;
    const uint32_t xb = amk_gemv_x_bytes(K);
    const uint32_t tb = collect ? amk_gemv_x_bytes(N_tile) : 0u;
    if (xb + tb > ops_smem) return false;
    const int nchunks = (int)(rowb / AMK_RING_TILE_BYTES);
    if (nchunks < 1) return false;
    plan->w = (const char*)W.ptr;
    plan->ldb = ldb;
    plan->n_off = n_off;
    plan->split = warp < w ? (w - warp + AMK_WARPS - 1) / AMK_WARPS : 0;
    plan->rows = paired ? 2 * plan->split : plan->split;
    plan->second = second;
    plan->nchunks = nchunks;
    plan->total = (int32_t)(xnumel / K) * plan->rows * nchunks;
    return true;
}

/* Global address of chunk j of warp `warp`'s plan (x row m is j / (rows * nchunks): the same
 * bytes again). The warp's i-th row of an x row is t = warp + i * AMK_WARPS of the first range
 * for i < split, else t = warp + (i - split) * AMK_WARPS of the second, `second` rows further. */
__host__ __device__ __forceinline__ const char* amk_ring_chunk_src_for(const amk_ring_plan& p, int32_t j, int warp) {
    const int32_t r = j % (p.rows * p.nchunks);
    const int32_t i = r / p.nchunks;
    const int32_t t = i < p.split ? warp + i * AMK_WARPS : p.second + warp + (i - p.split) * AMK_WARPS;
    return p.w + (int64_t)(p.n_off + t) * p.ldb + (int64_t)(r % p.nchunks) * AMK_RING_TILE_BYTES;
}

/* Dynamic shared memory the ops may use (everything below the ring). */
__device__ __forceinline__ uint32_t amk_ops_smem_bytes() {
#if AMK_RING_ON
    if (amk_ring_active) return amk_ring_offset(amk_dyn_smem_bytes());
#endif
    return amk_dyn_smem_bytes();
}

#if AMK_RING_ON
__device__ __forceinline__ unsigned char* amk_ring_base(int warp) {
    return amk_dyn_smem + amk_ring_offset(amk_dyn_smem_bytes()) + (size_t)warp * AMK_RING_STAGES * AMK_RING_TILE_BYTES;
}

/* amk_ring_plan_for the calling warp. */
__device__ __forceinline__ bool amk_ring_plan_of(const amk_buffer_t* bufs, int32_t n_bufs, const amk_instruction_t& inst,
                                                 uint32_t ops_smem, amk_ring_plan* plan) {
    return amk_ring_plan_for(bufs, n_bufs, inst, ops_smem, amk_warp(), plan);
}

/* Lane 0 moves the warp's issue cursor (shared) to the next queue slot whose task has ring chunks
 * for this warp, or past the queue. Out of line: it runs once per task, and inlined its
 * instruction decoding would weigh on the registers of the streaming loop. */
__device__ __noinline__ void amk_ring_advance(const amk_instruction_t* insts, int32_t n_insts,
                                              const amk_buffer_t* bufs, int32_t n_bufs, uint32_t ops_smem) {
    amk_ring_warp* s = &amk_ring_state[amk_warp()];
    int32_t slot = s->slot;
    amk_ring_plan plan;
    plan.total = 0;
    while (slot < amk_ring_len && plan.total == 0) {
        ++slot;
        if (slot < amk_ring_len) {
            const int32_t task = amk_ring_queue[slot];
            if (task >= 0 && task < n_insts) amk_ring_plan_of(bufs, n_bufs, insts[task], ops_smem, &plan);
        }
    }
    s->plan = plan;
    s->slot = slot;
    s->j = 0;
}

__device__ __forceinline__ const char* amk_ring_chunk_src(const amk_ring_plan& p, int32_t j) {
    return amk_ring_chunk_src_for(p, j, amk_warp());
}

/* Issue the next chunk of the warp's stream into its slot (issued % STAGES), first moving the
 * cursor over tasks without ring chunks; past the end of the queue nothing is copied. The
 * cp.async engine commits one group per call either way, so that the distance the consumer waits
 * for stays constant. The whole warp calls it; the cursor stays in shared memory (lane 0 writes
 * it between two __syncwarp), so the streaming loop holds no extra registers for it. */
__device__ __forceinline__ void amk_ring_issue(const amk_program_t& prog) {
    amk_ring_warp* sh = &amk_ring_state[amk_warp()];
    if (sh->j >= sh->plan.total && sh->slot < amk_ring_len) {
        __syncwarp();
        if (amk_lane() == 0)
            amk_ring_advance(prog.instructions, prog.n_instructions, prog.buffers, prog.n_buffers, amk_ops_smem_bytes());
        __syncwarp();
    }
    if (sh->slot < amk_ring_len && !sh->broken) {
        const int warp = amk_warp();
        const int slot = (int)(sh->issued % AMK_RING_STAGES);
        unsigned char* dst = amk_ring_base(warp) + (size_t)slot * AMK_RING_TILE_BYTES;
        const char* src = amk_ring_chunk_src(sh->plan, sh->j);
#if AMK_RING_TMA
        /* The slot held chunk issued - STAGES, which every lane read through the generic proxy;
         * the copy engine writes it through the async proxy. Each reading lane orders its reads
         * before the copy with a proxy fence, then the warp barrier hands them to lane 0 (the
         * pattern the PTX memory model asks for when two proxies touch the same bytes). */
        amk_ptx_fence_proxy_async_shared();
        __syncwarp();
        if (amk_lane() == 0) {
            const amk_smem_addr_t bar = amk_ptx_smem_addr(&amk_ring_bar[warp][slot]);
            const amk_smem_addr_t d = amk_ptx_smem_addr(dst);
            amk_ptx_mbarrier_arrive_expect_tx(bar, AMK_RING_TILE_BYTES);
            amk_ptx_cp_async_bulk_g2s(d, src, AMK_RING_TILE_BYTES, bar);
        }
#else
        const int lane = amk_lane();
#pragma unroll
        for (int v = 0; v < AMK_RING_VPL; ++v) amk_ptx_cp_async_16(dst + (v * 32 + lane) * 16, src + (v * 32 + lane) * 16);
#endif
        __syncwarp();
        if (amk_lane() == 0) {
            ++sh->j;
            ++sh->issued;
        }
        __syncwarp();
    }
#if !AMK_RING_TMA
    amk_ptx_cp_async_commit();
#endif
}

/* Wait until chunk number `c` of the warp's stream has landed; returns its slot.
 *
 * With prog (the consumer), the TMA wait is bounded by the watchdog budget of a counter wait
 * (sync.cuh, checked every 16 polls): past it, it raises AMK_ABORT_WATCHDOG (the task the warp
 * runs and its opcode, counter -1 = the streaming ring, observed = the chunk, threshold = the
 * chunks issued, detail = the slot; kernels.Diag.Describe) and marks the warp's
 * stream broken, so an issuer and a consumer that disagree on a task's chunks end the launch with
 * a diagnosis instead of hanging the GPU. A broken stream issues nothing more (re-arming a
 * barrier whose phase never completed would be undefined) and its later waits return at once.
 * An abort raised elsewhere does not cut a wait short: an issued chunk always lands, soon, and
 * leaving before it would let the next issue re-arm its barrier too early. Every wait is bounded,
 * the ones of amk_ring_finish at the end of the kernel included: no device wait can hang the GPU. */
__device__ __forceinline__ const unsigned char* amk_ring_wait(uint32_t c, const amk_program_t* prog) {
    const int slot = (int)(c % AMK_RING_STAGES);
#if AMK_RING_TMA
    const amk_smem_addr_t bar = amk_ptx_smem_addr(&amk_ring_bar[amk_warp()][slot]);
    const uint32_t parity = (c / AMK_RING_STAGES) & 1u;
    uint32_t done = amk_ring_state[amk_warp()].broken;
    uint64_t start = 0;
    for (uint32_t polls = 1; !done; ++polls) {
        done = amk_ptx_mbarrier_try_wait_parity(bar, parity);
        if (done || (polls & 0xFu) != 0u) continue;
        const uint64_t now = amk_now_ns();
        const uint64_t budget = prog->watchdog_ns ? prog->watchdog_ns : (uint64_t)(AMK_WATCHDOG_NS);
        if (polls == 0x10u) {
            start = now;
        } else if (now - start > budget) {
            const int32_t task = amk_ring_state[amk_warp()].task;
            const int32_t op = task >= 0 && task < prog->n_instructions ? prog->instructions[task].op : -1;
            amk_raise(*prog, AMK_ABORT_WATCHDOG, task, op, -1, c, amk_ring_state[amk_warp()].issued, slot, now - start);
            amk_ring_state[amk_warp()].broken = 1;
            break;
        }
    }
#else
    (void)prog;
    /* Commit groups complete in order; STAGES - 1 groups were committed after this chunk's. */
    amk_ptx_cp_async_wait<AMK_RING_STAGES - 1>();
#endif
    return amk_ring_base(amk_warp()) + (size_t)slot * AMK_RING_TILE_BYTES;
}

/* Megakernel entry: the ring is active when the launch provides its bytes; every warp issues the
 * first STAGES - 1 chunks of its stream before the first task's wait. Ends with a barrier. */
__device__ __forceinline__ void amk_ring_start(const amk_program_t& prog, const int32_t* queue, int32_t len) {
    if (threadIdx.x == 0) {
        amk_ring_active = amk_ring_fits(amk_dyn_smem_bytes());
        amk_ring_queue = queue;
        amk_ring_len = len;
    }
#if AMK_RING_TMA
    if (threadIdx.x < AMK_WARPS * AMK_RING_STAGES) {
        amk_ptx_mbarrier_init<1>(amk_ptx_smem_addr(&amk_ring_bar[0][0] + threadIdx.x));
    }
    amk_ptx_fence_mbarrier_init();
    amk_ptx_fence_proxy_async_shared();
#endif
    __syncthreads();
    if (!amk_ring_active) return;
    if (amk_lane() == 0) {
        amk_ring_warp& w = amk_ring_state[amk_warp()];
        w.plan.total = 0;
        w.slot = -1;
        w.j = 0;
        w.issued = 0;
        w.consumed = 0;
        w.broken = 0;
        w.task = -1;
    }
    __syncwarp();
    for (int k = 0; k < AMK_RING_STAGES - 1; ++k) amk_ring_issue(prog);
    __syncthreads();
}

/* Megakernel loop, before each task (and before the barrier that loads its instruction): the
 * task the warp's ring waits are for, which a timed-out wait reports. Each warp's lane 0 writes
 * its own warp's record, so no warp still in the previous task sees it change. */
__device__ __forceinline__ void amk_ring_begin(int32_t task) {
    if (amk_lane() == 0) amk_ring_state[amk_warp()].task = task;
}

/* Entry kernels run tiles without a queue: no ring (before their first barrier). */
__device__ __forceinline__ void amk_ring_off() {
    if (threadIdx.x == 0) amk_ring_active = 0;
}

/* Megakernel exit (also after a trap or an abort): no copy may still be writing shared memory.
 * Each wait is bounded like a consumer's: a chunk that never lands raises the watchdog (naming
 * the chunk and the slot) and breaks the stream, and the later waits return at once. */
__device__ __forceinline__ void amk_ring_finish(const amk_program_t& prog) {
    if (!amk_ring_active) return;
#if AMK_RING_TMA
    const amk_ring_warp& w = amk_ring_state[amk_warp()];
    for (uint32_t c = w.consumed; c < w.issued; ++c) amk_ring_wait(c, &prog);
#else
    (void)prog;
    amk_ptx_cp_async_wait<0>();
#endif
}

/* The warp's next chunk of its stream, issuing one more ahead: its slot, landed. The consumer reads
 * it and then calls amk_ring_consumed. */
__device__ __forceinline__ const unsigned char* amk_ring_next(const amk_program_t& prog) {
    amk_ring_issue(prog);
    return amk_ring_wait(amk_ring_state[amk_warp()].consumed, &prog);
}

/* The chunk amk_ring_next returned has been read by every lane: its slot may be refilled. */
__device__ __forceinline__ void amk_ring_consumed() {
    __syncwarp();
    if (amk_lane() == 0) ++amk_ring_state[amk_warp()].consumed;
    __syncwarp();
}

/* Consume the chunks of one row range of one x row of the current task: the warp's rows t of
 * [n_off, n_off + N_tile) (each: its chunks from the ring, the leftover vectors and the scalar
 * tail from global memory, then the store), issuing one chunk ahead for every chunk it consumes.
 * The caller has checked the task's plan (amk_ring_plan_of), whose rows and chunks this walks in
 * the issuer's order: a paired tile calls it for its first range, then its second (amk_op_fused). */
template <typename T>
__device__ __forceinline__ void amk_gemv_ring_row(const amk_program_t& prog, const float* __restrict__ xs,
                                                  const T* __restrict__ W, int64_t ldw, int K, int n_off, int N_tile,
                                                  const amk_buffer_t& out, int64_t obase, const amk_buffer_t* bias,
                                                  const amk_buffer_t* res) {
    constexpr int V = amk_vec<T>::N;
    constexpr int CV = AMK_RING_TILE_BYTES / 16; /* vectors per chunk */
    const int lane = amk_lane();
    const int nvec = K / V;
    const int nchunks = (int)(((int64_t)K * sizeof(T)) / AMK_RING_TILE_BYTES);
    for (int t = amk_warp(); t < N_tile; t += AMK_WARPS) {
        const int64_t n = n_off + t;
        float acc = 0.f;
        for (int ci = 0; ci < nchunks; ++ci) {
            const unsigned char* st = amk_ring_next(prog);
#pragma unroll
            for (int v = 0; v < AMK_RING_VPL; ++v) {
                float f[V];
                amk_vec<T>::cvt(*reinterpret_cast<const uint4*>(st + (v * 32 + lane) * 16), f);
                acc = amk_dot_smem<V>(xs + ((int64_t)ci * CV + v * 32 + lane) * V, f, acc);
            }
            amk_ring_consumed();
        }
        for (int kv = nchunks * CV + lane; kv < nvec; kv += 32) {
            float f[V];
            amk_vec<T>::cvt(__ldcs(reinterpret_cast<const uint4*>(W + n * ldw) + kv), f);
            acc = amk_dot_smem<V>(xs + (int64_t)kv * V, f, acc);
        }
        for (int k = nvec * V + lane; k < K; k += 32) acc = fmaf(xs[k], amk_vec<T>::one(W + n * ldw, k), acc);
        amk_gemv_store(out, obase + n, acc, bias, n, res);
    }
}

/* amk_gemv_ring_row for a quantised tile (amk_qtile, ops_gemv.cuh): the ring's chunks are pieces
 * of the stored rows (plan ldb = row_bytes), each lane's 16-byte vectors dequantised in registers
 * (amk_qdot16, one scale per vector: the plan admits only groups that are whole vectors), the
 * leftover vectors from global memory. No zero points (the plan refuses them). */
__device__ __forceinline__ void amk_gemv_ring_row_q(const amk_program_t& prog, const float* __restrict__ xs,
                                                    const amk_qtile& q, int K, int n_off, int N_tile,
                                                    const amk_buffer_t& out, int64_t obase, const amk_buffer_t* res) {
    constexpr int CV = AMK_RING_TILE_BYTES / 16; /* vectors per chunk */
    const int lane = amk_lane();
    const int per_vec = q.i4 ? 32 : 16;
    const int nvec = K / per_vec;
    const int nchunks = (int)(q.row_bytes / AMK_RING_TILE_BYTES);
    for (int t = amk_warp(); t < N_tile; t += AMK_WARPS) {
        const int64_t n = n_off + t;
        const int64_t sb = n * q.ng;
        float acc = 0.f;
        for (int ci = 0; ci < nchunks; ++ci) {
            const unsigned char* st = amk_ring_next(prog);
#pragma unroll
            for (int v = 0; v < AMK_RING_VPL; ++v) {
                const int k0 = (ci * CV + v * 32 + lane) * per_vec;
                const uint4 r = *reinterpret_cast<const uint4*>(st + (v * 32 + lane) * 16);
                acc = fmaf(amk_qdot16(r, xs + k0, q.i4, q.zdef), amk_qscale(*q.S, sb + amk_qgroup(q, k0)), acc);
            }
            amk_ring_consumed();
        }
        for (int kv = nchunks * CV + lane; kv < nvec; kv += 32) {
            const int k0 = kv * per_vec;
            const uint4 r = __ldcs(reinterpret_cast<const uint4*>(q.w + n * q.row_bytes) + kv);
            acc = fmaf(amk_qdot16(r, xs + k0, q.i4, q.zdef), amk_qscale(*q.S, sb + amk_qgroup(q, k0)), acc);
        }
        amk_gemv_store(out, obase + n, acc, nullptr, n, res);
    }
}
#endif /* AMK_RING_ON */

#endif /* AMK_RING_CUH */
