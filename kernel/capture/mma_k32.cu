// Capture kernels for mma.sync.aligned.m16n8k32.row.col with 8-bit inputs (s8; e4m3 / e5m2, mixed too), driven by
// flashsim/gpu/capture/mma_k32.py.
//
// Memory layout (raw bit patterns, one mma after the other):
//   A: n x 16 x 32 bytes (row-major M x K)     B: n x 32 x 8 bytes (K x N, row-major)
//   C, D: n x 16 x 8 (row-major M x N): 32-bit (s32 / f32) or 16-bit (f16)
// Each warp takes mma m = warp, warp + nwarps, ...; every lane loads its fragment registers from global memory with
// the PTX ISA's fragment formulas for m16n8k32 with 8-bit types (lane = 4 g + t):
//   A: a0 = row g, cols 4t..4t+3; a1 = row g+8, the same cols; a2 = row g, cols 16+4t..; a3 = row g+8, cols 16+4t..
//   B: b0 = rows 4t..4t+3 of col g; b1 = rows 16+4t.. of col g        (lowest index in the lowest byte)
//   C / D: c0, c1 = row g, cols 2t, 2t+1; c2, c3 = row g+8 (f16: {c0, c1} and {c2, c3} as two f16x2 registers)
// runs one mma.sync and stores D the same way. Values travel as bits only.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;

__device__ __forceinline__ u32 pack4(const u8* p, int stride) {   // p[0], p[stride], p[2 stride], p[3 stride]
    return (u32)p[0] | ((u32)p[stride] << 8) | ((u32)p[2 * stride] << 16) | ((u32)p[3 * stride] << 24);
}

__device__ __forceinline__ void load_ab(const u8* a, const u8* b, int lane, u32 ra[4], u32 rb[2]) {
    const int g = lane >> 2, t = lane & 3;
    ra[0] = pack4(a + g * 32 + 4 * t, 1);
    ra[1] = pack4(a + (g + 8) * 32 + 4 * t, 1);
    ra[2] = pack4(a + g * 32 + 16 + 4 * t, 1);
    ra[3] = pack4(a + (g + 8) * 32 + 16 + 4 * t, 1);
    rb[0] = pack4(b + (4 * t) * 8 + g, 8);
    rb[1] = pack4(b + (16 + 4 * t) * 8 + g, 8);
}

__device__ __forceinline__ int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
__device__ __forceinline__ int c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

#define LOOP_BEGIN                                                                      \
    const int lane = threadIdx.x & 31;                                                  \
    const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);     \
    const int nwarps = (int)((gridDim.x * (unsigned)blockDim.x) >> 5);                  \
    for (int m = warp; m < n; m += nwarps) {                                            \
        u32 ra[4], rb[2];                                                               \
        load_ab(A + (size_t)m * 512, B + (size_t)m * 256, lane, ra, rb);

// 32-bit accumulators (s32 or f32): the words move through registers by bit casts only
#define K32_ACC32_KERNEL(NAME, TYPES)                                                                        \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,                           \
                                const u32* __restrict__ C, u32* __restrict__ D, int n) {                      \
    LOOP_BEGIN                                                                                               \
        const u32* c = C + (size_t)m * 128;                                                                  \
        u32* d = D + (size_t)m * 128;                                                                        \
        u32 rc[4], rd[4];                                                                                    \
        _Pragma("unroll") for (int i = 0; i < 4; ++i) rc[i] = c[c_row(lane, i) * 8 + c_col(lane, i)];        \
        asm volatile("mma.sync.aligned.m16n8k32.row.col." TYPES " "                                          \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"                 \
                     : "=r"(rd[0]), "=r"(rd[1]), "=r"(rd[2]), "=r"(rd[3])                                     \
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),               \
                       "r"(rc[0]), "r"(rc[1]), "r"(rc[2]), "r"(rc[3]));                                      \
        _Pragma("unroll") for (int i = 0; i < 4; ++i) d[c_row(lane, i) * 8 + c_col(lane, i)] = rd[i];        \
    }                                                                                                        \
}

// f16 accumulators: two f16x2 registers, the lower column in the low half
#define K32_ACC16_KERNEL(NAME, TYPES)                                                                        \
extern "C" __global__ void NAME(const u8* __restrict__ A, const u8* __restrict__ B,                           \
                                const u16* __restrict__ C, u16* __restrict__ D, int n) {                      \
    LOOP_BEGIN                                                                                               \
        const u16* c = C + (size_t)m * 128;                                                                  \
        u16* d = D + (size_t)m * 128;                                                                        \
        u32 rc[2], rd[2];                                                                                    \
        _Pragma("unroll") for (int r = 0; r < 2; ++r)                                                        \
            rc[r] = (u32)c[c_row(lane, 2 * r) * 8 + c_col(lane, 2 * r)]                                      \
                  | ((u32)c[c_row(lane, 2 * r + 1) * 8 + c_col(lane, 2 * r + 1)] << 16);                     \
        asm volatile("mma.sync.aligned.m16n8k32.row.col." TYPES " "                                          \
                     "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"                                     \
                     : "=r"(rd[0]), "=r"(rd[1])                                                              \
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),               \
                       "r"(rc[0]), "r"(rc[1]));                                                              \
        _Pragma("unroll") for (int r = 0; r < 2; ++r) {                                                      \
            d[c_row(lane, 2 * r) * 8 + c_col(lane, 2 * r)] = (u16)(rd[r] & 0xFFFFu);                         \
            d[c_row(lane, 2 * r + 1) * 8 + c_col(lane, 2 * r + 1)] = (u16)(rd[r] >> 16);                     \
        }                                                                                                    \
    }                                                                                                        \
}

K32_ACC32_KERNEL(mma_k32_s32_s8_s8_s32, "s32.s8.s8.s32")
K32_ACC32_KERNEL(mma_k32_f32_e4m3_e4m3_f32, "f32.e4m3.e4m3.f32")
K32_ACC32_KERNEL(mma_k32_f32_e5m2_e5m2_f32, "f32.e5m2.e5m2.f32")
K32_ACC32_KERNEL(mma_k32_f32_e4m3_e5m2_f32, "f32.e4m3.e5m2.f32")
K32_ACC16_KERNEL(mma_k32_f16_e4m3_e4m3_f16, "f16.e4m3.e4m3.f16")
K32_ACC16_KERNEL(mma_k32_f16_e5m2_e5m2_f16, "f16.e5m2.e5m2.f16")

// Register-level probe of the fragment layouts: the registers come straight from memory in register order
// (RA: n x 32 lanes x 4 words, RB: n x 32 x 2, RC / RD: n x 32 x 4), so the host builds them with
// flashsim.layout's m16n8k32 maps (A8, B8, C_F32) and the H200 checks those maps, not a formula of this file.
extern "C" __global__ void mma_k32_regs_s32_s8_s8_s32(const u32* __restrict__ RA, const u32* __restrict__ RB,
                                                     const u32* __restrict__ RC, u32* __restrict__ RD, int n) {
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * (unsigned)blockDim.x) >> 5);
    for (int m = warp; m < n; m += nwarps) {
        const size_t at = (size_t)m * 32 + lane;
        const u32* ra = RA + at * 4;
        const u32* rb = RB + at * 2;
        const u32* rc = RC + at * 4;
        u32 rd[4];
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                     : "=r"(rd[0]), "=r"(rd[1]), "=r"(rd[2]), "=r"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "r"(rc[0]), "r"(rc[1]), "r"(rc[2]), "r"(rc[3]));
#pragma unroll
        for (int i = 0; i < 4; ++i) RD[at * 4 + i] = rd[i];
    }
}
