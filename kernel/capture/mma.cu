// Capture kernels for mma.sync.aligned.m16n8k16.row.col: one kernel per type, driven by
// flashsim/gpu/capture/mma.py.
//
// Memory layout (raw bit patterns, one mma after the other):
//   A: n x 16 x 16 (row-major M x K) 16-bit f16 / bf16     B: n x 16 x 8 (K x N, row-major) 16-bit
//   C, D: n x 16 x 8 (row-major M x N), 32-bit f32 or 16-bit f16
// Each warp takes mma m = warp, warp + nwarps, ...: every lane loads its fragment registers straight from
// global memory with the PTX ISA formulas ("Matrix fragments for mma.m16n8k16"), runs one
// mma.sync and stores its D fragment the same way. Values travel as bits: no float arithmetic touches them.

typedef unsigned short u16;
typedef unsigned int u32;

// ---- fragment maps: element i of a lane's fragment -> (row, col); groupID = lane >> 2, tid = lane % 4 ----
// A (16x16, .row): a0..a7; row = groupID for a0,a1,a4,a5 and groupID + 8 otherwise;
//                  col = tid*2 + (i & 1), plus 8 for i >= 4.
__device__ __forceinline__ int a_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int a_col(int lane, int i) { return (lane & 3) * 2 + (i & 1) + 8 * (i >> 2); }
// B (16x8, .col): b0..b3; row (k) = tid*2 + (i & 1), plus 8 for i >= 2; col = groupID.
__device__ __forceinline__ int b_row(int lane, int i) { return (lane & 3) * 2 + (i & 1) + 8 * (i >> 1); }
__device__ __forceinline__ int b_col(int lane, int i) { return lane >> 2; }
// C / D (16x8): c0..c3; row = groupID for c0,c1 and groupID + 8 for c2,c3; col = tid*2 + (i & 1).
__device__ __forceinline__ int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
__device__ __forceinline__ int c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

// a .f16x2 / .bf16x2 register: the lower-indexed element in the low 16 bits
__device__ __forceinline__ u32 pack2(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

__device__ __forceinline__ void load_ab(const u16* a, const u16* b, int lane, u32 ra[4], u32 rb[2]) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int i = 2 * r;
        ra[r] = pack2(a[a_row(lane, i) * 16 + a_col(lane, i)], a[a_row(lane, i + 1) * 16 + a_col(lane, i + 1)]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = 2 * r;
        rb[r] = pack2(b[b_row(lane, i) * 8 + b_col(lane, i)], b[b_row(lane, i + 1) * 8 + b_col(lane, i + 1)]);
    }
}

#define MMA_LOOP_BEGIN                                                                  \
    const int lane = threadIdx.x & 31;                                                  \
    const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);     \
    const int nwarps = (int)((gridDim.x * (unsigned)blockDim.x) >> 5);                  \
    for (int m = warp; m < n; m += nwarps) {                                            \
        const u16* a = A + (size_t)m * 256;                                             \
        const u16* b = B + (size_t)m * 128;                                             \
        u32 ra[4], rb[2];                                                               \
        load_ab(a, b, lane, ra, rb);

#define MMA_LOOP_END }

// D = A * B + C with f32 C / D; the 32-bit words move through .f32 registers by bit casts only
#define MMA_F32_KERNEL(NAME, ITYPE)                                                                      \
extern "C" __global__ void NAME(const u16* __restrict__ A, const u16* __restrict__ B,                      \
                                const u32* __restrict__ C, u32* __restrict__ D, int n) {                  \
    MMA_LOOP_BEGIN                                                                                       \
        const u32* c = C + (size_t)m * 128;                                                              \
        u32* d = D + (size_t)m * 128;                                                                    \
        float rc[4], rd[4];                                                                              \
        _Pragma("unroll") for (int i = 0; i < 4; ++i) rc[i] = __uint_as_float(c[c_row(lane, i) * 8 + c_col(lane, i)]); \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ITYPE "." ITYPE ".f32 "                   \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"             \
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])                                 \
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),           \
                       "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));                                  \
        _Pragma("unroll") for (int i = 0; i < 4; ++i) d[c_row(lane, i) * 8 + c_col(lane, i)] = __float_as_uint(rd[i]); \
    MMA_LOOP_END                                                                                         \
}

MMA_F32_KERNEL(mma_f32_f16_f16_f32, "f16")
MMA_F32_KERNEL(mma_f32_bf16_bf16_f32, "bf16")

// D = A * B + C with f16 C / D: two .f16x2 registers per lane
extern "C" __global__ void mma_f16_f16_f16_f16(const u16* __restrict__ A, const u16* __restrict__ B,
                                               const u16* __restrict__ C, u16* __restrict__ D, int n) {
    MMA_LOOP_BEGIN
        const u16* c = C + (size_t)m * 128;
        u16* d = D + (size_t)m * 128;
        u32 rc[2], rd[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = 2 * r;
            rc[r] = pack2(c[c_row(lane, i) * 8 + c_col(lane, i)], c[c_row(lane, i + 1) * 8 + c_col(lane, i + 1)]);
        }
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                     "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
                     : "=r"(rd[0]), "=r"(rd[1])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "r"(rc[0]), "r"(rc[1]));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = 2 * r;
            d[c_row(lane, i) * 8 + c_col(lane, i)] = (u16)(rd[r] & 0xFFFFu);
            d[c_row(lane, i + 1) * 8 + c_col(lane, i + 1)] = (u16)(rd[r] >> 16);
        }
    MMA_LOOP_END
}
