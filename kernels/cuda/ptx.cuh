/* ==========================================================================================
 * The kernels' inline PTX: every asm statement of kernels/cuda/ is one named wrapper here, and
 * nowhere else (kernels.TestInlinePTXOnlyInPtxCuh checks it).
 *
 * On the device each wrapper is exactly the asm statement the kernels used to write inline, so
 * the generated code does not change (kernels/build's TestPTXMatchesRevision compares the PTX of
 * every variant across a change; docs/results/emu.md records the run for this file). A wrapper is
 * defined under the architecture guard of its instruction; its callers keep their own guards.
 *
 * With AMK_EMU (the CPU emulator, kernels/emu/, which compiles these sources with a host C++
 * compiler and force-includes kernels/emu/emu.h) the same names are host definitions that call
 * the emulator's runtime (namespace amk_emu, declared in emu.h):
 *   - loads, reductions and fences become C++ atomics and fences of the same order (acquire,
 *     release, acq_rel); a spin poll lets the other emulated threads run;
 *   - cp.async copies its 16 bytes only when cp.async.wait_group retires its group, and poisons
 *     the destination (0xFF bytes, NaN for every float type) until then;
 *   - cp.async.bulk completes the transaction bytes of its mbarrier when the emulated copy engine
 *     lands it, later, in an order the schedule seed shuffles, its destination poisoned until
 *     then; the mbarrier keeps its arrival count, transaction count and phase parity, and misuse
 *     (an arrival past the count, a negative transaction count, a copy to an uninitialised or
 *     foreign barrier) is reported, not ignored.
 * amk_trace_task is no instruction: it tells the emulator which task a block runs (its reports
 * name the task and the opcode); on the device it is empty.
 *
 * Adding inline PTX: write the wrapper here, under the instruction's architecture guard, with an
 * AMK_EMU definition beside it that models the instruction (or reports that it cannot), and run
 * the PTX comparison if the change should leave the device code alone.
 * ========================================================================================== */
#ifndef AMK_PTX_CUH
#define AMK_PTX_CUH

#include <stdint.h>

#if defined(AMK_EMU)

/* ---- host definitions: the CPU emulator (kernels/emu/emu.h declares namespace amk_emu) ------ */
inline uint32_t amk_ptx_dynamic_smem_size() { return amk_emu::dynamic_smem_bytes(); }
inline uint64_t amk_ptx_globaltimer() { return amk_emu::globaltimer_ns(); }
inline void amk_ptx_prefetch_l2(const void* p) { amk_emu::prefetch_l2(p); }
inline uint32_t amk_ptx_ld_acquire_gpu(const uint32_t* p) { return amk_emu::load_acquire(p); }
inline void amk_ptx_fence_acq_rel_gpu() { amk_emu::fence_acq_rel(); }
template <uint32_t V>
inline void amk_ptx_red_release_gpu_add(uint32_t* p) {
    amk_emu::reduce_add_release(p, V);
}
inline void amk_ptx_cp_async_16(void* smem, const void* gmem) { amk_emu::cp_async(smem, gmem, 16); }
inline void amk_ptx_cp_async_commit() { amk_emu::cp_async_commit(); }
template <int N>
inline void amk_ptx_cp_async_wait() {
    amk_emu::cp_async_wait(N);
}
/* A shared-memory address as the bulk-copy wrappers take it: on the host, the pointer itself. */
typedef void* amk_smem_addr_t;
inline amk_smem_addr_t amk_ptx_smem_addr(const void* p) { return const_cast<void*>(p); }
inline void amk_ptx_fence_proxy_async_shared() { amk_emu::fence_proxy_async(); }
template <uint32_t Count>
inline void amk_ptx_mbarrier_init(amk_smem_addr_t bar) {
    amk_emu::mbarrier_init(static_cast<uint64_t*>(bar), Count);
}
inline void amk_ptx_fence_mbarrier_init() { amk_emu::fence_acq_rel(); }
inline void amk_ptx_mbarrier_arrive_expect_tx(amk_smem_addr_t bar, uint32_t bytes) {
    amk_emu::mbarrier_arrive_expect_tx(static_cast<uint64_t*>(bar), bytes);
}
inline void amk_ptx_cp_async_bulk_g2s(amk_smem_addr_t smem, const void* gmem, uint32_t bytes, amk_smem_addr_t bar) {
    amk_emu::cp_async_bulk(smem, gmem, bytes, static_cast<uint64_t*>(bar));
}
inline uint32_t amk_ptx_mbarrier_try_wait_parity(amk_smem_addr_t bar, uint32_t parity) {
    return amk_emu::mbarrier_try_wait_parity(static_cast<uint64_t*>(bar), parity);
}
inline void amk_trace_task(int32_t task, int32_t op) { amk_emu::trace_task(task, op); }

#else /* the device */

/* Bytes of dynamic shared memory this launch provides. */
__device__ __forceinline__ uint32_t amk_ptx_dynamic_smem_size() {
    uint32_t n;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

/* The global nanosecond timer (the watchdogs' clock). */
__device__ __forceinline__ uint64_t amk_ptx_globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Non-binding prefetch of the 128-byte line at p into L2. */
__device__ __forceinline__ void amk_ptx_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
/* A load the compiler can neither hoist nor cache, with acquire semantics at GPU scope. */
__device__ __forceinline__ uint32_t amk_ptx_ld_acquire_gpu(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
/* Release/acquire fence at GPU scope. */
__device__ __forceinline__ void amk_ptx_fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
/* *p += V as a release reduction at GPU scope (no value returned); V is an immediate operand. */
template <uint32_t V>
__device__ __forceinline__ void amk_ptx_red_release_gpu_add(uint32_t* p) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "n"(V) : "memory");
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/* cp.async (sm_80+): one 16-byte global -> shared copy that bypasses L1, the commit of the
 * thread's copies so far as one group, and the wait until at most N of its groups are pending.
 * The PTX <cuda_pipeline.h> emits for 16-byte copies, written with memory clobbers (the header's
 * commit and wait have none, so the compiler could move shared loads across them) and without
 * the header, which newer toolkits need not ship. */
__device__ __forceinline__ void amk_ptx_cp_async_16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(smem)), "l"(gmem)
                 : "memory");
}
__device__ __forceinline__ void amk_ptx_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void amk_ptx_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* A shared-memory address as the bulk-copy wrappers take it: the 32-bit shared-window address.
 * The ring converts each barrier and slot address once and hands the same value to every
 * statement that uses it, as the kernels did before the wrappers (so the PTX is unchanged). */
typedef uint32_t amk_smem_addr_t;
__device__ __forceinline__ amk_smem_addr_t amk_ptx_smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* Orders the thread's generic-proxy accesses to shared memory before later async-proxy ones. */
__device__ __forceinline__ void amk_ptx_fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
/* mbarrier (sm_90 + PTX 8.0): initialise with an arrival count (an immediate); make the
 * initialisation visible to the async proxy; arrive once announcing `bytes` transaction bytes; a
 * bulk global -> shared copy that completes its bytes on the barrier; test whether the phase of
 * parity `parity` has completed (1) or not yet (0). */
template <uint32_t Count>
__device__ __forceinline__ void amk_ptx_mbarrier_init(amk_smem_addr_t bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "n"(Count) : "memory");
}
__device__ __forceinline__ void amk_ptx_fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void amk_ptx_mbarrier_arrive_expect_tx(amk_smem_addr_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void amk_ptx_cp_async_bulk_g2s(amk_smem_addr_t smem, const void* gmem, uint32_t bytes,
                                                          amk_smem_addr_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem),
                 "l"(gmem), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ uint32_t amk_ptx_mbarrier_try_wait_parity(amk_smem_addr_t bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done;
}
#endif

__device__ __forceinline__ void amk_trace_task(int32_t, int32_t) {}

#endif /* AMK_EMU */
#endif /* AMK_PTX_CUH */
