/* ==========================================================================================
 * amk's CPU emulator of the megakernel: the shim the kernel sources are compiled with.
 *
 * The emulator build (kernels/build: BuildEmulator) compiles kernels/cuda/ unchanged with a host
 * C++ compiler, with this header force-included (-include emu.h), the fake CUDA headers of
 * include/ on the include path and AMK_EMU defined (kernels/cuda/ptx.cuh then takes its host
 * definitions). -D__CUDA_ARCH__ selects the architecture whose code paths run (700: the register
 * paths; 800: cp.async; 900 with -D__CUDACC_VER_MAJOR__=12: the bulk copies and mbarriers).
 *
 * The model (runtime.cc implements it):
 *   - one OS thread per thread block, all started at once (a cooperative launch: every block is
 *     resident, so the blocks' counter waits run for real);
 *   - one fiber per CUDA thread; a fiber runs until it reaches a barrier, a warp collective, a
 *     spin poll or (with a schedule seed) a preemption point at a memory operation, and the
 *     block's scheduler then resumes another (round robin, or in a seeded random order);
 *   - __shared__ variables are thread_local (one OS thread = one block); the dynamic shared
 *     memory is the runtime's, poisoned (0xFF bytes) at the launch;
 *   - barriers and warp collectives check that every participant reaches the same call site with
 *     the same mask; a divergent barrier, a collective with a missing or exited lane, a block
 *     whose threads all wait, a fault, or a launch past its deadline is reported (block, thread,
 *     task, opcode, counter, call sites) and ends the run with an error, never silently.
 * ========================================================================================== */
#ifndef AMK_EMU_H
#define AMK_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <limits>
#include <type_traits>

/* ---- CUDA keywords --------------------------------------------------------------------------- */
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ thread_local
#define __constant__
#define __align__(n) __attribute__((aligned(n)))
#define __CUDACC_EMU__ 1

/* ---- vector types ------------------------------------------------------------------------------ */
struct __attribute__((aligned(16))) uint4 { unsigned int x, y, z, w; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned int x, y; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline int4 make_int4(int a, int b, int c, int d) { return int4{a, b, c, d}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }
static inline float2 make_float2(float a, float b) { return float2{a, b}; }

/* ---- the runtime (runtime.cc) ------------------------------------------------------------------ */
namespace amk_emu {

/* The running CUDA thread (set by the block's scheduler before it resumes a fiber). */
extern thread_local uint3 thread_idx;
extern thread_local uint3 block_idx;
extern uint3 block_dim, grid_dim;

/* Block barrier (__syncthreads and its reductions); site = the call's file and line. */
int barrier(int kind, int pred, const char* file, int line);
enum { kBarSync = 0, kBarCount = 1, kBarAnd = 2, kBarOr = 3 };

/* Warp collectives over the lanes of mask: shuffles (mode 0 idx, 1 xor, 2 down, 3 up),
 * votes (0 ballot, 1 any, 2 all), __syncwarp. */
uint64_t warp_shuffle(unsigned mask, uint64_t bits, int mode, int arg, int width, const char* file, int line);
unsigned warp_vote(unsigned mask, int pred, int mode, const char* file, int line);
void warp_sync(unsigned mask, const char* file, int line);
unsigned active_mask();

/* cooperative_groups::this_grid().sync(). */
void grid_sync(const char* file, int line);

/* Memory operations other emulated threads may be waiting for: they wake idle blocks, and with a
 * schedule seed they are preemption points. */
void memory_event();
void sleep_ns(unsigned ns); /* __nanosleep: a spin poll; lets the block's other threads run */
void fence_acq_rel();

/* What kernels/cuda/ptx.cuh's emulator definitions call. */
uint32_t dynamic_smem_bytes();
uint64_t globaltimer_ns();
void prefetch_l2(const void* p);
uint32_t load_acquire(const uint32_t* p);
void reduce_add_release(uint32_t* p, uint32_t v);
void cp_async(void* smem, const void* gmem, uint32_t bytes);
void cp_async_commit();
void cp_async_wait(int pending);
void fence_proxy_async();
void mbarrier_init(uint64_t* bar, uint32_t count);
void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes);
void cp_async_bulk(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar);
uint32_t mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity);
void trace_task(int32_t task, int32_t op);

/* A kernel bug the emulator can name: reported with the running block, thread and task. */
[[noreturn]] void kernel_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

template <typename T>
static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a warp shuffle moves at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    return bits;
}
template <typename T>
static inline T from_bits(uint64_t bits) {
    T v;
    memcpy(&v, &bits, sizeof(T));
    return v;
}
}  // namespace amk_emu

#define threadIdx (amk_emu::thread_idx)
#define blockIdx (amk_emu::block_idx)
#define blockDim (amk_emu::block_dim)
#define gridDim (amk_emu::grid_dim)
#define warpSize 32

/* ---- barriers and warp collectives: the call site (a default argument the compiler fills in at
 * the caller) is part of the check that every participant reaches the same one --------------- */
#define AMK_EMU_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
static inline void __syncthreads(AMK_EMU_SITE) { amk_emu::barrier(amk_emu::kBarSync, 0, file, line); }
static inline int __syncthreads_count(int p, AMK_EMU_SITE) { return amk_emu::barrier(amk_emu::kBarCount, p != 0, file, line); }
static inline int __syncthreads_and(int p, AMK_EMU_SITE) { return amk_emu::barrier(amk_emu::kBarAnd, p != 0, file, line); }
static inline int __syncthreads_or(int p, AMK_EMU_SITE) { return amk_emu::barrier(amk_emu::kBarOr, p != 0, file, line); }
static inline void __syncwarp(unsigned mask = 0xffffffffu, AMK_EMU_SITE) { amk_emu::warp_sync(mask, file, line); }
template <typename T>
static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32, AMK_EMU_SITE) {
    return amk_emu::from_bits<T>(amk_emu::warp_shuffle(mask, amk_emu::to_bits(v), 0, src_lane, width, file, line));
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32, AMK_EMU_SITE) {
    return amk_emu::from_bits<T>(amk_emu::warp_shuffle(mask, amk_emu::to_bits(v), 1, lane_mask, width, file, line));
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32, AMK_EMU_SITE) {
    return amk_emu::from_bits<T>(amk_emu::warp_shuffle(mask, amk_emu::to_bits(v), 2, (int)delta, width, file, line));
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32, AMK_EMU_SITE) {
    return amk_emu::from_bits<T>(amk_emu::warp_shuffle(mask, amk_emu::to_bits(v), 3, (int)delta, width, file, line));
}
static inline unsigned __ballot_sync(unsigned mask, int p, AMK_EMU_SITE) { return amk_emu::warp_vote(mask, p != 0, 0, file, line); }
static inline int __any_sync(unsigned mask, int p, AMK_EMU_SITE) { return (int)amk_emu::warp_vote(mask, p != 0, 1, file, line); }
static inline int __all_sync(unsigned mask, int p, AMK_EMU_SITE) { return (int)amk_emu::warp_vote(mask, p != 0, 2, file, line); }
static inline unsigned __activemask() { return amk_emu::active_mask(); }


static inline void __nanosleep(unsigned ns) { amk_emu::sleep_ns(ns); }

/* ---- memory: atomics (sequentially consistent, as strong as the GPU's relaxed device-scope
 * atomics and stronger), fences, cache-hinted loads and stores ---------------------------------- */
#define AMK_EMU_ATOMIC(T)                                                                                    \
    static inline T atomicAdd(T* p, T v) {                                                                   \
        T old = __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);                                                  \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicSub(T* p, T v) {                                                                   \
        T old = __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);                                                  \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicExch(T* p, T v) {                                                                  \
        T old = __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);                                                 \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicCAS(T* p, T cmp, T v) {                                                            \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
        amk_emu::memory_event();                                                                             \
        return cmp;                                                                                          \
    }                                                                                                        \
    static inline T atomicAnd(T* p, T v) {                                                                   \
        T old = __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);                                                  \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicOr(T* p, T v) {                                                                    \
        T old = __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);                                                   \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicXor(T* p, T v) {                                                                   \
        T old = __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);                                                  \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicMax(T* p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                        \
        while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
            ;                                                                                                \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }                                                                                                        \
    static inline T atomicMin(T* p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                                        \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) \
            ;                                                                                                \
        amk_emu::memory_event();                                                                             \
        return old;                                                                                          \
    }
AMK_EMU_ATOMIC(int)
AMK_EMU_ATOMIC(unsigned int)
AMK_EMU_ATOMIC(unsigned long long)
#undef AMK_EMU_ATOMIC
static inline float atomicAdd(float* p, float v) {
    uint32_t old = __atomic_load_n(reinterpret_cast<uint32_t*>(p), __ATOMIC_SEQ_CST), next;
    do {
        float f;
        memcpy(&f, &old, 4);
        f += v;
        memcpy(&next, &f, 4);
    } while (!__atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(p), &old, next, true, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    amk_emu::memory_event();
    float f;
    memcpy(&f, &old, 4);
    return f;
}
static inline void __threadfence() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    amk_emu::memory_event();
}
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __threadfence(); }
template <typename T> static inline T __ldg(const T* p) { return *p; }
template <typename T> static inline T __ldcg(const T* p) { return *p; }
template <typename T> static inline T __ldca(const T* p) { return *p; }
template <typename T> static inline T __ldcs(const T* p) { return *p; }
template <typename T> static inline T __ldlu(const T* p) { return *p; }
template <typename T> static inline T __ldcv(const T* p) { return *(const volatile T*)p; }
template <typename T> static inline void __stcg(T* p, T v) { *p = v; }
template <typename T> static inline void __stcs(T* p, T v) { *p = v; }
template <typename T> static inline void __stwb(T* p, T v) { *p = v; }

/* ---- arithmetic (the build passes -ffp-contract=off: a*b+c rounds twice unless fmaf) --------- */
template <typename A, typename B>
static inline typename std::common_type<A, B>::type min(A a, B b) {
    return b < a ? b : a;
}
template <typename A, typename B>
static inline typename std::common_type<A, B>::type max(A a, B b) {
    return a < b ? b : a;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __int_as_float(int u) { return __uint_as_float((unsigned)u); }
static inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
/* Each operation rounds on its own (a volatile result keeps the compiler from fusing). */
static inline float __fmul_rn(float a, float b) {
    volatile float r = a * b;
    return r;
}
static inline float __fadd_rn(float a, float b) {
    volatile float r = a + b;
    return r;
}
static inline float __fsub_rn(float a, float b) {
    volatile float r = a - b;
    return r;
}
static inline float __fdiv_rn(float a, float b) {
    volatile float r = a / b;
    return r;
}
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }

#endif /* AMK_EMU_H */
