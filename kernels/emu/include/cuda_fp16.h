/* amk CPU emulator (kernels/emu): the fp16 storage type and the conversions amk's kernels use,
 * as host code. Conversions to fp16 round to nearest even (subnormals, overflow to infinity, NaN
 * kept quiet), as the device's __float2half_rn does. */
#ifndef AMK_EMU_CUDA_FP16_H
#define AMK_EMU_CUDA_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

struct __half {
    uint16_t x;
};
struct __attribute__((aligned(4))) __half2 {
    __half x, y;
};

static inline float __half2float(__half h) {
    const uint32_t sign = (uint32_t)(h.x & 0x8000u) << 16;
    const uint32_t exp = (h.x >> 10) & 0x1fu, man = h.x & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        const float f = ldexpf((float)man, -24); /* zero or subnormal: exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13); /* infinity or NaN */
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

static inline __half __float2half_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return __half{(uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu))}; /* NaN, quiet */
    if (a >= 0x477ff000u) return __half{(uint16_t)(sign | 0x7c00u)};                       /* rounds past 65504 */
    if (a < 0x38800000u) {                                                                  /* below 2^-14: subnormal */
        float mag;
        memcpy(&mag, &a, 4);
        const float units = nearbyintf(mag * 16777216.0f); /* multiples of 2^-24, ties to even */
        return __half{(uint16_t)(sign | (uint16_t)units)};
    }
    const uint32_t man = a & 0x7fffffu;
    uint32_t h = ((a >> 23) - 112u) << 10 | (man >> 13);
    const uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; /* may carry into the exponent: correct */
    return __half{(uint16_t)(sign | h)};
}
static inline __half __float2half(float f) { return __float2half_rn(f); }
static inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
static inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }

#endif /* AMK_EMU_CUDA_FP16_H */
