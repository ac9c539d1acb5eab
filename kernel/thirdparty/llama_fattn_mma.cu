// llama.cpp's tensor-core FlashAttention kernel (ggml/src/ggml-cuda/fattn-mma-f16.cuh, as vendored by
// llama-cpp-python 0.3.36), one instantiation, built for the PTX simulator's third-party check
// (tests/thirdparty/kernels.py): head dim 64 for K/Q and V, 16 query columns per block (ncols1 = 16, ncols2 = 1),
// no logit softcap, V separate from K, no sparse KV list. The kernel is llama.cpp's hand-written mma.sync /
// ldmatrix / cp.async code; flags and include folders come from tests/thirdparty/kernels.py (ggml-cuda's CMake).
//
// The PTX also carries what the launch needs: the threads per block and the dynamic shared memory that llama.cpp's
// host code (ggml_cuda_flash_attn_ext_mma_f16_case) computes for this case on a compute capability 9.0 GPU, and
// the KV rows per softmax step, all from llama.cpp's own constexpr configuration functions.
#include "fattn-mma-f16.cuh"

constexpr int kDKQ = 64, kDV = 64, kNcols1 = 16, kNcols2 = 1;

template __global__ void flash_attn_ext_f16<kDKQ, kDV, kNcols1, kNcols2, /*use_logit_softcap=*/false,
                                            /*V_is_K_view=*/false, /*use_sparse=*/false>(
    const char *, const char *, const char *, const char *, const char *, const int *, float *, float2 *,
    const float, const float, const float, const float, const uint32_t, const float, const int32_t, const uint3,
    const int32_t, const int32_t, const int32_t, const int32_t, const int32_t, const int32_t, const int32_t,
    const int32_t, const int32_t, const int32_t, const int32_t, const int64_t, const int32_t, const int32_t,
    const int64_t, const int32_t, const int32_t, const int32_t, const int32_t, const int32_t, const int64_t);

// The host's arithmetic of ggml_cuda_flash_attn_ext_mma_f16_case, on the device-side constexpr twins of its
// configuration functions (the host ones are not constexpr; for sm_90 both read the Ampere table).
#ifdef __CUDA_ARCH__
constexpr int kNcols = kNcols1 * kNcols2;
constexpr int kThreads = ggml_cuda_fattn_mma_get_nthreads(kDKQ, kDV, kNcols);
constexpr int kBatchFa = ggml_cuda_fattn_mma_get_nbatch_fa(kDKQ, kDV, kNcols);
constexpr int kBatchK2 = ggml_cuda_fattn_mma_get_nbatch_K2(kDKQ, kDV, kNcols);
constexpr int kBatchV2 = ggml_cuda_fattn_mma_get_nbatch_V2(kDKQ, kDV, kNcols);
constexpr int kBatchCombine = ggml_cuda_fattn_mma_get_nbatch_combine(kDKQ, kDV, kNcols);
constexpr bool kQInReg = ggml_cuda_fattn_mma_get_Q_in_reg(kDKQ, kDV, kNcols);
constexpr int kStages = ggml_cuda_fattn_mma_get_nstages(kDKQ, kDV, kNcols1, kNcols2, /*use_sparse=*/false);
// min(ncols, get_cols_per_warp(cc)): get_cols_per_warp is 16 or 32 on NVIDIA GPUs, so 16 columns stay 16
static_assert(kNcols <= 16, "cols_per_warp below assumes ncols <= 16");
constexpr int kColsPerWarp = kNcols;
constexpr int kWarps = kThreads / 32;
constexpr bool kSwizzled = ggml_cuda_fattn_mma_get_swizzled(kDKQ, kDV, kNcols1, kNcols2);
constexpr int kTileK = ggml_cuda_fattn_mma_get_stride_tile(kBatchK2, kSwizzled);
constexpr int kTileV = ggml_cuda_fattn_mma_get_stride_tile(kBatchV2, kSwizzled);
constexpr size_t kKV1 = kBatchFa * (kTileK > kTileV ? kTileK : kTileV) * sizeof(half2);
constexpr size_t kKV2 = kBatchFa * (kTileK + kTileV) * sizeof(half2);
constexpr size_t kQ = kNcols * (kDKQ / 2 + 4) * sizeof(half2);
constexpr size_t kMask = kNcols1 * (kBatchFa / 2 + 4) * sizeof(half2);
constexpr size_t kCombine = kWarps * kColsPerWarp * (kBatchCombine + 4) * sizeof(half2);
constexpr size_t kKV = kStages <= 1 ? kKV1 : kKV2;
constexpr size_t kMain = kQInReg ? (kQ > kKV + kMask ? kQ : kKV + kMask) : kQ + kKV + kMask;

extern "C" __device__ const unsigned long long flashsim_shared_bytes = kCombine > kMain ? kCombine : kMain;
extern "C" __device__ const unsigned long long flashsim_block_threads = kThreads;
extern "C" __device__ const unsigned long long flashsim_kv_batch = kBatchFa;
extern "C" __device__ const unsigned long long flashsim_ncols = kNcols;
#endif
