// A plain bf16 FlashAttention-2-style forward written the way public mma.sync kernels are (not flashsim's kernel):
// cp.async.cg tile loads, ldmatrix.x4 (and .trans for V), mma.sync m16n8k16 bf16 -> f32, exp2f (ex2.approx.f32,
// no .ftz), rsqrtf for the softmax scale (rsqrt.approx.f32), shfl.bfly row max / row sum, O / l with div.rn.f32.
// Built with nvcc -O3 -arch=sm_90: the per-row statistics are what this experiment traces against the GPU.
// One block: 4 warps, 64 query rows, d = 128, key tiles of 64; q, k, v, o: [rows][128] bf16 (one head).
#include <cuda_bf16.h>
#include <stdint.h>

#define D 128
#define BR 64
#define BC 64

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void load_tile(__nv_bfloat16 (*dst)[D], const __nv_bfloat16* src, int rows_left) {
  // 64 rows x 256 bytes = 1024 chunks of 16 bytes over 128 threads; rows past the end are zero
  for (int c = threadIdx.x; c < BR * D / 8; c += blockDim.x) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    if (r < rows_left) cp_async16(&dst[r][col], src + (size_t)r * D + col);
    else *reinterpret_cast<uint4*>(&dst[r][col]) = make_uint4(0, 0, 0, 0);
  }
}

extern "C" __global__ void __launch_bounds__(128) attn_bf16(__nv_bfloat16* o, float* lse, const __nv_bfloat16* q,
                                                            const __nv_bfloat16* k, const __nv_bfloat16* v, int n,
                                                            float* row_m, float* row_l) {
  __shared__ __align__(128) __nv_bfloat16 sq[BR][D];
  __shared__ __align__(128) __nv_bfloat16 sk[BC][D];
  __shared__ __align__(128) __nv_bfloat16 sv[BC][D];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * BR;
  const float scale = rsqrtf((float)D);
  const float scale_log2 = scale * 1.44269504088896340736f;
  load_tile(sq, q + (size_t)row0 * D, n - row0);
  asm volatile("cp.async.commit_group;\n");
  float acc[D / 8][4];
  for (int j = 0; j < D / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  for (int kv = 0; kv < n; kv += BC) {
    __syncthreads();
    load_tile(sk, k + (size_t)kv * D, n - kv);
    load_tile(sv, v + (size_t)kv * D, n - kv);
    asm volatile("cp.async.commit_group;\n");
    asm volatile("cp.async.wait_group 0;\n");
    __syncthreads();
    float s[BC / 8][4];
    for (int j = 0; j < BC / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      ldsm_x4(a, &sq[warp * 16 + (lane % 8) + 8 * ((lane / 8) % 2)][kk * 16 + 8 * (lane / 16)]);
      for (int j = 0; j < BC / 16; ++j) {
        uint32_t b[4];
        ldsm_x4(b, &sk[j * 16 + (lane % 8) + 8 * (lane / 16)][kk * 16 + 8 * ((lane / 8) % 2)]);
        mma_bf16(s[2 * j], a, b[0], b[1]);
        mma_bf16(s[2 * j + 1], a, b[2], b[3]);
      }
    }
    for (int j = 0; j < BC / 8; ++j)  // keys past the end
      for (int e = 0; e < 4; ++e)
        if (kv + j * 8 + 2 * t + (e & 1) >= n) s[j][e] = -INFINITY;
    for (int h = 0; h < 2; ++h) {  // rows g (h = 0) and g + 8 (h = 1)
      float mx = m[h];
      for (int j = 0; j < BC / 8; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = (mx == -INFINITY ? 0.f : mx) * scale_log2;
      const float corr = exp2f(m[h] * scale_log2 - ms);
      m[h] = mx;
      float sum = 0.f;
      for (int j = 0; j < BC / 8; ++j) {
        s[j][2 * h] = exp2f(s[j][2 * h] * scale_log2 - ms);
        s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] * scale_log2 - ms);
        sum += s[j][2 * h] + s[j][2 * h + 1];
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      l[h] = l[h] * corr + sum;
      for (int j = 0; j < D / 8; ++j) {
        acc[j][2 * h] *= corr;
        acc[j][2 * h + 1] *= corr;
      }
    }
    for (int kk = 0; kk < BC / 16; ++kk) {
      uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                       pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      for (int j = 0; j < D / 16; ++j) {
        uint32_t b[4];
        ldsm_x4_t(b, &sv[kk * 16 + (lane % 8) + 8 * ((lane / 8) % 2)][j * 16 + 8 * (lane / 16)]);
        mma_bf16(acc[2 * j], a, b[0], b[1]);
        mma_bf16(acc[2 * j + 1], a, b[2], b[3]);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + warp * 16 + g + 8 * h;
    if (row >= n) continue;
    for (int j = 0; j < D / 8; ++j) {
      const float x0 = acc[j][2 * h] / l[h], x1 = acc[j][2 * h + 1] / l[h];
      *reinterpret_cast<uint32_t*>(&o[(size_t)row * D + j * 8 + 2 * t]) = pack_bf16(x0, x1);
    }
    if (t == 0) {
      lse[row] = m[h] * scale + logf(l[h]);
      row_m[row] = m[h];
      row_l[row] = l[h];
    }
  }
}
