// Silicon probes of the warp's matrix instructions (flashsim.ptx.probes.matrix), through shared memory. Blocks of
// 64 threads (two warps); each warp owns 64 rows of 16 bytes of shared memory, filled from ROWS; lane i gives the
// address of row SEL[i] of its warp's rows. Registers come from / go to REGS / OUT, R words per lane.
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define SETUP                                                                                                  \
    __shared__ __align__(16) uint32_t smem[2 * 64 * 4];                                                       \
    int t = threadIdx.x, w = t / 32;                                                                          \
    for (int k = t; k < 2 * 64 * 4; k += 64) smem[k] = ROWS[k];                                               \
    __syncthreads();                                                                                            \
    uint32_t* row = smem + 4 * (64 * w + SEL[t]);                                                             \
    uint32_t sa = (uint32_t)__cvta_generic_to_shared(row);                                                    \
    (void)sa;
#define WRITE_BACK                                                                                             \
    __syncthreads();                                                                                            \
    for (int k = t; k < 2 * 64 * 4; k += 64) SMEM_OUT[k] = smem[k];

#define PARAMS const uint32_t *ROWS, const uint32_t *SEL, const uint32_t *REGS, uint32_t *OUT, uint32_t *SMEM_OUT

#define LD1(NAME, FORM, ADDR, CA)                                                                              \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP uint32_t d0;                                                                                      \
        asm volatile("ldmatrix.sync.aligned.m8n8.x1" FORM ".b16 {%0}, [%1];" : "=r"(d0) : CA(ADDR));           \
        OUT[t] = d0;                                                                                            \
        WRITE_BACK                                                                                              \
    }
#define LD2(NAME, FORM, ADDR, CA)                                                                              \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP uint32_t d0, d1;                                                                                  \
        asm volatile("ldmatrix.sync.aligned.m8n8.x2" FORM ".b16 {%0, %1}, [%2];" : "=r"(d0), "=r"(d1) : CA(ADDR)); \
        OUT[2 * t] = d0;                                                                                        \
        OUT[2 * t + 1] = d1;                                                                                    \
        WRITE_BACK                                                                                              \
    }
#define LD4(NAME, FORM, ADDR, CA)                                                                              \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP uint32_t d0, d1, d2, d3;                                                                          \
        asm volatile("ldmatrix.sync.aligned.m8n8.x4" FORM ".b16 {%0, %1, %2, %3}, [%4];"                        \
                     : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3) : CA(ADDR));                                      \
        OUT[4 * t] = d0;                                                                                        \
        OUT[4 * t + 1] = d1;                                                                                    \
        OUT[4 * t + 2] = d2;                                                                                    \
        OUT[4 * t + 3] = d3;                                                                                    \
        WRITE_BACK                                                                                              \
    }
LD1(ldmatrix_x1, ".shared", sa, "r")
LD2(ldmatrix_x2, ".shared", sa, "r")
LD4(ldmatrix_x4, ".shared", sa, "r")
LD1(ldmatrix_x1_trans, ".trans.shared", sa, "r")
LD2(ldmatrix_x2_trans, ".trans.shared::cta", sa, "r")
LD4(ldmatrix_x4_trans, ".trans.shared", sa, "r")
LD2(ldmatrix_x2_generic, "", row, "l")
LD4(ldmatrix_x4_trans_generic, ".trans", row, "l")

#define ST(NAME, NUM, FORM, ADDR, CA, VEC, ...)                                                                \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP const uint32_t* r = REGS + NUM * t;                                                              \
        __syncthreads();                                                                                        \
        for (int k = t; k < 2 * 64 * 4; k += 64) smem[k] = 0;                                                 \
        __syncthreads();                                                                                        \
        asm volatile("stmatrix.sync.aligned.m8n8.x" #NUM FORM ".b16 [%0], " VEC ";" : : CA(ADDR), __VA_ARGS__ \
                     : "memory");                                                                               \
        WRITE_BACK                                                                                              \
    }
ST(stmatrix_x1, 1, ".shared", sa, "r", "{%1}", "r"(r[0]))
ST(stmatrix_x2, 2, ".shared", sa, "r", "{%1, %2}", "r"(r[0]), "r"(r[1]))
ST(stmatrix_x4, 4, ".shared", sa, "r", "{%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]))
ST(stmatrix_x1_trans, 1, ".trans.shared", sa, "r", "{%1}", "r"(r[0]))
ST(stmatrix_x2_trans, 2, ".trans.shared::cta", sa, "r", "{%1, %2}", "r"(r[0]), "r"(r[1]))
ST(stmatrix_x4_trans, 4, ".trans.shared", sa, "r", "{%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]))
ST(stmatrix_x4_generic, 4, "", row, "l", "{%1, %2, %3, %4}", "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]))

extern "C" __global__ void movmatrix(PARAMS) {
    SETUP uint32_t d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(REGS[t]));
    OUT[t] = d;
    WRITE_BACK
}

// mma.sync: lane t's A, B, C registers are REGS[R t ..]; D goes to OUT[ND t ..]
#define MMA4(NAME, TYPES)                                                                                      \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP const uint32_t* r = REGS + 10 * t;                                                               \
        uint32_t d0, d1, d2, d3;                                                                                \
        asm volatile("mma.sync.aligned." TYPES " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "                \
                     "{%10, %11, %12, %13};"                                                                    \
                     : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)                                                   \
                     : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]),  \
                       "r"(r[8]), "r"(r[9]));                                                                   \
        OUT[4 * t] = d0;                                                                                        \
        OUT[4 * t + 1] = d1;                                                                                    \
        OUT[4 * t + 2] = d2;                                                                                    \
        OUT[4 * t + 3] = d3;                                                                                    \
        WRITE_BACK                                                                                              \
    }
#define MMA2(NAME, TYPES)                                                                                      \
    extern "C" __global__ void NAME(PARAMS) {                                                                  \
        SETUP const uint32_t* r = REGS + 8 * t;                                                                \
        uint32_t d0, d1;                                                                                        \
        asm volatile("mma.sync.aligned." TYPES " {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"               \
                     : "=r"(d0), "=r"(d1)                                                                       \
                     : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7])); \
        OUT[2 * t] = d0;                                                                                        \
        OUT[2 * t + 1] = d1;                                                                                    \
        WRITE_BACK                                                                                              \
    }
MMA4(mma_m16n8k16_f32_f16, "m16n8k16.row.col.f32.f16.f16.f32")
MMA4(mma_m16n8k16_f32_bf16, "m16n8k16.row.col.f32.bf16.bf16.f32")
MMA2(mma_m16n8k16_f16_f16, "m16n8k16.row.col.f16.f16.f16.f16")
MMA4(mma_m16n8k32_s32_s8, "m16n8k32.row.col.s32.s8.s8.s32")
MMA4(mma_m16n8k32_f32_e4m3, "m16n8k32.row.col.f32.e4m3.e4m3.f32")
MMA4(mma_m16n8k32_f32_e5m2_e4m3, "m16n8k32.row.col.f32.e5m2.e4m3.f32")
MMA2(mma_m16n8k32_f16_e4m3_e5m2, "m16n8k32.row.col.f16.e4m3.e5m2.f16")

// the kernel's path: A (16 x 16 f16, row-major rows 0..31: row m, half k / 8) by ldmatrix.x4, B (16 x 8 f16, rows
// 32..47: row k) by ldmatrix.x2.trans, mma f16 += with C from REGS, D stored back by stmatrix.x2 at rows 48..63
extern "C" __global__ void ldmatrix_mma_stmatrix(PARAMS) {
    SETUP uint32_t a0, a1, a2, a3, b0, b1, d0, d1;
    int lane = t % 32;
    uint32_t arow = (uint32_t)__cvta_generic_to_shared(smem + 4 * (64 * w + 2 * (lane % 16) + lane / 16));
    uint32_t brow = (uint32_t)__cvta_generic_to_shared(smem + 4 * (64 * w + 32 + lane % 16));
    uint32_t drow = (uint32_t)__cvta_generic_to_shared(smem + 4 * (64 * w + 48 + lane % 16));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(arow));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(brow));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"
                 : "=r"(d0), "=r"(d1)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(REGS[2 * t]), "r"(REGS[2 * t + 1]));
    __syncthreads();
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" : : "r"(drow), "r"(d0), "r"(d1)
                 : "memory");
    OUT[2 * t] = d0;
    OUT[2 * t + 1] = d1;
    WRITE_BACK
}
