// Stands in for cuRAND's device header when FlashInfer's Hopper prefill is built for the PTX simulator's third-party
// check (kernel/thirdparty/flashinfer_sm90_prefill.cu): FlashInfer's cutlass_utils.cuh includes CUTLASS's device
// reference utilities (tools/util: tensor_fill.h, tensor_elementwise.h), whose random fills call cuRAND; the
// attention kernel never reaches them, and this machine's CUDA toolkit (and the GPU machine's) ships no cuRAND. These
// are flashsim's own declarations of the names those utilities mention, never defined: a kernel that called one would
// fail to link, not run something else. Taking this header on every machine, the real one never, keeps the PTX the
// same wherever it is built.
#pragma once
#include <cuda_runtime.h>

struct curandStateXORWOW {
    unsigned int d, v[5];
    int boxmuller_flag, boxmuller_flag_double;
    float boxmuller_extra;
    double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;

__device__ void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                            curandState_t *state);
__device__ float curand_normal(curandState_t *state);
__device__ double curand_normal_double(curandState_t *state);
__device__ float curand_uniform(curandState_t *state);
__device__ double curand_uniform_double(curandState_t *state);
