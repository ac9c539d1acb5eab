// Planted bug for memcheck: a float4 load from a pointer one float past a 16-byte boundary.
extern "C" __global__ void misaligned_load(const float* in, float* out) {
    const float4* v = reinterpret_cast<const float4*>(in + 1);
    float4 x = v[threadIdx.x];
    out[threadIdx.x] = x.x + x.y + x.z + x.w;
}
