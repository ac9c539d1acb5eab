// FlashAttention-2's forward kernel (flash-attn 2.8.3, csrc/flash_attn/src), one instantiation, built for the
// PTX simulator's third-party check (tests/thirdparty/kernels.py): head dim 64, fp16, causal, the kernel traits
// FA2 itself launches for that case (run_mha_fwd_hdim64: 128 x 128 tiles, 4 warps), even M / N / K, no dropout,
// ALiBi, softcap or returned softmax. The include path puts kernel/thirdparty/shims (torch's three small headers)
// before FA2's own folders; FA2's nvcc flags come from tests/thirdparty/kernels.py.
//
// Besides the kernel, the PTX carries what the launch needs to know of the build: the byte offset and size of
// each Flash_fwd_params field the launch fills (flashsim_field_<name>), the struct's size, the dynamic shared
// memory and threads per block of the traits. So the launch never restates the C++ layout by hand.
#include <stddef.h>

#include "flash_fwd_launch_template.h"

using Fa2Traits = Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>;

template __global__ void FLASH_NAMESPACE::flash_fwd_kernel<Fa2Traits, /*Is_dropout=*/false, /*Is_causal=*/true,
    /*Is_local=*/false, /*Has_alibi=*/false, /*Is_even_MN=*/true, /*Is_even_K=*/true, /*Is_softcap=*/false,
    /*Return_softmax=*/false>(__grid_constant__ const FLASH_NAMESPACE::Flash_fwd_params);

// offsetof on a struct with a base class: nvcc and the host compiler lay it out as C does (the base first);
// the warning that it is not standard-layout is expected.
#pragma nv_diag_suppress 1427
#define FLASHSIM_FIELD(name)                                                                                  \
    extern "C" __device__ const unsigned long long flashsim_field_##name[2] = {                              \
        offsetof(FLASH_NAMESPACE::Flash_fwd_params, name), sizeof(((FLASH_NAMESPACE::Flash_fwd_params *)0)->name)};

FLASHSIM_FIELD(q_ptr)
FLASHSIM_FIELD(k_ptr)
FLASHSIM_FIELD(v_ptr)
FLASHSIM_FIELD(o_ptr)
FLASHSIM_FIELD(softmax_lse_ptr)
FLASHSIM_FIELD(q_batch_stride)
FLASHSIM_FIELD(k_batch_stride)
FLASHSIM_FIELD(v_batch_stride)
FLASHSIM_FIELD(o_batch_stride)
FLASHSIM_FIELD(q_row_stride)
FLASHSIM_FIELD(k_row_stride)
FLASHSIM_FIELD(v_row_stride)
FLASHSIM_FIELD(o_row_stride)
FLASHSIM_FIELD(q_head_stride)
FLASHSIM_FIELD(k_head_stride)
FLASHSIM_FIELD(v_head_stride)
FLASHSIM_FIELD(o_head_stride)
FLASHSIM_FIELD(h)
FLASHSIM_FIELD(h_k)
FLASHSIM_FIELD(h_h_k_ratio)
FLASHSIM_FIELD(b)
FLASHSIM_FIELD(seqlen_q)
FLASHSIM_FIELD(seqlen_k)
FLASHSIM_FIELD(d)
FLASHSIM_FIELD(seqlen_q_rounded)
FLASHSIM_FIELD(seqlen_k_rounded)
FLASHSIM_FIELD(d_rounded)
FLASHSIM_FIELD(total_q)
FLASHSIM_FIELD(scale_softmax)
FLASHSIM_FIELD(scale_softmax_log2)
FLASHSIM_FIELD(p_dropout)
FLASHSIM_FIELD(rp_dropout)
FLASHSIM_FIELD(scale_softmax_rp_dropout)
FLASHSIM_FIELD(window_size_left)
FLASHSIM_FIELD(window_size_right)
FLASHSIM_FIELD(is_causal)
FLASHSIM_FIELD(is_seqlens_k_cumulative)

extern "C" __device__ const unsigned long long flashsim_params_bytes = sizeof(FLASH_NAMESPACE::Flash_fwd_params);
extern "C" __device__ const unsigned long long flashsim_shared_bytes = Fa2Traits::kSmemSize;
extern "C" __device__ const unsigned long long flashsim_block_threads = Fa2Traits::kNThreads;
extern "C" __device__ const unsigned long long flashsim_block_m = Fa2Traits::kBlockM;
