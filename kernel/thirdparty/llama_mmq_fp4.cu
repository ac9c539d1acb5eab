// llama.cpp's quantized matrix multiplication on consumer Blackwell's FP4 tensor cores (ggml/src/ggml-cuda/mmq.cuh,
// mmq-load-tiles.cuh, mmq-vec-dot.cuh and mma.cuh as vendored by llama-cpp-python 0.3.36), one instantiation, built
// for sm_120a for the PTX simulator's third-party check (tests/thirdparty/kernels.py): MXFP4 weights (ggml's
// block_mxfp4: 32 e2m1 codes with one e8m0 scale) times activations quantised to MXFP4 as well (the W4A4 path,
// prec_src1 = GGML_PREC_Q4: block_fp4_mmq, 256 e2m1 codes with eight e8m0 scales), f32 out, 8 activation columns per
// tile (J = 8), rows a multiple of the tile (no bounds fallback). With BLACKWELL_MMA_AVAILABLE (sm_120a) each
// product is one `mma.sync.aligned.kind::mxf4.block_scale.scale_vec::2X.m16n8k64` (mma.cuh: mma_block_scaled_fp4),
// its f32 result added to the tile's sums. With FLASHSIM_NVFP4 defined, the NVFP4 twin: block_nvfp4 weights (64
// codes, a ue4m3 scale per 16), activations with a ue4m3 scale per 16 and a per-column f32 scale (y_scale, applied
// at the write-back), `kind::mxf4nvf4.block_scale.scale_vec::4X` ue4m3. Flags and include folders come from
// tests/thirdparty/kernels.py (ggml-cuda's CMake).
//
// The PTX also carries the threads per block, the rows per tile and the dynamic shared memory that
// launch_mul_mat_q computes (mmq_get_nbytes_shared, on the device-side constexpr twins of its helpers).
#include "mmq.cuh"

#ifdef FLASHSIM_NVFP4
constexpr ggml_type kType = GGML_TYPE_NVFP4;
#else
constexpr ggml_type kType = GGML_TYPE_MXFP4;
#endif
constexpr int kJ = 8;
constexpr bool kFallback = false;
constexpr ggml_prec kPrec = GGML_PREC_Q4;

template __global__ void mul_mat_q<kType, kJ, kFallback, kPrec>(
    const char *, const int *, const int32_t *, const int32_t *, float *, float *, const float *, const uint3,
    const int, const int, const int, const int, const int, const uint3, const uint3, const int, const int,
    const int, const uint3, const uint3, const int, const int, const int, const uint3);

#ifdef __CUDA_ARCH__
#ifndef BLACKWELL_MMA_AVAILABLE
#error "the FP4 mma path needs BLACKWELL_MMA_AVAILABLE: build for sm_120a"
#endif
constexpr ggml_cuda_mmq_config kConfig = ggml_cuda_mmq_get_config(kType, kJ, kFallback, kPrec);
static_assert(kConfig.use_mma_data_layout(), "sm_120a uses the mma data layout");
static_assert(kConfig.sram_layout == GGML_CUDA_MMQ_SRAM_LAYOUT_FP4, "the W4A4 config keeps the FP4 tile");
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
