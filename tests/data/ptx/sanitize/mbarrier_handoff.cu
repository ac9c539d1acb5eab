// Producer / consumer through an mbarrier: warp 0 writes a shared tile and each of its threads arrives on the
// mbarrier (expected count 32); warp 1 waits for the phase to complete and reads the tile (clean). wait == 0: the
// consumer skips the wait (a hazard racecheck must report).
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

extern "C" __global__ void mbarrier_handoff(const float* in, float* out, int wait) {
    __shared__ float tile[32];
    __shared__ uint64_t bar;
    int t = threadIdx.x;
    uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar);
    if (t == 0) {
        asm volatile("mbarrier.init.shared.b64 [%0], 32;" ::"r"(b) : "memory");
    }
    __syncthreads();
    if (t < 32) {
        tile[t] = in[t];
        uint64_t state;
        asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(b) : "memory");
    } else {
        if (wait) {
            uint32_t done = 0;
            while (!done) {
                asm volatile(
                    "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
                    : "=r"(done)
                    : "r"(b)
                    : "memory");
            }
        }
        out[t - 32] = tile[(t - 32 + 1) % 32];
    }
}
