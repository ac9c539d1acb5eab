// Layout capture: one warp loads known tiles with ldmatrix, runs mma.sync.m16n8k16, repacks S into P,
// converts f32 pairs with cvt.rn.{f16,bf16}x2.f32 and shuffles with shfl.sync; every lane writes its raw
// 32-bit registers into its row of `out` (32 x LC_NOUT words, lane-major).
//
// Driven by flashsim/gpu/capture/layout.py. Every offset and size (LC_*) comes from flashsim/layout/silicon.py
// as a define; the per-lane ldmatrix row addresses come from flashsim/layout/ldmatrix.py as data (`addr`),
// so this file holds no layout knowledge of its own: the silicon is asked, the model answers.
//
// Inputs
//   tiles     LC_NTILES x LC_TILE 16-bit elements, copied to shared memory (tile order: LC_T_*)
//   addr      32 x LC_NADDR element offsets inside a tile: the row address each lane gives ldmatrix
//   host_regs 32 x LC_NHOST words: C f32 (4), C f16x2 (2), A bf16 (4), B bf16 (2) fragments built on the host
//   cvt_in    32 x 2*LC_NCVT f32 bit patterns: pairs (lo, hi) for cvt.rn.*x2.f32
//   shfl_in   LC_NSHFL x 32 words; shfl_mode (0 up, 1 down, 2 bfly, 3 idx), shfl_b (LC_NSHFL x 32), shfl_c

#if !defined(LC_NOUT) || !defined(LC_NTILES) || !defined(LC_TILE) || !defined(LC_NADDR) || !defined(LC_NHOST)
#error "build through flashsim/gpu/capture/layout.py: the LC_* defines come from flashsim.layout.silicon"
#endif

typedef unsigned int u32;
typedef unsigned short u16;

__device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- ldmatrix ----------------------------------------------------------------------------------------
__device__ __forceinline__ void ldsm_x1(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(d[0]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x2(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(d[0]), "=r"(d[1]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x1_t(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(d[0]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x2_t(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(d[0]), "=r"(d[1]) : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(u32* d, u32 a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(a));
}

// ---- mma.m16n8k16 ------------------------------------------------------------------------------------
__device__ __forceinline__ void mma_f32_f16(float* d, const u32* a, const u32* b, const float* c) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void mma_f16_f16(u32* d, const u32* a, const u32* b, const u32* c) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                 "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));
}
__device__ __forceinline__ void mma_f32_bf16(float* d, const u32* a, const u32* b, const float* c) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// ---- conversions: the first source goes to the upper half (PTX cvt, .f16x2 / .bf16x2) --------------------
__device__ __forceinline__ u32 cvt_f16x2(float lo, float hi) {
    u32 d;
    asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}
__device__ __forceinline__ u32 cvt_bf16x2(float lo, float hi) {
    u32 d;
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// ---- shfl.sync with the destination predicate ----------------------------------------------------------
#define LC_SHFL_ASM(MODE)                                                                                  \
    asm volatile("{\n .reg .pred p;\n shfl.sync." MODE ".b32 %0|p, %2, %3, %4, 0xffffffff;\n"             \
                 " selp.u32 %1, 1, 0, p;\n}\n" : "=r"(d), "=r"(pv) : "r"(a), "r"(b), "r"(c))

__device__ __forceinline__ void shfl(int mode, u32 a, u32 b, u32 c, u32& d, u32& pv) {
    switch (mode) {   // uniform across the warp: every lane runs the same operation
        case 0: LC_SHFL_ASM("up"); break;
        case 1: LC_SHFL_ASM("down"); break;
        case 2: LC_SHFL_ASM("bfly"); break;
        default: LC_SHFL_ASM("idx"); break;
    }
}

__device__ __forceinline__ void put(u32* o, int slot, const u32* r, int n) {
    for (int i = 0; i < n; ++i) o[slot + i] = r[i];
}
__device__ __forceinline__ void putf(u32* o, int slot, const float* r, int n) {
    for (int i = 0; i < n; ++i) o[slot + i] = __float_as_uint(r[i]);
}

extern "C" __global__ void __launch_bounds__(32)
layout_capture(const u16* __restrict__ tiles, const int* __restrict__ addr, const u32* __restrict__ host_regs,
               const u32* __restrict__ cvt_in, const u32* __restrict__ shfl_in, const int* __restrict__ shfl_mode,
               const int* __restrict__ shfl_b, const int* __restrict__ shfl_c, u32* __restrict__ out) {
    __shared__ __align__(16) u16 sm[LC_NTILES * LC_TILE];
    const int lane = threadIdx.x;
    for (int i = lane; i < LC_NTILES * LC_TILE; i += 32) sm[i] = tiles[i];
    __syncwarp();

    const int* ad = addr + lane * LC_NADDR;
    u32* o = out + lane * LC_NOUT;
    const u32 base = smem_u32(sm);
#define LC_AT(TILE_ID, ADDR_ID) (base + 2u * static_cast<u32>((TILE_ID) * LC_TILE + ad[ADDR_ID]))

    // 1. ldmatrix on tiles of distinct bit patterns, with the kernel's address patterns
    u32 r[4];
    ldsm_x4(r, LC_AT(LC_T_A_U, LC_ADDR_A_X4));   put(o, LC_LD_A_X4, r, 4);
    ldsm_x2(r, LC_AT(LC_T_K_U, LC_ADDR_KT_X2));  put(o, LC_LD_KT_X2, r, 2);
    ldsm_x4(r, LC_AT(LC_T_K_U, LC_ADDR_KT_X4));  put(o, LC_LD_KT_X4, r, 4);
    ldsm_x2_t(r, LC_AT(LC_T_V_U, LC_ADDR_V_X2T)); put(o, LC_LD_V_X2T, r, 2);
    ldsm_x4_t(r, LC_AT(LC_T_V_U, LC_ADDR_V_X4T)); put(o, LC_LD_V_X4T, r, 4);
    // 2. every ldmatrix variant on 32 rows addressed through a permutation of the lanes
    ldsm_x1(r, LC_AT(LC_T_R, LC_ADDR_R_PERM));   put(o, LC_LD_R_X1, r, 1);
    ldsm_x2(r, LC_AT(LC_T_R, LC_ADDR_R_PERM));   put(o, LC_LD_R_X2, r, 2);
    ldsm_x4(r, LC_AT(LC_T_R, LC_ADDR_R_PERM));   put(o, LC_LD_R_X4, r, 4);
    ldsm_x1_t(r, LC_AT(LC_T_R, LC_ADDR_R_PERM)); put(o, LC_LD_R_X1T, r, 1);
    ldsm_x2_t(r, LC_AT(LC_T_R, LC_ADDR_R_PERM)); put(o, LC_LD_R_X2T, r, 2);
    ldsm_x4_t(r, LC_AT(LC_T_R, LC_ADDR_R_PERM)); put(o, LC_LD_R_X4T, r, 4);

    // 3. mma on small-integer tiles loaded as the attention kernel loads Q, K and V
    u32 a[4], bk[4], bv[4];
    ldsm_x4(a, LC_AT(LC_T_A_M, LC_ADDR_A_X4));
    ldsm_x4(bk, LC_AT(LC_T_K_M, LC_ADDR_KT_X4));    // bk[0..1]: keys 0..7, bk[2..3]: keys 8..15
    ldsm_x4_t(bv, LC_AT(LC_T_V_M, LC_ADDR_V_X4T));  // bv[0..1]: d 0..7,    bv[2..3]: d 8..15
    const u32* h = host_regs + lane * LC_NHOST;
    float c32[4], d32[4];
    for (int i = 0; i < 4; ++i) c32[i] = __uint_as_float(h[i]);
    u32 c16[2] = {h[4], h[5]}, d16[2];
    mma_f32_f16(d32, a, bk, c32);   putf(o, LC_MMA_F32, d32, 4);
    mma_f16_f16(d16, a, bk, c16);   put(o, LC_MMA_F16, d16, 2);
    const float zero[4] = {0.f, 0.f, 0.f, 0.f};
    mma_f32_bf16(d32, h + 6, h + 10, zero); putf(o, LC_MMA_BF16, d32, 4);

    // 4. S = Q K^T over 16 keys (two n8 tiles), the register repack to P, O = P V (two n8 tiles of d)
    float s[8];
    mma_f32_f16(s, a, bk, zero);
    mma_f32_f16(s + 4, a, bk + 2, zero);
    putf(o, LC_S, s, 8);
    u32 p[4];
    for (int q = 0; q < 4; ++q) p[q] = cvt_f16x2(s[2 * q], s[2 * q + 1]);
    put(o, LC_P, p, 4);
    float o32[8];
    mma_f32_f16(o32, p, bv, zero);
    mma_f32_f16(o32 + 4, p, bv + 2, zero);
    putf(o, LC_O_F32, o32, 8);
    const u32 z16[2] = {0u, 0u};
    u32 o16[4];
    mma_f16_f16(o16, p, bv, z16);
    mma_f16_f16(o16 + 2, p, bv + 2, z16);
    put(o, LC_O_F16, o16, 4);

    // 5. conversions of chosen f32 pairs
    const u32* ci = cvt_in + lane * 2 * LC_NCVT;
    for (int i = 0; i < LC_NCVT; ++i) {
        const float lo = __uint_as_float(ci[2 * i]), hi = __uint_as_float(ci[2 * i + 1]);
        o[LC_CVT_F16X2 + i] = cvt_f16x2(lo, hi);
        o[LC_CVT_BF16X2 + i] = cvt_bf16x2(lo, hi);
    }

    // 6. shuffles
    for (int k = 0; k < LC_NSHFL; ++k) {
        u32 d, pv;
        shfl(shfl_mode[k], shfl_in[k * 32 + lane], static_cast<u32>(shfl_b[k * 32 + lane]),
             static_cast<u32>(shfl_c[k]), d, pv);
        o[LC_SHFL + k] = d;
        o[LC_SHFL_PRED + k] = pv;
    }
#undef LC_AT
}
