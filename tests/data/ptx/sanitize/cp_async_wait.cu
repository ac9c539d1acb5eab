// cp.async into shared memory, then a block barrier and a read of another thread's bytes. wait != 0: each thread
// waits for its copies before the barrier (clean); wait == 0: the copy may still be in flight when another thread
// reads (a hazard racecheck must report).
typedef unsigned int uint32_t;

extern "C" __global__ void cp_async_wait(const float* in, float* out, int wait) {
    __shared__ __align__(16) float tile[128 * 4];
    int t = threadIdx.x;
    uint32_t dst = (uint32_t)__cvta_generic_to_shared(&tile[4 * t]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(in + 4 * t) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (wait) {
        asm volatile("cp.async.wait_all;" ::: "memory");
    }
    __syncthreads();
    out[t] = tile[4 * ((t + 1) % blockDim.x)];
    if (!wait) {
        asm volatile("cp.async.wait_all;" ::: "memory");
    }
}
