// The mma.sync ceiling of a GPU: CHAINS independent mma.sync chains per warp, ITERS steps each, every SM full.
// Operands stay in registers (no memory traffic in the loop); the accumulators are written once at the end so
// the compiler keeps every mma.
// FS_PEAK_VARY = 1: each chain's B at step `it` is b + zero * (it * CHAINS + chain), zero a launch argument (0), into
// a fresh register: the values do not change, but ptxas cannot prove it, so it can neither hoist a product out of
// the loop nor share one between chains or steps. It needs to be told: on sm_90 ptxas lowers the m16n8k32 e4m3 mma
// to e4m3 -> f16 conversions and two HMMA.16816 from zero, then adds to the accumulator (FADD / HADD2); with
// loop-invariant operands common to every chain it computed the products once, before the loop, and left only the
// adds in it, so the FP8 "ceilings" measured before (1754 / 1820 TFLOP/s) timed adds, not mma's
// (tools/sass_ops.py --peak). A's registers stay fixed, so A's unpacking to f16 may leave the loop: a kernel
// unpacks an A fragment once for all its n8 tiles too. Not in place: an earlier version added `zero` to the operand
// registers themselves every step, and the f16 probe then measured 457 TFLOP/s instead of 632 (presumably each add
// waits until the mma's in flight have read the register it overwrites; benchmarks/logs/2026-11-30g/
// peak_in_place_vary.txt); this form costs one integer add per mma (552, `flashsim bench peak --vary all`).
// FS_PEAK_VARY = 0: fixed operands, for an mma that accumulates in place and so cannot leave the loop
// (flashsim.gpu.peak.must_vary decides).
// One define picks the instruction (FS_PEAK_KIND):
//   0 m16n8k16 f32.f16.f16.f32   1 m16n8k16 f16.f16.f16.f16
//   2 m16n8k32 s32.s8.s8.s32     3 m16n8k32 f32.e4m3.e4m3.f32   4 m16n8k32 f16.e4m3.e4m3.f16
// Built and timed by flashsim/gpu/peak.py (`flashsim bench peak`, benchmarks/bench_peak.py).
#ifndef FS_PEAK_KIND
#error "build through flashsim.gpu.peak (FS_PEAK_KIND, FS_PEAK_CHAINS, FS_PEAK_ITERS, FS_PEAK_VARY)"
#endif
typedef unsigned int u32;
constexpr int CHAINS = FS_PEAK_CHAINS;
constexpr int ITERS = FS_PEAK_ITERS;
constexpr bool ACC32 = FS_PEAK_KIND == 0 || FS_PEAK_KIND == 2 || FS_PEAK_KIND == 3;
constexpr int NACC = ACC32 ? 4 : 2;

__device__ __forceinline__ void step(u32 (&d)[NACC], const u32 (&a)[4], u32 b0, u32 b1) {
#if FS_PEAK_KIND == 0
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif FS_PEAK_KIND == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif FS_PEAK_KIND == 2
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif FS_PEAK_KIND == 3
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(d[0]), "+r"(d[1]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

extern "C" __global__ void mma_peak(const u32* __restrict__ seed, u32* __restrict__ out, u32 zero) {
    const int lane = threadIdx.x & 31;
    u32 a[4], b0 = seed[(lane + 4) & 31], b1 = seed[(lane + 5) & 31];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = seed[(lane + i) & 31];   // small operands: nothing overflows to inf
    u32 d[CHAINS][NACC];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int i = 0; i < NACC; ++i) d[c][i] = 0u;
    for (int it = 0; it < ITERS; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            step(d[c], a, FS_PEAK_VARY ? b0 + zero * static_cast<u32>(it * CHAINS + c) : b0, b1);
    }
    u32 x = 0u;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
#pragma unroll
        for (int i = 0; i < NACC; ++i) x ^= d[c][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
