// llama.cpp's quantized matrix multiplication (ggml/src/ggml-cuda/mmq.cuh, as vendored by llama-cpp-python 0.3.36),
// one instantiation, built for the PTX simulator's third-party check (tests/thirdparty/kernels.py): q8_0 weights
// (blocks of 32 int8 with an f16 scale) times activations in llama.cpp's q8_1 "mmq" layout (blocks of 128 int8
// with four f32 scales), f32 out, 8 activation columns per tile (J = 8), rows a multiple of the tile (no bounds
// fallback). The products run on int8 tensor cores (mma.sync m16n8k32 s8 -> s32); flags and include folders come
// from tests/thirdparty/kernels.py (ggml-cuda's CMake).
//
// The PTX also carries the threads per block, the rows per tile and the dynamic shared memory that
// launch_mul_mat_q computes (mmq_get_nbytes_shared, on the device-side constexpr twins of its helpers).
#include "mmq.cuh"

constexpr ggml_type kType = GGML_TYPE_Q8_0;
constexpr int kJ = 8;
constexpr bool kFallback = false;

template __global__ void mul_mat_q<kType, kJ, kFallback>(
    const char *, const int *, const int32_t *, const int32_t *, float *, float *, const float *, const uint3,
    const int, const int, const int, const int, const int, const uint3, const uint3, const int, const int,
    const int, const uint3, const uint3, const int, const int, const int, const uint3);

#ifdef __CUDA_ARCH__
constexpr ggml_cuda_mmq_config kConfig = ggml_cuda_mmq_get_config(kType, kJ, kFallback);
static_assert(kConfig.use_mma_data_layout(), "sm_90 uses the mma data layout");
constexpr size_t kIds = kConfig.J * sizeof(int);
constexpr size_t kX = kConfig.I * ggml_cuda_mmq_get_sram_stride(kConfig.sram_layout) * 4;
constexpr size_t kY = kConfig.J * sizeof(block_q8_1_mmq);

extern "C" __device__ const unsigned long long flashsim_shared_bytes = kIds + kX + GGML_PAD(kY, kConfig.nthreads * sizeof(int));
extern "C" __device__ const unsigned long long flashsim_block_threads = kConfig.nthreads;
extern "C" __device__ const unsigned long long flashsim_rows_per_tile = kConfig.I;
extern "C" __device__ const unsigned long long flashsim_cols_per_tile = kConfig.J;
extern "C" __device__ const unsigned long long flashsim_k_per_iteration = kConfig.K_vram;
extern "C" __device__ const unsigned long long flashsim_stream_k = kConfig.stream_k;
#endif
