// Planted bug for initcheck: the first half of a shared tile is written, every thread reads the whole tile.
extern "C" __global__ void uninitialised_shared(float* out) {
    __shared__ float tile[128];
    int t = threadIdx.x;
    if (t < 64) {
        tile[t] = 1.0f;
    }
    __syncthreads();
    out[t] = tile[127 - t];
}
