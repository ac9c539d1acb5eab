// Stands in for PyTorch's header of this name (see ../CUDAGeneratorImpl.h): (seed, offset) of the RNG state.
#pragma once
#include <tuple>
#include <ATen/cuda/CUDAGeneratorImpl.h>

namespace at { namespace cuda { namespace philox {
__host__ __device__ __forceinline__ std::tuple<uint64_t, uint64_t> unpack(at::PhiloxCudaState state) {
    return std::make_tuple(state.seed, state.offset);
}
}}}  // namespace at::cuda::philox
