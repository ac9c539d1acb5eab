// llama.cpp's tensor-core matrix multiplication for float weights (ggml/src/ggml-cuda/mmf.cuh, as vendored by
// llama-cpp-python 0.3.36), one instantiation, built for the PTX simulator's third-party check
// (tests/thirdparty/kernels.py): bf16 weights (nv_bfloat162 pairs), f32 activations and output, 32 weight rows
// and 8 activation columns per block, 4 warps (what mul_mat_f_cuda picks for 256 columns: one K iteration per
// warp), no expert ids. A GEMM on llama.cpp's hand-written mma.sync bf16 tiles; flags and include folders come
// from tests/thirdparty/kernels.py (ggml-cuda's CMake).
//
// The PTX also carries the threads per block and the dynamic shared memory mul_mat_f_cuda computes for this case
// on an NVIDIA GPU (its host formula, on the device-side constexpr twins of its helpers).
#include "mmf.cuh"

constexpr int kRowsPerBlock = MMF_ROWS_PER_BLOCK, kColsPerBlock = 8, kWarps = 4;

template __global__ void mul_mat_f<nv_bfloat162, kRowsPerBlock, kColsPerBlock, kWarps, /*has_ids=*/false>(
    const nv_bfloat162 *, const float *, const int32_t *, float *, const int, const int, const int, const int,
    const int, const int, const int, const int, const int, const int, const int, const int, const int, const int,
    const int, const int);

#ifdef __CUDA_ARCH__
constexpr int kWarpSize = 32;
constexpr int kSharedIter = kWarps * tile<16, 8, nv_bfloat162>::I * (kWarpSize + mmf_get_padding()) * 4;
constexpr int kColsPad = tile<8, 8, nv_bfloat162>::I;
constexpr int kSharedCombine =
    ((kColsPerBlock + kColsPad - 1) / kColsPad * kColsPad) * (kWarps * kRowsPerBlock + mmf_get_padding()) * 4;

extern "C" __device__ const unsigned long long flashsim_shared_bytes =
    kSharedIter > kSharedCombine ? kSharedIter : kSharedCombine;
extern "C" __device__ const unsigned long long flashsim_block_threads = kWarps * kWarpSize;
extern "C" __device__ const unsigned long long flashsim_rows_per_block = kRowsPerBlock;
extern "C" __device__ const unsigned long long flashsim_cols_per_block = kColsPerBlock;
#endif
