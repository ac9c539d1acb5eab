// The serving calls' index check on the GPU: cache_seqlens, block_table and cu_seqlens checked where they live, so
// that the host never copies them back (a copy waits for the GPU and cannot be captured in a CUDA graph). The rules
// are kernel/serving_rules.cuh's (flashsim/serving/indices.py's, whose index_flag is their emulation, bit for bit);
// here one block applies them to every entry: each thread keeps its own smallest violation, the block takes the min
// in shared memory, and the thread that holds it hands over its value.
//
// One block of FS_CHECK_THREADS threads (the arrays are a batch's few entries: the table's rows are split over the
// warps, each row's pages over the lanes, and only the pages a row reads are loaded). The result goes to `record`
// (4 u64: code, value, tag, unused) only when a violation is found and the record is still empty (code ~0): the
// first error sticks until the host reads and clears it. The record is host memory mapped into the device (the host
// reads it without waiting for the GPU), so nothing is written to it on the good path. `tag` names the call's
// problem for the host's message.
// Null arrays are not checked (a KV cache has no cu_seqlens; cache_seqlens and block_table are optional).
// flash_fwd reads nothing this kernel writes, so the kernel lets it start at once (griddepcontrol.launch_dependents,
// sm_90+): where the host launches flash_fwd as a programmatic dependent (flashsim.gpu.serving.OVERLAP_CHECK), the
// check runs beside it instead of before it; otherwise the instruction has no effect. (flash_fwd's fused builds,
// FS_FUSED, apply the same rules themselves and need no check kernel.)

#ifndef FS_CHECK_THREADS
#error "build through flashsim.gpu: the rule numbers arrive as defines (FS_CHECK_THREADS, FS_IDX_*)"
#endif

#include "serving_rules.cuh"

typedef unsigned long long fs_u64;

namespace fsc {
constexpr int THREADS = FS_CHECK_THREADS;
constexpr int WARPS = THREADS / 32;
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, one block");
}  // namespace fsc

extern "C" __global__ void __launch_bounds__(fsc::THREADS, 1)
serving_check(const int* __restrict__ seqlens_k, const int* __restrict__ block_table, const int* __restrict__ cu_q,
              const int* __restrict__ cu_k, int batch, int seqlen_limit, int nk_cap, int max_pages, int page_shift,
              int num_pages, int q_total, int k_total, int nq_cap, fs_u64* record, fs_u64 tag) {
    using namespace fsc;
    using fsr::NONE;
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    __shared__ fs_u64 s_code, s_value;
    const int tid = threadIdx.x;
    if (tid == 0) s_code = NONE;
    fsr::Least m;
    if (seqlens_k != nullptr)
        for (int b = tid; b < batch; b += THREADS) fsr::check_seqlen(m, seqlens_k, b, seqlen_limit);
    if (block_table != nullptr) {
        const int warp = tid / 32, lane = tid % 32;
        for (int b = warp; b < batch; b += WARPS) {
            const int used = fsr::pages_used(seqlens_k, b, nk_cap, page_shift);
#pragma unroll 4
            for (int j = lane; j < used; j += 32)   // unrolled: four independent loads in flight per lane
                fsr::check_page(m, block_table, b, j, max_pages, used, num_pages);
        }
    }
    for (int i = tid; i <= batch; i += THREADS) {
        if (cu_q != nullptr) fsr::check_cu(m, cu_q, i, batch, q_total, nq_cap, FS_IDX_CU_Q_START);
        if (cu_k != nullptr) fsr::check_cu(m, cu_k, i, batch, k_total, nk_cap, FS_IDX_CU_K_START);
    }
    __syncthreads();
    if (m.c != NONE) atomicMin(&s_code, m.c);
    __syncthreads();
    const fs_u64 least = s_code;
    if (least == NONE) return;   // every index valid: nothing is written
    if (m.c == least) s_value = m.v;   // one thread: codes name one entry of one rule
    __syncthreads();
    if (tid == 0) fsr::publish(record, least, s_value, tag);
}
