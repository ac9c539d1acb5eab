// Capture and validation kernels for the special-function unit: ex2.approx.ftz.f32 and rcp.approx.ftz.f32.
//
// Driven by flashsim/gpu/capture/sfu.py. Three kinds of kernel:
//   *_hw      apply the instruction elementwise to an input array (raw uint32 bit patterns in and out);
//   *_model   apply the table-driven model (the same one as flashsim/numerics/sfu.py) elementwise, so the
//             host can check that this C++ copy of the model agrees with the numpy one;
//   *_sweep   generate the inputs start .. start+count-1 (as uint32 bit patterns, wrapping) from the
//             thread index, compare instruction and model, count mismatches per (sign, exponent field)
//             bucket and record the first `cap` mismatching (input, instruction, model) triples.
// The model functions are __host__ __device__ so that a host build can check them against numpy too.
//
// Model parameters come in a small uint32 array (layout below, mirrored by the Python side).

#ifndef SFU_HD
#define SFU_HD __host__ __device__ __forceinline__
#endif

typedef unsigned int sfu_u32;
typedef unsigned long long sfu_u64;
typedef long long sfu_i64;

#define SFU_MASK 0x7FFFFFu
#define SFU_ONE_EXP 8388608LL   // 2^23: one unit of the exponent field

// ex2 parameter slots
enum { EX2_NEG_MODE = 0,    // 0: two's complement fixed point, one table; 1: sign-magnitude, separate negative table
       EX2_ROUNDING = 1,    // rounding of x * 2^23 to an integer: 0 toward zero, 1 down, 2 up, 3 nearest even
       EX2_NAN_MODE = 2,    // 0: NaN in -> constant EX2_NAN_BITS; 1: NaN in -> input with the quiet bit set
       EX2_NAN_BITS = 3, EX2_UNDERFLOW_BITS = 4, EX2_OVERFLOW_BITS = 5, EX2_PINF_BITS = 6, EX2_NINF_BITS = 7,
       EX2_NPARAMS = 8 };
// rcp parameter slots
enum { RCP_NAN_MODE = 0, RCP_NAN_BITS = 1, RCP_ZERO_POS = 2, RCP_ZERO_NEG = 3, RCP_INF_POS = 4, RCP_INF_NEG = 5,
       RCP_UNDERFLOW_POS = 6, RCP_UNDERFLOW_NEG = 7, RCP_NPARAMS = 8 };

SFU_HD float sfu_as_float(sfu_u32 b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float f;
    __builtin_memcpy(&f, &b, 4);
    return f;
#endif
}

// x * 2^23 (exact for |x| <= 255) rounded to an integer by the measured rule.
SFU_HD sfu_i64 sfu_fixed(float s, sfu_u32 rule) {
    float r = rule == 0 ? truncf(s) : rule == 1 ? floorf(s) : rule == 2 ? ceilf(s) : rintf(s);
    return (sfu_i64)r;
}

SFU_HD sfu_u32 ex2_model(sfu_u32 xb, const sfu_u32* gpos, const sfu_u32* gneg, const sfu_u32* p) {
    const sfu_u32 e = (xb >> 23) & 0xFFu;
    if (e == 255u) {
        if (xb & SFU_MASK) return p[EX2_NAN_MODE] ? (xb | 0x400000u) : p[EX2_NAN_BITS];
        return (xb >> 31) ? p[EX2_NINF_BITS] : p[EX2_PINF_BITS];
    }
    float x = e ? sfu_as_float(xb) : 0.0f;                 // ftz: a subnormal input counts as zero
    x = fminf(fmaxf(x, -255.0f), 255.0f);
    sfu_i64 r;
    if (p[EX2_NEG_MODE] == 0u) {
        const sfu_i64 n = sfu_fixed(x * 8388608.0f, p[EX2_ROUNDING]);
        const sfu_i64 f = n & (sfu_i64)SFU_MASK;               // n mod 2^23, also for negative n
        const sfu_i64 k = (n - f) / SFU_ONE_EXP;               // floor(n / 2^23)
        r = (sfu_i64)gpos[f] + k * SFU_ONE_EXP;
    } else {
        const sfu_i64 n = sfu_fixed(fabsf(x) * 8388608.0f, p[EX2_ROUNDING]);
        const sfu_i64 f = n & (sfu_i64)SFU_MASK;
        const sfu_i64 k = (n - f) / SFU_ONE_EXP;
        r = (xb >> 31) ? (sfu_i64)gneg[f] - k * SFU_ONE_EXP : (sfu_i64)gpos[f] + k * SFU_ONE_EXP;
    }
    if (r < SFU_ONE_EXP) return p[EX2_UNDERFLOW_BITS];       // biased exponent <= 0: flushed
    if (r >= 0x7F800000LL) return p[EX2_OVERFLOW_BITS];       // biased exponent >= 255
    return (sfu_u32)r;
}

SFU_HD sfu_u32 rcp_model(sfu_u32 xb, const sfu_u32* tab, const sfu_u32* p) {
    const sfu_u32 e = (xb >> 23) & 0xFFu;
    const bool neg = (xb >> 31) != 0u;
    if (e == 255u) {
        if (xb & SFU_MASK) return p[RCP_NAN_MODE] ? (xb | 0x400000u) : p[RCP_NAN_BITS];
        return neg ? p[RCP_INF_NEG] : p[RCP_INF_POS];
    }
    if (e == 0u) return neg ? p[RCP_ZERO_NEG] : p[RCP_ZERO_POS];  // ftz: +-0 and subnormals
    sfu_i64 r = (sfu_i64)tab[xb & SFU_MASK] + (127LL - (sfu_i64)e) * SFU_ONE_EXP;
    if (r < SFU_ONE_EXP) return neg ? p[RCP_UNDERFLOW_NEG] : p[RCP_UNDERFLOW_POS];
    if (r > 0x7F800000LL) r = 0x7F800000LL;
    return (xb & 0x80000000u) | (sfu_u32)r;
}

#ifdef __CUDACC__

__device__ __forceinline__ sfu_u32 ex2_hw(sfu_u32 xb) {
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__uint_as_float(xb)));
    return __float_as_uint(y);
}

__device__ __forceinline__ sfu_u32 rcp_hw(sfu_u32 xb) {
    float y;
    asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__uint_as_float(xb)));
    return __float_as_uint(y);
}

#define SFU_GRID_STRIDE(i, n) \
    for (sfu_u64 i = (sfu_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (sfu_u64)gridDim.x * blockDim.x)

extern "C" __global__ void ex2_hw_apply(const sfu_u32* __restrict__ in, sfu_u32* __restrict__ out, sfu_u64 n) {
    SFU_GRID_STRIDE(i, n) out[i] = ex2_hw(in[i]);
}

extern "C" __global__ void rcp_hw_apply(const sfu_u32* __restrict__ in, sfu_u32* __restrict__ out, sfu_u64 n) {
    SFU_GRID_STRIDE(i, n) out[i] = rcp_hw(in[i]);
}

extern "C" __global__ void ex2_model_apply(const sfu_u32* __restrict__ in, sfu_u32* __restrict__ out, sfu_u64 n,
                                           const sfu_u32* __restrict__ gpos, const sfu_u32* __restrict__ gneg,
                                           const sfu_u32* __restrict__ params) {
    SFU_GRID_STRIDE(i, n) out[i] = ex2_model(in[i], gpos, gneg, params);
}

extern "C" __global__ void rcp_model_apply(const sfu_u32* __restrict__ in, sfu_u32* __restrict__ out, sfu_u64 n,
                                           const sfu_u32* __restrict__ tab, const sfu_u32* __restrict__ params) {
    SFU_GRID_STRIDE(i, n) out[i] = rcp_model(in[i], tab, params);
}

// Mismatch bookkeeping shared by the sweeps: a per-block histogram over 512 buckets (sign << 8 | exponent
// field) flushed to hist[] at the end, and the first `cap` triples (input, instruction, model) in rec[].
__device__ __forceinline__ void sfu_record(sfu_u32 xb, sfu_u32 got, sfu_u32 want, unsigned int* bucket,
                                           sfu_u32* rec, sfu_u64 cap, sfu_u64* nrec) {
    atomicAdd(&bucket[xb >> 23], 1u);
    if (*(volatile sfu_u64*)nrec < cap) {
        const sfu_u64 j = atomicAdd(nrec, 1ull);
        if (j < cap) {
            rec[3 * j] = xb;
            rec[3 * j + 1] = got;
            rec[3 * j + 2] = want;
        }
    }
}

__device__ __forceinline__ void sfu_hist_flush(const unsigned int* bucket, sfu_u64* hist) {
    __syncthreads();
    for (int b = threadIdx.x; b < 512; b += blockDim.x)
        if (bucket[b]) atomicAdd(&hist[b], (sfu_u64)bucket[b]);
}

extern "C" __global__ void ex2_sweep(sfu_u64 start, sfu_u64 count, const sfu_u32* __restrict__ gpos,
                                     const sfu_u32* __restrict__ gneg, const sfu_u32* __restrict__ params,
                                     sfu_u64* __restrict__ hist, sfu_u32* __restrict__ rec, sfu_u64 cap,
                                     sfu_u64* __restrict__ nrec) {
    __shared__ unsigned int bucket[512];
    for (int b = threadIdx.x; b < 512; b += blockDim.x) bucket[b] = 0u;
    __syncthreads();
    SFU_GRID_STRIDE(i, count) {
        const sfu_u32 xb = (sfu_u32)(start + i);
        const sfu_u32 got = ex2_hw(xb), want = ex2_model(xb, gpos, gneg, params);
        if (got != want) sfu_record(xb, got, want, bucket, rec, cap, nrec);
    }
    sfu_hist_flush(bucket, hist);
}

extern "C" __global__ void rcp_sweep(sfu_u64 start, sfu_u64 count, const sfu_u32* __restrict__ tab,
                                     const sfu_u32* __restrict__ params, sfu_u64* __restrict__ hist,
                                     sfu_u32* __restrict__ rec, sfu_u64 cap, sfu_u64* __restrict__ nrec) {
    __shared__ unsigned int bucket[512];
    for (int b = threadIdx.x; b < 512; b += blockDim.x) bucket[b] = 0u;
    __syncthreads();
    SFU_GRID_STRIDE(i, count) {
        const sfu_u32 xb = (sfu_u32)(start + i);
        const sfu_u32 got = rcp_hw(xb), want = rcp_model(xb, tab, params);
        if (got != want) sfu_record(xb, got, want, bucket, rec, cap, nrec);
    }
    sfu_hist_flush(bucket, hist);
}

#endif  // __CUDACC__
