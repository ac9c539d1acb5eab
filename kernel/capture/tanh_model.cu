// tanh.approx.f32 on the GPU against flashsim.numerics.sfu_tanh's model evaluated on the GPU too, for a sweep over
// all 2^32 inputs (flashsim/gpu/capture/tanh_sweep.py). The model here is the same description as
// flashsim.numerics.sfu_interp (QuadUnit / QuadBinade with the folded squarer): per biased exponent 119 .. 129 the
// top mant_bits mantissa bits, index = their top k, X = the 17 below, S = the folded square of X without its
// columns below 19, >> 19; A = C0 + C1 X + C2 S exactly; A 2^L truncated toward zero to f32 (1 where it reaches 1).

#define LOW_BITS 17
#define SQ_DROP 19
#define FIRST_E 119
#define LAST_E 129

// the tables: per segment c0 / c1 / c2; per binade (E - 119) base (its first segment), shift (23 - mant_bits: the
// input bits the unit ignores) and lsb (L)
struct TanhTables {
    const long long *c0, *c1, *c2;
    const int *base, *shift, *lsb;
};

__device__ unsigned tanh_model(unsigned x, const TanhTables& t) {
    unsigned sign = x & 0x80000000u, mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return 0x7fffffffu;
    int E = (int)(mag >> 23);
    if (E < FIRST_E) return x;
    if (E > LAST_E) return sign | 0x3f800000u;
    int b = E - FIRST_E;
    unsigned key = (mag & 0x7fffffu) >> t.shift[b];
    int i = t.base[b] + (int)(key >> LOW_BITS);
    long long X = key & ((1u << LOW_BITS) - 1u);
    long long S = 0;
    for (int p = 0; p < LOW_BITS; ++p) {
        if (!((X >> p) & 1)) continue;
        if (2 * p >= SQ_DROP) S += 1LL << (2 * p);
        for (int q = p + 1; q < LOW_BITS; ++q)
            if (((X >> q) & 1) && p + q + 1 >= SQ_DROP) S += 1LL << (p + q + 1);
    }
    S >>= SQ_DROP;
    long long A = t.c0[i] + t.c1[i] * X + t.c2[i] * S;
    if (A <= 0) return sign;  // never reached by the fitted tables
    int top = 63 - __clzll(A);
    int e = top + t.lsb[b];  // A 2^L in [2^e, 2^(e+1))
    if (e >= 0) return sign | 0x3f800000u;
    unsigned long long ua = (unsigned long long)A;
    unsigned mant = (unsigned)(top >= 23 ? ua >> (top - 23) : ua << (23 - top)) & 0x7fffffu;
    return sign | ((unsigned)(e + 127) << 23) | mant;
}

#define TABLE_PARAMS                                                                                         \
    const long long *c0, const long long *c1, const long long *c2, const int *base, const int *shift, \
        const int *lsb
#define TABLES {c0, c1, c2, base, shift, lsb}

extern "C" __global__ void tanh_model_kernel(const unsigned* x, unsigned* out, unsigned n, TABLE_PARAMS) {
    TanhTables t = TABLES;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tanh_model(x[i], t);
}

// hardware vs model over [start, start + n): mismatch count per input exponent (256 counters, both signs) and the
// first mismatching inputs (up to cap)
extern "C" __global__ void tanh_sweep_kernel(unsigned start, unsigned n, unsigned long long* per_e, unsigned* first,
                                             unsigned* nfirst, unsigned cap, TABLE_PARAMS) {
    TanhTables t = TABLES;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = start + i;
    float r;
    asm volatile("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(__uint_as_float(x)));
    unsigned hw = __float_as_uint(r);
    if (hw != tanh_model(x, t)) {
        atomicAdd(&per_e[(x >> 23) & 0xff], 1ULL);
        unsigned slot = atomicAdd(nfirst, 1u);
        if (slot < cap) first[slot] = x;
    }
}
