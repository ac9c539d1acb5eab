// Planted bug for memcheck: each thread reads the element after its own, so the last thread reads one float past
// the end of `in` (an off-by-one of a shifted copy).
extern "C" __global__ void oob_read(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i + 1];
    }
}
