/* ==========================================================================================
 * amk sync primitives (seed 000 §8): the only way work crosses blocks.
 *
 *   signal(c): every thread's output stores are issued (__syncthreads), thread 0 increments
 *              the counter by exactly one with a release reduction (red.release.gpu on sm_70+;
 *              else a device fence then atomicAdd), then the block agrees the instruction is
 *              retired.
 *   wait(inst): thread 0 acquire-polls each (counter, threshold) with a load the compiler can
 *              neither hoist nor cache (ld.acquire.gpu on sm_70+, else atomicAdd(c, 0)), with a
 *              short busy window and then exponential __nanosleep backoff capped at AMK_BACKOFF_MAX_NS. Every 64 polls it
 *              checks the abort flag and the watchdog:
 *
 *   DEVICE-SIDE SPIN WATCHDOG (R23): a wait that lasts longer than its budget
 *              (amk_program_t.watchdog_ns, or AMK_WATCHDOG_NS when that is 0; measured on the
 *              %globaltimer nanosecond clock) raises AMK_ABORT_WATCHDOG, a code distinct from
 *              every trap, and records the task, the counter, the value observed and the
 *              threshold in amk_diag_t. Every other waiting block sees the flag at its next poll
 *              and leaves its queue, so a deadlocked or mis-marshalled program ends the launch
 *              in bounded time instead of hanging the GPU.
 *
 *   The result (go / abort) is broadcast through shared memory with one __syncthreads, so the
 *   whole block takes the same path.
 * ========================================================================================== */
#ifndef AMK_SYNC_CUH
#define AMK_SYNC_CUH

#include "common.cuh"

#define AMK_SPIN_BUSY_ITERS 64u   /* polls before the first sleep (the satisfied fast path)   */
#define AMK_BACKOFF_MIN_NS  32u   /* first sleep                                              */
#ifndef AMK_BACKOFF_MAX_NS
/* Sleep cap. A waiter on the critical path sees its counter at most this late: 256 ns is a
 * fraction of one hop, where the former 4 us cap could exceed a whole layer's streaming. */
#define AMK_BACKOFF_MAX_NS 256u
#endif
#define AMK_POLL_MASK       0x3Fu /* abort flag + watchdog clock every 64 polls               */

__device__ __forceinline__ uint64_t amk_now_ns() { return amk_ptx_globaltimer(); }

/* Non-hoistable acquire load of a counter. */
__device__ __forceinline__ uint32_t amk_acquire_load(amk_counter_t* c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    return amk_ptx_ld_acquire_gpu(c);
#else
    return atomicAdd(c, 0u);
#endif
}

__device__ __forceinline__ void amk_backoff(uint32_t& spins, uint32_t& sleep_ns) {
    ++spins;
    if (spins > AMK_SPIN_BUSY_ITERS) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
        __nanosleep(sleep_ns);
#endif
        sleep_ns = sleep_ns < AMK_BACKOFF_MAX_NS ? (sleep_ns << 1) : AMK_BACKOFF_MAX_NS;
    }
}

/* Device-scope release/acquire fence. On sm_70+ this is fence.acq_rel.gpu: with the strong
 * relaxed atomicAdd after it, the PTX memory model's release pattern (the abi.h sanctioned form
 * B); cheaper than __threadfence(), which compiles to the sequentially consistent fence.sc.gpu. */
__device__ __forceinline__ void amk_fence_acq_rel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    amk_ptx_fence_acq_rel_gpu();
#else
    __threadfence();
#endif
}

/* Retire an instruction: ++ its counter with release semantics (whole block calls). On sm_70+
 * one release reduction (red.release.gpu) orders the block's stores, made visible to thread 0
 * by the barrier (cumulativity), before the increment: no separate fence, no returned value. */
__device__ __forceinline__ void amk_signal(const amk_program_t& prog, int32_t counter) {
    __syncthreads();
    if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
        amk_ptx_red_release_gpu_add<1u>(&prog.counters[counter]);
#else
        amk_fence_acq_rel();
        atomicAdd(&prog.counters[counter], 1u);
#endif
    }
    __syncthreads();
}

/* Block until every wait of `inst` holds. Returns false (for the whole block) if the launch was
 * aborted, by another block or by this wait's watchdog. `task` is the instruction index. */
__device__ __forceinline__ bool amk_wait_all(const amk_program_t& prog, const amk_instruction_t& inst,
                                             int32_t task) {
    __shared__ int s_go;
    if (inst.n_waits <= 0) return true;
    if (threadIdx.x == 0) {
        const uint64_t budget = prog.watchdog_ns ? prog.watchdog_ns : (uint64_t)(AMK_WATCHDOG_NS);
        int go = 1;
        uint32_t spins = 0, sleep_ns = AMK_BACKOFF_MIN_NS;
        uint64_t start = 0;
        bool timing = false;
        /* Counters only grow, so a satisfied wait stays satisfied: check them in order. */
        for (int w = 0; w < inst.n_waits;) {
            amk_counter_t* c = &prog.counters[inst.wait_counter[w]];
            const uint32_t need = (uint32_t)inst.wait_threshold[w];
            const uint32_t seen = amk_acquire_load(c);
            if (seen >= need) {
                ++w;
                continue;
            }
            if ((spins & AMK_POLL_MASK) == 0u) {
                if (amk_aborted(prog)) {
                    go = 0;
                    break;
                }
                const uint64_t now = amk_now_ns();
                if (!timing) {
                    start = now;
                    timing = true;
                } else if (now - start > budget) {
                    amk_raise(prog, AMK_ABORT_WATCHDOG, task, inst.op, inst.wait_counter[w], seen, need, 0,
                              now - start);
                    go = 0;
                    break;
                }
            }
            amk_backoff(spins, sleep_ns);
        }
        if (go) amk_fence_acq_rel(); /* cumulativity: the block's reads after the barrier follow the acquire */
        s_go = go;
    }
    __syncthreads();
    /* No second barrier: the VM runs dispatch + signal (two barriers) before the next wait
     * rewrites s_go. */
    return s_go != 0;
}

#endif /* AMK_SYNC_CUH */
