// Planted bug for racecheck: a shared tile is filled and synchronised, then each thread reads its neighbour's slot
// and overwrites its own with no barrier between the reads and the writes (write-after-read hazard). fixed != 0
// puts the barrier there.
extern "C" __global__ void war_hazard(const float* in, float* out, int fixed) {
    __shared__ float tile[256];
    int t = threadIdx.x;
    tile[t] = in[t];
    __syncthreads();
    float left = tile[(t + 1) % blockDim.x];
    if (fixed) {
        __syncthreads();
    }
    tile[t] = 2.0f * left;
    __syncthreads();
    out[t] = tile[t];
}
