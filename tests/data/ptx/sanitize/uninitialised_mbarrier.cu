// Planted bug for memcheck: an arrive on an mbarrier that no thread initialised.
typedef unsigned long long uint64_t;
typedef unsigned int uint32_t;

extern "C" __global__ void uninitialised_mbarrier(float* out) {
    __shared__ uint64_t bar;
    uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar);
    uint64_t state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(b) : "memory");
    out[threadIdx.x] = (float)state;
}
