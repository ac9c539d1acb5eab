// Planted bug for memcheck: the block's dynamic shared memory holds blockDim.x floats, and each thread writes the
// slot after its own: the last thread writes past the launch's dynamic size.
extern "C" __global__ void shared_out_of_range(float* out) {
    extern __shared__ float tile[];
    tile[threadIdx.x + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}
