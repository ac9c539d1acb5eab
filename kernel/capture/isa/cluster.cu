// Silicon probes of thread-block clusters (flashsim.ptx.probes.cluster): the cluster special registers (a launch
// with a cluster, a kernel with __cluster_dims__, and no cluster: the implicit 1x1x1 one), distributed shared memory
// through mapa (shared::cluster and generic), st / ld / red .shared::cluster, getctarank and isspacep of mapped
// addresses, barrier.cluster, and a remote mbarrier arrive. Only values are stored, never an address: the
// simulator's shared::cluster address encoding is its own.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define SREG(I, NAME)                                              \
    {                                                              \
        uint32_t x;                                                \
        asm volatile("mov.u32 %0, " NAME ";" : "=r"(x));           \
        o[I] = x;                                                  \
    }

__device__ __forceinline__ void specials(uint32_t* out) {
    if (threadIdx.x != 0) return;
    uint32_t b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    uint32_t* o = out + b * 18;
    SREG(0, "%%cluster_ctarank")
    SREG(1, "%%cluster_nctarank")
    SREG(2, "%%clusterid.x")
    SREG(3, "%%clusterid.y")
    SREG(4, "%%clusterid.z")
    SREG(5, "%%nclusterid.x")
    SREG(6, "%%nclusterid.y")
    SREG(7, "%%nclusterid.z")
    SREG(8, "%%cluster_ctaid.x")
    SREG(9, "%%cluster_ctaid.y")
    SREG(10, "%%cluster_ctaid.z")
    SREG(11, "%%cluster_nctaid.x")
    SREG(12, "%%cluster_nctaid.y")
    SREG(13, "%%cluster_nctaid.z")
    SREG(14, "%%ctaid.x")
    SREG(15, "%%ctaid.y")
    SREG(16, "%%ctaid.z")
    uint32_t e;
    asm volatile("{ .reg .pred p; mov.pred p, %%is_explicit_cluster; selp.u32 %0, 1, 0, p; }" : "=r"(e));
    o[17] = e;
}

extern "C" __global__ void cluster_specials(uint32_t* out) { specials(out); }

extern "C" __global__ void __cluster_dims__(2, 2, 1) cluster_specials_static(uint32_t* out) { specials(out); }

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ uint32_t rank_and_size(uint32_t* n) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(*n));
    return r;
}

// Each thread stores in[i] into the next CTA's buf through mapa + st.shared::cluster and adds in[i] & 0xFF to the
// next CTA's counter; after the cluster barrier out gets its own buf, out2 the next CTA's buf read through a
// generic mapa address, info getctarank of both mapped addresses and isspacep of the generic one, cnt the counter.
extern "C" __global__ void dsmem_exchange(const uint32_t* in, uint32_t* out, uint32_t* out2, uint32_t* info,
                                          uint32_t* cnt) {
    __shared__ uint32_t buf[64];
    __shared__ uint32_t counter;
    uint32_t t = threadIdx.x, n;
    uint32_t rank = rank_and_size(&n);
    uint32_t i = blockIdx.x * blockDim.x + t;
    if (t == 0) counter = 0;
    buf[t] = 0;
    cluster_sync();
    uint32_t target = (rank + 1) % n;
    uint32_t local = (uint32_t)__cvta_generic_to_shared(&buf[t]), remote, cl, rc;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(target));
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(in[i]) : "memory");
    cl = (uint32_t)__cvta_generic_to_shared(&counter);
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rc) : "r"(cl), "r"(target));
    asm volatile("red.shared::cluster.add.u32 [%0], %1;" ::"r"(rc), "r"(in[i] & 0xFFu) : "memory");
    cluster_sync();
    out[i] = buf[t];
    uint64_t generic = (uint64_t)&buf[t], mapped;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(mapped) : "l"(generic), "r"(target));
    out2[i] = *(volatile uint32_t*)mapped;
    uint32_t r1, r2, own, sc, scta, glob;
    asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(r1) : "r"(remote));
    asm volatile("getctarank.u64 %0, %1;" : "=r"(r2) : "l"(mapped));
    asm volatile("getctarank.shared::cluster.u32 %0, %1;" : "=r"(own) : "r"(local));
    asm volatile("{ .reg .pred p; isspacep.shared::cluster p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(sc) : "l"(mapped));
    asm volatile("{ .reg .pred p; isspacep.shared::cta p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(scta) : "l"(mapped));
    asm volatile("{ .reg .pred p; isspacep.global p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(glob) : "l"(mapped));
    info[i] = r1 | (r2 << 4) | (own << 8) | (sc << 12) | (scta << 13) | (glob << 14);
    if (t == 0) cnt[blockIdx.x] = counter;
    cluster_sync();  // no CTA exits while another may still read its shared memory
}

// CUTLASS's ClusterBarrier pattern: thread 0 of each CTA initialises its mbarrier (count 1), fences the init to the
// cluster; every thread stores in[i] into the next CTA's data, and after __syncthreads thread 0 arrives on the next
// CTA's mbarrier; each CTA waits on its own and reads what the previous one stored.
extern "C" __global__ void remote_mbarrier(const uint32_t* in, uint32_t* out) {
    __shared__ __align__(8) uint64_t bar;
    __shared__ uint32_t data[32];
    uint32_t t = threadIdx.x, n;
    uint32_t rank = rank_and_size(&n);
    uint32_t i = blockIdx.x * blockDim.x + t;
    uint32_t barp = (uint32_t)__cvta_generic_to_shared(&bar);
    if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barp) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
    uint32_t target = (rank + 1) % n;
    uint32_t local = (uint32_t)__cvta_generic_to_shared(&data[t]), remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(target));
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(in[i]) : "memory");
    __syncthreads();
    if (t == 0) {
        uint32_t rb;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(barp), "r"(target));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(rb) : "memory");
    }
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0, 1000000; "
            "selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(barp)
            : "memory");
    }
    out[i] = data[t];
    cluster_sync();
}

// st.async / red.async: each thread writes {in[i], in[i] ^ 0x5A5A5A5A} into the next CTA's data and adds in[i] to its
// total, completing the bytes on that CTA's mbarrier (which expects them all: 32 * 8 + 32 * 4 bytes); each CTA waits
// on its own mbarrier and stores what arrived.
extern "C" __global__ void st_red_async(const uint32_t* in, uint32_t* out, uint32_t* sums) {
    __shared__ __align__(8) uint64_t bar;
    __shared__ __align__(16) uint32_t data[64];
    __shared__ uint32_t total;
    uint32_t t = threadIdx.x, n;
    uint32_t rank = rank_and_size(&n);
    uint32_t i = blockIdx.x * blockDim.x + t;
    uint32_t barp = (uint32_t)__cvta_generic_to_shared(&bar);
    if (t == 0) {
        total = 0;
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barp) : "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barp), "r"(32u * 8u + 32u * 4u)
                     : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    cluster_sync();
    uint32_t target = (rank + 1) % n, rd, rb, rt;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(rd)
                 : "r"((uint32_t)__cvta_generic_to_shared(&data[2 * t])), "r"(target));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(barp), "r"(target));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(rt)
                 : "r"((uint32_t)__cvta_generic_to_shared(&total)), "r"(target));
    uint32_t v = in[i];
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.u32 [%0], {%1, %2}, [%3];" ::"r"(rd),
                 "r"(v), "r"(v ^ 0x5A5A5A5Au), "r"(rb)
                 : "memory");
    asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];" ::"r"(
                     rt),
                 "r"(v), "r"(rb)
                 : "memory");
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(barp)
            : "memory");
    }
    out[2 * i] = data[2 * t];
    out[2 * i + 1] = data[2 * t + 1];
    if (t == 0) sums[blockIdx.x] = total;
    cluster_sync();
}
