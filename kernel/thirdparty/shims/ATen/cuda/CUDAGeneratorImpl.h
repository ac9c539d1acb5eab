// Stands in for PyTorch's header of this name when FlashAttention-2's kernels are built without torch
// (kernel/thirdparty/fa2_fwd.cu). FA2 needs one thing from it: a by-value RNG state in Flash_fwd_params that the
// kernel unpacks into (seed, offset) for dropout. This is flashsim's own minimal version: two plain 64-bit values
// (no CUDA-graph capture mode); the launch writes zeros, and the kernels built here run without dropout.
#pragma once
#include <stdint.h>

namespace at {
struct PhiloxCudaState {
    uint64_t seed;
    uint64_t offset;
};
}  // namespace at
