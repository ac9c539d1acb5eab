// FlashAttention forward, raw mma.sync.m16n8k16, written for consumer Blackwell (sm_120), runs on sm_80+.
// f16 or bf16 (FS_BF16); head dims 32..256; MQA / GQA; causal and sliding-window masks; logit soft-capping;
// (B, H, N, d) or (B, N, H, d) through strides; quantized Q K^T (FS_QUANT_INT8: INT8 Q and K from kernel/quantize.cu,
// mma.sync.m16n8k32 s8, as SageAttention; FS_QUANT_NVFP4: NVFP4 Q and K, sm_120a's block-scaled
// mma.sync.m16n8k64.kind::mxf4nvf4, as SageAttention3) and P V (FS_QUANT_FP8: e4m3 P and V, mma.sync.m16n8k32 e4m3,
// f32 or two-level f16 accumulation, as SageAttention2 / 2++).
//
// The seed's design, for real:
//   * O accumulates in registers for the whole KV loop (never in shared memory); f32 or f16 (FS_PV_F16), or f32
//     with each KV tile's P V accumulated by the f16 mma from zero and then added in f32 (FS_PV_F16X2).
//   * K and V stream through a ring of FS_STAGES shared-memory slots filled with cp.async.
//   * Q, K are read with ldmatrix, V with ldmatrix.trans, all from XOR-swizzled shared memory (conflict free).
//   * The S accumulator is repacked into the A operand of P@V in registers (no shared-memory round trip).
//   * Online softmax with exp2: softmax_scale*log2(e) is folded into one FFMA per score.
//
// Bit-exactness contract with flashsim.emulator: every floating-point operation outside the tensor cores is an
// explicitly rounded IEEE op (__fadd_rn, __fmul_rn, __fmaf_rn, __frcp_rn, __fdiv_rn: the compiler can neither
// contract nor reorder them) or ex2.approx.ftz.f32 (modelled by flashsim.sfu). Every reduction has a fixed order,
// written out below and mirrored step for step by flashsim/emulator/kernel_program.py.
//
// Compile-time configuration: the defines of flashsim.config.KernelConfig.defines() (never edit numbers here).

#ifndef FS_HEAD_DIM
#error "build through flashsim.gpu: the configuration arrives as defines (FS_HEAD_DIM, FS_WARPS, ...)"
#endif

typedef unsigned short fs_half;   // raw f16 or bf16 bits (FS_BF16); no cuda_fp16.h needed
typedef unsigned int uint32_t;
#define FS_INF __int_as_float(0x7f800000)   // NVRTC has no math.h INFINITY
#include "async_copy.cuh"

namespace fs {

constexpr int D = FS_HEAD_DIM;
constexpr int WARPS = FS_WARPS;
constexpr int MT = FS_M_TILES;                 // m16 tiles (16 query rows each) per warp
constexpr int WARP_M = 16 * MT;
constexpr int THREADS = 32 * WARPS;
// FS_WARP_SPLIT (flashsim.config.KernelConfig.warp_split, serving only): W > 1 warps share the block's WARP_M rows
// and split its keys W ways, each warp with its own K / V ring, merged in shared memory at the end (see the epilogue)
constexpr int BLOCK_M = WARP_M * WARPS / FS_WARP_SPLIT;
constexpr bool Q_IN_REGS = FS_Q_IN_REGS != 0;   // flashsim.config.KernelConfig.q_in_registers
// MBAR (flashsim.config.KernelConfig.ring_mbarrier): the K / V ring is synchronised by mbarriers instead of a block
// barrier per tile: slot s is "full" when every thread's cp.async into it completed (cp.async.mbarrier.arrive),
// "empty" when every thread is done reading it; a warp waits only for the tile it reads, and refills the slot of
// tile t - 1 after its Q K^T of tile t. Otherwise: cp.async groups and one __syncthreads per tile.
constexpr bool MBAR = FS_MBAR != 0;
// OSTAGE (flashsim.config.KernelConfig.stage_o; never with QUANT, whose Q rows are half an O row): the epilogue
// writes each warp's O into its own rows of the Q tile (the warp alone reads them, and is done with them), then stores
// whole 16-byte chunks of rows to global memory instead of one 4-byte pair per lane and n8 tile. O is always
// allocated by flashsim (gpu/launch.py, gpu/torch_op.py: 256-byte aligned) and its rows are D or q_rs = H * D
// elements apart, so every chunk is 16-byte aligned.
constexpr bool OSTAGE = FS_OSTAGE != 0;
static_assert(!(OSTAGE && FS_QUANT_INT8), "FS_OSTAGE stages O in the Q tile, which INT8 Q K^T stores at 1 byte");
// Skip the O rescale when alpha is exactly 1 on the whole warp: measured on the H200 (benchmarks/RESULTS.md) to
// gain 5-8% at d=128, where O is 64+ registers a lane, and to lose 5-9% at d=64, so only for the large O.
constexpr bool SKIP_UNIT_RESCALE = D >= 128;
constexpr int BC = FS_KV_TILE;
constexpr int STAGES = FS_STAGES;
constexpr bool PV_F16 = FS_PV_F16 != 0;          // O accumulator in f16
constexpr bool PV_F16X2 = FS_PV_F16X2 != 0;      // O in f32, each tile's P V through the f16 mma (two levels)
static_assert(!(PV_F16 && PV_F16X2), "FS_PV_F16 and FS_PV_F16X2 exclude each other");
constexpr bool CAUSAL = FS_CAUSAL != 0;
constexpr bool LOCAL = FS_LOCAL != 0;            // sliding window (bounds are launch arguments)
constexpr bool SOFTCAP = FS_SOFTCAP != 0;        // scores become tanh(s * cap_scale), softmax on softcap * tanh
constexpr bool BF16 = FS_BF16 != 0;              // q, k, v, o and P in bf16 (P@V accumulates in f32 only)
constexpr bool BNHD = FS_BNHD != 0;              // rows N apart by the row-stride arguments; else by D (constant)
static_assert(!(BF16 && (PV_F16 || PV_F16X2)), "bf16 has no f16 accumulator: P@V in f32");
static_assert(!Q_IN_REGS || MT == 1, "Q stays in registers only with one m16 tile per warp");
// INT8 Q K^T: Q and K are s8 with one f32 scale per QB query rows / keys (QB = 16: an m16 tile of Q, a k16 slice
// of K); S = float(s32) * (q_scale * k_scale); the LSE gets q . mean(k) * lse_scale back (K was smoothed).
// NVFP4 Q K^T (FS_QUANT_NVFP4, quant "nvfp4"; built for sm_120a only): the same per-16-row / per-16-key f32 scales,
// smoothing and LSE correction (QUANT), with Q and K as e2m1 codes two a byte (a row of D / 2 bytes: the s8 path's
// ldmatrix fragments, byte for byte, are m16n8k64's e2m1 fragments) and a ue4m3 scale per FS_FP4_BLOCK elements of
// each row. Q K^T on mma.sync.m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X (f32 accumulators from zero, k64
// steps in order), S = acc * (q_scale * k_scale). The mma's scale selectors are {0, 0}: lane 4 g holds row g's four
// scale bytes of a k64 step, lane 4 g + 1 row g + 8's (A), lane 4 g key 8 n + g's (B) (flashsim.layout.blockscale):
// every lane loads row g + 8 (t4 & 1)'s and key 8 n + g's, the other lanes' copies unread. Q's block scales sit in
// registers for the whole loop (one word per m16 tile and k64 step), K's ride in their own ring of KV slots.
// (The NVFP4 constants exist only in its builds: every namespace-scope constant lands in the PTX.)
constexpr bool QUANT = FS_QUANT_INT8 != 0 || FS_QUANT_NVFP4 != 0;
constexpr int QB = FS_QUANT_BLOCK;
static_assert(!QUANT || QB == 16, "an INT8 scale covers one m16 tile of Q and one k16 slice of K");
static_assert(!(QUANT && SOFTCAP), "INT8 Q K^T smooths K, which softcap's tanh does not allow");
// FP8 P@V (quant "int8-fp8"): P * FP8_P_SCALE (448) to e4m3 (cvt.rn.satfinite), V per channel to e4m3 by
// kernel/quantize.cu, stored transposed (d rows x keys) with each 32-key block's keys in the A fragment's slot order
// (slot s holds key 16 (s / 16) + 8 ((s % 4) / 2) + 2 ((s % 16) / 4) + s % 2, what a lane's S registers give), P V
// on mma.sync.m16n8k32 e4m3, O * v_deq[c] in the epilogue (v_deq = amax_c / (448 v_range), v_range V's e4m3 range).
// Accumulation in f32 (O directly), or with FS_PV_F16X2 in f16: each group of FS_FP8_GROUP_KEYS keys' P V by the
// f16 mma from +0 over its k32 slices in order, then added to the f32 O (V's narrow range keeps every f16 sum
// finite: flashsim.config.FP8_V_RANGE, proofs/prove_fp8_f16_range.py).
constexpr bool FP8_PV = FS_QUANT_FP8 != 0;
// EXP_IN_PV (flashsim.config.KernelConfig.exp_in_pv; the plain f16 / f32 P V path): every m16 tile's max, alpha and
// O rescale (with its warp vote) come first; then, per k16 slice j of P V, the exponentials of S's n8 tiles 2j, 2j+1
// with their row sums, the packing and the slice's mma's, in one basic block, so that ptxas issues slice j + 1's FFMA
// and ex2 beside slice j's mma's (otherwise the vote's branch sits between the last exponential and the first mma).
// Every p, every row sum (n8 tiles in order) and every O element see the same operations in the same order.
constexpr bool EXP_IN_PV = FS_EXP_IN_PV != 0 && !FP8_PV && !PV_F16X2;
constexpr float FP8_P_SCALE = static_cast<float>(FS_FP8_P_SCALE);
constexpr int FP8_GROUP = FS_FP8_GROUP_KEYS / 32;   // k32 slices per f16 group (FS_PV_F16X2)
static_assert(!FP8_PV || QUANT, "FP8 P@V comes with INT8 Q K^T");
static_assert(!FP8_PV || (!PV_F16 && !BF16), "FP8 P@V: f16 inputs, f32 or two-level f16 accumulation");
static_assert(!FP8_PV || (FS_KV_TILE % 32 == 0 && FP8_GROUP >= 1 && FS_KV_TILE % (32 * FP8_GROUP) == 0),
              "FP8 P@V: kv_tile a multiple of 32 (k32 slices) and of the f16 group");
// The overflow flag (see flash_fwd's arguments) is live with an f16 P@V mma on f16 P and V
// (flashsim.config.KernelConfig.pv_mma_f16; the host allocates the flag by the same rule).
constexpr bool OVERFLOW_FLAG = FS_OVERFLOW_FLAG != 0;
static_assert(!OVERFLOW_FLAG || PV_F16 || PV_F16X2, "the overflow flag watches an f16 P@V accumulator");
// Serving (flashsim.config.KernelConfig's seqlens, paged, pack_gqa, split; all off for flashsim.attention, and then
// nothing below that they guard is compiled). SEQLENS: per-sequence query and key counts (and, for variable-length
// batches, row offsets) are launch arguments, read once per block. PAGED: key j of a row lives in page
// block_table[j >> page_shift], slot j & (page_size - 1). PACK_GQA: the grid's y is the K / V head, and row r of the
// block's packed rows is query row r / group of query head kv_head * group + r % group. SPLIT: grid z is batch x
// num_splits; a block visits only its split's part of its KV tiles and writes its rows' partial O (f32, divided by
// the part's own l) and LSE to o_part / lse_part, which flash_combine (the end of this file) merges.
// (Their constants exist only in serving builds: NVRTC emits every namespace-scope constant into the PTX, and a
// build without them must keep the PTX it had.)
static_assert(FS_SEQLENS || !(FS_PAGED || FS_PACK_GQA || FS_SPLIT), "paging, GQA packing and splits are serving");
#if FS_SEQLENS
constexpr bool PAGED = FS_PAGED != 0;
constexpr bool PACK_GQA = FS_PACK_GQA != 0;
constexpr bool SPLIT = FS_SPLIT != 0;
static_assert(BNHD && !QUANT, "serving: (B, N, H, D) rows and no quantization pass");
static_assert(!(OSTAGE && (PACK_GQA || SPLIT)), "O staging writes one head's consecutive rows of the element type");
// FUSED (flashsim.config.KernelConfig.fused): the index check runs inside this kernel, one launch fewer per serving
// call (each (batch, split)'s first block checks the entries it reads, kernel/serving_rules.cuh's rules, on its early
// return too; the last block of the grid to finish writes the smallest violation to the host's record). The
// ticket that tells "last" lives in `fused_state`, a buffer the host zeroes once; the last block sets it back to 0,
// so the next launch (or graph replay) finds it zeroed. With SPLIT, flash_combine still runs after this kernel: the
// combine by the last split to finish, in this kernel, measured 5-10 us slower on the H100 (one warp merging its
// block's rows one after another at the grid's tail; benchmarks/experiments/serving_host_time/). (Only as
// #if FS_FUSED: a namespace-scope constant would land in the PTX of every serving build.)
#endif

static_assert(FS_WARP_SPLIT == 1 || (FS_SEQLENS && !FS_OSTAGE && FS_WARPS == FS_WARP_SPLIT && !(FS_SPLIT && FS_FUSED)),
              "warp_split: a serving build, every warp on its own part of the keys (with split-KV across blocks too: "
              "not fused)");
static_assert(D % 32 == 0 && D >= 32 && D <= 256, "head dim: a multiple of 32 from 32 to 256");
constexpr int QK_ROW_BYTES = FS_QUANT_NVFP4 ? D / 2 : D * (QUANT ? 1 : 2);   // a Q / K row: e2m1, s8, f16 / bf16
// V rows: keys x d (f16 / bf16), or with FP8_PV d x keys (e4m3, transposed)
constexpr int V_ROW_BYTES = FP8_PV ? FS_KV_TILE : D * 2;
constexpr int QK_CHUNKS = QK_ROW_BYTES / 16;         // 16-byte chunks in a row: 2 .. 32
constexpr int V_CHUNKS = V_ROW_BYTES / 16;
constexpr int Q_BYTES = BLOCK_M * QK_ROW_BYTES;
constexpr int K_SLOT_BYTES = BC * QK_ROW_BYTES;
constexpr int V_SLOT_BYTES = FP8_PV ? D * V_ROW_BYTES : BC * V_ROW_BYTES;
constexpr int K_RING_OFFSET = Q_BYTES;
constexpr int V_RING_OFFSET = Q_BYTES + STAGES * K_SLOT_BYTES;
enum : int { MBAR_BYTES = 8 };      // one mbarrier object (PTX: .b64 in shared memory); an enumerator, so no symbol
#if FS_QUANT_NVFP4
constexpr int SF_ROW = D / FS_FP4_BLOCK;                  // ue4m3 block scales of a Q / K row
constexpr int KSF_SLOT_BYTES = BC * SF_ROW;               // a KV tile's K block scales, key-major
constexpr int KSF_RING_OFFSET = V_RING_OFFSET + STAGES * V_SLOT_BYTES;
static_assert(FS_FP4_BLOCK == 16 && SF_ROW % 4 == 0 && KSF_SLOT_BYTES % 16 == 0,
              "NVFP4: 16-element blocks, whole k64 steps of scale words, whole 16-byte chunks of a tile's scales");
static_assert(FP8_PV && !PV_F16 && !CAUSAL && !LOCAL && !SOFTCAP && !BNHD && !BF16,
              "NVFP4 Q K^T: FP8 P V, (B, H, N, D) f16, no mask but the keys' bound (flashsim.config)");
#define FS_KSF_RING_BYTES (STAGES * KSF_SLOT_BYTES)
#define FS_QK_BYTES(elements) ((elements) / 2)             // two e2m1 codes a byte
#else
#define FS_KSF_RING_BYTES 0
#define FS_QK_BYTES(elements) ((elements) * QK_EB)
#endif
// a K / V ring (FS_WARP_SPLIT: each warp's, one after another from K_RING_OFFSET) and its barriers (full[s], empty[s])
#define FS_RING_BYTES (STAGES * (K_SLOT_BYTES + V_SLOT_BYTES) + FS_KSF_RING_BYTES)
#define FS_RING_BARS_BYTES (MBAR ? 2 * STAGES * MBAR_BYTES : 0)
constexpr int BAR_OFFSET = V_RING_OFFSET + STAGES * V_SLOT_BYTES + FS_KSF_RING_BYTES
                           + (FS_WARP_SPLIT - 1) * FS_RING_BYTES;   // MBAR: full[s], then empty[s] (each ring's)
constexpr int SMEM_BYTES = BAR_OFFSET + FS_WARP_SPLIT * FS_RING_BARS_BYTES;
static_assert(FS_WARP_SPLIT == 1 || WARP_M * (D + 1) * 4 <= FS_RING_BYTES,
              "a warp's part (O / l and LSE, f32) fits its ring");
static_assert(FS_WARP_SPLIT == 1 || WARP_M * (FS_WARP_SPLIT + 2) * 4 <= Q_BYTES,
              "the merge's row weights fit the Q tile");
static_assert(SMEM_BYTES == FS_EXPECTED_SMEM, "shared-memory layout differs from flashsim.config.smem_buffers");

constexpr int S_NT = BC / 8;       // n8 tiles of S per warp
constexpr int O_NT = D / 8;        // n8 tiles of O per warp
constexpr int QK_KS = QK_ROW_BYTES / 32;   // k steps of Q K^T: k16 (f16 / bf16) or k32 (s8), 32 bytes of a row each
constexpr int PV_KS = BC / 16;     // k16 steps of P V
static_assert(BC % 16 == 0 && D % 16 == 0, "tile shapes must be multiples of 16");

// ---- PTX wrappers ------------------------------------------------------------------------------------------
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(v) : "memory");
}
// one 16-byte chunk from shared to global memory (the global address 16-byte aligned)
__device__ __forceinline__ void copy_chunk_to_global(void* dst, uint32_t src) {
    uint32_t a, b, c, d;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(src) : "memory");
    asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" :: "l"(dst), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void mma_f32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if FS_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
#endif
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// m16n8k32 s8: the same register layout as m16n8k16 byte for byte (a register holds 4 s8 where it held 2 f16).
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#if FS_QUANT_NVFP4
// NVFP4 Q K^T's mma (flashsim.emulator.quantize.NVFP4_FORM): sa / sb the lane's scale words, selectors {0, 0}.
__device__ __forceinline__ void mma_fp4(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, uint32_t sa,
                                        uint32_t sb) {
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sa), "r"(sb));
}
__device__ __forceinline__ uint32_t ld_shared_b32(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
    return v;
}
#endif
__device__ __forceinline__ void mma_fp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_fp8_f16(uint32_t (&d)[2], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four f32 -> four e4m3 bytes (cvt.rn.satfinite: to nearest even, clamped to +-448, NaN -> 0x7f), x0 in the low byte.
__device__ __forceinline__ uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
// P's A fragment of k32 slice j of one m16 tile, from its S accumulators s (n8 tiles 4j .. 4j+3): a0 = row g, tiles
// 4j, 4j+1; a1 = row g + 8; a2, a3 = tiles 4j+2, 4j+3 (a lane's values in its own slot order: V^T's keys were stored
// in that order by kernel/quantize.cu), each P * FP8_P_SCALE to e4m3.
__device__ __forceinline__ void pack_p_fp8(uint32_t (&a)[4], const float (&s)[S_NT][4], int j) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float (&t0)[4] = s[4 * j + 2 * h];
            const float (&t1)[4] = s[4 * j + 2 * h + 1];
            a[2 * h + r] = pack_e4m3x4(__fmul_rn(t0[2 * r], FP8_P_SCALE), __fmul_rn(t0[2 * r + 1], FP8_P_SCALE),
                                       __fmul_rn(t1[2 * r], FP8_P_SCALE), __fmul_rn(t1[2 * r + 1], FP8_P_SCALE));
        }
}
__device__ __forceinline__ void mma_f16(uint32_t (&d)[2], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x) {   // the SFU; flashsim.sfu.ex2 models it bit for bit
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// The softmax's exponentials of one n8 tile of S, row r (0: g, 1: g + 8): p = 2^(s*scale_log2 - m*scale_log2), one
// FFMA per score and the SFU; each p replaces its score and joins the row sum l (the f32 p, before rounding to f16).
__device__ __forceinline__ void exp_tile(float (&s)[4], float& l, int r, float scale_log2, float m_exp) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const float p = ex2(__fmaf_rn(s[2 * r + e], scale_log2, -m_exp));
        s[2 * r + e] = p;
        l = __fadd_rn(l, p);
    }
}
__device__ __forceinline__ float rcp_approx(float x) {   // the SFU; flashsim.sfu.rcp models it bit for bit
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// Two f32 -> f16x2, round to nearest even; lo lands in the low 16 bits (the lower-indexed element).
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// Two f32 -> the element type (f16x2 or bf16x2), round to nearest even: P for P V and the output O.
__device__ __forceinline__ uint32_t pack_elem2(float lo, float hi) {
#if FS_BF16
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return pack_f16x2(lo, hi);
#endif
}
__device__ __forceinline__ uint32_t mul_f16x2(uint32_t a, uint32_t b) {
    uint32_t r;
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
__device__ __forceinline__ float f16_to_f32(uint32_t h) {
    float r;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }\n" : "=f"(r) : "h"((unsigned short)h));
    return r;
}

__device__ __forceinline__ bool nonfinite(float x) {   // inf or NaN, from the bits (no float compare)
    return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
}

// Two levels: an n8 tile's f16 accumulator (two f16x2 registers) added to its f32 one, element by element.
__device__ __forceinline__ void add_f16_tile(float (&o)[4], const uint32_t (&t)[2]) {
    o[0] = __fadd_rn(o[0], f16_to_f32(t[0] & 0xffffu));
    o[1] = __fadd_rn(o[1], f16_to_f32(t[0] >> 16));
    o[2] = __fadd_rn(o[2], f16_to_f32(t[1] & 0xffffu));
    o[3] = __fadd_rn(o[3], f16_to_f32(t[1] >> 16));
}

// Natural log of a positive normal float from IEEE-exact operations only, so the emulator reproduces its bits:
// x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(s), s = (m-1)/(m+1); odd series to s^9.
// The constants arrive as bit patterns from flashsim/emulator/kernel_math.py (FS_LOG_*).
__device__ __forceinline__ float log_exact_ops(float x) {
    int bits = __float_as_int(x);
    int e = ((bits >> 23) & 0xff) - 127;
    float m = __int_as_float((bits & 0x7fffff) | 0x3f800000);
    if (m > __int_as_float(FS_LOG_SQRT2)) { m = __fmul_rn(m, 0.5f); e += 1; }
    float f = __fsub_rn(m, 1.0f);
    float s = __fdiv_rn(f, __fadd_rn(2.0f, f));
    float z = __fmul_rn(s, s);
    float poly = __fmaf_rn(z, __int_as_float(FS_LOG_C9), __int_as_float(FS_LOG_C7));
    poly = __fmaf_rn(z, poly, __int_as_float(FS_LOG_C5));
    poly = __fmaf_rn(z, poly, __int_as_float(FS_LOG_C3));
    float t = __fmul_rn(__fmul_rn(z, s), poly);
    float ln1p = __fmaf_rn(2.0f, s, __fmul_rn(2.0f, t));
    return __fmaf_rn(static_cast<float>(e), __int_as_float(FS_LOG_LN2), ln1p);
}

// Soft-capping: tanh(y) = (1 - e) / (1 + e), e = 2^(-2|y| log2 e), with the SFU's ex2 and rcp (both modelled bit
// for bit) and IEEE ops, y's sign put back. flashsim/emulator/kernel_math.py (softcap_tanh) says why not tanh.approx.
__device__ __forceinline__ float softcap_tanh(float y) {
    const uint32_t b = __float_as_uint(y);
    const float a = __uint_as_float(b & 0x7fffffffu);
    const float e = ex2(__fmul_rn(a, -__int_as_float(FS_TANH_TWO_LOG2E)));
    const float t = __fmul_rn(__fsub_rn(1.f, e), rcp_approx(__fadd_rn(1.f, e)));
    return __uint_as_float(__float_as_uint(t) | (b & 0x80000000u));
}

// Swizzle of a row of C 16-byte chunks: the 8 rows an ldmatrix reads (same logical chunk) land in 8 distinct bank
// groups (16-byte units of a 128-byte line). Rows of 8k chunks start in the same group: XOR the chunk with row % 8.
// Rows of 8k + 4 chunks (f16 d = 32, 96, 160, 224; s8 d = 64, 192) alternate between two half lines: XOR with
// (row / 2) % 4. Rows of 4k + 2 chunks (s8 d = 32, 96, 160, 224) cycle through four quarter lines: XOR with
// (row / 4) % 2. The chunk stays inside its aligned group of 4 or 2, so inside the row; rows 8 apart have the same
// swizzle in every case.
template <int C>
__device__ __forceinline__ int swz_bits(int row) {
    static_assert(C % 8 == 0 || C % 8 == 4 || C % 4 == 2, "rows of 8k, 8k + 4 or 4k + 2 chunks");
    return (C % 8 == 0) ? (row & 7) : (C % 8 == 4) ? ((row >> 1) & 3) : ((row >> 2) & 1);
}
// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of C-chunk rows.
template <int C>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return static_cast<uint32_t>(row * C * 16 + ((chunk ^ swz_bits<C>(row)) << 4));
}

// ldmatrix addresses: every lane's row is (its own row r_l) + (a multiple of 8), so row % 8 = r_l % 8 and the
// swizzled chunk of an even logical chunk c plus the lane's 0/1 offset h is c ^ (h ^ r_l % 8). The lane part is
// computed once; each k16 step / n8 pair only XORs in its even chunk number (and adds an immediate row offset),
// so the compiler does not keep dozens of precomputed addresses alive in registers.
__device__ __forceinline__ uint32_t chunk_off(int even_chunk, int lane_x) {
    return static_cast<uint32_t>((even_chunk ^ lane_x) << 4);
}

// Two-level P V (pv_accum f16x2, f16 or FP8 P): for each pair of n8 tiles of O, STEPS mma's into f16 accumulators
// from +0, in step order, then each added to the f32 O (already rescaled) element by element. load_b(b, step, n)
// loads the step's B fragments of O tiles n, n + 1; mma(d, mt, step, b0, b1) is the step's f16-accumulate mma of
// m16 tile mt. o is the f32 O accumulator (index [mt][n]: MT x O_NT when this path is built).
template <int STEPS, typename O, typename LoadB, typename Mma>
__device__ __forceinline__ void pv_two_level(O& o, LoadB load_b, Mma mma) {
#pragma unroll
    for (int n = 0; n < O_NT; n += 2) {
        uint32_t t16[MT][2][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) t16[mt][0][0] = t16[mt][0][1] = t16[mt][1][0] = t16[mt][1][1] = 0u;
#pragma unroll
        for (int j = 0; j < STEPS; ++j) {
            uint32_t b[4];
            load_b(b, j, n);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma(t16[mt][0], mt, j, b[0], b[1]);
                mma(t16[mt][1], mt, j, b[2], b[3]);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            add_f16_tile(o[PV_F16 ? 0 : mt][n], t16[mt][0]);
            add_f16_tile(o[PV_F16 ? 0 : mt][n + 1], t16[mt][1]);
        }
    }
}

// load_tile's fast path: thread (r, c) copies the chunks of column c in rows r, r + STEP, ... (STEP = NT / C)
// from src onwards; RAGGED: a chunk at or past row n or column byte `cols` is zero-filled (a tile past the bounds).
// NT: the threads that share the copy (the block's, or with FS_WARP_SPLIT one warp's).
template <int ROWS, int C, bool RAGGED, int NT>
__device__ __forceinline__ void load_rows(uint32_t tile, const unsigned char* src, const unsigned char* g, int row0,
                                          int n, long long rs, int r, int c, int cols) {
    constexpr int STEP = NT / C;
    constexpr int CHUNKS = ROWS * C;
#pragma unroll
    for (int it = 0; it < (CHUNKS + NT - 1) / NT; ++it)
        if (CHUNKS % NT == 0 || r + it * STEP < ROWS) {
            const bool valid = !RAGGED || (row0 + r + it * STEP < n && 16 * c < cols);
            cp_async_16(tile + swz<C>(r + it * STEP, c), valid ? src + it * STEP * rs : g, valid ? 16 : 0);
        }
}

// Copy rows [row0, row0 + ROWS) of a matrix of C-chunk rows (row stride `rs` bytes), starting `col0` bytes into each
// row, into a swizzled tile; a 16-byte chunk is zero-filled when its row is at or past n or its first byte at or
// past ncol (a column bound only V^T's key padding needs). NT threads (tid < NT) share the copy.
template <int ROWS, int C, int NT = THREADS>
__device__ __forceinline__ void load_tile(uint32_t tile, const unsigned char* __restrict__ g, int row0, int n,
                                          long long rs, int tid, int col0 = 0, int ncol = 0x7fffffff) {
    constexpr int CHUNKS = ROWS * C;
    constexpr int ITERS = (CHUNKS + NT - 1) / NT;
    // col0 is folded into the base pointer and the bound once, outside the loop: with col0 added per chunk ptxas
    // gave the int8-fp8 d = 64 default 140 spill bytes (tests/test_budget.py keeps the quantized defaults in check)
    const unsigned char* base = g + col0;
    const int cols = ncol - col0;
    if (!QUANT && NT % C == 0) {
        // A thread's chunks share one column c and lie STEP rows apart: one address each, plus a constant. The
        // bounds are tested only on a tile that reaches past them (block-uniform): on the others every chunk is a
        // plain 16-byte copy. Measured on the H200 (benchmarks/experiments/load_path/): the address and bound
        // arithmetic of the chunk loop below was a fifth of the f16 kernel's instructions (stall_profile.txt), and
        // this path runs the d = 128 defaults 1.02-1.06x as fast; the INT8 / FP8 builds ran 0-6% slower with it,
        // so they keep the chunk loop. (Sending a ragged tile to the chunk loop instead of load_rows<true> raised
        // the sm_120 registers, 213 -> 232 at d = 256 with f16 P@V: tools/cubin_diff.py.)
        const int r = tid / C, c = tid % C;
        const unsigned char* src = base + static_cast<long long>(row0 + r) * rs + c * 16;
        if (row0 + ROWS <= n && 16 * C <= cols)
            load_rows<ROWS, C, false, NT>(tile, src, g, row0, n, rs, r, c, cols);
        else
            load_rows<ROWS, C, true, NT>(tile, src, g, row0, n, rs, r, c, cols);
        return;
    }
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        int i = it * NT + tid;
        if (CHUNKS % NT == 0 || i < CHUNKS) {
            int r = i / C, c = i % C;
            bool valid = row0 + r < n && 16 * c < cols;
            const unsigned char* src = valid ? base + static_cast<long long>(row0 + r) * rs + c * 16 : g;
            cp_async_16(tile + swz<C>(r, c), src, valid ? 16 : 0);
        }
    }
}

// One KV tile of V: keys [key0, key0 + BC) x d as f16 / bf16 rows (row stride kv_row elements, keys >= nk zero), or
// with FP8_PV the transposed e4m3 tile: D rows of BC keys (row stride nkp bytes; 16-key chunks at or past nkp zero).
__device__ __forceinline__ void load_v_tile(uint32_t tile, const unsigned char* __restrict__ vh, int key0, int nk,
                                            long long kv_row, int nkp, int tid) {
    if (FP8_PV)
        load_tile<D, V_CHUNKS>(tile, vh, 0, D, nkp, tid, key0, nkp);
    else
        load_tile<BC, V_CHUNKS>(tile, vh, key0, nk, kv_row * 2, tid);
}

#if FS_QUANT_NVFP4
// One KV tile's K block scales: keys [key0, key0 + BC) of the head's scale rows (SF_ROW bytes a key, rows nk16 =
// nk rounded up to 16: the rows kernel/quantize.cu writes) into a ring slot, key-major and unswizzled (a warp reads
// 8 consecutive keys' words: no bank conflict). A 16-byte chunk (16 / SF_ROW keys) at or past key nk16 is zero-filled.
__device__ __forceinline__ void load_k_scales(uint32_t slot, const unsigned char* __restrict__ sfh, int key0, int nk16,
                                              int tid) {
    constexpr int CHUNKS = KSF_SLOT_BYTES / 16, KEYS = 16 / SF_ROW;
#pragma unroll
    for (int it = 0; it < (CHUNKS + THREADS - 1) / THREADS; ++it) {
        const int i = it * THREADS + tid;
        if (CHUNKS % THREADS == 0 || i < CHUNKS) {
            const bool valid = key0 + i * KEYS < nk16;
            cp_async_16(slot + 16 * i, valid ? sfh + static_cast<long long>(key0) * SF_ROW + 16 * i : sfh,
                        valid ? 16 : 0);
        }
    }
}
#endif

#if FS_SEQLENS
// SPLIT: two f32 of a partial O row to global memory in one 8-byte store (col is even: 8-byte aligned)
__device__ __forceinline__ void st_global_f32x2(float* dst, float a, float b) {
    asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" :: "l"(dst), "f"(a), "f"(b) : "memory");
}
// FS_WARP_SPLIT: a warp's part in its ring's first bytes, rows of the block's WARP_M packed rows: O / l (WARP_M x D
// f32), then the LSEs (WARP_M f32)
__device__ __forceinline__ void st_shared_f32x2(uint32_t addr, float a, float b) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ void st_shared_f32(uint32_t addr, float a) {
    asm volatile("st.shared.f32 [%0], %1;\n" :: "r"(addr), "f"(a) : "memory");
}
// element `at` (+ `base`) of warp w's part
__device__ __forceinline__ float warp_part(const unsigned char* smem, int w, int at, int base) {
    return reinterpret_cast<const float*>(smem + K_RING_OFFSET + w * FS_RING_BYTES)[base + at];
}

// flash_combine's steps (flashsim.emulator.kernel_program.combine), which the in-block merge of FS_WARP_SPLIT shares:
// the weights' base (the parts' max LSE, 0 where every part is empty), a part's weight, the empty total, the LSE
__device__ __forceinline__ float combine_base(float mx) { return (mx == -FS_INF) ? 0.f : mx; }
__device__ __forceinline__ float combine_weight(float part_lse, float base) {
    return ex2(__fmul_rn(__fsub_rn(part_lse, base), __int_as_float(FS_COMBINE_LOG2E)));
}
__device__ __forceinline__ bool combine_empty(float sum) { return (sum == 0.f) || (sum != sum); }
__device__ __forceinline__ float combine_lse(float mx, float sum, bool empty) {
    return empty ? FS_INF : __fadd_rn(mx, log_exact_ops(sum));
}

// PAGED: the page-table entries of the KV tile starting at key key0, one per lane: lane l holds the physical page of
// the tile's l-th page, table[(key0 >> page_shift) + l] clamped into [0, num_pages) (the host checks the table; the
// clamp keeps an unchecked one in bounds), 0 for a lane past the tile's last page or past the sequence's last key
// (nothing read). A tile spans at most ROWS / 16 + 1 pages (pages of 16 keys or more): one warp's lanes hold them
// all. Loaded one tile ahead (FS_FILL_SLOT), so the table's latency overlaps the copies in flight instead of
// standing before each chunk's address.
template <int ROWS>
__device__ __forceinline__ int tile_pages(const int* __restrict__ table, int key0, int n, int page_shift,
                                          int num_pages, int lane) {
    static_assert(ROWS / 16 + 1 <= 32, "a KV tile's pages fit one warp's lanes");
    const int first = key0 >> page_shift, last = (min(key0 + ROWS, n) - 1) >> page_shift;
    const int idx = first + lane;
    return (key0 < n && idx <= last) ? min(max(__ldg(table + idx), 0), num_pages - 1) : 0;
}

// Serving's K and V tiles: keys [key0, key0 + ROWS) of one head into the swizzled K and V tiles of C-chunk rows (the
// two have one layout without quantization); keys at or past n are zero-filled without reading anything. Key j's
// rows are kbase / vbase + j * rs bytes, or with PAGED physical row (page << page_shift) | (j & page mask), page from
// `pages` (tile_pages of this tile: lane l's entry is the tile's l-th page, read by a warp shuffle), looked up once
// for both. Thread (r, c) copies column c of rows r, r + STEP, ... as load_rows does (else the chunk loop of
// load_tile), in a loop unrolled 4 times instead of fully: with runtime row strides a fully unrolled loop keeps an
// address per chunk alive (ptxas: the 1-warp d = 128 decode build used 255 registers and spilt, the d = 256 one spilt
// 28 to 380 B). Every lane of the warp calls it (the shuffle), in the block-uniform (FS_WARP_SPLIT: warp-uniform)
// fill; NT threads (tid < NT: the block's, or one warp's) share the copy.
template <int ROWS, int C, int NT>
__device__ __forceinline__ void load_kv_rows(uint32_t ktile, uint32_t vtile, const unsigned char* __restrict__ kbase,
                                             const unsigned char* __restrict__ vbase, int pages, int key0, int n,
                                             long long rs, int page_shift, int tid) {
    static_assert(QK_CHUNKS == V_CHUNKS, "K and V rows of one layout");
    constexpr int CHUNKS = ROWS * C;
    constexpr bool BY_COLUMN = NT % C == 0;
    constexpr int STEP = BY_COLUMN ? NT / C : 1;
    const int mask = (1 << page_shift) - 1, first = key0 >> page_shift;
#pragma unroll 4
    for (int it = 0; it < (CHUNKS + NT - 1) / NT; ++it) {
        const int i = it * NT + tid;
        const int r = BY_COLUMN ? tid / C + it * STEP : i / C, c = BY_COLUMN ? tid % C : i % C;
        const int key = key0 + r;
        // the tile's page of this key (every lane shuffles, also those past the tile's rows: their source is unused)
        const int page = PAGED ? __shfl_sync(0xffffffffu, pages, ((key >> page_shift) - first) & 31) : 0;
        if (CHUNKS % NT == 0 || r < ROWS) {
            long long at = 0;   // the chunk's byte offset (0 for a zero-filled one: a valid address, never read)
            if (key < n) {
                const long long row = PAGED ? (static_cast<long long>(page) << page_shift) + (key & mask) : key;
                at = row * rs + c * 16;
            }
            const uint32_t dst = swz<C>(r, c);
            cp_async_16(ktile + dst, kbase + at, key < n ? 16 : 0);
            cp_async_16(vtile + dst, vbase + at, key < n ? 16 : 0);
        }
    }
}

// PACK_GQA: the block's Q tile, packed row p = r0 + r of query row p / group, head p % group of the K / V head's
// group: qg points at the group's first head of the sequence's row 0, rows rs bytes apart, heads hs bytes apart.
// Packed rows at or past `rows` are zero-filled. Once per block: the plain chunk loop.
__device__ __forceinline__ void load_q_packed(uint32_t tile, const unsigned char* __restrict__ qg, int r0, int rows,
                                              int group, long long rs, long long hs, int tid) {
    constexpr int C = QK_CHUNKS;
    constexpr int CHUNKS = BLOCK_M * C;
#pragma unroll
    for (int it = 0; it < (CHUNKS + THREADS - 1) / THREADS; ++it) {
        const int i = it * THREADS + tid;
        if (CHUNKS % THREADS == 0 || i < CHUNKS) {
            const int r = i / C, c = i % C, p = r0 + r;
            const bool valid = p < rows;
            const unsigned char* src = valid ? qg + (p / group) * rs + (p % group) * hs + c * 16 : qg;
            cp_async_16(tile + swz<C>(r, c), src, valid ? 16 : 0);
        }
    }
}
#endif

}  // namespace fs

#if FS_FUSED
#include "serving_rules.cuh"
namespace fs {
// FUSED's state, FS_FUSED_HEADER u32 words the host zeroes once (flashsim.gpu.serving): [0, 2) the smallest
// violation code found so far, as its complement (atomicMax: 0 means none, so a zeroed buffer holds none), [2] the
// grid's ticket.
// The entries a block checks: the first block of each (batch, split) (q block 0, head 0; it exists whatever the
// lengths, and checks on its early return too) takes, with split 0, the batch's cache_seqlens entry and its
// cu_seqlens offsets (b, and the end offset in the last batch), and, paged, every page its split's tiles cover
// (masks aside: the check covers the pages a row reads, as serving_check does). The splits of a batch cover its
// pages, the batches every entry: the smallest code over the grid is serving_check's.
__device__ __forceinline__ void fused_entries(fsr::Least& m, const int* __restrict__ seqlens_k,
                                              const int* __restrict__ cu_q, const int* __restrict__ cu_k, int batch,
                                              int batches, int seqlen_limit, int q_total, int k_total, int nq_cap,
                                              int nk_cap) {
    if (seqlens_k != nullptr) fsr::check_seqlen(m, seqlens_k, batch, seqlen_limit);
    for (int i = batch; i <= (batch == batches - 1 ? batches : batch); ++i) {
        if (cu_q != nullptr) fsr::check_cu(m, cu_q, i, batches, q_total, nq_cap, FS_IDX_CU_Q_START);
        if (cu_k != nullptr) fsr::check_cu(m, cu_k, i, batches, k_total, nk_cap, FS_IDX_CU_K_START);
    }
}

// PAGED: the table entries of keys [key0, key1) of row `batch` (nk its clamped length), each thread a page.
__device__ __forceinline__ void fused_pages(fsr::Least& m, const int* __restrict__ block_table, int batch, int key0,
                                            int key1, int nk, int bt_stride, int page_shift, int num_pages, int tid) {
    const int used = fsr::pages_for(nk, page_shift), last = fsr::pages_for(key1, page_shift);
    for (int j = (key0 >> page_shift) + tid; j < last; j += THREADS)
        fsr::check_page(m, block_table, batch, j, bt_stride, used, num_pages);
}

// The warp's smallest code into the state (lane 0; only a violation writes).
__device__ __forceinline__ void fused_flag(unsigned* state, fsr::u64 c, int lane) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c = min(c, __shfl_xor_sync(0xffffffffu, c, o));
    if (lane == 0 && c != fsr::NONE) atomicMax(reinterpret_cast<unsigned long long*>(state), ~c);
}

// Every block, last: its ticket of the grid; the last block to finish writes the smallest violation (if any) to the
// host's record, with its value found again from the arrays (fsr::value_of), and zeroes the state's words for the
// next launch. Block-uniform (a barrier).
__device__ __forceinline__ void fused_finish(unsigned* state, fsr::u64* record, fsr::u64 tag,
                                             const int* __restrict__ seqlens_k, const int* __restrict__ block_table,
                                             const int* __restrict__ cu_q, const int* __restrict__ cu_k, int batches,
                                             int seqlen_limit, int nk_cap, int bt_stride, int page_shift,
                                             int num_pages, int q_total, int k_total, int nq_cap, int tid) {
    __syncthreads();   // every warp's flag, before the block's ticket
    if (tid != 0) return;
    __threadfence();
    if (atomicAdd(state + 2, 1u) != gridDim.x * gridDim.y * gridDim.z - 1) return;
    __threadfence();
    const fsr::u64 inv = atomicExch(reinterpret_cast<unsigned long long*>(state), 0ull);
    atomicExch(state + 2, 0u);
    if (inv != 0)
        fsr::publish(record, ~inv, fsr::value_of(~inv, seqlens_k, block_table, cu_q, cu_k, batches, seqlen_limit,
                                                 nk_cap, bt_stride, page_shift, num_pages, q_total, k_total, nq_cap),
                     tag);
}
}  // namespace fs
#endif

// q: (B, Hq, Nq, D), k, v: (B, Hkv, Nk, D), f16 or bf16, addressed through element strides (batch, head, row) so
// that (B, N, H, D) works too; the elements of a row are contiguous. o: like q (q's strides). lse: (B, Hq, Nq) f32
// contiguous, natural log: lse_scale * m + ln(l). Query head h reads K / V head h / group (MQA / GQA).
// scale_log2: the factor of the scores inside ex2; cap_scale (SOFTCAP): scores become tanh(s * cap_scale).
// win_left, win_right (LOCAL): key j is visible to query i iff pos - win_left <= j <= pos + win_right, pos =
// i + nk - nq (flashsim.masking; an unbounded side arrives as nq + nk).
// overflow: one u64 the host sets to ~0; with an f16 P@V mma (FS_PV_F16 / FS_PV_F16X2) the kernel lowers it to the
// smallest (b * H + h) * nq + row whose unnormalised O holds an inf or NaN while its l is finite and non-zero: an
// f16 accumulator that left the f16 range (or an inf / NaN value in v). Untouched with f32 P@V.
// QUANT: q and k are s8 with q's and k's element strides (kernel/quantize.cu writes them); q_scale (B, Hq,
// ceil(nq / QB)), k_scale (B, Hkv, ceil(nk / QB)) and q_corr (B, Hq, nq), f32 contiguous. Unused (null) otherwise.
// FP8_PV: v is V^T in e4m3, (B, Hkv, D, nkp), keys in slot order per 32 (see FP8_PV above); v_deq (B, Hkv, D) f32.
// grid = (ceil(nq / BLOCK_M), H, B), block = THREADS, dynamic smem = SMEM_BYTES.
//
// SEQLENS (serving; flashsim.serving): nq and nk arrive as the capacities nq_cap (rows of a sequence: Nq, or
// max_seqlen_q) and nk_cap (keys: N_cache, max_pages * page_size, or max_seqlen_k), and the serving arguments follow
// nkp: cu_q / cu_k (B + 1) int32 row offsets of a variable-length batch (q, o: (q_total, H, D); k, v: (k_total, Hkv,
// D); batch strides 0), or null (sequence b's rows at b * q_bs, nq_cap of them); seqlens_k (B,) int32 the keys
// sequence b holds (a KV cache), or null; PAGED: block_table (B, bt_stride) int32 pages of num_pages, page_size =
// 1 << page_shift, k / v (num_pages, page_size, Hkv, D); SPLIT: num_splits, and o_part (num_splits, B * nq_cap * Hq,
// D), lse_part (num_splits, B * nq_cap * Hq) f32, rows in q's (b, i, h) order. lse_bs, lse_hs: lse's batch and head
// strides (rows contiguous: (B, Hq, Nq) or (Hq, q_total)). grid = (ceil(rows / BLOCK_M), PACK_GQA ? Hkv : Hq,
// B * num_splits), rows = nq_cap (PACK_GQA: nq_cap * group); a block past its sequence's rows returns at once.
// FUSED: fused_state (the tickets, above), record (the host-mapped u64[4] of kernel/serving_check.cu) and tag, or a
// null record for a call without the index check, and seqlen_limit (serving_check's), after lse_hs.
#if FS_FUSED
#define FS_FUSED_ARGS                                                                                              \
    , unsigned* __restrict__ fused_state, unsigned long long* record, unsigned long long tag, int seqlen_limit
#else
#define FS_FUSED_ARGS
#endif
#if FS_SEQLENS
#define FS_NQ_ARG nq_cap
#define FS_NK_ARG nk_cap
#define FS_SERVING_ARGS                                                                                            \
    , const int* __restrict__ cu_q, const int* __restrict__ cu_k, const int* __restrict__ seqlens_k, int q_total,   \
        int k_total, const int* __restrict__ block_table, int bt_stride, int page_shift, int num_pages,            \
        int num_splits, float* __restrict__ o_part, float* __restrict__ lse_part, long long lse_bs, long long lse_hs \
        FS_FUSED_ARGS
#else
#define FS_NQ_ARG nq
#define FS_NK_ARG nk
#define FS_SERVING_ARGS
#endif
// NVFP4: q_sf (B, Hq, nq16, SF_ROW) and k_sf (B, Hkv, nk16, SF_ROW) ue4m3 block scales (kernel/quantize.cu), after
// nkp; q and k are then the codes, rows of D / 2 bytes (q's and k's element strides halved).
#if FS_QUANT_NVFP4
#define FS_NVFP4_ARGS , const unsigned char* __restrict__ q_sf, const unsigned char* __restrict__ k_sf
#else
#define FS_NVFP4_ARGS
#endif
extern "C" __global__ void __launch_bounds__(fs::THREADS, 1)
flash_fwd(const void* __restrict__ q, const void* __restrict__ k, const fs_half* __restrict__ v,
          fs_half* __restrict__ o, float* __restrict__ lse, unsigned long long* __restrict__ overflow, int FS_NQ_ARG,
          int FS_NK_ARG,
          int group, long long q_bs, long long q_hs, long long q_rs, long long kv_bs, long long kv_hs,
          long long kv_rs, float lse_scale, float scale_log2, float cap_scale, int win_left, int win_right,
          const float* __restrict__ q_scale, const float* __restrict__ k_scale, const float* __restrict__ q_corr,
          const float* __restrict__ v_deq, int nkp FS_SERVING_ARGS FS_NVFP4_ARGS) {
    using namespace fs;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t s_base = smem_addr(smem);
    // FS_WARP_SPLIT: KW warps share the block's rows, warp kw taking part kw of its keys through its own ring
    constexpr int KW = FS_WARP_SPLIT;
    constexpr int LOADERS = THREADS / KW;   // the threads that fill one ring
    const int kw = KW > 1 ? static_cast<int>(threadIdx.x) / 32 : 0;
    const uint32_t full_bar = s_base + BAR_OFFSET + kw * FS_RING_BARS_BYTES, empty_bar = full_bar + MBAR_BYTES * STAGES;
    const uint32_t s_q = s_base;
    const uint32_t s_k = s_base + K_RING_OFFSET + kw * FS_RING_BYTES;
    const uint32_t s_v = s_base + V_RING_OFFSET + kw * FS_RING_BYTES;

#if FS_SPLIT && __CUDA_ARCH__ >= 900
    // flash_combine, launched as this grid's programmatic dependent (flashsim.gpu.serving.OVERLAP_COMBINE), may be
    // scheduled once every block of this grid has started: its blocks wait (griddepcontrol.wait) for this grid to
    // complete and its writes to be visible, so only their launch overlaps this grid, never their reads.
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane >> 2;      // groupID: this lane's rows are g and g + 8 of the warp's 16
    const int t4 = lane & 3;      // thread in quad: columns 2*t4, 2*t4+1 of each n8 tile
    const int row_warp = KW > 1 ? 0 : warp;   // the warp's rows: WARP_M from row_warp * WARP_M of the block's
    const int ltid = KW > 1 ? lane : tid;     // this thread among its ring's LOADERS

    // The block's q block, head and batch. Causal: the blocks run longest first across the whole grid (the
    // scheduler starts blocks in the order of their linear index): linear index L takes q block
    // gridDim.x - 1 - L / (H B), so every head's last q block (the most KV tiles) starts before any shorter one.
    // Measured 1.10-1.14x on causal 4 x 16 x 4096 on the H200 (benchmarks/experiments/lpt).
    unsigned qblk = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;     // blockIdx's type: the same arithmetic
    if (CAUSAL) {
        const unsigned bhn = gridDim.y * gridDim.z;
        const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        qblk = gridDim.x - 1 - lin / bhn;
        head = (lin % bhn) % gridDim.y;
        batch = (lin % bhn) / gridDim.y;
    }

    constexpr int QK_EB = QK_ROW_BYTES / D;     // bytes of a Q / K element
#if FS_SEQLENS
    // SPLIT: grid z = batch * num_splits + split. The sequence's query rows [q_start, q_start + nq) and keys
    // [k_start, k_start + nk), clamped into the arrays (the host checks every index; the clamps keep an unchecked
    // one from reading out of bounds).
    const int split = SPLIT ? static_cast<int>(batch % static_cast<unsigned>(num_splits)) : 0;
    if (SPLIT) batch /= static_cast<unsigned>(num_splits);
    const int part = split * KW + kw;   // this warp's part of the row's keys (FS_WARP_SPLIT: warp kw of split s)
    int q_start = 0, nq = nq_cap, k_start = 0, nk = nk_cap;
    if (cu_q != nullptr) {
        q_start = min(max(__ldg(cu_q + batch), 0), q_total);
        nq = min(max(__ldg(cu_q + batch + 1) - q_start, 0), min(nq_cap, q_total - q_start));
    }
    if (cu_k != nullptr) {
        k_start = min(max(__ldg(cu_k + batch), 0), k_total);
        nk = min(max(__ldg(cu_k + batch + 1) - k_start, 0), min(nk_cap, k_total - k_start));
    }
    if (seqlens_k != nullptr) nk = min(max(__ldg(seqlens_k + batch), 0), nk_cap);
    const int rows = PACK_GQA ? nq * group : nq;   // this sequence's (packed) query rows of the block's head
#if FS_FUSED
    // the index check (fused_entries' comment): this thread's smallest violation among its block's entries
    const int batches = static_cast<int>(gridDim.z) / (SPLIT ? num_splits : 1);
    const bool checker = record != nullptr && qblk == 0 && head == 0;
    fsr::Least found;
#define FS_FUSED_ENTRIES()                                                                                         \
    do {                                                                                                           \
        if (split == 0 && tid == 0)                                                                                \
            fused_entries(found, seqlens_k, cu_q, cu_k, batch, batches, seqlen_limit, q_total, k_total, nq_cap,    \
                          nk_cap);                                                                                 \
    } while (0)
#define FS_FUSED_FINISH()                                                                                          \
    do {                                                                                                           \
        if (record != nullptr)                                                                                     \
            fused_finish(fused_state, record, tag, seqlens_k, block_table, cu_q, cu_k, batches, seqlen_limit,     \
                         nk_cap, bt_stride, page_shift, num_pages, q_total, k_total, nq_cap, tid);                 \
    } while (0)
#endif
    if (static_cast<int>(qblk) * BLOCK_M >= rows) {   // a whole block past them: before any barrier
#if FS_FUSED
        if (checker) {   // (only varlen's empty sequences: no split, no pages)
            FS_FUSED_ENTRIES();
            fused_flag(fused_state, found.c, lane);
        }
        FS_FUSED_FINISH();
#endif
        return;
    }
    const int kv_head = PACK_GQA ? static_cast<int>(head) : static_cast<int>(head) / group;
    const int q_head0 = PACK_GQA ? static_cast<int>(head) * group : static_cast<int>(head);   // the block's first head
    const int heads_q = PACK_GQA ? static_cast<int>(gridDim.y) * group : static_cast<int>(gridDim.y);
    const unsigned char* qh = static_cast<const unsigned char*>(q) + (batch * q_bs + q_start * q_rs + q_head0 * q_hs) * 2;
    const long long kv_off = PAGED ? kv_head * kv_hs : batch * kv_bs + k_start * kv_rs + kv_head * kv_hs;
    const unsigned char* kh = static_cast<const unsigned char*>(k) + kv_off * 2;
    const unsigned char* vh = reinterpret_cast<const unsigned char*>(v + kv_off);
    const int* bt_row = PAGED ? block_table + static_cast<long long>(batch) * bt_stride : nullptr;
#else
    const unsigned char* qh = static_cast<const unsigned char*>(q) + FS_QK_BYTES(batch * q_bs + head * q_hs);
    const unsigned char* kh = static_cast<const unsigned char*>(k)
                              + FS_QK_BYTES(batch * kv_bs + (head / group) * kv_hs);
    // FP8_PV: v is (B, Hkv, D, nkp) e4m3, keys padded to nkp (a multiple of 32) with zeros
    const unsigned char* vh = FP8_PV
        ? reinterpret_cast<const unsigned char*>(v) + (static_cast<long long>(batch) * (gridDim.y / group)
                                                      + head / group) * D * static_cast<long long>(nkp)
        : reinterpret_cast<const unsigned char*>(v + batch * kv_bs + (head / group) * kv_hs);
#endif
    const int r0 = qblk * BLOCK_M;
    const long long q_row = BNHD ? q_rs : D, kv_row = BNHD ? kv_rs : D;   // element distance of consecutive rows
    const int off = nk - nq;      // query row i sits at key position i + off (bottom-right aligned)

    // KV tiles this block visits, [t_begin, t_begin + n_tiles): causal / the window bound the keys any of its rows
    // sees; tiles wholly outside are skipped (flashsim.masking.key_range; the emulator skips the same ones).
#if FS_SEQLENS
    // The block's first and last query rows (PACK_GQA: those of its first and last packed rows, padding included):
    // flashsim.serving.blocks.block_tiles computes the same range.
    const int q_lo = PACK_GQA ? r0 / group : r0, q_hi = PACK_GQA ? (r0 + BLOCK_M - 1) / group : r0 + BLOCK_M - 1;
    int key_end = nk, key_begin = 0;
    if (CAUSAL) key_end = min(key_end, max(0, q_hi + 1 + off));
    if (LOCAL) {
        key_end = min(key_end, max(0, q_hi + 1 + off + win_right));
        key_begin = min(nk, max(0, q_lo + off - win_left));
    }
    int t_begin = key_begin / BC, t_end = (key_end + BC - 1) / BC;
    // the fused check's pages: split s's tiles [s * per, (s + 1) * per) of the ceil(nk / BC), per = ceil(/ S)
    const int all_tiles = (nk + BC - 1) / BC, per_split = (all_tiles + num_splits - 1) / num_splits;
    if (SPLIT || KW > 1) {   // part s * KW + kw of the row's S * KW parts (split s, warp kw), ceil(tiles / parts) long
        const int parts = (SPLIT ? num_splits : 1) * KW, per_part = (all_tiles + parts - 1) / parts;
        t_begin = max(t_begin, part * per_part);
        t_end = min(t_end, min(all_tiles, (part + 1) * per_part));
    }
#if FS_FUSED
    if (checker) {   // PAGED: the pages of the split's tiles, masks aside
        FS_FUSED_ENTRIES();
        if (PAGED)
            fused_pages(found, block_table, batch, min(nk, split * per_split * BC),
                        min(nk, (split + 1) * per_split * BC), nk, bt_stride, page_shift, num_pages, tid);
        fused_flag(fused_state, found.c, lane);
    }
#undef FS_FUSED_ENTRIES
#endif
    const int n_tiles = max(0, t_end - t_begin);
#else
    int key_end = nk, key_begin = 0;
    if (CAUSAL) key_end = min(key_end, max(0, r0 + BLOCK_M + off));
    if (LOCAL) {
        key_end = min(key_end, max(0, r0 + BLOCK_M + off + win_right));
        key_begin = min(nk, max(0, r0 + off - win_left));
    }
    const int t_begin = key_begin / BC;
    const int n_tiles = max(0, (key_end + BC - 1) / BC - t_begin);
#endif
    // Fill ring slot `slot` with KV tile `tn` of this block's range (K, then V, as cp.async copies of this thread's
    // chunks); MBAR: the copies arrive on the slot's full barrier when they land. The one fill, for the prologue and
    // both refills. A macro, not a lambda or a function: those, however written, made ptxas schedule some defaults
    // differently from the hand-inlined code (with [&] the 3-stage d = 64 builds, with [=] the INT8 builds, as a
    // function the d = 128 f32 causal one); the macro's SASS is that code's, for every default on both arches.
#if FS_QUANT_NVFP4
    // the K block scales of the block's K / V head (rows nk16 apart) and their ring
    const int nk16 = (nk + QB - 1) / QB * QB;
    const unsigned char* ksfh = k_sf + (static_cast<long long>(batch) * (gridDim.y / group) + head / group)
                                       * nk16 * SF_ROW;
    const uint32_t s_ksf = s_base + KSF_RING_OFFSET;
#define FS_FILL_K_SCALES(slot, tn)                                                                                 \
    load_k_scales(s_ksf + (slot) * KSF_SLOT_BYTES, ksfh, (t_begin + (tn)) * BC, nk16, tid)
#else
#define FS_FILL_K_SCALES(slot, tn) do {} while (0)
#endif
#if FS_SEQLENS
// Serving: a contiguous cache of few chunks per thread takes load_tile (the dense kernel's fast path); pages, and the
// one-warp decode blocks' many chunks per thread, take load_kv_rows (its loop is not fully unrolled: see there).
#define FS_FILL_SLOT(slot, tn)                                                                                     \
    do {                                                                                                           \
        if (!PAGED && BC * QK_CHUNKS <= 8 * LOADERS) {                                                             \
            load_tile<BC, QK_CHUNKS, LOADERS>(s_k + (slot) * K_SLOT_BYTES, kh, (t_begin + (tn)) * BC, nk,           \
                                              kv_row * 2, ltid);                                                   \
            load_tile<BC, V_CHUNKS, LOADERS>(s_v + (slot) * V_SLOT_BYTES, vh, (t_begin + (tn)) * BC, nk,            \
                                             kv_row * 2, ltid);                                                    \
        } else {                                                                                                   \
            load_kv_rows<BC, QK_CHUNKS, LOADERS>(s_k + (slot) * K_SLOT_BYTES, s_v + (slot) * V_SLOT_BYTES, kh, vh,  \
                                                 pages, (t_begin + (tn)) * BC, nk, kv_row * 2, page_shift, ltid);  \
            if (PAGED) pages = tile_pages<BC>(bt_row, (t_begin + (tn) + 1) * BC, nk, page_shift, num_pages, lane);   \
        }                                                                                                          \
        if (MBAR) mbar_arrive_cp(full_bar + MBAR_BYTES * (slot));                                                  \
    } while (0)
#else
#define FS_FILL_SLOT(slot, tn)                                                                                     \
    do {                                                                                                           \
        load_tile<BC, QK_CHUNKS>(s_k + (slot) * K_SLOT_BYTES, kh, (t_begin + (tn)) * BC, nk, FS_QK_BYTES(kv_row), tid); \
        load_v_tile(s_v + (slot) * V_SLOT_BYTES, vh, (t_begin + (tn)) * BC, nk, kv_row, nkp, tid);                 \
        FS_FILL_K_SCALES(slot, tn);                                                                                \
        if (MBAR) mbar_arrive_cp(full_bar + MBAR_BYTES * (slot));                                                  \
    } while (0)
#endif

#if FS_SEQLENS
    int pages = PAGED ? tile_pages<BC>(bt_row, t_begin * BC, nk, page_shift, num_pages, lane) : 0;   // tile 0's
#endif
    if (MBAR) {   // every thread arrives once per phase on both barriers of a slot
        if (KW > 1 ? lane == 0 : threadIdx.x == 0) {   // each ring's first thread
            for (int s = 0; s < STAGES; ++s) {
                mbar_init(full_bar + MBAR_BYTES * s, LOADERS);
                mbar_init(empty_bar + MBAR_BYTES * s, LOADERS);
            }
        }
        __syncthreads();
    }
    // ---- prologue: Q, then the first STAGES-1 KV tiles, one cp.async group each ---------------------------
#if FS_PACK_GQA
    load_q_packed(s_q, qh, r0, rows, group, q_rs * 2, q_hs * 2, tid);
#else
    load_tile<BLOCK_M, QK_CHUNKS>(s_q, qh, r0, nq, FS_QK_BYTES(q_row), tid);
#endif
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_tiles) FS_FILL_SLOT(s, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();   // the Q group is complete
    __syncthreads();

    // Q fragments (A operand of Q K^T, one x4 per k16 step and m16 tile). With one m16 tile per warp they stay
    // in registers for the whole loop; with two, registers go to the second tile's S and O, and Q is re-read
    // from shared memory (it stays there) at each k16 step.
    uint32_t qf[Q_IN_REGS ? MT : 1][Q_IN_REGS ? QK_KS : 1][4];
    const int q_row_lane = row_warp * WARP_M + (lane & 7) + ((lane >> 3) & 1) * 8;
    const uint32_t q_lane = s_q + q_row_lane * QK_ROW_BYTES;
    const int q_x = (lane >> 4) ^ swz_bits<QK_CHUNKS>(lane & 7);
    // K (no .trans): key = 8n + (lane & 7) + 8 (lane >> 4), chunk = 2 ks + ((lane >> 3) & 1)
    const uint32_t k_lane = ((lane & 7) + ((lane >> 4) << 3)) * QK_ROW_BYTES;
    const int k_x = ((lane >> 3) & 1) ^ swz_bits<QK_CHUNKS>(lane & 7);
    // V (.trans): key = 16 j + (lane & 7) + 8 ((lane >> 3) & 1), chunk = n + (lane >> 4)
    const uint32_t v_lane = ((lane & 7) + (((lane >> 3) & 1) << 3)) * V_ROW_BYTES;
    const int v_x = (lane >> 4) ^ swz_bits<V_CHUNKS>(lane & 7);
    // V^T (FP8_PV, no .trans, like K): d = 8n + (lane & 7) + 8 (lane >> 4), chunk = 2 j + ((lane >> 3) & 1)
    const uint32_t k_vlane = ((lane & 7) + ((lane >> 4) << 3)) * V_ROW_BYTES;
    const int kv_x = ((lane >> 3) & 1) ^ swz_bits<V_CHUNKS>(lane & 7);
    if (Q_IN_REGS) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int ks = 0; ks < QK_KS; ++ks)
                ldmatrix_x4(qf[Q_IN_REGS ? mt : 0][Q_IN_REGS ? ks : 0],
                            q_lane + mt * 16 * QK_ROW_BYTES + chunk_off(ks * 2, q_x));
    }

    float m_run[MT][2], l_run[MT][2];            // running row max (unscaled score units); lane-partial row sums
    float o_acc32[PV_F16 ? 1 : MT][PV_F16 ? 1 : O_NT][4];
    uint32_t o_acc16[PV_F16 ? MT : 1][PV_F16 ? O_NT : 1][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        m_run[mt][0] = m_run[mt][1] = -FS_INF;
        l_run[mt][0] = l_run[mt][1] = 0.f;
#pragma unroll
        for (int n = 0; n < O_NT; ++n) {
            if (PV_F16) { o_acc16[mt][n][0] = 0u; o_acc16[mt][n][1] = 0u; }
            else { o_acc32[mt][n][0] = o_acc32[mt][n][1] = o_acc32[mt][n][2] = o_acc32[mt][n][3] = 0.f; }
        }
    }
    // global query rows of this lane: m16 tile mt, row r (g or g + 8)
    const int row_base = r0 + row_warp * WARP_M + g;
#if FS_PACK_GQA
    int q_row_of[MT][2];   // the query row of each of this lane's packed rows (tile mt, row g / g + 8)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) q_row_of[mt][r] = (row_base + mt * 16 + r * 8) / group;
#endif
    // QUANT: the scale of each m16 tile's rows (one QB block; past nq the last block's, never stored) and of K.
    const int nqb = (nq + QB - 1) / QB, nkb = (nk + QB - 1) / QB;
    const long long bhq = static_cast<long long>(batch) * gridDim.y + head;
    const float* ksh = k_scale + (static_cast<long long>(batch) * (gridDim.y / group) + head / group) * nkb;
    float qsc[QUANT ? MT : 1];
    if (QUANT) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            qsc[QUANT ? mt : 0] = __ldg(q_scale + bhq * nqb + min((row_base - g + mt * 16) / QB, nqb - 1));
    }
#if FS_QUANT_NVFP4
    // Q's block-scale words, held for the loop: m16 tile mt, k64 step ks, of row g + 8 (t4 & 1) (past the written
    // rows the last one's: never stored)
    uint32_t qsf[MT][QK_KS];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        const int row = min(row_base + mt * 16 + 8 * (t4 & 1), nqb * QB - 1);
        const unsigned int* w = reinterpret_cast<const unsigned int*>(q_sf + (bhq * nqb * QB + row) * SF_ROW);
#pragma unroll
        for (int ks = 0; ks < QK_KS; ++ks) qsf[mt][ks] = __ldg(w + ks);
    }
#endif

    for (int t = 0; t < n_tiles; ++t) {
        // MBAR: wait for tile t's full barrier; the slot of tile t - 1 is refilled after Q K^T below. Otherwise
        // tile t's group is complete once at most STAGES-2 younger groups are pending, and the barrier also tells
        // every warp that all warps are done with tile t-1, whose slot the next load overwrites.
        if (MBAR) {
            // tile t landed (its slot's phase t / STAGES)
            mbar_wait(full_bar + MBAR_BYTES * (t % STAGES), (t / STAGES) & 1);
        } else {
            cp_async_wait<STAGES - 2>();
            if (KW > 1) __syncwarp();   // a warp's own ring (its loop runs its own tile count)
            else __syncthreads();
            const int tn = t + STAGES - 1;
            if (tn < n_tiles) {
                const int slot = tn % STAGES;
                FS_FILL_SLOT(slot, tn);
            }
            cp_async_commit();
        }
        const int slot = t % STAGES;
        const uint32_t kt = s_k + slot * K_SLOT_BYTES;
        const uint32_t vt = s_v + slot * V_SLOT_BYTES;
        const int key0 = (t_begin + t) * BC;

        // ---- S = Q K^T: accumulators from zero (f32, or s32 with QUANT), k steps in order; one K fragment feeds
        // every m16 tile ------------------------------------------------------------------------------------------
        float s_acc[MT][S_NT][4];
        int s_int[QUANT ? MT : 1][QUANT ? S_NT : 1][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int n = 0; n < S_NT; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
#if FS_QUANT_NVFP4
                    s_acc[mt][n][e] = 0.f;
#else
                    if (QUANT) s_int[QUANT ? mt : 0][QUANT ? n : 0][e] = 0;
                    else s_acc[mt][n][e] = 0.f;
#endif
                }
#pragma unroll
        for (int ks = 0; ks < QK_KS; ++ks) {
            uint32_t qs[Q_IN_REGS ? 1 : MT][4];
            if (!Q_IN_REGS) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldmatrix_x4(qs[Q_IN_REGS ? 0 : mt], q_lane + mt * 16 * QK_ROW_BYTES + chunk_off(ks * 2, q_x));
            }
#pragma unroll
            for (int n = 0; n < S_NT; n += 2) {
                // matrices: keys [8n, 8n+8) x row bytes [32ks, +16), [+16, +32); keys [8n+8, 8n+16) x the same
                uint32_t b[4];
                ldmatrix_x4(b, kt + k_lane + n * 8 * QK_ROW_BYTES + chunk_off(ks * 2, k_x));
#if FS_QUANT_NVFP4
                // keys 8n + g and 8n + 8 + g: their scale words of step ks
                const uint32_t ksf_t = s_ksf + slot * KSF_SLOT_BYTES + (n * 8 + g) * SF_ROW + 4 * ks;
                const uint32_t sb0 = ld_shared_b32(ksf_t), sb1 = ld_shared_b32(ksf_t + 8 * SF_ROW);
#endif
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const uint32_t (&a)[4] = Q_IN_REGS ? qf[Q_IN_REGS ? mt : 0][Q_IN_REGS ? ks : 0]
                                                       : qs[Q_IN_REGS ? 0 : mt];
#if FS_QUANT_NVFP4
                    mma_fp4(s_acc[mt][n], a, b[0], b[1], qsf[mt][ks], sb0);
                    mma_fp4(s_acc[mt][n + 1], a, b[2], b[3], qsf[mt][ks], sb1);
#else
                    if (QUANT) {
                        mma_s8(s_int[QUANT ? mt : 0][QUANT ? n : 0], a, b[0], b[1]);
                        mma_s8(s_int[QUANT ? mt : 0][QUANT ? n + 1 : 0], a, b[2], b[3]);
                    } else {
                        mma_f32(s_acc[mt][n], a, b[0], b[1]);
                        mma_f32(s_acc[mt][n + 1], a, b[2], b[3]);
                    }
#endif
                }
            }
        }
        if (MBAR) {   // refill the slot of tile t - 1 (tile tn = t + STAGES - 1) once every thread is done with it
            const int tn = t + STAGES - 1;
            if (tn < n_tiles) {
                const int sl = tn % STAGES;
                if (t >= 1) mbar_wait(empty_bar + MBAR_BYTES * sl, ((t - 1) / STAGES) & 1);
                FS_FILL_SLOT(sl, tn);
            }
        }
        // ---- QUANT: dequantise, s = float(s32) * (q_scale * k_scale) per m16 tile x k16 slice of keys (NVFP4: s =
        // acc * (q_scale * k_scale)) ------------------------------------------------------------------------------
        if (QUANT) {
#pragma unroll
            for (int j = 0; j < PV_KS; ++j) {
                const float ksc = __ldg(ksh + min(key0 / QB + j, nkb - 1));   // past nk: masked below anyway
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const float f = __fmul_rn(qsc[QUANT ? mt : 0], ksc);
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int e = 0; e < 4; ++e)
#if FS_QUANT_NVFP4
                            s_acc[mt][2 * j + h][e] = __fmul_rn(s_acc[mt][2 * j + h][e], f);
#else
                            s_acc[mt][2 * j + h][e] = __fmul_rn(
                                __int2float_rn(s_int[QUANT ? mt : 0][QUANT ? 2 * j + h : 0][e]), f);
#endif
                }
            }
        }

        // ---- soft-capping: s = tanh(s * cap_scale) (the softmax then runs on softcap * s) --------------------
        if (SOFTCAP) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < S_NT; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s_acc[mt][n][e] = softcap_tanh(__fmul_rn(s_acc[mt][n][e], cap_scale));
        }

        // ---- mask: keys past nk, (causal) after the diagonal, (window) outside the window -> -inf ------------
#if FS_SEQLENS
        const bool need_mask = (key0 + BC > nk) || (CAUSAL && key0 + BC - 1 > q_lo + off)
                               || (LOCAL && (key0 + BC - 1 > q_lo + off + win_right
                                             || key0 < q_hi + off - win_left));
#else
        const bool need_mask = (key0 + BC > nk) || (CAUSAL && key0 + BC - 1 > r0 + off)
                               || (LOCAL && (key0 + BC - 1 > r0 + off + win_right
                                             || key0 < r0 + BLOCK_M - 1 + off - win_left));
#endif
        if (need_mask) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int n = 0; n < S_NT; ++n) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = key0 + n * 8 + 2 * t4 + (e & 1);
#if FS_PACK_GQA
                        const int row = q_row_of[mt][e >> 1];
#else
                        const int row = row_base + mt * 16 + (e >> 1) * 8;
#endif
                        if (col >= nk || (CAUSAL && col > row + off)
                            || (LOCAL && (col > row + off + win_right || col < row + off - win_left)))
                            s_acc[mt][n][e] = -FS_INF;
                    }
                }
        }

        float m_exp[MT][2];   // each row's m * scale_log2: the exponentials' offset, here or (EXP_IN_PV) in the P V loop
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            // ---- online softmax, rows r = 0 (g) and 1 (g + 8) of m16 tile mt ------------------------------------
            float alpha[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = -FS_INF;                  // lane-local max over (n, e) in order; fmax ignores NaN
#pragma unroll
                for (int n = 0; n < S_NT; ++n) {
                    mx = fmaxf(mx, s_acc[mt][n][2 * r]);
                    mx = fmaxf(mx, s_acc[mt][n][2 * r + 1]);
                }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));   // quad all-reduce
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m_run[mt][r], mx);
                // -inf guard: a row with no visible key so far subtracts 0 instead of -inf (no inf - inf = NaN).
                const float m_safe = (m_new == -FS_INF) ? 0.f : m_new;
                alpha[r] = ex2(__fmul_rn(__fsub_rn(m_run[mt][r], m_safe), scale_log2));
                m_exp[mt][r] = __fmul_rn(m_safe, scale_log2);
                m_run[mt][r] = m_new;
                float l = __fmul_rn(l_run[mt][r], alpha[r]);
#pragma unroll
                for (int n = 0; n < (EXP_IN_PV ? 0 : S_NT); ++n) exp_tile(s_acc[mt][n], l, r, scale_log2, m_exp[mt][r]);
                l_run[mt][r] = l;
            }

            // ---- rescale O by alpha (per row), in registers -----------------------------------------------
            // With SKIP_UNIT_RESCALE, skipped warp-uniformly when every row's factor is exactly 1 (the running max
            // did not move): x * 1 == x bit for bit (O's NaNs come canonical from the mma), so nothing changes.
            if (PV_F16) {
                const uint32_t a0 = pack_f16x2(alpha[0], alpha[0]);
                const uint32_t a1 = pack_f16x2(alpha[1], alpha[1]);
                if (!SKIP_UNIT_RESCALE || __any_sync(0xffffffffu, (a0 != 0x3c003c00u) || (a1 != 0x3c003c00u)))
#pragma unroll
                for (int n = 0; n < O_NT; ++n) {
                    o_acc16[PV_F16 ? mt : 0][n][0] = mul_f16x2(o_acc16[PV_F16 ? mt : 0][n][0], a0);
                    o_acc16[PV_F16 ? mt : 0][n][1] = mul_f16x2(o_acc16[PV_F16 ? mt : 0][n][1], a1);
                }
            } else if (!SKIP_UNIT_RESCALE || __any_sync(0xffffffffu, (alpha[0] != 1.f) || (alpha[1] != 1.f))) {
#pragma unroll
                for (int n = 0; n < O_NT; ++n) {
                    float (&o)[4] = o_acc32[PV_F16 ? 0 : mt][n];
                    o[0] = __fmul_rn(o[0], alpha[0]);
                    o[1] = __fmul_rn(o[1], alpha[0]);
                    o[2] = __fmul_rn(o[2], alpha[1]);
                    o[3] = __fmul_rn(o[3], alpha[1]);
                }
            }
        }

        // ---- O += P V: the S accumulators of n8 tiles 2j, 2j+1 are P's A fragment for k16 slice j ----------
        if (FP8_PV && !PV_F16X2) {
            // k32 slice j: P's fragment from n8 tiles 4j .. 4j+3 of S (pack_p_fp8), V^T's slots [32j, +32)
#pragma unroll
            for (int j = 0; j < BC / 32; ++j) {
                uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) pack_p_fp8(pa[mt], s_acc[mt], j);
#pragma unroll
                for (int n = 0; n < O_NT; n += 2) {
                    // matrices: d [8n, 8n+8) x slots [32j, +16), [+16, +32); d [8n+8, +8) x the same
                    uint32_t b[4];
                    ldmatrix_x4(b, vt + k_vlane + n * 8 * V_ROW_BYTES + chunk_off(j * 2, kv_x));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_fp8(o_acc32[PV_F16 ? 0 : mt][n], pa[mt], b[0], b[1]);
                        mma_fp8(o_acc32[PV_F16 ? 0 : mt][n + 1], pa[mt], b[2], b[3]);
                    }
                }
            }
        } else if (FP8_PV) {
            // Two levels per group of FP8_GROUP k32 slices (pv_two_level), P's fragments packed per group.
#pragma unroll
            for (int g = 0; g < BC / 32 / FP8_GROUP; ++g) {
                uint32_t pa[MT][FP8_GROUP][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int jj = 0; jj < FP8_GROUP; ++jj) pack_p_fp8(pa[mt][jj], s_acc[mt], g * FP8_GROUP + jj);
                pv_two_level<FP8_GROUP>(
                    o_acc32,
                    [&](uint32_t (&b)[4], int jj, int n) {
                        ldmatrix_x4(b, vt + k_vlane + n * 8 * V_ROW_BYTES + chunk_off((g * FP8_GROUP + jj) * 2, kv_x));
                    },
                    [&](uint32_t (&d)[2], int mt, int jj, uint32_t b0, uint32_t b1) {
                        mma_fp8_f16(d, pa[mt][jj], b0, b1);
                    });
            }
        } else if (PV_F16X2) {
            // Two levels over the tile's k16 slices (pv_two_level), P rounded to f16 as below.
            uint32_t pa[MT][PV_KS][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int j = 0; j < PV_KS; ++j) {
                    pa[mt][j][0] = pack_f16x2(s_acc[mt][2 * j][0], s_acc[mt][2 * j][1]);
                    pa[mt][j][1] = pack_f16x2(s_acc[mt][2 * j][2], s_acc[mt][2 * j][3]);
                    pa[mt][j][2] = pack_f16x2(s_acc[mt][2 * j + 1][0], s_acc[mt][2 * j + 1][1]);
                    pa[mt][j][3] = pack_f16x2(s_acc[mt][2 * j + 1][2], s_acc[mt][2 * j + 1][3]);
                }
            pv_two_level<PV_KS>(
                o_acc32,
                [&](uint32_t (&b)[4], int j, int n) {
                    ldmatrix_x4_trans(b, vt + v_lane + j * 16 * V_ROW_BYTES + chunk_off(n, v_x));
                },
                [&](uint32_t (&d)[2], int mt, int j, uint32_t b0, uint32_t b1) { mma_f16(d, pa[mt][j], b0, b1); });
        } else
#pragma unroll
        for (int j = 0; j < PV_KS; ++j) {
            if (EXP_IN_PV) {   // the exponentials of n8 tiles 2j, 2j + 1 (each row's sum still runs over n in order)
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int r = 0; r < 2; ++r)
#pragma unroll
                        for (int n = 2 * j; n < 2 * j + 2; ++n)
                            exp_tile(s_acc[mt][n], l_run[mt][r], r, scale_log2, m_exp[mt][r]);
            }
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                pa[mt][0] = pack_elem2(s_acc[mt][2 * j][0], s_acc[mt][2 * j][1]);
                pa[mt][1] = pack_elem2(s_acc[mt][2 * j][2], s_acc[mt][2 * j][3]);
                pa[mt][2] = pack_elem2(s_acc[mt][2 * j + 1][0], s_acc[mt][2 * j + 1][1]);
                pa[mt][3] = pack_elem2(s_acc[mt][2 * j + 1][2], s_acc[mt][2 * j + 1][3]);
            }
#pragma unroll
            for (int n = 0; n < O_NT; n += 2) {
                // matrices (.trans): keys [16j, +8) x d [8n, +8), keys [16j+8, +8) x d [8n, +8), then d [8n+8, +8)
                uint32_t b[4];
                ldmatrix_x4_trans(b, vt + v_lane + j * 16 * V_ROW_BYTES + chunk_off(n, v_x));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    if (PV_F16) {
                        mma_f16(o_acc16[PV_F16 ? mt : 0][n], pa[mt], b[0], b[1]);
                        mma_f16(o_acc16[PV_F16 ? mt : 0][n + 1], pa[mt], b[2], b[3]);
                    } else {
                        mma_f32(o_acc32[PV_F16 ? 0 : mt][n], pa[mt], b[0], b[1]);
                        mma_f32(o_acc32[PV_F16 ? 0 : mt][n + 1], pa[mt], b[2], b[3]);
                    }
                }
            }
        }
        if (MBAR) mbar_arrive(empty_bar + MBAR_BYTES * slot);
    }
#undef FS_FILL_SLOT
#undef FS_FILL_K_SCALES
    cp_async_wait<0>();   // nothing may be in flight when the block exits
    // O staging writes into the warp's own Q rows: the warp's last Q reads (ldmatrix) come first in the order its
    // mma.sync's and shuffles give, and a __syncwarp puts that order in a form the memory model and racecheck accept
    // (benchmarks/experiments/racecheck_warnings/: compute-sanitizer's warp-level WAR warnings without it)
    // (FS_WARP_SPLIT: the warp's part goes into its own ring, which its ldmatrix read: the same order, the same fence)
    if (OSTAGE || KW > 1) __syncwarp();

    // ---- epilogue: quad-reduce l, O /= l as O * (1/l) with the IEEE reciprocal, LSE -----------------------
#if FS_SEQLENS
    // O rows from the block's first head of the sequence's row 0; lse (and the flag) by lse's strides; SPLIT: the
    // partial outputs' rows, q's (b, i, h) order over every batch (cu_q is null with splits)
    fs_half* oh = o + batch * q_bs + q_start * q_rs + q_head0 * q_hs;
    const long long lse_base = batch * lse_bs + q_start;
    const long long part_rows = static_cast<long long>(gridDim.z / (SPLIT ? num_splits : 1)) * nq_cap * heads_q;
#else
    const long long bh = static_cast<long long>(batch) * gridDim.y + head;
    fs_half* oh = o + batch * q_bs + head * q_hs;
    float* lh = lse + bh * nq;
#endif
    const float* vdq = FP8_PV ? v_deq + (static_cast<long long>(batch) * (gridDim.y / group)
                                         + head / group) * D : nullptr;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
        float inv[2], lse_row[2];
        bool live[2], bad[2] = {false, false};     // live: l finite and non-zero; bad: a non-finite O element
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float l = l_run[mt][r];
            l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
            l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
            const bool empty = (l == 0.f) || (l != l);     // no visible key, or NaN: O stays as is, lse = +inf
            live[r] = !empty;
            inv[r] = empty ? 1.f : __frcp_rn(l);
#if FS_SPLIT || FS_WARP_SPLIT > 1
            // a split's LSE: -inf where the part holds no visible key (the combine gives it weight 0), NaN stays NaN
            lse_row[r] = empty ? (l == 0.f ? -FS_INF : l) : __fmaf_rn(m_run[mt][r], lse_scale, log_exact_ops(l));
#else
            lse_row[r] = empty ? FS_INF : __fmaf_rn(m_run[mt][r], lse_scale, log_exact_ops(l));
#endif
        }
        const int row0 = row_base + mt * 16, row1 = row0 + 8;
#if FS_SEQLENS
        // this lane's two rows: inside the sequence's rows, O offset from oh, lse index, partial-output row
        bool in_rows[2];
        long long o_off[2], l_idx[2], p_row[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int pr = row0 + 8 * r;
            const int qi = PACK_GQA ? pr / group : pr, hq = PACK_GQA ? q_head0 + pr % group : q_head0;
            in_rows[r] = pr < rows;
            o_off[r] = qi * q_rs + (hq - q_head0) * q_hs;
            l_idx[r] = lse_base + hq * lse_hs + qi;
            p_row[r] = (static_cast<long long>(batch) * nq_cap + qi) * heads_q + hq;
        }
#endif
        if (QUANT) {   // the smoothing's row shift back: true scores = smoothed + q . mean(k)
            if (row0 < nq) lse_row[0] = __fmaf_rn(__ldg(q_corr + bhq * nq + row0), lse_scale, lse_row[0]);
            if (row1 < nq) lse_row[1] = __fmaf_rn(__ldg(q_corr + bhq * nq + row1), lse_scale, lse_row[1]);
        }
#pragma unroll
        for (int n = 0; n < O_NT; ++n) {
            float v0, v1, v2, v3;
            if (PV_F16) {
                const uint32_t (&h)[2] = o_acc16[PV_F16 ? mt : 0][n];
                v0 = f16_to_f32(h[0] & 0xffffu); v1 = f16_to_f32(h[0] >> 16);
                v2 = f16_to_f32(h[1] & 0xffffu); v3 = f16_to_f32(h[1] >> 16);
            } else {
                const float (&f)[4] = o_acc32[PV_F16 ? 0 : mt][n];
                v0 = f[0]; v1 = f[1]; v2 = f[2]; v3 = f[3];
            }
            if (OVERFLOW_FLAG) {
                bad[0] |= nonfinite(v0) || nonfinite(v1);
                bad[1] |= nonfinite(v2) || nonfinite(v3);
            }
            const int col = n * 8 + 2 * t4;
            v0 = __fmul_rn(v0, inv[0]); v1 = __fmul_rn(v1, inv[0]);
            v2 = __fmul_rn(v2, inv[1]); v3 = __fmul_rn(v3, inv[1]);
            if (FP8_PV) {      // O = (O / l) * amax_c / (448 v_range): P's scale and V's per-channel scale back
                const float d0 = __ldg(vdq + col), d1 = __ldg(vdq + col + 1);
                v0 = __fmul_rn(v0, d0); v1 = __fmul_rn(v1, d1); v2 = __fmul_rn(v2, d0); v3 = __fmul_rn(v3, d1);
            }
            if (OSTAGE) {   // n8 tile n is 16-byte chunk n of the row; this lane's pair is its word t4
                const int lr0 = warp * WARP_M + mt * 16 + g;
                st_shared_b32(s_q + swz<QK_CHUNKS>(lr0, n) + 4 * t4, pack_elem2(v0, v1));
                st_shared_b32(s_q + swz<QK_CHUNKS>(lr0 + 8, n) + 4 * t4, pack_elem2(v2, v3));
            } else {
#if FS_SEQLENS
                if (KW > 1 && !SPLIT) {   // the warp's part of the block's rows (warp_part), O / l in f32, unrounded
                    const int lr0 = mt * 16 + g;
                    st_shared_f32x2(s_k + (lr0 * D + col) * 4, v0, v1);
                    st_shared_f32x2(s_k + ((lr0 + 8) * D + col) * 4, v2, v3);
                } else if (SPLIT) {   // the part's O / l in f32, unrounded
                    if (in_rows[0]) st_global_f32x2(o_part + (part * part_rows + p_row[0]) * D + col, v0, v1);
                    if (in_rows[1]) st_global_f32x2(o_part + (part * part_rows + p_row[1]) * D + col, v2, v3);
                } else {
                    if (in_rows[0]) *reinterpret_cast<uint32_t*>(oh + o_off[0] + col) = pack_elem2(v0, v1);
                    if (in_rows[1]) *reinterpret_cast<uint32_t*>(oh + o_off[1] + col) = pack_elem2(v2, v3);
                }
#else
                if (row0 < nq)
                    *reinterpret_cast<uint32_t*>(oh + static_cast<long long>(row0) * q_row + col) = pack_elem2(v0, v1);
                if (row1 < nq)
                    *reinterpret_cast<uint32_t*>(oh + static_cast<long long>(row1) * q_row + col) = pack_elem2(v2, v3);
#endif
            }
        }
#if FS_SEQLENS
        if (t4 == 0) {
#pragma unroll
            for (int r = 0; r < 2; ++r)
                if (KW > 1 && !SPLIT) st_shared_f32(s_k + (WARP_M * D + mt * 16 + g + 8 * r) * 4, lse_row[r]);
                else if (in_rows[r]) {
                    if (SPLIT) lse_part[part * part_rows + p_row[r]] = lse_row[r];
                    else lse[l_idx[r]] = lse_row[r];
                }
        }
        if (OVERFLOW_FLAG) {
#pragma unroll
            for (int r = 0; r < 2; ++r)
                if (bad[r] && live[r] && in_rows[r]) atomicMin(overflow, static_cast<unsigned long long>(l_idx[r]));
        }
#else
        if (t4 == 0) {
            if (row0 < nq) lh[row0] = lse_row[0];
            if (row1 < nq) lh[row1] = lse_row[1];
        }
        if (OVERFLOW_FLAG) {
            if (bad[0] && live[0] && row0 < nq) atomicMin(overflow, static_cast<unsigned long long>(bh * nq + row0));
            if (bad[1] && live[1] && row1 < nq) atomicMin(overflow, static_cast<unsigned long long>(bh * nq + row1));
        }
#endif
    }
    if (OSTAGE) {   // the warp's WARP_M rows, chunk by chunk: lane l takes chunks l, l + 32, ... (rows in order)
        __syncwarp();
        constexpr int WARP_CHUNKS = WARP_M * QK_CHUNKS;
        constexpr int CHUNK_ELEMS = 16 / static_cast<int>(sizeof(fs_half));   // O elements in a 16-byte chunk
#pragma unroll
        for (int c = lane; c < WARP_CHUNKS; c += 32) {
            const int lr = warp * WARP_M + c / QK_CHUNKS, ch = c % QK_CHUNKS;
            if (r0 + lr < nq)
                copy_chunk_to_global(oh + static_cast<long long>(r0 + lr) * q_row + ch * CHUNK_ELEMS,
                                     s_q + swz<QK_CHUNKS>(lr, ch));
        }
    }
#if FS_SEQLENS
    if (KW > 1 && !SPLIT) {   // (with SPLIT too, each warp wrote its own part: flash_combine merges them)
        // The block's KW parts merged as flash_combine merges a KW-way split's (its combine_* steps, parts in warp
        // order): first each packed row's weights w_s / W, its max LSE m and total W, once a row, into the Q tile's
        // bytes (every warp is done with Q); then O = fma(w_s / W, O_s, O) from 0, two columns a thread. The same
        // operations in the same order, so the bits of that split call.
        __syncthreads();   // every warp's part written, every warp done with Q
        constexpr int ROW_W = KW + 2;   // a row's weights, then m, then W
        float* row_w = reinterpret_cast<float*>(smem);
        for (int lr = tid; lr < WARP_M; lr += THREADS) {
            if (r0 + lr >= rows) continue;
            float mx = -FS_INF;
#pragma unroll
            for (int w = 0; w < KW; ++w) mx = fmaxf(mx, warp_part(smem, w, lr, WARP_M * D));
            const float base = combine_base(mx);
            float wt[KW], sum = 0.f;
#pragma unroll
            for (int w = 0; w < KW; ++w) wt[w] = combine_weight(warp_part(smem, w, lr, WARP_M * D), base);
#pragma unroll
            for (int w = 0; w < KW; ++w) sum = __fadd_rn(sum, wt[w]);
            const float inv = combine_empty(sum) ? 1.f : __frcp_rn(sum);
#pragma unroll
            for (int w = 0; w < KW; ++w) row_w[lr * ROW_W + w] = __fmul_rn(wt[w], inv);
            row_w[lr * ROW_W + KW] = mx;
            row_w[lr * ROW_W + KW + 1] = sum;
        }
        __syncthreads();
        constexpr int PAIRS = D / 2;
        for (int i = tid; i < WARP_M * PAIRS; i += THREADS) {
            const int lr = i / PAIRS, col = 2 * (i % PAIRS), pr = r0 + lr;
            if (pr >= rows) continue;
            const float* rw = row_w + lr * ROW_W;
            float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
            for (int w = 0; w < KW; ++w) {
                acc0 = __fmaf_rn(rw[w], warp_part(smem, w, lr * D + col, 0), acc0);
                acc1 = __fmaf_rn(rw[w], warp_part(smem, w, lr * D + col + 1, 0), acc1);
            }
            const int qi = PACK_GQA ? pr / group : pr, hq = PACK_GQA ? q_head0 + pr % group : q_head0;
            *reinterpret_cast<uint32_t*>(oh + qi * q_rs + (hq - q_head0) * q_hs + col) = pack_elem2(acc0, acc1);
            if (col == 0) lse[lse_base + hq * lse_hs + qi] = combine_lse(rw[KW], rw[KW + 1], combine_empty(rw[KW + 1]));
        }
    }
#endif
#if FS_FUSED
    FS_FUSED_FINISH();
#undef FS_FUSED_FINISH
#endif
}

#if FS_SPLIT
// The combine of split-KV, launched after flash_fwd on the same stream (flashsim.gpu.serving): it merges each query
// row's num_splits partial outputs into O and LSE, in the order of operations of
// flashsim.emulator.kernel_program.combine. Row r (q's (b, i, h) order; R = B * nq * Hq rows) has parts
// lse_s = lse_part[s * R + r] and O_s = o_part[(s * R + r) * D + c]. m = max_s lse_s (fmax: NaN ignored); the base
// b = m, or 0 where every part is empty (m = -inf: the softmax's -inf guard); w_s = ex2((lse_s - b) * log2(e))
// (exactly 0 for an empty part); W = w_0 + w_1 + ... in split order; O = sum over s in order of
// fma(w_s * (1 / W), O_s, O) from 0, rounded to the element type; LSE = m + ln(W). Where W is 0 (no part saw a key)
// or NaN, O is what the sum gave (0, or NaN) and LSE = +inf: the single-pass epilogue's rule. One warp per row, lane
// l holding columns l, l + 32, ...; block = 32 * FS_COMBINE_WARPS threads, grid = ceil(R / FS_COMBINE_WARPS). The
// warp's lanes first load the row's part LSEs and compute their ex2 terms side by side into shared memory, so that the
// serial max and sum in split order read registers' worth of shared memory instead of waiting on one global load per
// part (with 40 parts the loads in a chain were 26% of a B=1 decode call: benchmarks/experiments/decode_profile/);
// the operations and their order are the ones above, so the bits are the same.
namespace fs {
constexpr int COMBINE_WARPS = FS_COMBINE_WARPS;
constexpr int MAX_SPLITS = FS_MAX_SPLITS;
// lane l of a row's warp holds O columns l, l + 32, ...; a lane holds the outputs of COMBINE_BATCH parts at once,
// 64 registers' worth (16 parts at d = 128, 8 at d = 256)
constexpr int COMBINE_COLS = FS_HEAD_DIM / 32;
constexpr int COMBINE_BATCH = 64 / COMBINE_COLS;
}
extern "C" __global__ void __launch_bounds__(32 * fs::COMBINE_WARPS)
flash_combine(const float* __restrict__ o_part, const float* __restrict__ lse_part, fs_half* __restrict__ o,
              float* __restrict__ lse, int num_splits, int rows, int nq, int heads) {
    using namespace fs;
    __shared__ float part_lse[COMBINE_WARPS][MAX_SPLITS];
    __shared__ float part_w[COMBINE_WARPS][MAX_SPLITS];
    constexpr int COLS = COMBINE_COLS, BATCH = COMBINE_BATCH;
    const int warp = threadIdx.x / 32, row = blockIdx.x * COMBINE_WARPS + warp, lane = threadIdx.x % 32;
    if (row >= rows) return;
#if __CUDA_ARCH__ >= 900
    // launched as flash_fwd's programmatic dependent: the parts are read only once that grid is complete and its
    // writes visible (without the launch attribute this returns at once: the stream's order already holds)
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    const long long R = rows;
    // The row's part outputs BATCH parts at a time, every load of a batch in flight at once (the first batch
    // before the weights, whose loads it overlaps): ceil(num_splits / BATCH) round trips to memory instead of
    // one per part.
    float part_o[BATCH][COLS];
    auto load_parts = [&](int s0) {
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            if (s0 + b < num_splits) {
                const float* src = o_part + ((s0 + b) * R + row) * D + lane;
#pragma unroll
                for (int j = 0; j < COLS; ++j) part_o[b][j] = __ldg(src + 32 * j);
            }
        }
    };
    load_parts(0);
    for (int s = lane; s < num_splits; s += 32) part_lse[warp][s] = __ldg(lse_part + s * R + row);
    __syncwarp();
    float mx = -FS_INF;
    for (int s = 0; s < num_splits; ++s) mx = fmaxf(mx, part_lse[warp][s]);
    const float base = combine_base(mx);
    for (int s = lane; s < num_splits; s += 32) part_w[warp][s] = combine_weight(part_lse[warp][s], base);
    __syncwarp();
    float sum = 0.f;
    for (int s = 0; s < num_splits; ++s) sum = __fadd_rn(sum, part_w[warp][s]);
    const bool empty = combine_empty(sum);
    const float inv = empty ? 1.f : __frcp_rn(sum);
    float acc[COLS];
#pragma unroll
    for (int j = 0; j < COLS; ++j) acc[j] = 0.f;
    for (int s0 = 0; s0 < num_splits; s0 += BATCH) {
        if (s0 > 0) load_parts(s0);
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            if (s0 + b < num_splits) {
                const float w = __fmul_rn(part_w[warp][s0 + b], inv);
#pragma unroll
                for (int j = 0; j < COLS; ++j) acc[j] = __fmaf_rn(w, part_o[b][j], acc[j]);
            }
        }
    }
    fs_half* dst = o + static_cast<long long>(row) * D + lane;
#pragma unroll
    for (int j = 0; j < COLS; ++j)
        dst[32 * j] = static_cast<fs_half>(pack_elem2(acc[j], 0.f) & 0xffffu);
    if (lane == 0) {   // lse (B, Hq, Nq), rows in q's (b, i, h) order
        const int b = row / (nq * heads), i = (row / heads) % nq, h = row % heads;
        lse[(static_cast<long long>(b) * heads + h) * nq + i] = combine_lse(mx, sum, empty);
    }
}
#endif
