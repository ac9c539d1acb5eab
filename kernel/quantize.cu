// The quantization pass of INT8 attention (SageAttention's recipe), as a kernel of ours so that every bit of it is
// emulated (flashsim/emulator/quantize.py is this file's program, step for step):
//   k_mean      mean of K over its tokens, per (batch, K/V head, channel): FS_MEAN_SLICES interleaved partial
//               sums (token j goes to slice j % FS_MEAN_SLICES, added in token order), the slices added in order,
//               then one IEEE division by nk.
//   quantize_k  K smoothed (k - mean, one IEEE subtraction) and quantized per block of FS_QUANT_BLOCK keys.
//   quantize_q  Q quantized per block of FS_QUANT_BLOCK rows; the row's q . mean(k) (fma over the channels in
//               order) for the LSE (flash_fwd adds it back).
//   v_absmax    (FP8 P@V) per (batch, K/V head, channel): amax = max |v| over the tokens (from 0, order-free),
//               v_inv = v_range / amax (0 when amax is 0), v_deq = amax / deq_div (flash_fwd's epilogue factor;
//               v_range and deq_div = P's scale * v_range are launch arguments: flashsim.config.FP8_V_RANGE).
//   quantize_v  (FP8 P@V) V^T in e4m3: v8t[c][32 b + s] = e4m3(v[32 b + key(s)][c] * v_inv[c]) (cvt.rn.satfinite),
//               keys past nk zero, key(s) = 16 (s / 16) + 8 ((s % 4) / 2) + 2 ((s % 16) / 4) + s % 2 (the order of
//               flash_fwd's P fragment slots).
//   quantize_k_fp4, quantize_q_fp4 (FS_QUANT_NVFP4; flashsim/emulator/quantize.py quantize_fp4_blocks): quantize_k /
//               quantize_q with NVFP4 in place of INT8: per 16-row block A = max |x|, scale = A / FS_NVFP4_ROW_DIV
//               (6 * 448), g = FS_NVFP4_SF_MAX / A and inv = FS_NVFP4_ROW_DIV / A (0 when A is 0); per FS_FP4_BLOCK
//               elements of a row a = max |x|, the ue4m3 scale sf = cvt.rn.satfinite.e4m3(a * g), e = inv / sf (0
//               when sf is 0 or NaN), the codes cvt.rn.satfinite.e2m1x2(x * e), two a byte (the lower-indexed
//               element in the low nibble). Codes with x's strides halved (bytes), block scales (B, H, nb * 16,
//               D / FS_FP4_BLOCK) bytes (rows past n: 0), scales as INT8's.
// Quantizing a block: amax = max |x| over the block, starting from 0 (fmaxf ignores NaN, so amax is never NaN; the
// max is order-free), scale = amax / 127, inv = 127 / amax (0 when amax is 0), x_q = cvt.rni.s32(x * inv) clamped
// to [-127, 127] (cvt.rni turns NaN into 0). An inf in a block makes scale inf and inv 0: every element of the
// block becomes 0 (inf * 0 is NaN, then 0), and every score it touches is 0 * inf = NaN.
// Every float operation is an explicitly rounded IEEE one (__fadd_rn, __fsub_rn, __fmul_rn, __fdiv_rn, __fmaf_rn).
//
// Element strides (batch, head, row) as flash_fwd's; x_q is written with x's strides (same shape, s8).
// Scales: (B, H, ceil(n / FS_QUANT_BLOCK)) f32, mean (B, Hkv, D) f32, corr (B, Hq, nq) f32, all contiguous.

#ifndef FS_HEAD_DIM
#error "build through flashsim.gpu: the configuration arrives as defines (FS_HEAD_DIM, FS_BF16, ...)"
#endif

typedef unsigned short fs_half;   // raw f16 or bf16 bits (FS_BF16)

namespace fsq {
constexpr int D = FS_HEAD_DIM;
constexpr int QB = FS_QUANT_BLOCK;
constexpr int SLICES = FS_MEAN_SLICES;
// quantize_k / quantize_q: one warp per block of QB = 16 rows, WARPS of them per CUDA block. Lane l holds half h = l & 1
// of row l >> 1: channels [h D/2, (h + 1) D/2), read and written in 16-byte pieces (8 elements in, 16 s8 out).
constexpr int WARPS = FS_QUANT_WARPS;
constexpr int V_THREADS = FS_QUANT_V_THREADS;
constexpr int HALF = D / 2;                 // channels a lane holds
constexpr int PIECES = HALF / 8;            // 16-byte loads a lane makes
static_assert(QB == 16 && D % 32 == 0, "a warp holds 16 rows as 32 half rows of at least 16 channels");

__device__ __forceinline__ float widen(unsigned int h) {   // exact: f16 through cvt.f32.f16, bf16 by its bits
#if FS_BF16
    return __uint_as_float(h << 16);
#else
    float r;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }\n" : "=f"(r) : "h"(static_cast<unsigned short>(h)));
    return r;
#endif
}
// element e (0..7) of a 16-byte piece
__device__ __forceinline__ float elem(const uint4& p, int e) {
    const unsigned int w = (e < 2) ? p.x : (e < 4) ? p.y : (e < 6) ? p.z : p.w;
    return widen((e & 1) ? (w >> 16) : (w & 0xffffu));
}

// The warp's 16 rows [row0, row0 + 16) of x (rows >= n are zeros): this lane's pieces, smoothed by `mean` when given
// (x - mean[c], one IEEE subtraction), quantized to s8 into xq (x's strides), the block's scale stored by lane 0.
// `raw` keeps the lane's input for the caller (quantize_q's q . mean).
__device__ __forceinline__ void quantize_rows(const fs_half* __restrict__ x, const float* __restrict__ mean,
                                              signed char* __restrict__ xq, long long rs, int row0, int n,
                                              float* __restrict__ scale, uint4 (&raw)[PIECES]) {
    const int lane = threadIdx.x % 32, r = row0 + (lane >> 1), c0 = (lane & 1) * HALF;
    const bool live = r < n;
#pragma unroll
    for (int i = 0; i < PIECES; ++i)
        raw[i] = live ? *reinterpret_cast<const uint4*>(x + static_cast<long long>(r) * rs + c0 + 8 * i)
                      : make_uint4(0u, 0u, 0u, 0u);
    // amax over the block, from 0 (fmaxf ignores NaN; the max is order-free); rows past n count as 0
    float a = 0.f;
#pragma unroll
    for (int i = 0; i < PIECES; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            float v = elem(raw[i], e);
            if (mean != nullptr) v = live ? __fsub_rn(v, mean[c0 + 8 * i + e]) : 0.f;
            a = fmaxf(a, fabsf(v));
        }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float inv = a > 0.f ? __fdiv_rn(127.f, a) : 0.f;
    if (lane == 0) *scale = __fdiv_rn(a, 127.f);
    if (!live) return;
#pragma unroll
    for (int i = 0; i < PIECES; i += 2) {      // 16 s8 per store (two pieces)
        unsigned int w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            float v = elem(raw[i + e / 8], e % 8);
            if (mean != nullptr) v = __fsub_rn(v, mean[c0 + 8 * i + e]);
            const int qv = min(127, max(-127, __float2int_rn(__fmul_rn(v, inv))));
            w[e / 4] |= (static_cast<unsigned int>(qv) & 0xffu) << (8 * (e % 4));
        }
        *reinterpret_cast<uint4*>(xq + static_cast<long long>(r) * rs + c0 + 8 * i) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// Per-channel fold over the tokens, for k_mean (a sum) and v_absmax (a max of |x|): thread (x, s) folds channel
// c = 32 blockIdx.x + x of tokens s, s + SLICES, ... in order from `init` with op(acc, x); then the SLICES partial
// results are folded in order 0, 1, ... Every thread returns the total. UNROLL loads are issued before their ops
// (which keep the order), so a thread waits one memory latency per UNROLL tokens instead of one per token.
struct AddOp { __device__ float operator()(float acc, float x) const { return __fadd_rn(acc, x); } };
struct AbsMaxOp {   // fmaxf ignores NaN; the partial results are >= 0, so folding them with |.| changes nothing
    __device__ float operator()(float acc, float x) const { return fmaxf(acc, fabsf(x)); }
};
template <typename Op>
__device__ __forceinline__ float fold_tokens(const fs_half* __restrict__ xh, int n, long long rs, Op op) {
    __shared__ float part[SLICES][32];
    constexpr int UNROLL = 8;
    const int s = threadIdx.y;
    float acc = 0.f;
    int j = s;
    for (; j + (UNROLL - 1) * SLICES < n; j += UNROLL * SLICES) {
        fs_half x[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) x[u] = xh[static_cast<long long>(j + u * SLICES) * rs];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc = op(acc, widen(x[u]));
    }
    for (; j < n; j += SLICES) acc = op(acc, widen(xh[static_cast<long long>(j) * rs]));
    part[s][threadIdx.x] = acc;
    __syncthreads();
    float tot = part[0][threadIdx.x];
#pragma unroll
    for (int i = 1; i < SLICES; ++i) tot = op(tot, part[i][threadIdx.x]);
    return tot;
}
// The row correction of quantize_q / quantize_q_fp4: each row's q . mean (fma over the channels in order from 0: the
// even lane of the row's pair takes the first half, hands its sum to the odd lane, which goes on with the second
// half), stored by the odd lane for rows below nq.
__device__ __forceinline__ void row_correction(const uint4 (&raw)[PIECES], const float* __restrict__ mh,
                                               float* __restrict__ corr, long long bh, int qb, int nq) {
    const int lane = threadIdx.x % 32, r = qb * QB + (lane >> 1), c0 = (lane & 1) * HALF;
    float acc = 0.f;
    if (!(lane & 1)) {
#pragma unroll
        for (int i = 0; i < PIECES; ++i)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc = __fmaf_rn(elem(raw[i], e), mh[c0 + 8 * i + e], acc);
    }
    acc = __shfl_sync(0xffffffffu, acc, lane & ~1);   // the odd lane starts from its pair's first half
    if (lane & 1) {
#pragma unroll
        for (int i = 0; i < PIECES; ++i)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc = __fmaf_rn(elem(raw[i], e), mh[c0 + 8 * i + e], acc);
        if (r < nq) corr[bh * nq + r] = acc;
    }
}
#if FS_QUANT_NVFP4
// ---- NVFP4 (quantize_k_fp4, quantize_q_fp4): the warp and lane shapes of quantize_rows; a lane's half row holds
// LANE_SF whole blocks of FB elements.
constexpr int FB = FS_FP4_BLOCK;           // elements per ue4m3 block scale
constexpr int SF_ROW = D / FB;             // block scales of a row
constexpr int LANE_SF = HALF / FB;         // of a lane's half row: 2 (D = 64) or 4 (D = 128)
static_assert(FB == 16 && (LANE_SF == 2 || LANE_SF == 4), "NVFP4: d = 64 or 128 (flashsim.config.NVFP4_HEAD_DIMS)");
// cvt.rn.satfinite.e4m3x2 of (0, x): x's e4m3 code in the low byte (x >= 0 here, so it is a ue4m3 code; NaN: 0x7f)
__device__ __forceinline__ unsigned int ue4m3_code(float x) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(0.f), "f"(x));
    return r & 0xffu;
}
// a ue4m3 code's value, exactly (cvt.rn.f16x2.e4m3x2, then f16 -> f32)
__device__ __forceinline__ float ue4m3_value(unsigned int code) {
    unsigned int h;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.rn.f16x2.e4m3x2 %0, t; }\n" : "=r"(h) : "h"(static_cast<unsigned short>(code)));
    return widen(h & 0xffffu);
}
// eight f32 -> eight e2m1 codes (cvt.rn.satfinite.e2m1x2: to nearest even, clamped to +-6), y[0] in the low nibble
__device__ __forceinline__ unsigned int e2m1x8(const float (&y)[8]) {
    unsigned int r;
    asm("{\n .reg .b8 b0, b1, b2, b3;\n"
        " cvt.rn.satfinite.e2m1x2.f32 b0, %2, %1;\n"
        " cvt.rn.satfinite.e2m1x2.f32 b1, %4, %3;\n"
        " cvt.rn.satfinite.e2m1x2.f32 b2, %6, %5;\n"
        " cvt.rn.satfinite.e2m1x2.f32 b3, %8, %7;\n"
        " mov.b32 %0, {b0, b1, b2, b3};\n}\n"
        : "=r"(r)
        : "f"(y[0]), "f"(y[1]), "f"(y[2]), "f"(y[3]), "f"(y[4]), "f"(y[5]), "f"(y[6]), "f"(y[7]));
    return r;
}
// quantize_rows in NVFP4: the warp's 16 rows [row0, row0 + 16) of x (rows >= n are zeros), smoothed by `mean` when
// given; codes two a byte into xq (x's strides in bytes halved), the rows' block scales into sf (SF_ROW bytes a row,
// every row of the block: rows >= n get 0), the block's f32 scale stored by lane 0.
__device__ __forceinline__ void quantize_rows_fp4(const fs_half* __restrict__ x, const float* __restrict__ mean,
                                                  unsigned char* __restrict__ xq, unsigned char* __restrict__ sf,
                                                  long long rs, int row0, int n, float* __restrict__ scale,
                                                  uint4 (&raw)[PIECES]) {
    const int lane = threadIdx.x % 32, r = row0 + (lane >> 1), c0 = (lane & 1) * HALF;
    const bool live = r < n;
#pragma unroll
    for (int i = 0; i < PIECES; ++i)
        raw[i] = live ? *reinterpret_cast<const uint4*>(x + static_cast<long long>(r) * rs + c0 + 8 * i)
                      : make_uint4(0u, 0u, 0u, 0u);
    // the lane's element j (smoothed; rows past n: 0)
    auto value = [&](int j) {
        float v = elem(raw[j / 8], j % 8);
        if (mean != nullptr) v = live ? __fsub_rn(v, mean[c0 + j]) : 0.f;
        return v;
    };
    // each block's amax and the 16 rows' (from 0; fmaxf ignores NaN; order-free)
    float ab[LANE_SF], a = 0.f;
#pragma unroll
    for (int b = 0; b < LANE_SF; ++b) {
        float m = 0.f;
#pragma unroll
        for (int e = 0; e < FB; ++e) m = fmaxf(m, fabsf(value(FB * b + e)));
        ab[b] = m;
        a = fmaxf(a, m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float inv = a > 0.f ? __fdiv_rn(static_cast<float>(FS_NVFP4_ROW_DIV), a) : 0.f;
    const float g = a > 0.f ? __fdiv_rn(static_cast<float>(FS_NVFP4_SF_MAX), a) : 0.f;
    if (lane == 0) *scale = __fdiv_rn(a, static_cast<float>(FS_NVFP4_ROW_DIV));
    unsigned int sfw = 0u, codes[HALF / 8];
#pragma unroll
    for (int b = 0; b < LANE_SF; ++b) {
        const unsigned int c = ue4m3_code(__fmul_rn(ab[b], g));
        sfw |= c << (8 * b);
        const float sv = ue4m3_value(c);
        const float e = sv > 0.f ? __fdiv_rn(inv, sv) : 0.f;   // 0 for a zero or NaN scale
#pragma unroll
        for (int h = 0; h < FB / 8; ++h) {
            float y[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) y[u] = __fmul_rn(value(FB * b + 8 * h + u), e);
            codes[(FB / 8) * b + h] = e2m1x8(y);
        }
    }
    unsigned char* sfr = sf + static_cast<long long>(r) * SF_ROW + c0 / FB;
    if (LANE_SF == 4) *reinterpret_cast<unsigned int*>(sfr) = sfw;
    else *reinterpret_cast<unsigned short*>(sfr) = static_cast<unsigned short>(sfw);
    if (!live) return;
    unsigned char* q = xq + static_cast<long long>(r) * (rs / 2) + c0 / 2;
#pragma unroll
    for (int i = 0; i < HALF / 32; ++i)     // 16 bytes (32 codes) per store
        *reinterpret_cast<uint4*>(q + 16 * i) = make_uint4(codes[4 * i], codes[4 * i + 1], codes[4 * i + 2], codes[4 * i + 3]);
}
#endif
}  // namespace fsq

// grid (D / 32, Hkv, B), block (32, FS_MEAN_SLICES)
extern "C" __global__ void k_mean(const fs_half* __restrict__ k, float* __restrict__ mean, int nk, long long bs,
                                  long long hs, long long rs) {
    using namespace fsq;
    const int c = blockIdx.x * 32 + threadIdx.x;
    const float tot = fold_tokens(k + blockIdx.z * bs + blockIdx.y * hs + c, nk, rs, AddOp());
    if (threadIdx.y == 0)
        mean[(static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * D + c] = __fdiv_rn(tot, __int2float_rn(nk));
}

// grid (ceil(nk / (QB WARPS)), Hkv, B), block 32 WARPS
extern "C" __global__ void __launch_bounds__(32 * fsq::WARPS)
quantize_k(const fs_half* __restrict__ k, const float* __restrict__ mean, signed char* __restrict__ kq,
           float* __restrict__ scale, int nk, long long bs, long long hs, long long rs) {
    using namespace fsq;
    const long long bh = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y;
    const long long base = blockIdx.z * bs + blockIdx.y * hs;
    const int qb = blockIdx.x * WARPS + threadIdx.x / 32, nb = (nk + QB - 1) / QB;
    if (qb >= nb) return;
    uint4 raw[PIECES];
    quantize_rows(k + base, mean + bh * D, kq + base, rs, qb * QB, nk, scale + bh * nb + qb, raw);
}

// grid (ceil(nq / (QB WARPS)), Hq, B), block 32 WARPS; query head h uses K/V head h / group's mean. corr: each row's
// q . mean, fma over the channels in order from 0: the even lane of the row's pair takes the first half, hands its
// sum to the odd lane, which goes on with the second half.
extern "C" __global__ void __launch_bounds__(32 * fsq::WARPS)
quantize_q(const fs_half* __restrict__ q, const float* __restrict__ mean, signed char* __restrict__ qq,
           float* __restrict__ scale, float* __restrict__ corr, int nq, int group, long long bs, long long hs,
           long long rs) {
    using namespace fsq;
    const long long bh = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y;
    const long long base = blockIdx.z * bs + blockIdx.y * hs;
    const int qb = blockIdx.x * WARPS + threadIdx.x / 32, nb = (nq + QB - 1) / QB;
    if (qb >= nb) return;
    const float* mh = mean + (static_cast<long long>(blockIdx.z) * (gridDim.y / group) + blockIdx.y / group) * D;
    uint4 raw[PIECES];
    quantize_rows(q + base, nullptr, qq + base, rs, qb * QB, nq, scale + bh * nb + qb, raw);
    row_correction(raw, mh, corr, bh, qb, nq);
}

#if FS_QUANT_NVFP4
// grid (ceil(nk / (QB WARPS)), Hkv, B), block 32 WARPS: quantize_k in NVFP4. kq: codes with k's strides halved
// (bytes); sf: (B, Hkv, nb * QB, SF_ROW) block scales; scale: (B, Hkv, nb) f32.
extern "C" __global__ void __launch_bounds__(32 * fsq::WARPS)
quantize_k_fp4(const fs_half* __restrict__ k, const float* __restrict__ mean, unsigned char* __restrict__ kq,
               unsigned char* __restrict__ sf, float* __restrict__ scale, int nk, long long bs, long long hs,
               long long rs) {
    using namespace fsq;
    const long long bh = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y;
    const long long base = blockIdx.z * bs + blockIdx.y * hs;
    const int qb = blockIdx.x * WARPS + threadIdx.x / 32, nb = (nk + QB - 1) / QB;
    if (qb >= nb) return;
    uint4 raw[PIECES];
    quantize_rows_fp4(k + base, mean + bh * D, kq + base / 2, sf + bh * nb * QB * SF_ROW, rs, qb * QB, nk,
                      scale + bh * nb + qb, raw);
}

// grid (ceil(nq / (QB WARPS)), Hq, B), block 32 WARPS: quantize_q in NVFP4 (its row corrections as quantize_q's).
extern "C" __global__ void __launch_bounds__(32 * fsq::WARPS)
quantize_q_fp4(const fs_half* __restrict__ q, const float* __restrict__ mean, unsigned char* __restrict__ qq,
               unsigned char* __restrict__ sf, float* __restrict__ scale, float* __restrict__ corr, int nq, int group,
               long long bs, long long hs, long long rs) {
    using namespace fsq;
    const long long bh = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y;
    const long long base = blockIdx.z * bs + blockIdx.y * hs;
    const int qb = blockIdx.x * WARPS + threadIdx.x / 32, nb = (nq + QB - 1) / QB;
    if (qb >= nb) return;
    const float* mh = mean + (static_cast<long long>(blockIdx.z) * (gridDim.y / group) + blockIdx.y / group) * D;
    uint4 raw[PIECES];
    quantize_rows_fp4(q + base, nullptr, qq + base / 2, sf + bh * nb * QB * SF_ROW, rs, qb * QB, nq,
                      scale + bh * nb + qb, raw);
    row_correction(raw, mh, corr, bh, qb, nq);
}
#endif

// grid (D / 32, Hkv, B), block (32, FS_MEAN_SLICES)
extern "C" __global__ void v_absmax(const fs_half* __restrict__ v, float* __restrict__ v_inv,
                                    float* __restrict__ v_deq, int nk, long long bs, long long hs, long long rs,
                                    float v_range, float deq_div) {
    using namespace fsq;
    const int c = blockIdx.x * 32 + threadIdx.x;
    const float m = fold_tokens(v + blockIdx.z * bs + blockIdx.y * hs + c, nk, rs, AbsMaxOp());
    if (threadIdx.y == 0) {
        const long long o = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * D + c;
        v_inv[o] = m > 0.f ? __fdiv_rn(v_range, m) : 0.f;
        v_deq[o] = __fdiv_rn(m, deq_div);
    }
}

// grid (nkp / 32, Hkv, B), block V_THREADS. The block's 32 keys are read row by row in 16-byte pieces (keys past nk
// as zeros) into shared memory, then each thread writes 4 slots (one u32) of one channel's row of V^T: a warp
// writes 4 channels x 32 contiguous bytes, and no global read is strided by a row.
extern "C" __global__ void __launch_bounds__(fsq::V_THREADS)
quantize_v(const fs_half* __restrict__ v, const float* __restrict__ v_inv, unsigned char* __restrict__ v8t, int nk,
           int nkp, long long bs, long long hs, long long rs) {
    using namespace fsq;
    constexpr int ROW_PIECES = D / 8;                       // 16-byte pieces of a row of V
    constexpr int PITCH = ROW_PIECES + 1;                   // a padding piece per row: key rows start in other banks
    __shared__ uint4 tile[32][PITCH];
    const long long bh = static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y;
    const fs_half* vh = v + blockIdx.z * bs + blockIdx.y * hs;
    const int b0 = blockIdx.x * 32;
    for (int e = threadIdx.x; e < 32 * ROW_PIECES; e += V_THREADS) {
        const int key = b0 + e / ROW_PIECES, p = e % ROW_PIECES;
        tile[e / ROW_PIECES][p] = key < nk ? *reinterpret_cast<const uint4*>(vh + static_cast<long long>(key) * rs + 8 * p)
                                           : make_uint4(0u, 0u, 0u, 0u);
    }
    __syncthreads();
    const fs_half* t = reinterpret_cast<const fs_half*>(&tile[0][0]);
    for (int e = threadIdx.x; e < 8 * D; e += V_THREADS) {
        const int c = e / 8, s0 = 4 * (e % 8);
        const float inv = v_inv[bh * D + c];
        float x[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int slot = s0 + u;
            const int key = 16 * (slot / 16) + 8 * ((slot % 4) / 2) + 2 * ((slot % 16) / 4) + slot % 2;
            x[u] = __fmul_rn(widen(t[key * 8 * PITCH + c]), inv);   // rows past nk: +0 (inv is finite)
        }
        unsigned short lo, hi;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x[1]), "f"(x[0]));
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x[3]), "f"(x[2]));
        *reinterpret_cast<unsigned int*>(v8t + (bh * D + c) * static_cast<long long>(nkp) + b0 + s0) =
            static_cast<unsigned int>(lo) | (static_cast<unsigned int>(hi) << 16);
    }
}
