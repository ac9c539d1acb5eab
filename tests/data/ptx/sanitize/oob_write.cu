// Planted bug for memcheck: `i <= n` writes one float past the end of `out`.
extern "C" __global__ void oob_write(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        out[i] = 1.0f;
    }
}
