// The K / V ring of flash_fwd's serving builds reduced to its synchronisation, to ask compute-sanitizer's racecheck
// and flashsim.ptx's the same question (README.md here): a block's threads fill a ring of STAGES slots with cp.async,
// each thread arriving on the slot's "full" mbarrier with cp.async.mbarrier.arrive.noinc; warps below live_warps wait
// on it and read the whole slot (chunks every thread of the block wrote); every thread releases the slot on its
// "empty" mbarrier, and the slot is refilled once all have. TWO_LOOPS = 0: the idle warps run the live warps' loop
// and skip the reads with a branch; TWO_LOOPS = 1: they take a loop of their own with only the ring's side (the
// shape of idle_warps/two_loops.patch). RACY = 1, the control: the live warps read a slot without waiting for
// its copies (on its "full" barrier), a race both checkers must report. KERNEL_PROLOGUE = 1: the prologue as flash_fwd
// has it: a Q group first, one cp.async group per filled slot (commit_group), cp.async.wait_group STAGES-1 (Q
// landed) and __syncthreads, and the chunks past the valid keys zero-filled (src-size 0), here the last tile's
// second half.
typedef unsigned int uint32_t;  // (NVRTC without the C++ headers)

#ifndef STAGES
#define STAGES 2
#endif
#ifndef TWO_LOOPS
#define TWO_LOOPS 0
#endif
#ifndef RACY
#define RACY 0
#endif
#ifndef KERNEL_PROLOGUE
#define KERNEL_PROLOGUE 0
#endif
#include "async_copy.cuh"  // kernel/: flash_fwd's own cp.async and mbarrier wrappers
using namespace fs;

constexpr int THREADS = 128;
constexpr int CHUNKS = 4;                          // 16-byte chunks a thread copies per slot
constexpr int SLOT_BYTES = THREADS * CHUNKS * 16;  // 8 KB

__device__ __forceinline__ uint32_t ld_shared(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) race_pattern(const uint4* __restrict__ src, uint32_t* out,
                                                                     int n_tiles, int live_warps) {
    __shared__ __align__(128) unsigned char ring[STAGES * SLOT_BYTES];
    __shared__ __align__(128) unsigned char q_tile[THREADS * 16];
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    const int tid = threadIdx.x, warp = tid / 32;
    const uint32_t base = smem_addr(ring), full0 = smem_addr(full), empty0 = smem_addr(empty);
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, THREADS);
            mbar_init(empty0 + 8 * s, THREADS);
        }
    }
    __syncthreads();
    const uint4* block_src = src + (size_t)blockIdx.x * n_tiles * THREADS * CHUNKS;
    auto fill = [&](int slot, int tile) {
        for (int c = 0; c < CHUNKS; ++c) {
            const uint32_t dst = base + slot * SLOT_BYTES + (c * THREADS + tid) * 16;
            const uint4* from = block_src + (size_t)tile * THREADS * CHUNKS + c * THREADS + tid;
            const int bytes = KERNEL_PROLOGUE && tile == n_tiles - 1 && c >= CHUNKS / 2 ? 0 : 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(from), "r"(bytes)
                         : "memory");
        }
        mbar_arrive_cp(full0 + 8 * slot);
    };
#if KERNEL_PROLOGUE
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_addr(q_tile) + tid * 16), "l"(block_src + tid)
                 : "memory");
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < n_tiles) fill(s, s);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 1) : "memory");
    __syncthreads();
#else
    for (int s = 0; s < STAGES - 1 && s < n_tiles; ++s) fill(s, s);
#endif
    const bool live = warp < live_warps;
    uint32_t acc = 0;
    auto begin = [&](int t) {
        if (!(RACY && live)) mbar_wait(full0 + 8 * (t % STAGES), (t / STAGES) & 1);
    };
    auto refill = [&](int t) {
        const int tn = t + STAGES - 1;
        if (tn < n_tiles) {
            const int sl = tn % STAGES;
            if (t >= 1) mbar_wait(empty0 + 8 * sl, ((t - 1) / STAGES) & 1);
            fill(sl, tn);
        }
    };
    auto read = [&](int t) {  // every chunk of the slot, each thread's 16 bytes read by some live thread
        const uint32_t slot = base + (t % STAGES) * SLOT_BYTES;
        for (int i = tid; i < THREADS * CHUNKS; i += 32 * live_warps) acc += ld_shared(slot + i * 16);
    };
    auto end = [&](int t) { mbar_arrive(empty0 + 8 * (t % STAGES)); };
#if TWO_LOOPS
    if (!live) {
        for (int t = 0; t < n_tiles; ++t) {
            begin(t);
            refill(t);
            end(t);
        }
    }
    const int live_tiles = live ? n_tiles : 0;
    for (int t = 0; t < live_tiles; ++t) {
        begin(t);
        read(t);
        refill(t);
        end(t);
    }
#else
    for (int t = 0; t < n_tiles; ++t) {
        begin(t);
        if (live) read(t);
        refill(t);
        end(t);
    }
#endif
#if KERNEL_PROLOGUE
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    acc += ld_shared(smem_addr(q_tile) + tid * 16) * 0u;  // Q is read (the value not used: numpy's sum stays)
#else
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
    out[blockIdx.x * THREADS + tid] = acc;
}
