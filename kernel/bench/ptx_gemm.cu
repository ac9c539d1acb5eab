// A 256 x 256 x 256 f16 GEMM with raw mma.sync, for the PTX simulator's benchmark (benchmarks/ptx/bench_ptx.py):
// C (M x N, f32, row-major) = A (M x K, f16, row-major) @ B (K x N), B given as BT (N x K, f16, row-major), i.e. the
// "row.col" operands of mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
//
// A block of 4 warps (2 x 2) computes a 64 x 64 tile of C; each warp a 32 x 32 sub-tile (2 x 4 mma tiles). K runs
// in tiles of 32: the block stages A's 64 x 32 and BT's 64 x 32 tiles in shared memory with cp.async (16 bytes a
// thread, twice each), waits, then each warp reads its fragments with ldmatrix.x4 and issues 8 mma per 16 of K.
// Rows of the shared tiles are padded by 8 halves (80 bytes: 16-byte aligned for cp.async and ldmatrix).
// NVRTC has no standard headers: the fixed-width types are typedef'd here.

typedef unsigned short u16;
typedef unsigned int u32;

#ifndef GEMM_M
#define GEMM_M 256
#endif
#ifndef GEMM_N
#define GEMM_N 256
#endif
#ifndef GEMM_K
#define GEMM_K 256
#endif
#define TILE 64
#define KTILE 32
#define PAD 8

__device__ __forceinline__ u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

extern "C" __global__ void __launch_bounds__(128) ptx_gemm(float *C, const u16 *A, const u16 *BT) {
  __shared__ __align__(16) u16 sA[TILE][KTILE + PAD];
  __shared__ __align__(16) u16 sB[TILE][KTILE + PAD];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;  // the warp's 32 x 32 sub-tile
  const int bm = blockIdx.y, bn = blockIdx.x;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int k0 = 0; k0 < GEMM_K; k0 += KTILE) {
    // stage: 64 rows x 32 halves = 256 chunks of 16 bytes per operand, two per thread
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int chunk = tid + c * 128, row = chunk / 4, col = (chunk % 4) * 8;
      const u16 *ga = A + (bm * TILE + row) * GEMM_K + k0 + col;
      const u16 *gb = BT + (bn * TILE + row) * GEMM_K + k0 + col;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(&sA[row][col])), "l"(ga));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(&sB[row][col])), "l"(gb));
    }
    asm volatile("cp.async.commit_group;");
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < KTILE; kk += 16) {
      u32 a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)  // lanes 0-15: rows 0-15 at k 0; lanes 16-31: the same rows at k 8
        ldmatrix_x4(a[mi], smem_addr(&sA[wm * 32 + mi * 16 + lane % 16][kk + (lane / 16) * 8]));
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)  // matrices: (n 0-7, k 0), (n 0-7, k 8), (n 8-15, k 0), (n 8-15, k 8)
        ldmatrix_x4(b[nj], smem_addr(&sB[wn * 32 + nj * 16 + lane % 8 + (lane / 16) * 8][kk + ((lane / 8) % 2) * 8]));
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
    }
    __syncthreads();
  }
  // C fragment: c0, c1 at (row g, cols 2t, 2t+1), c2, c3 at row g + 8
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int row = bm * TILE + wm * 32 + mi * 16 + g, col = bn * TILE + wn * 32 + ni * 8 + 2 * t;
      *(float2 *)&C[row * GEMM_N + col] = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *(float2 *)&C[(row + 8) * GEMM_N + col] = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}
