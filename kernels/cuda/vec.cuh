/* ==========================================================================================
 * 16-byte vectors of the float dtypes: amk_vec<T>::N elements per uint4, converted to and from
 * fp32 (pack and round round to nearest even, exactly as amk_st and amk_round_to do), and the
 * vectorised glue moves:
 * the dtype is resolved once per op, aligned runs move as 16-byte vectors, and each thread
 * issues all AMK_GLUE_UNROLL of its loads before its first store. Activations are written by
 * other SMs in the same launch: plain (coherent) loads after the wait's acquire, never the
 * read-only path.
 * ========================================================================================== */
#ifndef AMK_VEC_CUH
#define AMK_VEC_CUH

#include "common.cuh"

template <typename T> struct amk_vec;
template <> struct amk_vec<float> {
    static constexpr int N = 4;
    static __device__ __forceinline__ void cvt(const uint4& r, float* f) {
        f[0] = __uint_as_float(r.x);
        f[1] = __uint_as_float(r.y);
        f[2] = __uint_as_float(r.z);
        f[3] = __uint_as_float(r.w);
    }
    static __device__ __forceinline__ float one(const float* p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ float round(float v) { return v; }
    static __device__ __forceinline__ uint4 pack(const float* f) {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
    }
};
template <> struct amk_vec<__half> {
    static constexpr int N = 8;
    static __device__ __forceinline__ void cvt(const uint4& r, float* f) {
        const __half2* h = reinterpret_cast<const __half2*>(&r);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 t = __half22float2(h[i]);
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    static __device__ __forceinline__ float one(const __half* p, int64_t i) { return __half2float(p[i]); }
    static __device__ __forceinline__ float round(float v) { return __half2float(__float2half_rn(v)); }
    static __device__ __forceinline__ uint4 pack(const float* f) { /* RNE, as amk_st */
        uint4 r;
        __half2* h = reinterpret_cast<__half2*>(&r);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
        return r;
    }
};
template <> struct amk_vec<__nv_bfloat16> {
    static constexpr int N = 8;
    /* bf16 -> fp32 is exact: the bf16 bits are the high half of the float (works on every
     * arch, no intrinsic needed). Element 2i is the low half of word i (little-endian). */
    static __device__ __forceinline__ void cvt(const uint4& r, float* f) {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    static __device__ __forceinline__ float one(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
    static __device__ __forceinline__ float round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
    static __device__ __forceinline__ uint4 pack(const float* f) { /* RNE, as amk_st */
        uint4 r;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
        return r;
    }
};

#define AMK_GLUE_UNROLL 2

/* One rotate-half pair as the VM's rotateHalf computes it: each product rounded on its own, then
 * the difference / sum (no fused multiply-add: nvcc would contract x1*cs - x2*sn into one fma,
 * which rounds once fewer than the reference). */
__device__ __forceinline__ void amk_rotate(float x1, float x2, float cs, float sn, float* o1, float* o2) {
    *o1 = __fsub_rn(__fmul_rn(x1, cs), __fmul_rn(x2, sn));
    *o2 = __fadd_rn(__fmul_rn(x2, cs), __fmul_rn(x1, sn));
}

/* The RoPE angle of pair i of a head at position pos, as the VM's table: inv = 1 / theta^(i/half)
 * in fp32, angle = pos * inv in fp32, precise sincosf. */
__device__ __forceinline__ void amk_rope_angle(float pos, int i, int half, float theta, float* sn, float* cs) {
    const float inv = 1.f / powf(theta, (float)i / (float)half);
    sincosf(pos * inv, sn, cs);
}

/* Bytes of one element of a dtype that moves as bytes (0: not byte-addressable, e.g. int4). */
__device__ __forceinline__ int amk_elem_bytes(int32_t dt) {
    switch (dt) {
        case AMK_F32:
        case AMK_I32:  return 4;
        case AMK_F16:
        case AMK_BF16: return 2;
        case AMK_I8:
        case AMK_U8:
        case AMK_BOOL: return 1;
        default:       return 0;
    }
}

/* dst[di : di + n] = src[si : si + n]. The same dtype on both sides moves as bytes (exact, as a
 * load and a store of that dtype), in 16-byte vectors where both ends are aligned; otherwise
 * element by element through amk_ld / amk_st (the cast). No barrier. */
__device__ __forceinline__ void amk_move(const amk_buffer_t& dst, int64_t di, const amk_buffer_t& src, int64_t si,
                                         int64_t n) {
    const int esz = amk_elem_bytes(src.dtype);
    int64_t done = 0;
    if (esz > 0 && src.dtype == dst.dtype) {
        const char* s = (const char*)src.ptr + si * esz;
        char* d = (char*)dst.ptr + di * esz;
        if ((((uintptr_t)s | (uintptr_t)d) & 15) == 0) {
            const int64_t nv = n * esz / 16;
            const uint4* vs = reinterpret_cast<const uint4*>(s);
            uint4* vd = reinterpret_cast<uint4*>(d);
            for (int64_t v0 = threadIdx.x; v0 < nv; v0 += (int64_t)AMK_THREADS * AMK_GLUE_UNROLL) {
                uint4 r[AMK_GLUE_UNROLL];
#pragma unroll
                for (int u = 0; u < AMK_GLUE_UNROLL; ++u)
                    if (v0 + u * AMK_THREADS < nv) r[u] = vs[v0 + u * AMK_THREADS];
#pragma unroll
                for (int u = 0; u < AMK_GLUE_UNROLL; ++u)
                    if (v0 + u * AMK_THREADS < nv) vd[v0 + u * AMK_THREADS] = r[u];
            }
            done = nv * 16 / esz;
        }
    }
    for (int64_t e = done + threadIdx.x; e < n; e += AMK_THREADS) amk_st(dst, di + e, amk_ld(src, si + e));
}

/* o[i] = a[i] + b[i] for one float dtype T over the aligned 16-byte vectors (all loads of a
 * thread first), the same fp32 sum and RNE store as the scalar path; returns the elements done
 * (the caller finishes the rest element by element). */
template <typename T>
__device__ __forceinline__ int64_t amk_add_typed(const T* a, const T* b, T* o, int64_t n) {
    constexpr int V = amk_vec<T>::N;
    const bool aligned = (((uintptr_t)a | (uintptr_t)b | (uintptr_t)o) & 15) == 0;
    const int64_t nv = aligned ? n / V : 0;
    const uint4* va = reinterpret_cast<const uint4*>(a);
    const uint4* vb = reinterpret_cast<const uint4*>(b);
    uint4* vo = reinterpret_cast<uint4*>(o);
    for (int64_t v0 = threadIdx.x; v0 < nv; v0 += (int64_t)AMK_THREADS * AMK_GLUE_UNROLL) {
        uint4 ra[AMK_GLUE_UNROLL], rb[AMK_GLUE_UNROLL];
#pragma unroll
        for (int u = 0; u < AMK_GLUE_UNROLL; ++u)
            if (v0 + u * AMK_THREADS < nv) {
                ra[u] = va[v0 + u * AMK_THREADS];
                rb[u] = vb[v0 + u * AMK_THREADS];
            }
#pragma unroll
        for (int u = 0; u < AMK_GLUE_UNROLL; ++u)
            if (v0 + u * AMK_THREADS < nv) {
                float fa[V], fb[V];
                amk_vec<T>::cvt(ra[u], fa);
                amk_vec<T>::cvt(rb[u], fb);
#pragma unroll
                for (int i = 0; i < V; ++i) fa[i] += fb[i];
                vo[v0 + u * AMK_THREADS] = amk_vec<T>::pack(fa);
            }
    }
    return nv * V;
}

#endif /* AMK_VEC_CUH */
