// The serving calls' index rules on the GPU, one entry at a time: what kernel/serving_check.cu (one block over every
// entry) and flash_fwd's fused builds (FS_FUSED: each block over the entries it reads) both apply. The rules, their
// numbers and the flag's encoding are flashsim/serving/indices.py's (its index_flag is their emulation, bit for bit;
// the numbers arrive as the FS_IDX_* defines):
//   seqlens     cache_seqlens[b] outside 0..seqlen_limit                       entry b
//   table       block_table[b, j] outside [0, num_pages), j < the pages row b reads (ceil(nk_b / page_size), nk_b
//               its length clamped into 0..nk_cap)                            entry b * max_pages + j
//   cu_*_start  cu[0] != 0                                                     entry 0
//   cu_*_order  cu[i] > cu[i + 1]                                              entry i
//   cu_*_end    cu[batch] != total                                             entry batch
//   cu_*_long   cu[i + 1] - cu[i] > cap (max_seqlen_q / max_seqlen_k)          entry i
// A violation is (code, value): code = rule << FS_IDX_ENTRY_BITS | entry, value = two int32 (the offending entry,
// and a second number the message quotes: the pages row b reads, or cu[i + 1]). The smallest code is the first
// violation in the rules' order, whoever finds it. A code names one entry of one rule, and its value follows from
// the arrays alone, so `value_of` finds it again from the code by running that entry's rule once more.

#pragma once

#ifndef FS_IDX_ENTRY_BITS
#error "build through flashsim.gpu: the rule numbers arrive as defines (FS_IDX_*)"
#endif

namespace fsr {
typedef unsigned long long u64;
constexpr u64 NONE = ~0ull;

__device__ __forceinline__ u64 code(int rule, long long entry) {
    return (static_cast<u64>(rule) << FS_IDX_ENTRY_BITS) | static_cast<u64>(entry);
}
__device__ __forceinline__ u64 pack(int lo, int hi) {
    return static_cast<u64>(static_cast<unsigned>(lo)) | (static_cast<u64>(static_cast<unsigned>(hi)) << 32);
}

// Keep (c, v) if c is smaller than this thread's smallest so far.
struct Least {
    u64 c = NONE, v = 0;
    __device__ __forceinline__ void add(u64 cc, u64 vv) {
        if (cc < c) {
            c = cc;
            v = vv;
        }
    }
};

// The pages that keys [0, n) span: ceil(n / page_size).
__device__ __forceinline__ int pages_for(int n, int page_shift) { return (n + (1 << page_shift) - 1) >> page_shift; }

// The pages row b reads: those of its length clamped into 0..nk_cap (nk_cap itself without lengths).
__device__ __forceinline__ int pages_used(const int* __restrict__ seqlens_k, int b, int nk_cap, int page_shift) {
    return pages_for(seqlens_k != nullptr ? min(max(__ldg(seqlens_k + b), 0), nk_cap) : nk_cap, page_shift);
}

// seqlens: entry b.
__device__ __forceinline__ void check_seqlen(Least& m, const int* __restrict__ seqlens_k, int b, int seqlen_limit) {
    const int n = __ldg(seqlens_k + b);
    if (n < 0 || n > seqlen_limit) m.add(code(FS_IDX_SEQLENS, b), pack(n, 0));
}

// table: slot j of row b (j below `used`, the pages the row reads).
__device__ __forceinline__ void check_page(Least& m, const int* __restrict__ block_table, int b, int j, int max_pages,
                                           int used, int num_pages) {
    const long long entry = static_cast<long long>(b) * max_pages + j;
    const int page = __ldg(block_table + entry);
    if (page < 0 || page >= num_pages) m.add(code(FS_IDX_TABLE, entry), pack(page, used));
}

// The rules of one cu_seqlens array (base: its start rule's number) at offset i of its batch + 1.
__device__ __forceinline__ void check_cu(Least& m, const int* __restrict__ cu, int i, int batch, int total, int cap,
                                         int base) {
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

// The value of the violation `c` (a code some thread found): its entry's rule run again.
__device__ __forceinline__ u64 value_of(u64 c, const int* __restrict__ seqlens_k, const int* __restrict__ block_table,
                                        const int* __restrict__ cu_q, const int* __restrict__ cu_k, int batch,
                                        int seqlen_limit, int nk_cap, int max_pages, int page_shift, int num_pages,
                                        int q_total, int k_total, int nq_cap) {
    const int rule = static_cast<int>(c >> FS_IDX_ENTRY_BITS);
    const long long entry = static_cast<long long>(c & ((1ull << FS_IDX_ENTRY_BITS) - 1));
    Least m;
    if (rule == FS_IDX_SEQLENS) {
        check_seqlen(m, seqlens_k, static_cast<int>(entry), seqlen_limit);
    } else if (rule == FS_IDX_TABLE) {
        const int b = static_cast<int>(entry / max_pages), j = static_cast<int>(entry % max_pages);
        check_page(m, block_table, b, j, max_pages, pages_used(seqlens_k, b, nk_cap, page_shift), num_pages);
    } else if (rule >= FS_IDX_CU_K_START) {
        check_cu(m, cu_k, static_cast<int>(entry), batch, k_total, nk_cap, FS_IDX_CU_K_START);
    } else {
        check_cu(m, cu_q, static_cast<int>(entry), batch, q_total, nq_cap, FS_IDX_CU_Q_START);
    }
    return m.v;
}

// Write (c, value) into the host-mapped record (4 u64: code, value, tag, unused) if it is still empty (code NONE):
// the first error sticks until the host reads and clears it. The code is written last, after a system-scope fence,
// so a host that sees the code sees the value and the tag. One thread.
__device__ __forceinline__ void publish(u64* record, u64 c, u64 value, u64 tag) {
    volatile u64* r = record;
    if (r[0] == NONE) {
        r[1] = value;
        r[2] = tag;
        __threadfence_system();
        r[0] = c;
    }
}
}  // namespace fsr
