// The serving calls' index check on the GPU: cache_seqlens, block_table and cu_seqlens checked where they live, so
// that the host never copies them back (a copy waits for the GPU and cannot be captured in a CUDA graph). The rules,
// their numbers and the flag's encoding are flashsim/serving/indices.py's (its index_flag is this kernel's
// emulation, bit for bit; the numbers arrive as the FS_IDX_* defines):
//   seqlens     cache_seqlens[b] outside 0..seqlen_limit                       entry b
//   table       block_table[b, j] outside [0, num_pages), j < the pages row b reads (ceil(nk_b / page_size), nk_b
//               its length clamped into 0..nk_cap)                            entry b * max_pages + j
//   cu_*_start  cu[0] != 0                                                     entry 0
//   cu_*_order  cu[i] > cu[i + 1]                                              entry i
//   cu_*_end    cu[batch] != total                                             entry batch
//   cu_*_long   cu[i + 1] - cu[i] > cap (max_seqlen_q / max_seqlen_k)          entry i
// A violation is (code, value): code = rule << FS_IDX_ENTRY_BITS | entry, value = two int32 (the offending entry,
// and a second number the message quotes: the pages row b reads, or cu[i + 1]). The smallest code is the first
// violation in the rules' order, whoever finds it: each thread keeps its own smallest, the block takes the min in
// shared memory, and the thread that holds it hands over its value.
//
// One block of FS_CHECK_THREADS threads (the arrays are a batch's few entries: the table's rows are split over the
// warps, each row's pages over the lanes, and only the pages a row reads are loaded). The result goes to `record`
// (4 u64: code, value, tag, unused) only when a violation is found and the record is still empty (code ~0): the
// first error sticks until the host reads and clears it. The record is host memory mapped into the device (the host
// reads it without waiting for the GPU), so nothing is written to it on the good path, and its code is written last,
// after a system-scope fence, so a host that sees the code sees the value and the tag. `tag` names the call's
// problem for the host's message.
// Null arrays are not checked (a KV cache has no cu_seqlens; cache_seqlens and block_table are optional).
// flash_fwd reads nothing this kernel writes, so the kernel lets it start at once (griddepcontrol.launch_dependents,
// sm_90+): where the host launches flash_fwd as a programmatic dependent (flashsim.gpu.serving.OVERLAP_CHECK), the
// check runs beside it instead of before it; otherwise the instruction has no effect.

#ifndef FS_CHECK_THREADS
#error "build through flashsim.gpu: the rule numbers arrive as defines (FS_CHECK_THREADS, FS_IDX_*)"
#endif

typedef unsigned long long fs_u64;

namespace fsc {
constexpr int THREADS = FS_CHECK_THREADS;
constexpr int WARPS = THREADS / 32;
constexpr fs_u64 NONE = ~0ull;
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, one block");

__device__ __forceinline__ fs_u64 code(int rule, long long entry) {
    return (static_cast<fs_u64>(rule) << FS_IDX_ENTRY_BITS) | static_cast<fs_u64>(entry);
}
__device__ __forceinline__ fs_u64 pack(int lo, int hi) {
    return static_cast<fs_u64>(static_cast<unsigned>(lo)) | (static_cast<fs_u64>(static_cast<unsigned>(hi)) << 32);
}

// Keep (c, v) if c is smaller than this thread's smallest so far.
struct Least {
    fs_u64 c = NONE, v = 0;
    __device__ __forceinline__ void add(fs_u64 cc, fs_u64 vv) {
        if (cc < c) {
            c = cc;
            v = vv;
        }
    }
};

// The rules of one cu_seqlens array (base: its start rule's number) over its batch + 1 offsets.
__device__ __forceinline__ void check_cu(Least& m, const int* __restrict__ cu, int batch, int total, int cap,
                                         int base, int tid) {
    for (int i = tid; i <= batch; i += THREADS) {
        const int lo = __ldg(cu + i);
        if (i == 0 && lo != 0) m.add(code(base, 0), pack(lo, 0));
        if (i == batch) {
            if (lo != total) m.add(code(base + 2, i), pack(lo, 0));
        } else {
            const int hi = __ldg(cu + i + 1);
            if (lo > hi) m.add(code(base + 1, i), pack(lo, hi));
            if (static_cast<long long>(hi) - lo > cap) m.add(code(base + 3, i), pack(lo, hi));
        }
    }
}
}  // namespace fsc

extern "C" __global__ void __launch_bounds__(fsc::THREADS, 1)
serving_check(const int* __restrict__ seqlens_k, const int* __restrict__ block_table, const int* __restrict__ cu_q,
              const int* __restrict__ cu_k, int batch, int seqlen_limit, int nk_cap, int max_pages, int page_shift,
              int num_pages, int q_total, int k_total, int nq_cap, fs_u64* record, fs_u64 tag) {
    using namespace fsc;
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    __shared__ fs_u64 s_code, s_value;
    const int tid = threadIdx.x;
    if (tid == 0) s_code = NONE;
    Least m;
    if (seqlens_k != nullptr) {
        for (int b = tid; b < batch; b += THREADS) {
            const int n = __ldg(seqlens_k + b);
            if (n < 0 || n > seqlen_limit) m.add(code(FS_IDX_SEQLENS, b), pack(n, 0));
        }
    }
    if (block_table != nullptr) {
        const int warp = tid / 32, lane = tid % 32;
        for (int b = warp; b < batch; b += WARPS) {
            const int n = seqlens_k != nullptr ? min(max(__ldg(seqlens_k + b), 0), nk_cap) : nk_cap;
            const int used = (n + (1 << page_shift) - 1) >> page_shift;
            const int* row = block_table + static_cast<long long>(b) * max_pages;
#pragma unroll 4
            for (int j = lane; j < used; j += 32) {   // unrolled: four independent loads in flight per lane
                const int page = __ldg(row + j);
                if (page < 0 || page >= num_pages)
                    m.add(code(FS_IDX_TABLE, static_cast<long long>(b) * max_pages + j), pack(page, used));
            }
        }
    }
    if (cu_q != nullptr) check_cu(m, cu_q, batch, q_total, nq_cap, FS_IDX_CU_Q_START, tid);
    if (cu_k != nullptr) check_cu(m, cu_k, batch, k_total, nk_cap, FS_IDX_CU_K_START, tid);
    __syncthreads();
    if (m.c != NONE) atomicMin(&s_code, m.c);
    __syncthreads();
    const fs_u64 least = s_code;
    if (least == NONE) return;   // every index valid: nothing is written
    if (m.c == least) s_value = m.v;   // one thread: codes name one entry of one rule
    __syncthreads();
    if (tid == 0 && *static_cast<volatile fs_u64*>(record) == NONE) {
        static_cast<volatile fs_u64*>(record)[1] = s_value;
        static_cast<volatile fs_u64*>(record)[2] = tag;
        __threadfence_system();
        static_cast<volatile fs_u64*>(record)[0] = least;
    }
}
