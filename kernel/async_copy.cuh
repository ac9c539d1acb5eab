// The asynchronous copies and mbarriers of flash_fwd's K / V ring, as PTX wrappers (namespace fs): shared-memory
// addresses, 16-byte cp.async (zero-filling), commit / wait groups, and the mbarrier a copy arrives on, which
// flash_fwd's ring and the experiments that take that ring apart (benchmarks/experiments/varlen_profile/race_pattern,
// decode_bulk) share. Needs uint32_t declared before it.
#pragma once

namespace fs {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
    // src_bytes = 0 zero-fills the 16 bytes: out-of-range rows of Q, K and V become zeros.
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// arrive on bar once every cp.async this thread issued so far has landed (.noinc: counted in the init count)
__device__ __forceinline__ void mbar_arrive_cp(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    unsigned long long state;
    asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n" : "=l"(state) : "r"(bar) : "memory");
}
// wait until the phase of the given parity has completed
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .pred done;\n AGAIN:\n mbarrier.try_wait.parity.shared.b64 done, [%0], %1;\n"
                 " @!done bra AGAIN;\n}\n" :: "r"(bar), "r"(parity) : "memory");
#else
    asm volatile("{\n .reg .pred done;\n AGAIN:\n mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n"
                 " @!done bra AGAIN;\n}\n" :: "r"(bar), "r"(parity) : "memory");
#endif
}

}  // namespace fs
