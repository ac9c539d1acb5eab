// A decode block's K / V stream reduced to its load path (README.md here): one warp per block reads its (batch, head,
// split)'s keys in tiles of KV_TILE (64 or 32) rows of d = 128 f16 through a ring of STAGES slots and consumes each
// tile as flash_fwd's decode does (ldmatrix of every K and V chunk, 2 mma.sync m16n8k16 a key), so that only the
// copy's form differs:
//   BULK = 0: 16-byte cp.async per lane (KV_TILE per lane per tile), rows 256 B apart, chunks XOR-swizzled, each
//             lane arriving on the slot's mbarrier with cp.async.mbarrier.arrive.noinc (flash_fwd's decode today);
//   BULK = 1: one cp.async.bulk per 256-byte row (4 per lane per 64-key tile) completing its bytes on the slot's
//             mbarrier, rows padded to 272 B so that ldmatrix stays free of bank conflicts without a swizzle;
//   BULK = 2: the tensor copy unit (TMA): lane 0 issues 4 cp.async.bulk.tensor.3d boxes per tile (KV_TILE keys x
//             64 d of K or V, KV_TILE x 128 B each) from tensor maps with the 128-byte swizzle (FA3's form); the
//             maps lie in global memory (tmap_k, tmap_v: 128 bytes each, from cuTensorMapEncodeTiled on the host).
// K and V are (B, N, H, d) f16 as the serving call's caches; rows past N are skipped (their slot rows unused).
// WARPS > 1: a block of WARPS warps, each with its own ring (slots and barriers) over its share of the block's keys
// (ceil(keys / WARPS), in warp order): a split inside the block, its warps' streams side by side on one SM. Warp w of
// block i writes out[(i * WARPS + w) * 32 + lane], so WARPS w with S splits gives the outputs of one-warp blocks with
// w * S splits, bit for bit (ring_cpu.py). WARPS 1 is the one-warp block (its PTX unchanged by the option).
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#ifndef BULK
#define BULK 0
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef KV_TILE
#define KV_TILE 64
#endif
#ifndef NO_MMA
#define NO_MMA 0   // 1: the tiles land and are released unread (no ldmatrix, no mma): the copies' cost alone
#endif
#ifndef WARPS
#define WARPS 1
#endif
#ifndef TIMES
#define TIMES 0    // 1: lane 0 writes the block's %globaltimer at its start and end to out[B * H * splits * 32 + ...]
#endif
constexpr int D = 128, ROW = D * 2, BC = KV_TILE, PITCH = BULK == 1 ? ROW + 16 : ROW, SLOT = BC * PITCH;

#include "async_copy.cuh"  // kernel/: flash_fwd's own cp.async and mbarrier wrappers
using namespace fs;

extern "C" __global__ void __launch_bounds__(32 * WARPS) ring(const char* __restrict__ k, const char* __restrict__ v,
                                                     float* out, int n, int heads, int splits, const void* tmap_k,
                                                     const void* tmap_v) {
    extern __shared__ __align__(1024) unsigned char smem[];
    __shared__ __align__(8) uint64_t full[WARPS * STAGES];
    const int lane = WARPS > 1 ? threadIdx.x % 32 : threadIdx.x, warp = WARPS > 1 ? threadIdx.x / 32 : 0;
#if TIMES
    unsigned long long t_start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_start));
#endif
    const int split = blockIdx.x % splits, head = (blockIdx.x / splits) % heads, batch = blockIdx.x / splits / heads;
    const int per = (n + splits - 1) / splits;
    int key0 = split * per, key1 = min(n, key0 + per);
#if WARPS > 1
    {   // this warp's share of the block's keys
        const int wper = (max(key1 - key0, 0) + WARPS - 1) / WARPS;
        key0 = min(key1, key0 + warp * wper);
        key1 = min(key1, key0 + wper);
    }
#endif
    const int tiles = (key1 - key0 + BC - 1) / BC;
    const long long rs = (long long)heads * ROW;   // bytes between keys of one head
    const char* kh = k + ((long long)batch * n * heads + head) * ROW;
    const char* vh = v + ((long long)batch * n * heads + head) * ROW;
    const uint32_t ks = smem_addr(smem) + warp * 2 * STAGES * SLOT, vs = ks + STAGES * SLOT;
    const uint32_t bar0 = smem_addr(full) + warp * 8 * STAGES;
    if (lane == 0)
        for (int s = 0; s < STAGES; ++s)
            asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(bar0 + 8 * s), "r"(BULK ? 1 : 32) : "memory");
    // (BULK 2: the dynamic shared memory starts 1024-byte aligned, so every 8 KB box keeps the swizzle's rows)
    __syncwarp();
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    auto fill = [&](int slot, int t) {
        const int first = key0 + t * BC, rows = min(BC, key1 - first);
        const uint32_t bar = bar0 + 8 * slot;
#if BULK == 2
        if (lane == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" :: "r"(bar), "r"(4 * BC * 128)
                         : "memory");
            const int row = batch * n + first;   // the map's outer dimension: (b, key) rows of B * N
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3, %4}], [%5];\n"
                             :: "r"(ks + slot * SLOT + half * BC * 128), "l"(tmap_k), "r"(half * 64), "r"(head),
                                "r"(row), "r"(bar) : "memory");
                asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                             "[%0], [%1, {%2, %3, %4}], [%5];\n"
                             :: "r"(vs + slot * SLOT + half * BC * 128), "l"(tmap_v), "r"(half * 64), "r"(head),
                                "r"(row), "r"(bar) : "memory");
            }
        }
        (void)rows;
#elif BULK
        if (lane == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" :: "r"(bar), "r"(2 * rows * ROW)
                         : "memory");
        __syncwarp();
        for (int r = lane; r < rows; r += 32) {
            const long long at = (long long)(first + r) * rs;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                         :: "r"(ks + slot * SLOT + r * PITCH), "l"(kh + at), "n"(ROW), "r"(bar) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                         :: "r"(vs + slot * SLOT + r * PITCH), "l"(vh + at), "n"(ROW), "r"(bar) : "memory");
        }
#else
#pragma unroll 4
        for (int i = lane; i < BC * 16; i += 32) {
            const int r = i / 16, c = i % 16;
            if (r < rows) {
                const long long at = (long long)(first + r) * rs + c * 16;
                const uint32_t dst = slot * SLOT + r * PITCH + ((c ^ (r & 7)) * 16);
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(ks + dst), "l"(kh + at) : "memory");
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(vs + dst), "l"(vh + at) : "memory");
            }
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" :: "r"(bar) : "memory");
#endif
    };
    for (int s = 0; s < STAGES - 1; ++s)
        if (s < tiles) fill(s, s);
    float acc[16][4] = {};
    const uint32_t a0 = lane * 0x3c003c00u, a1 = a0 ^ 0x00010001u;   // an A operand that stays in registers
    for (int t = 0; t < tiles; ++t) {
        const int slot = t % STAGES;
        mbar_wait(bar0 + 8 * slot, (t / STAGES) & 1);
        const int tn = t + STAGES - 1;   // refill the slot of tile t - 1, which every lane finished (__syncwarp)
        if (tn < tiles) fill(tn % STAGES, tn);
#if !NO_MMA
#pragma unroll
        for (int it = 0; it < BC; ++it) {   // BC / 2 ldmatrix.x4 over K, BC / 2 .trans over V; 2 mma each
            const int row = (it % (BC / 2) / 4) * 8 + (lane & 7), chunk = (it % 4) * 4 + (lane >> 3);
            // BULK 2: two boxes of BC rows x 128 B, chunk c of a row at (c ^ (row & 7)) within its 128 B
            const uint32_t off = BULK == 2 ? (chunk / 8) * BC * 128 + row * 128 + ((chunk % 8) ^ (row & 7)) * 16
                                           : row * PITCH + (BULK ? chunk : (chunk ^ (row & 7))) * 16;
            const uint32_t addr = (it < BC / 2 ? ks : vs) + slot * SLOT + off;
            uint32_t b[4];
            if (it < BC / 2)
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(addr));
            else
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(addr));
            float* c = acc[it % 16];
#pragma unroll
            for (int h = 0; h < 2; ++h)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                             "{%0,%1,%2,%3};\n"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                             : "r"(a0), "r"(a1), "r"(a1), "r"(a0), "r"(b[2 * h]), "r"(b[2 * h + 1]));
        }
#endif
        __syncwarp();   // every lane is done with the slot before the next iteration refills it
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) s += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
    out[(blockIdx.x * WARPS + warp) * 32 + lane] = s;
#if TIMES
#if WARPS > 1
    __syncthreads();   // the block ends with its last warp
#endif
    unsigned long long t_end;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_end));
    unsigned long long* times = reinterpret_cast<unsigned long long*>(out + gridDim.x * WARPS * 32);
    if (threadIdx.x == 0) times[2 * blockIdx.x] = t_start, times[2 * blockIdx.x + 1] = t_end;
#endif
}
