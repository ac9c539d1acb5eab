// Kernels for tests/test_ptx_machine.py: divergence, warp-synchronous ops, barriers, mbarriers, blocks that wait
// on each other, special registers, printf. Each computes something a test can predict exactly in Python.
typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void diverge(u32 *out, u32 *mask_after, u32 *trips) {
  u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  u32 v;
  if (t % 3 == 0) {
    v = t * 7u;
  } else {
    if (t % 3 == 1) v = t + 100u;
    else v = 0u - t;
  }
  u32 acc = v;
  u32 n = (t * 13u) % 37u;  // per-thread trip count
  u32 k = 0;
  for (; k < n; ++k) {
    acc = acc * 3u + k;
    if (acc % 11u == 0u) break;  // some lanes leave the loop early
  }
  trips[t] = k;
  mask_after[t] = __activemask();  // after the joins: the whole warp, reconverged
  if (t % 5 == 0) return;           // early exit of some lanes
  out[t] = acc ^ __activemask();    // the lanes left
}

extern "C" __global__ void partial_shfl(u32 *out, u32 *ballot) {
  u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  u32 lane = threadIdx.x % 32;
  u32 x = t * 2654435761u;
  for (u32 k = 0; k < lane % 4; ++k) x += k;  // lanes arrive at the shuffle at different times
  u32 v;
  if (lane < 16) {
    v = __shfl_sync(0x0000ffffu, x, (lane + 1) % 16);
    ballot[t] = __ballot_sync(0x0000ffffu, (x & 1u) != 0u);
  } else {
    v = __shfl_sync(0xffff0000u, x, 16 + (lane + 3) % 16);
    ballot[t] = __ballot_sync(0xffff0000u, (x & 2u) != 0u);
  }
  out[t] = v;
}

extern "C" __global__ void block_reductions(u32 *out, const u32 *pred) {
  u32 t = blockIdx.x * blockDim.x + threadIdx.x;
  int p = pred[t] != 0;
  u32 count = __syncthreads_count(p);
  int all = __syncthreads_and(p);
  int any = __syncthreads_or(p);
  out[3 * t] = count;
  out[3 * t + 1] = all;
  out[3 * t + 2] = any;
}

// warps 0-1 produce into a two-slot ring of shared memory, warps 2-3 consume; barriers 1-2 say "slot full",
// 3-4 "slot empty", each with 128 threads: two warps arrive, two sync
extern "C" __global__ void named_barriers(u32 *out, u32 rounds) {
  __shared__ u32 ring[2][64];
  u32 tid = threadIdx.x;
  u32 warp = tid / 32;
  if (warp < 2) {
    for (u32 r = 0; r < rounds; ++r) {
      u32 s = r % 2;
      if (r >= 2) asm volatile("bar.sync %0, 128;" ::"r"(3 + s));
      ring[s][tid] = r * 1000u + tid;
      asm volatile("bar.arrive %0, 128;" ::"r"(1 + s));
    }
  } else {
    u32 acc = 0;
    for (u32 r = 0; r < rounds; ++r) {
      u32 s = r % 2;
      asm volatile("bar.sync %0, 128;" ::"r"(1 + s));
      acc = acc * 31u + ring[s][(tid - 64 + r) % 64];
      asm volatile("bar.arrive %0, 128;" ::"r"(3 + s));
    }
    out[blockIdx.x * 64 + tid - 64] = acc;
  }
}

__device__ __forceinline__ void mbar_init(u32 addr, u32 count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(addr), "r"(count));
}
__device__ __forceinline__ void mbar_arrive(u32 addr) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [%0]; }" ::"r"(addr) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 addr, u32 parity) {
  asm volatile(
      "{ .reg .pred p; WAIT: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra WAIT; }" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// one producer warp fills a ring of STAGES slots; two consumer warps read every slot; full[s] completes when
// the producer's 32 lanes arrived, empty[s] when both consumer warps' 64 lanes did
#define STAGES 3
extern "C" __global__ void mbarrier_ring(u32 *out, const u32 *in, u32 items) {
  __shared__ u32 slot[STAGES][32];
  __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
  u32 tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init((u32)__cvta_generic_to_shared(&full[s]), 32);
      mbar_init((u32)__cvta_generic_to_shared(&empty[s]), 64);
    }
  }
  __syncthreads();
  if (warp == 0) {
    for (u32 i = 0; i < items; ++i) {
      u32 s = i % STAGES, phase = (i / STAGES) & 1;
      mbar_wait((u32)__cvta_generic_to_shared(&empty[s]), phase ^ 1);
      slot[s][lane] = in[i * 32 + lane];
      mbar_arrive((u32)__cvta_generic_to_shared(&full[s]));
    }
  } else {
    u32 acc = 0;
    for (u32 i = 0; i < items; ++i) {
      u32 s = i % STAGES, phase = (i / STAGES) & 1;
      mbar_wait((u32)__cvta_generic_to_shared(&full[s]), phase);
      acc = acc * 7u + slot[s][(lane + warp) % 32];
      mbar_arrive((u32)__cvta_generic_to_shared(&empty[s]));
    }
    out[(warp - 1) * 32 + lane] = acc;
  }
}

// block `writer` publishes data, then a flag; every other block spins on the flag, then reads the data
extern "C" __global__ void flag_wait(u32 *data, volatile u32 *flag, u32 *out, u32 writer) {
  u32 tid = threadIdx.x;
  if (blockIdx.x == writer) {
    data[tid] = tid * 3u + 1u;
    __threadfence();
    __syncthreads();
    if (tid == 0) *flag = 1u;
  } else {
    if (tid == 0) {
      while (*flag == 0u) {
      }
    }
    __syncthreads();
    out[blockIdx.x * blockDim.x + tid] = ((volatile u32 *)data)[tid];
  }
}

extern "C" __global__ void specials(u32 *out, u64 *clocks) {
  u32 t = ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) +
          (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  u32 lane, warp, nwarp, sm, nsm;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm("mov.u32 %0, %%warpid;" : "=r"(warp));
  asm("mov.u32 %0, %%nwarpid;" : "=r"(nwarp));
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
  u64 c0 = clock64();
  u32 *o = out + 12 * t;
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
  o[6] = lane; o[7] = warp; o[8] = nwarp; o[9] = sm; o[10] = nsm;  // o[11]: below
  u32 spin = 0;
  for (u32 k = 0; k <= lane; ++k) spin = spin * 5u + k;  // work between the clock reads
  o[11] = spin;
  u64 c1 = clock64();
  clocks[2 * t] = c0;
  clocks[2 * t + 1] = c1;
}

extern "C" __global__ void prints(const u32 *p) {
  u32 t = threadIdx.x;
  if (t < 2)
    printf("t=%d u=%u x=%x f=%f s=%s p=%p c=%c ll=%lld\n", -(int)t - 1, 4000000000u + t, 0xbeef0u + t, 0.25 + t,
           t ? "one" : "zero", p, 'a' + (int)t, -(1LL << 40) - t);
}
