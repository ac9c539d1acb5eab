"""Small CUDA sources for the flashsim.gpu tests (tests/test_gpu_*.py): an mma.sync kernel, scalar args, smem.

Test data, not part of the package: the tests import it as ``cuda_kernels`` (pytest puts tests/ on sys.path).
"""

# One warp computes D = A @ B + C with mma.sync.m16n8k16 (f16 inputs, f32 accumulators), reading plain
# row-major matrices and building the fragments with the PTX ISA's index formulas. MMA_BF16 switches the
# input type; the template instantiations exercise name expressions.
MMA_SOURCE = r"""
template <bool BF16>
__global__ void mma_m16n8k16(const unsigned short* a, const unsigned short* b, const float* c, float* d) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    auto pack = [](unsigned short lo, unsigned short hi) { return (unsigned)lo | ((unsigned)hi << 16); };
    unsigned ra[4], rb[2];
    for (int j = 0; j < 4; ++j) {
        const int row = g + ((j & 1) ? 8 : 0), col = t * 2 + ((j & 2) ? 8 : 0);
        ra[j] = pack(a[row * 16 + col], a[row * 16 + col + 1]);
    }
    for (int j = 0; j < 2; ++j) {
        const int k = t * 2 + (j ? 8 : 0);
        rb[j] = pack(b[k * 8 + g], b[(k + 1) * 8 + g]);
    }
    float rc[4], rd[4];
    for (int j = 0; j < 4; ++j) rc[j] = c[(g + (j >= 2 ? 8 : 0)) * 8 + t * 2 + (j & 1)];
    if (BF16) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
    }
    for (int j = 0; j < 4; ++j) d[(g + (j >= 2 ? 8 : 0)) * 8 + t * 2 + (j & 1)] = rd[j];
}
"""
MMA_NAMES = ("mma_m16n8k16<false>", "mma_m16n8k16<true>")

# Scalar arguments of every width, a static shared array, and a dynamic shared buffer of any size.
MISC_SOURCE = r"""
extern "C" __global__ void axpb(float* out, const float* x, float a, int n, double b, unsigned long long tag,
                                long long* tag_out) {
    __shared__ float stage[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = __fadd_rn(__fmul_rn(a, stage[threadIdx.x]), (float)b);
    if (i == 0) tag_out[0] = (long long)(tag ^ 0x5a5a5a5a5a5a5a5aull);
}

// Each thread writes its words of a dynamic shared buffer, then reads the mirror image after a barrier:
// only a block that really got smem_words * 4 bytes of shared memory reproduces the expected output.
extern "C" __global__ void smem_mirror(unsigned* out, int smem_words) {
    extern __shared__ unsigned buf[];
    for (int w = threadIdx.x; w < smem_words; w += blockDim.x) buf[w] = w * 2654435761u + blockIdx.x;
    __syncthreads();
    for (int w = threadIdx.x; w < smem_words; w += blockDim.x)
        out[blockIdx.x * smem_words + w] = buf[smem_words - 1 - w];
}

extern "C" __global__ void poke(float* p, long long offset) { p[offset] = 1.0f; }
"""

# 64 live floats per thread: ~72 registers unconstrained, spills under maxrregcount=32; 1024 threads of it
# exceed the 64 K registers of an SM (a launch error that leaves the context usable).
HEAVY_SOURCE = r"""
extern "C" __global__ void heavy(float* out, const float* in, int n) {
    float acc[64];
    #pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = in[threadIdx.x + j * n];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
        #pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j * 7 + r) % 64] + 1.0f;
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    out[threadIdx.x] = s;
}
"""
