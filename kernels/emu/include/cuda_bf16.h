/* amk CPU emulator (kernels/emu): the bf16 storage type and the conversions amk's kernels use,
 * as host code. bf16 -> fp32 is exact; fp32 -> bf16 rounds to nearest even and keeps NaN quiet,
 * as the device's __float2bfloat16_rn does. */
#ifndef AMK_EMU_CUDA_BF16_H
#define AMK_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
    uint16_t x;
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};

static inline float __bfloat162float(__nv_bfloat16 b) {
    const uint32_t bits = (uint32_t)b.x << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(uint16_t)(u >> 16)};
}
static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }
static inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }

#endif /* AMK_EMU_CUDA_BF16_H */
