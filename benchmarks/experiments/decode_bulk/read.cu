// Reads without compute: what the GPU's memory gives to loads alone (streaming_fit.py here).
//   read_flat:  every thread of a grid of SMs x BLOCKS_PER_SM blocks streams K and V front to back, grid-stride,
//               UNROLL 16-byte non-caching loads of each in flight per thread: the best order for the DRAM pages;
//   read_heads: the decode's partition: one block per (batch, head, split) as flash_fwd and ring.cu, each row of
//               256 bytes (d = 128 f16) read by 16 lanes, rows of one head 2 KB apart in (B, N, H, d), UNROLL rows of
//               K and of V in flight per half-warp; blockDim a multiple of 32 (1 warp is the decode's block).
// Each thread folds what it read into one word and writes it (out has one word per thread): the XOR of all of out is
// the XOR of every 32-bit word of K and V exactly when every byte was read once (read_cpu.py checks it in flashsim.ptx).
typedef unsigned int uint32_t;
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef TIMES
#define TIMES 0   // 1: thread 0 writes the block's %globaltimer at its start and end after out's per-thread words
#endif

__device__ __forceinline__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void record(uint32_t* out, unsigned long long t_start) {
    if (TIMES && threadIdx.x == 0) {
        unsigned long long* times = reinterpret_cast<unsigned long long*>(out + gridDim.x * blockDim.x);
        times[2 * blockIdx.x] = t_start, times[2 * blockIdx.x + 1] = now();
    }
}

__device__ __forceinline__ uint4 load_stream(const void* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ uint32_t fold(uint4 a) { return a.x ^ a.y ^ a.z ^ a.w; }

extern "C" __global__ void read_flat(const uint4* __restrict__ k, const uint4* __restrict__ v, long long n16,
                                     uint32_t* out) {
    const unsigned long long t_start = TIMES ? now() : 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t x = 0;
    for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
        uint4 a[UNROLL], b[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) a[u] = load_stream(k + i + u * stride), b[u] = load_stream(v + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) x ^= fold(a[u]) ^ fold(b[u]);
    }
    for (; i < n16; i += stride) x ^= fold(load_stream(k + i)) ^ fold(load_stream(v + i));
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = x;
    record(out, t_start);
}

extern "C" __global__ void read_heads(const char* __restrict__ k, const char* __restrict__ v, uint32_t* out, int n,
                                      int heads, int splits) {
    constexpr int ROW = 256;
    const unsigned long long t_start = TIMES ? now() : 0;
    const int split = blockIdx.x % splits, head = (blockIdx.x / splits) % heads, batch = blockIdx.x / splits / heads;
    const int per = (n + splits - 1) / splits, key0 = split * per, key1 = min(n, key0 + per);
    const long long rs = (long long)heads * ROW;
    const char* kh = k + ((long long)batch * n * heads + head) * ROW + (threadIdx.x % 16) * 16;
    const char* vh = v + ((long long)batch * n * heads + head) * ROW + (threadIdx.x % 16) * 16;
    const int step = blockDim.x / 16;   // rows a block reads per load instruction
    uint32_t x = 0;
    int r = key0 + threadIdx.x / 16;
    for (; r + (UNROLL - 1) * step < key1; r += UNROLL * step) {
        uint4 a[UNROLL], b[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            a[u] = load_stream(kh + (r + u * step) * rs), b[u] = load_stream(vh + (r + u * step) * rs);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) x ^= fold(a[u]) ^ fold(b[u]);
    }
    for (; r < key1; r += step) x ^= fold(load_stream(kh + r * rs)) ^ fold(load_stream(vh + r * rs));
    out[blockIdx.x * blockDim.x + threadIdx.x] = x;
    record(out, t_start);
}
