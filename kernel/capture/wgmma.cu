// Capture kernels for Hopper's wgmma.mma_async (sm_90a), driven by flashsim/gpu/capture/wgmma.py, which writes this
// file (kernel_source) and checks it is unchanged (tests/test_wgmma_silicon.py). Do not edit by hand.
//
// Memory (raw bit patterns, one wgmma after the other): A n x 64 x K (row-major M x K), B n x K x N (row-major),
// C, D n x 64 x N (32-bit f32 / s32 or 16-bit f16 words), S n bytes (scale-d of each wgmma).
// One warpgroup (128 threads) per block takes wgmma m = block, block + grid, ...: A and B are copied into shared
// memory in the no-swizzle K-major canonical layout (byte (r, kb) at (r / 8) * 256 + (kb / 16) * 128 + (r % 8) * 16
// + kb % 16: 8 x 16-byte core matrices, LBO = 128, SBO = 256), every thread loads its accumulator registers with the
// wgmma D fragment (element i of thread t: row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2), column 8 (i / 4)
// + 2 (t % 4) + i % 2; f16: element pairs in one register, the lower column in the low half), the A registers of the
// register-A kernels with the A fragment (element j: row 16 (t / 32) + (t % 32) / 4 + 8 ((j / 2) % 2), column
// 2 (t % 4) + j % 2 + 8 (j / 4)), then one inline-PTX block: wgmma.fence, wgmma.mma_async, commit_group,
// wait_group 0; D is stored the way C was loaded. Values travel as bits only.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u32 smem_offset(u32 r, u32 kb) {
    return (r >> 3) * 256u + (kb >> 4) * 128u + (r & 7u) * 16u + (kb & 15u);
}

__device__ __forceinline__ u64 descriptor(const void* p) {  // start address, LBO, SBO; base offset 0, no swizzle
    const u32 a = (u32)__cvta_generic_to_shared(p);
    return (u64)((a & 0x3FFFFu) >> 4) | ((u64)(128u >> 4) << 16) | ((u64)(256u >> 4) << 32);
}

// A (64 x 32 bytes) and B (N rows of 32 bytes: column n of B, K-major) into the canonical layout; B's element
// (k, n) of ES bytes is global byte (k * N + n) * ES + j
__device__ __forceinline__ void stage(u8* sa, u8* sb, const u8* a, const u8* b, int N, int es) {
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) sa[smem_offset(i >> 5, i & 31)] = a[i];
    for (int i = threadIdx.x; i < N * 32; i += blockDim.x) {
        const int n = i >> 5, kb = i & 31, k = kb / es, j = kb % es;
        sb[smem_offset(n, kb)] = b[(k * N + n) * es + j];
    }
}

__device__ __forceinline__ int d_row(int t, int i) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int d_col(int t, int i) { return 8 * (i >> 2) + 2 * (t & 3) + (i & 1); }
__device__ __forceinline__ int a_row(int t, int j) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((j >> 1) & 1); }
__device__ __forceinline__ int a_col(int t, int j) { return 2 * (t & 3) + (j & 1) + 8 * (j >> 2); }

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n8_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %9, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n64_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %37, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n256_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %133, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %4, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%0, %1}, %2, %3, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n8_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %7, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, %6, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n64_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %21, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %66, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_f16_f16_n256_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %69, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n8_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 2);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %9, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n64_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %37, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n256_ra(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 2);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %133, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_tf32_tf32_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 4);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_tf32_tf32_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 4);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_tf32_tf32_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 4);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e4m3_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e4m3_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e4m3_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e4m3_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %4, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3 {%0, %1}, %2, %3, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e4m3_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f16.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e4m3_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %66, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e5m2_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e5m2_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e5m2_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e5m2_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %4, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e5m2 {%0, %1}, %2, %3, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e5m2_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f16.e4m3.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e4m3_e5m2_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %66, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f16.e4m3.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e4m3_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e4m3_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e4m3_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e4m3_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %4, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e4m3 {%0, %1}, %2, %3, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e4m3_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f16.e5m2.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e4m3_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %66, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e5m2_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e5m2_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e5m2_e5m2_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e5m2_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 512;
        u16* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[2];
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %4, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e5m2 {%0, %1}, %2, %3, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 2; ++r) {
            dd[d_row(t, 2 * r) * 8 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 8 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e5m2_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f16.e5m2.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e5m2_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 16384;
        u16* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[64];
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %66, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f16.e5m2.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 64; ++r) {
            dd[d_row(t, 2 * r) * 256 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 256 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_s8_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {%0, %1, %2, %3}, %4, %5, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_s8_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_s8_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_s8_n64_sat(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.satfinite.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_u8_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8 {%0, %1, %2, %3}, %4, %5, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_u8_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_u8_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_s8_u8_n64_sat(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.satfinite.s32.s8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_s8_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8 {%0, %1, %2, %3}, %4, %5, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_s8_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_s8_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_s8_n64_sat(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.satfinite.s32.u8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_u8_n8(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[8 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 512;
        u32* dd = D + (size_t)m * 512;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 256, 8, 1);
        u32 d[4];
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) d[i] = c[d_row(t, i) * 8 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %6, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8 {%0, %1, %2, %3}, %4, %5, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) dd[d_row(t, i) * 8 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_u8_n64(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_u8_n256(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[256 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 16384;
        u32* dd = D + (size_t)m * 16384;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 8192, 256, 1);
        u32 d[128];
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) d[i] = c[d_row(t, i) * 256 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %130, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 128; ++i) dd[d_row(t, i) * 256 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_s32_u8_u8_n64_sat(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.satfinite.s32.u8.u8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n64_ra_na(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %37, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, -1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_f16_f16_n64_ra_nb(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        u32 ra[4];
        const u16* a16 = (const u16*)a;
        _Pragma("unroll") for (int r = 0; r < 4; ++r)
            ra[r] = (u32)a16[a_row(t, 2 * r) * 16 + a_col(t, 2 * r)]
                  | ((u32)a16[a_row(t, 2 * r + 1) * 16 + a_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %37, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, -1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n64_na(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, -1, 1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_bf16_bf16_n64_nb(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 2);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, -1, 0, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_tf32_tf32_n64_na(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 4);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, -1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_tf32_tf32_n64_nb(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 4);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, -1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f32_e4m3_e5m2_n64_na(const u8* __restrict__ A, const u8* __restrict__ B,
        const u32* __restrict__ C, u32* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u32* c = C + (size_t)m * 4096;
        u32* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[32];
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) d[i] = c[d_row(t, i) * 64 + d_col(t, i)];
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %34, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, -1, 1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int i = 0; i < 32; ++i) dd[d_row(t, i) * 64 + d_col(t, i)] = d[i];
    }
}

extern "C" __global__ void __launch_bounds__(128) wgmma_f16_e5m2_e4m3_n64_nb(const u8* __restrict__ A, const u8* __restrict__ B,
        const u16* __restrict__ C, u16* __restrict__ D, const u8* __restrict__ S, int n) {
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[64 * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {
        const u8* a = A + (size_t)m * 2048;
        const u16* c = C + (size_t)m * 4096;
        u16* dd = D + (size_t)m * 4096;
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * 2048, 64, 1);
        u32 d[16];
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r)
            d[r] = (u32)c[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)]
                 | ((u32)c[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] << 16);
        const u32 scale_d = S[m];
        const u64 da = descriptor(sa), db = descriptor(sb);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, %18, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f16.e5m2.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, -1;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15])
            : "l"(da), "l"(db), "r"(scale_d)
            : "memory");
        _Pragma("unroll")
        for (int r = 0; r < 16; ++r) {
            dd[d_row(t, 2 * r) * 64 + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);
            dd[d_row(t, 2 * r + 1) * 64 + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);
        }
    }
}
