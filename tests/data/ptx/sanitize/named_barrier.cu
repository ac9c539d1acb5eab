// Named barrier 1 with 64 threads orders warps 0 and 1 only: warp 0 writes a shared tile, warp 1 reads it after
// the barrier (clean), while warps 2 and 3 work on their own tile. stray != 0: warp 2 also reads warp 0's tile
// without taking part in barrier 1 (a read-after-write hazard racecheck must report).
extern "C" __global__ void named_barrier(const float* in, float* out, int stray) {
    __shared__ float tile[64];
    __shared__ float other[64];
    int t = threadIdx.x;
    int warp = t / 32;
    if (warp == 0) {
        tile[t] = in[t];
        asm volatile("bar.sync 1, 64;" ::: "memory");
    } else if (warp == 1) {
        asm volatile("bar.sync 1, 64;" ::: "memory");
        out[t] = tile[t - 32];
    } else {
        other[t - 64] = in[t];
        asm volatile("bar.sync 2, 64;" ::: "memory");
        float x = other[(t - 64 + 1) % 64];
        if (stray && warp == 2) {
            x += tile[t - 64];
        }
        out[t] = x;
    }
}
