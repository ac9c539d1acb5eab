// Capture and hypothesis kernels for the SFU's approximate functions beyond ex2.approx.ftz.f32 / rcp.approx.ftz.f32
// (those two: kernel/capture/sfu.cu). Driven by flashsim/gpu/capture/sfu_approx.py; every sweep generates its inputs
// from the thread index (the 2^32 f32 bit patterns, or a slice), so only counts and a few records come back.
//
//   hw_apply        one instruction (FN_*) elementwise over an array of bit patterns (f16 / bf16 in the low half);
//   compose_sweep   a non-.ftz form against the SASS sequence ptxas wraps around the bare MUFU (its .ftz form);
//   pair_sweep      an x2 form against its two halves through the scalar form;
//   table_sweep     rsqrt / sqrt (.ftz) against the table model: result = T[exponent parity, mantissa], rescaled;
//   lg2_sweep       lg2.approx.ftz.f32 against round(E + L[m]) for a candidate L (float64) and rounding;
//   key_fill/key_sweep  "the result is a function of key(x)": fill table[key(x)] = f(x), then count the x whose
//                   result differs from table[key(x)];
//   relation_sweep  counts of simple relations (odd symmetry, identity, saturation) per exponent bucket.
// Mismatches are counted per bucket (sign << 8 | exponent field of the input) and the first `cap` (input, got,
// model) triples are recorded.

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef long long i64;

enum {
    FN_EX2_FTZ = 0, FN_EX2 = 1, FN_RCP_FTZ = 2, FN_RCP = 3, FN_RSQRT_FTZ = 4, FN_RSQRT = 5, FN_SQRT_FTZ = 6,
    FN_SQRT = 7, FN_LG2_FTZ = 8, FN_LG2 = 9, FN_SIN_FTZ = 10, FN_SIN = 11, FN_COS_FTZ = 12, FN_COS = 13,
    FN_TANH = 14, FN_EX2_F16 = 15, FN_EX2_BF16 = 16, FN_TANH_F16 = 17, FN_TANH_BF16 = 18, FN_EX2_F16X2 = 19,
    FN_EX2_BF16X2 = 20, FN_TANH_F16X2 = 21, FN_TANH_BF16X2 = 22, FN_COUNT = 23
};

#define F32_UNARY(NAME, INSN)                                                     \
    __device__ __forceinline__ u32 NAME(u32 x) {                                  \
        u32 r;                                                                    \
        asm volatile(INSN " %0, %1;" : "=r"(r) : "r"(x));                         \
        return r;                                                                 \
    }
#define HALF_UNARY(NAME, INSN)                                                    \
    __device__ __forceinline__ u32 NAME(u32 x) {                                  \
        u16 r, a = (u16)x;                                                        \
        asm volatile(INSN " %0, %1;" : "=h"(r) : "h"(a));                         \
        return (u32)r;                                                            \
    }

F32_UNARY(ex2_ftz, "ex2.approx.ftz.f32")
F32_UNARY(ex2_full, "ex2.approx.f32")
F32_UNARY(rcp_ftz, "rcp.approx.ftz.f32")
F32_UNARY(rcp_full, "rcp.approx.f32")
F32_UNARY(rsqrt_ftz, "rsqrt.approx.ftz.f32")
F32_UNARY(rsqrt_full, "rsqrt.approx.f32")
F32_UNARY(sqrt_ftz, "sqrt.approx.ftz.f32")
F32_UNARY(sqrt_full, "sqrt.approx.f32")
F32_UNARY(lg2_ftz, "lg2.approx.ftz.f32")
F32_UNARY(lg2_full, "lg2.approx.f32")
F32_UNARY(sin_ftz, "sin.approx.ftz.f32")
F32_UNARY(sin_full, "sin.approx.f32")
F32_UNARY(cos_ftz, "cos.approx.ftz.f32")
F32_UNARY(cos_full, "cos.approx.f32")
F32_UNARY(tanh_f32, "tanh.approx.f32")
HALF_UNARY(ex2_f16, "ex2.approx.f16")
HALF_UNARY(ex2_bf16, "ex2.approx.ftz.bf16")
HALF_UNARY(tanh_f16, "tanh.approx.f16")
HALF_UNARY(tanh_bf16, "tanh.approx.bf16")
F32_UNARY(ex2_f16x2, "ex2.approx.f16x2")
F32_UNARY(ex2_bf16x2, "ex2.approx.ftz.bf16x2")
F32_UNARY(tanh_f16x2, "tanh.approx.f16x2")
F32_UNARY(tanh_bf16x2, "tanh.approx.bf16x2")

__device__ __forceinline__ u32 hw(int fn, u32 x) {
    switch (fn) {
        case FN_EX2_FTZ: return ex2_ftz(x);
        case FN_EX2: return ex2_full(x);
        case FN_RCP_FTZ: return rcp_ftz(x);
        case FN_RCP: return rcp_full(x);
        case FN_RSQRT_FTZ: return rsqrt_ftz(x);
        case FN_RSQRT: return rsqrt_full(x);
        case FN_SQRT_FTZ: return sqrt_ftz(x);
        case FN_SQRT: return sqrt_full(x);
        case FN_LG2_FTZ: return lg2_ftz(x);
        case FN_LG2: return lg2_full(x);
        case FN_SIN_FTZ: return sin_ftz(x);
        case FN_SIN: return sin_full(x);
        case FN_COS_FTZ: return cos_ftz(x);
        case FN_COS: return cos_full(x);
        case FN_TANH: return tanh_f32(x);
        case FN_EX2_F16: return ex2_f16(x);
        case FN_EX2_BF16: return ex2_bf16(x);
        case FN_TANH_F16: return tanh_f16(x);
        case FN_TANH_BF16: return tanh_bf16(x);
        case FN_EX2_F16X2: return ex2_f16x2(x);
        case FN_EX2_BF16X2: return ex2_bf16x2(x);
        case FN_TANH_F16X2: return tanh_f16x2(x);
        default: return tanh_bf16x2(x);
    }
}

__device__ __forceinline__ float f(u32 b) { return __uint_as_float(b); }
__device__ __forceinline__ u32 u(float v) { return __float_as_uint(v); }

// The SASS ptxas 13.0 emits for each non-.ftz form (nvdisasm of sm_90), with the bare MUFU given by the .ftz form:
//   ex2:   FSETP.GEU P0, x, -126; @!P0 FMUL x, x, 0.5; MUFU.EX2; @!P0 FMUL r, r, r
//   rcp:   s = |x| > 2^126 ? 0.25 : (|x| >=u 2^-126 ? 1 : 2^24); r = s * MUFU.RCP(x * s)
//   rsqrt: P0 = |x| >=u 2^-126; @!P0 x *= 2^24; MUFU.RSQ; @!P0 r *= 2^12
//   sqrt:  the same with MUFU.SQRT and r *= 2^-12;  lg2: MUFU.LG2 and r += -24
//   sin / cos: FMUL.RZ by 1/(2 pi) then MUFU.SIN / COS, the same for .ftz and not.
__device__ __forceinline__ u32 composed(int fn, u32 xb) {
    const float x = f(xb), ax = fabsf(x);
    const bool small = ax < 1.17549435e-38f;  // !(|x| >=u 2^-126): false for NaN
    switch (fn) {
        case FN_EX2: {
            if (!(x < -126.0f)) return ex2_ftz(xb);
            const float r = f(ex2_ftz(u(__fmul_rn(x, 0.5f))));
            return u(__fmul_rn(r, r));
        }
        case FN_RCP: {
            const float s = ax > 8.50705917e+37f ? 0.25f : (small ? 16777216.0f : 1.0f);
            return u(__fmul_rn(s, f(rcp_ftz(u(__fmul_rn(x, s))))));
        }
        case FN_RSQRT:
            return small ? u(__fmul_rn(f(rsqrt_ftz(u(__fmul_rn(x, 16777216.0f)))), 4096.0f)) : rsqrt_ftz(xb);
        case FN_SQRT:
            return small ? u(__fmul_rn(f(sqrt_ftz(u(__fmul_rn(x, 16777216.0f)))), 0.000244140625f)) : sqrt_ftz(xb);
        case FN_LG2:
            return small ? u(__fadd_rn(f(lg2_ftz(u(__fmul_rn(x, 16777216.0f)))), -24.0f)) : lg2_ftz(xb);
        case FN_SIN: return sin_ftz(xb);
        default: return cos_ftz(xb);
    }
}

#define GRID_STRIDE(i, n) \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

__device__ __forceinline__ void record(u32 xb, u32 got, u32 want, unsigned int* bucket, u32* rec, u64 cap,
                                       u64* nrec) {
    atomicAdd(&bucket[xb >> 23], 1u);
    if (*(volatile u64*)nrec < cap) {
        const u64 j = atomicAdd(nrec, 1ull);
        if (j < cap) {
            rec[3 * j] = xb;
            rec[3 * j + 1] = got;
            rec[3 * j + 2] = want;
        }
    }
}

#define BUCKETS_BEGIN                                          \
    __shared__ unsigned int bucket[512];                       \
    for (int b = threadIdx.x; b < 512; b += blockDim.x) bucket[b] = 0u; \
    __syncthreads();
#define BUCKETS_END                                            \
    __syncthreads();                                           \
    for (int b = threadIdx.x; b < 512; b += blockDim.x)        \
        if (bucket[b]) atomicAdd(&hist[b], (u64)bucket[b]);

extern "C" __global__ void hw_apply(int fn, const u32* __restrict__ in, u32* __restrict__ out, u64 n) {
    GRID_STRIDE(i, n) out[i] = hw(fn, in[i]);
}

extern "C" __global__ void compose_sweep(int fn, u64 start, u64 count, u64* hist, u32* rec, u64 cap, u64* nrec) {
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = hw(fn, xb), want = composed(fn, xb);
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}

// fn: an x2 form; scalar: its one-half form. Low half of the result from the low half of the input.
extern "C" __global__ void pair_sweep(int fn, int scalar, u64 start, u64 count, u64* hist, u32* rec, u64 cap,
                                      u64* nrec) {
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = hw(fn, xb);
        const u32 want = (hw(scalar, xb & 0xFFFFu) & 0xFFFFu) | (hw(scalar, xb >> 16) << 16);
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}

// Special classes of an f32 input; params[class] is that class's constant result unless bit `class` of
// params[CLASS_COMPUTED] is set (then the class is computed by the model), params[NAN_QUIET]: NaN in -> the
// input with its quiet bit set instead of the constant.
enum { CLS_ZERO_POS = 0, CLS_ZERO_NEG = 1, CLS_NORMAL_POS = 2, CLS_NORMAL_NEG = 3, CLS_INF_POS = 4,
       CLS_INF_NEG = 5, CLS_NAN = 6, CLASS_COMPUTED = 7, NAN_QUIET = 8, NPARAMS = 9 };

__device__ __forceinline__ int f32_class(u32 xb) {
    const u32 e = (xb >> 23) & 0xFFu, neg = xb >> 31;
    if (e == 0u) return CLS_ZERO_POS + neg;  // zero or subnormal: the bare MUFU flushes
    if (e == 255u) return (xb & 0x7FFFFFu) ? CLS_NAN : CLS_INF_POS + neg;
    return CLS_NORMAL_POS + neg;
}

// Returns true with *out set when the input's class has a constant result.
__device__ __forceinline__ bool special_result(u32 xb, const u32* p, u32* out) {
    const int c = f32_class(xb);
    if ((p[CLASS_COMPUTED] >> c) & 1u) return false;
    *out = (c == CLS_NAN && p[NAN_QUIET]) ? (xb | 0x400000u) : p[c];
    return true;
}

// rsqrt / sqrt of a positive normal x = (1 + m 2^-23) 2^E: T[(E & 1) << 23 | m] holds the result at
// x' = (1 + m 2^-23) 2^(E & 1) in [1, 4); x = x' 2^(2k) with k = (E - (E & 1)) / 2, so the result's exponent
// field moves by -k (rsqrt) or +k (sqrt). Both results stay normal for every normal x.
__device__ __forceinline__ u32 table_model(int fn, u32 xb, const u32* T, const u32* p) {
    u32 r;
    if (special_result(xb, p, &r)) return r;
    const int E = (int)((xb >> 23) & 0xFFu) - 127;
    const int par = E & 1;
    const int k = (E - par) / 2;
    const u32 g = T[((u32)par << 23) | (xb & 0x7FFFFFu)];
    const int shift = fn == FN_RSQRT_FTZ ? -k : k;
    return (u32)((int)g + shift * (1 << 23)) | (xb & 0x80000000u);
}

extern "C" __global__ void table_sweep(int fn, u64 start, u64 count, const u32* __restrict__ T,
                                       const u32* __restrict__ p, u64* hist, u32* rec, u64 cap, u64* nrec) {
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = hw(fn, xb), want = table_model(fn, xb, T, p);
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}

extern "C" __global__ void table_model_apply(int fn, const u32* __restrict__ in, u32* __restrict__ out, u64 n,
                                             const u32* __restrict__ T, const u32* __restrict__ p) {
    GRID_STRIDE(i, n) out[i] = table_model(fn, in[i], T, p);
}

// round-to-odd of the exact E + L (E an integer, L a double): Fast2Sum gives s = fl(E + L) and the error t;
// an inexact s becomes the neighbour with an odd last bit, so one rounding to f32 of it is the rounding of
// the exact sum (53 >= 24 + 2).
__device__ __forceinline__ double sum_to_odd(double E, double L) {
    double a = E, b = L;
    if (fabs(a) < fabs(b)) { a = L; b = E; }
    const double s = __dadd_rn(a, b);
    const double t = __dadd_rn(b, -__dadd_rn(s, -a));
    if (t == 0.0) return s;
    long long sb = __double_as_longlong(s);
    if (sb & 1ll) return s;
    // move one ulp toward the exact value
    const bool up = (t > 0.0) == (s > 0.0);
    sb += up ? 1 : -1;
    return __longlong_as_double(sb);
}

__device__ __forceinline__ u32 round_f32(double v, int mode) {
    switch (mode) {
        case 0: return u(__double2float_rn(v));
        case 1: return u(__double2float_rz(v));
        case 2: return u(__double2float_rd(v));
        default: return u(__double2float_ru(v));
    }
}

// lg2 of a positive normal x = (1 + m 2^-23) 2^E: round(E + L[m]) with rounding `mode` (0 rn, 1 rz, 2 rd, 3 ru);
// with `split`, L has 2^24 entries and E < 0 reads the upper half (L[2^23 + m]); E == 0 and E == -1 read the
// captured tables instead when `tables_at_01` is set.
__device__ __forceinline__ u32 lg2_model(u32 xb, const double* L, const u32* T1, const u32* T0, int mode,
                                         int tables_at_01, int split, const u32* p) {
    u32 r;
    if (special_result(xb, p, &r)) return r;
    const int E = (int)((xb >> 23) & 0xFFu) - 127;
    const u32 m = xb & 0x7FFFFFu;
    if (tables_at_01 && E == 0) return T1[m];
    if (tables_at_01 && E == -1) return T0[m];
    return round_f32(sum_to_odd((double)E, L[(split && E < 0 ? (1u << 23) : 0u) | m]), mode);
}

extern "C" __global__ void lg2_sweep(u64 start, u64 count, const double* __restrict__ L, const u32* __restrict__ T1,
                                     const u32* __restrict__ T0, int mode, int tables_at_01, int split,
                                     const u32* __restrict__ p, u64* hist, u32* rec, u64 cap, u64* nrec) {
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = lg2_ftz(xb), want = lg2_model(xb, L, T1, T0, mode, tables_at_01, split, p);
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}

// Keys. The argument a is x itself, or (arg_rz_mul) the f32 product RZ(x * C) that ptxas feeds MUFU.SIN / COS.
//   kind 0 (float): the bit pattern >> shift (sign included): the unit reads only the top bits of x;
//   kind 1 (fixed, sign-magnitude): sign << bits | min(R(|a| 2^frac), 2^bits - 1), or with `periodic` the
//           integer R(|a| 2^frac) mod 2^frac (bits = frac); R: rounding 0 toward zero, 1 to nearest (ties away);
//   kind 2 (fixed, two's complement, periodic): floor or nearest of a 2^frac, mod 2^frac.
// Infinities and NaNs take two slots of their own past the others (by sign).
struct KeySpec {
    int kind, shift, frac, bits, periodic, rounding, arg_rz_mul;
    u32 mul_bits;
};

// floor(M 2^s) (or nearest, ties away) for a 24-bit M and any s, as an unsigned 64-bit value modulo 2^64;
// only the low bits matter to the callers.
__device__ __forceinline__ u64 scaled(u64 M, int s, int rounding, bool* overflow) {
    *overflow = false;
    if (s >= 0) {
        if (s >= 40) { *overflow = true; return 0ull; }
        return M << s;
    }
    if (-s >= 40) return 0ull;
    const u64 q = M >> (-s);
    if (rounding == 1) return q + ((M >> (-s - 1)) & 1ull);
    return q;
}

__device__ __forceinline__ u64 key_of(u32 xb, const KeySpec& k) {
    u32 ab = xb;
    if (k.arg_rz_mul) ab = u(__fmul_rz(f(xb), f(k.mul_bits)));
    if (k.kind == 0) return (u64)(ab >> k.shift);
    const u32 e = (ab >> 23) & 0xFFu, neg = ab >> 31;
    if (e == 255u) return (k.kind == 1 ? (2ull << k.bits) : (1ull << k.frac)) + neg;  // own slots
    const u64 M = e ? ((ab & 0x7FFFFFu) | 0x800000u) : (ab & 0x7FFFFFu);
    const int s = (int)(e ? e : 1u) - 150 + k.frac;  // |a| 2^frac = M 2^s
    bool over;
    if (k.kind == 1) {
        u64 j = scaled(M, s, k.rounding, &over);
        if (k.periodic) j &= (1ull << k.frac) - 1ull;
        else if (over || j >= (1ull << k.bits)) j = (1ull << k.bits) - 1ull;
        return ((u64)neg << k.bits) | j;
    }
    // two's complement: floor(a 2^frac) mod 2^frac = (-ceil(|a| 2^frac)) mod 2^frac for negative a
    u64 j;
    if (!neg) {
        j = scaled(M, s, k.rounding, &over);
    } else if (k.rounding == 1) {  // nearest, ties away from zero (symmetric)
        j = 0ull - scaled(M, s, 1, &over);
    } else {
        u64 fl = scaled(M, s, 0, &over);
        const bool exact = s >= 0 || -s >= 40 ? (s >= 0 || M == 0ull) : ((M & ((1ull << (-s)) - 1ull)) == 0ull);
        j = 0ull - (fl + (exact ? 0ull : 1ull));
    }
    return j & ((1ull << k.frac) - 1ull);
}

// The KeySpec travels as its fields (a struct argument would tie the host to its C layout).
#define KEY_PARAMS int kind, int shift, int frac, int bits, int periodic, int rounding, int arg_rz_mul, u32 mul_bits
#define KEY_SPEC const KeySpec k = {kind, shift, frac, bits, periodic, rounding, arg_rz_mul, mul_bits};

extern "C" __global__ void key_fill(int fn, KEY_PARAMS, u64 start, u64 count, u32* table, unsigned char* hit) {
    KEY_SPEC
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u64 key = key_of(xb, k);
        table[key] = hw(fn, xb);
        hit[key] = 1;
    }
}

extern "C" __global__ void key_sweep(int fn, KEY_PARAMS, u64 start, u64 count, const u32* __restrict__ table,
                                     u64* hist, u32* rec, u64 cap, u64* nrec) {
    KEY_SPEC
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = hw(fn, xb), want = table[key_of(xb, k)];
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}

// The keys and the lg2 candidates of an input array, for checking this file's copies against the numpy ones.
extern "C" __global__ void key_apply(KEY_PARAMS, const u32* __restrict__ in, u64* __restrict__ out, u64 n) {
    KEY_SPEC
    GRID_STRIDE(i, n) out[i] = key_of(in[i], k);
}

extern "C" __global__ void lg2_model_apply(const u32* __restrict__ in, u32* __restrict__ out, u64 n,
                                           const double* __restrict__ L, const u32* __restrict__ T1,
                                           const u32* __restrict__ T0, int mode, int tables_at_01, int split,
                                           const u32* __restrict__ p) {
    GRID_STRIDE(i, n) out[i] = lg2_model(in[i], L, T1, T0, mode, tables_at_01, split, p);
}

// Relations, counted where they FAIL: 0 odd (f(-x) == -f(x)), 1 even (f(-x) == f(x)), 2 identity (f(x) == x),
// 3 saturation (f(x) == +-1 with x's sign), 4 zero (f(x) == +-0).
extern "C" __global__ void relation_sweep(int fn, int rel, u64 start, u64 count, u64* hist, u32* rec, u64 cap,
                                          u64* nrec) {
    BUCKETS_BEGIN
    GRID_STRIDE(i, count) {
        const u32 xb = (u32)(start + i);
        const u32 got = hw(fn, xb);
        u32 want;
        switch (rel) {
            case 0: want = hw(fn, xb ^ 0x80000000u) ^ 0x80000000u; break;
            case 1: want = hw(fn, xb ^ 0x80000000u); break;
            case 2: want = xb; break;
            case 3: want = (xb & 0x80000000u) | 0x3F800000u; break;
            default: want = got & 0x80000000u; break;
        }
        if (got != want) record(xb, got, want, bucket, rec, cap, nrec);
    }
    BUCKETS_END
}
