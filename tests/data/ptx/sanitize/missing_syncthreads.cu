// Planted bug for racecheck: each thread writes its slot of a shared tile and reads its neighbour's. mode 0: no
// barrier between (read-after-write hazard, also between lanes of one warp); mode 1: __syncthreads (clean);
// mode 2: __syncwarp, and every thread reads a lane of its own warp (clean: the warp barrier orders its lanes).
extern "C" __global__ void missing_syncthreads(const float* in, float* out, int mode) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = in[t];
    if (mode == 1) {
        __syncthreads();
    } else if (mode == 2) {
        __syncwarp();
    }
    int from = mode == 2 ? (t & ~31) | ((t + 1) & 31) : (t + 1) % blockDim.x;
    out[t] = tile[from];
}
