/* The CPU emulator's runtime under test (kernels/launch: TestEmulatorRuntime): this translation
 * unit takes the place of kernel.cc and launches one scenario per run instead of the megakernel.
 * The program pointer names a record in the image: the scenario number at +0, a 16-byte aligned
 * source buffer at +64 (256 bytes the test fills with 0..255) and one 32-bit result per thread at
 * +512 (0: every check passed; otherwise the bits of the checks that failed). */
#include <cooperative_groups.h>
#include <stdint.h>

#include "ptx.cuh"

extern __shared__ __align__(16) unsigned char amk_dyn_smem[];

namespace {
struct Record {
    int32_t scenario;
    uint32_t counter;
    int32_t flag;
    int32_t pad[13];
    unsigned char src[256];
    unsigned char pad2[192];
    uint32_t result[1];
};

__shared__ __align__(8) uint64_t bar;

/* Every collective and copy the emulator models, each checked by the thread itself. */
void correct_use(Record* r) {
    const unsigned tid = threadIdx.x, lane = tid % 32;
    uint32_t bad = 0;
    if (__shfl_sync(0xffffffffu, (int)lane * 10, (int)((lane + 1) % 32)) != (int)((lane + 1) % 32) * 10) bad |= 1u << 0;
    if (__shfl_xor_sync(0xffffffffu, (int)lane, 3, 8) != (int)(lane ^ 3)) bad |= 1u << 1;
    const int down = (lane % 16) + 4 < 16 ? (int)lane + 4 : (int)lane;
    if (__shfl_down_sync(0xffffffffu, (int)lane, 4, 16) != down) bad |= 1u << 2;
    if (__shfl_up_sync(0xffffffffu, (int)lane, 2) != (lane >= 2 ? (int)lane - 2 : (int)lane)) bad |= 1u << 3;
    if (__ballot_sync(0xffffffffu, lane & 1) != 0xAAAAAAAAu) bad |= 1u << 4;
    if (!__any_sync(0xffffffffu, lane == 5) || !__all_sync(0xffffffffu, lane < 32) || __all_sync(0xffffffffu, lane < 31))
        bad |= 1u << 5;
    if (lane < 16 && __shfl_xor_sync(0x0000ffffu, (int)lane, 1) != (int)(lane ^ 1)) bad |= 1u << 6;
    __syncwarp();
    if (__syncthreads_count(tid % 3 == 0) != (int)((blockDim.x + 2) / 3)) bad |= 1u << 7;
    if (!__syncthreads_and(1) || !__syncthreads_or(tid == blockDim.x - 1) || __syncthreads_or(0)) bad |= 1u << 8;
    /* cp.async: the destination is poisoned until the group is waited for */
    unsigned char* dst = amk_dyn_smem + 16 * tid;
    const unsigned char* src = r->src + 16 * (tid % 16);
    amk_ptx_cp_async_16(dst, src);
    amk_ptx_cp_async_commit();
    for (int i = 0; i < 16; ++i)
        if (dst[i] != 0xFF) bad |= 1u << 9;
    amk_ptx_cp_async_wait<0>();
    for (int i = 0; i < 16; ++i)
        if (dst[i] != src[i]) bad |= 1u << 10;
    __syncthreads();
    /* a bulk copy completing an mbarrier's transaction bytes, two phases */
    unsigned char* bulk = amk_dyn_smem + 4096;
    if (tid == 0) amk_ptx_mbarrier_init<1>(amk_ptx_smem_addr(&bar));
    __syncthreads();
    for (uint32_t phase = 0; phase < 2; ++phase) {
        if (tid == 0) {
            amk_ptx_mbarrier_arrive_expect_tx(amk_ptx_smem_addr(&bar), 64);
            amk_ptx_cp_async_bulk_g2s(amk_ptx_smem_addr(bulk), r->src + 64 * phase, 64, amk_ptx_smem_addr(&bar));
        }
        __syncthreads();
        while (!amk_ptx_mbarrier_try_wait_parity(amk_ptx_smem_addr(&bar), phase)) {
        }
        for (int i = 0; i < 64; ++i)
            if (bulk[i] != r->src[64 * phase + i]) bad |= 1u << 11;
        __syncthreads();
    }
    /* the grid barrier: every block's increments before every block's read */
    if (tid == 0) atomicAdd(&r->counter, 1u);
    cooperative_groups::this_grid().sync();
    if (__atomic_load_n(&r->counter, __ATOMIC_SEQ_CST) != gridDim.x) bad |= 1u << 12;
    /* counters across blocks: an acquire poll that sleeps until another block's release */
    if (tid == 0 && blockIdx.x == 0) {
        while (amk_ptx_ld_acquire_gpu(reinterpret_cast<const uint32_t*>(&r->flag)) == 0) __nanosleep(100);
    }
    if (tid == 0 && blockIdx.x == gridDim.x - 1) amk_ptx_red_release_gpu_add<1u>(reinterpret_cast<uint32_t*>(&r->flag));
    r->result[blockIdx.x * blockDim.x + tid] = bad;
}

int depth(int n) {
    volatile char frame[4096];
    frame[0] = (char)n;
    __nanosleep(0); /* a switch: the stack's depth is checked */
    return n == 0 ? frame[0] : depth(n - 1) + frame[0];
}
}  // namespace

extern "C" void amk_emu_megakernel(const void* program) {
    Record* r = static_cast<Record*>(const_cast<void*>(program));
    const unsigned tid = threadIdx.x, lane = tid % 32;
    switch (r->scenario) {
        case 0:
            correct_use(r);
            break;
        case 1: /* thread 5 at a warp collective, the rest of the block at a barrier */
            if (tid == 5)
                __syncwarp();
            else
                __syncthreads();
            break;
        case 2: /* lane 3 exits, the others shuffle with the full mask */
            if (lane == 3) return;
            (void)__shfl_xor_sync(0xffffffffu, 1, 1);
            break;
        case 3: /* the warp's lanes at two different shuffles */
            if (lane & 1)
                (void)__shfl_xor_sync(0xffffffffu, 1, 1);
            else
                (void)__shfl_xor_sync(0xffffffffu, 2, 1);
            break;
        case 4: /* an arrival on an mbarrier never initialised */
            if (tid == 0) amk_ptx_mbarrier_arrive_expect_tx(amk_ptx_smem_addr(&bar), 16);
            break;
        case 5: /* cp.async into global memory */
            if (tid == 0) amk_ptx_cp_async_16(r->src + 128, r->src);
            break;
        case 6: /* a cp.async group never waited for */
            amk_ptx_cp_async_16(amk_dyn_smem + 16 * tid, r->src);
            amk_ptx_cp_async_commit();
            break;
        case 7: /* a store to an unmapped address */
            if (tid == 7) *reinterpret_cast<volatile int*>(uintptr_t(16)) = 1;
            break;
        case 8: /* a spin that never ends */
            if (tid == 0)
                while (*reinterpret_cast<volatile int32_t*>(&r->flag) == 0) __nanosleep(1000);
            break;
        case 9: /* deep recursion */
            if (tid == 0) r->result[0] = (uint32_t)depth(100);
            break;
        case 10: /* thread 0 leaves, the others wait at a barrier */
            if (tid == 0) return;
            __syncthreads();
            break;
        case 11: /* two bulk copies to the same bytes in flight at once */
            if (tid == 0) {
                amk_ptx_mbarrier_init<2>(amk_ptx_smem_addr(&bar));
                amk_ptx_mbarrier_arrive_expect_tx(amk_ptx_smem_addr(&bar), 32);
                amk_ptx_cp_async_bulk_g2s(amk_ptx_smem_addr(amk_dyn_smem), r->src, 16, amk_ptx_smem_addr(&bar));
                amk_ptx_cp_async_bulk_g2s(amk_ptx_smem_addr(amk_dyn_smem), r->src + 16, 16, amk_ptx_smem_addr(&bar));
            }
            break;
        default:
            amk_emu::kernel_error("unknown scenario %d", r->scenario);
    }
}
