// Silicon probes of the unrounded mul / add pairs ptxas may contract into an FMA (flashsim.ptx.probes.contraction):
// each thread reads its operands x, y, z from the three rows of `xyz` and writes what the pair gives. The pairs
// ptxas fuses are written as inline PTX (NVVM contracts plain C++ itself, to fma.rn); the pairs it keeps apart are
// the plain C++ NVRTC leaves unrounded (a product added in another basic block) and inline PTX whose product has
// another reader.
typedef unsigned int uint32_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand

__device__ __forceinline__ float mul_f32(float a, float b) {
    float r;
    asm("mul.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

#define OPERANDS                                                                                                 \
    int i = blockIdx.x * blockDim.x + threadIdx.x;                                                              \
    if (i >= n) return;                                                                                          \
    float x = __uint_as_float(xyz[i]), y = __uint_as_float(xyz[n + i]), z = __uint_as_float(xyz[2 * n + i]);

// x * y + z: fused (FFMA)
extern "C" __global__ void mul_add(const uint32_t* xyz, uint32_t* out, int n) {
    OPERANDS
    float p = mul_f32(x, y), r;
    asm("add.f32 %0, %1, %2;" : "=f"(r) : "f"(p), "f"(z));
    out[i] = __float_as_uint(r);
}

// z - x * y and x * y - z: fused (FFMA with a negated product, with a negated addend)
extern "C" __global__ void mul_sub(const uint32_t* xyz, uint32_t* out, uint32_t* out2, int n) {
    OPERANDS
    float p = mul_f32(x, y), q = mul_f32(x, y), r, s;
    asm("sub.f32 %0, %1, %2;" : "=f"(r) : "f"(z), "f"(p));
    asm("sub.f32 %0, %1, %2;" : "=f"(s) : "f"(q), "f"(z));
    out[i] = __float_as_uint(r);
    out2[i] = __float_as_uint(s);
}

// x * y + z flushing subnormals: fused (FFMA.FTZ)
extern "C" __global__ void mul_add_ftz(const uint32_t* xyz, uint32_t* out, int n) {
    OPERANDS
    float p, r;
    asm("mul.ftz.f32 %0, %1, %2;" : "=f"(p) : "f"(x), "f"(y));
    asm("add.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(p), "f"(z));
    out[i] = __float_as_uint(r);
}

// one product read by two adds: both fused (two FFMA, the product repeated)
extern "C" __global__ void two_readers(const uint32_t* xyz, uint32_t* out, uint32_t* out2, int n) {
    OPERANDS
    float p, r, s;
    asm("{\n\t.reg .f32 t;\n\tmul.f32 t, %2, %3;\n\tadd.f32 %0, t, %4;\n\tsub.f32 %1, %4, t;\n\t}"
        : "=f"(r), "=f"(s)
        : "f"(x), "f"(y), "f"(z));
    out[i] = __float_as_uint(r);
    out2[i] = __float_as_uint(s);
}

// x * y + z * x: the first operand's product fused, the second rounded (FMUL, FFMA)
extern "C" __global__ void two_products(const uint32_t* xyz, uint32_t* out, int n) {
    OPERANDS
    float p = mul_f32(x, y), q = mul_f32(z, x), r;
    asm("add.f32 %0, %1, %2;" : "=f"(r) : "f"(p), "f"(q));
    out[i] = __float_as_uint(r);
}

// the product also stored: kept apart (FMUL, FADD)
extern "C" __global__ void product_stored(const uint32_t* xyz, uint32_t* out, uint32_t* out2, int n) {
    OPERANDS
    float p = mul_f32(x, y), r;
    asm("add.f32 %0, %1, %2;" : "=f"(r) : "f"(p), "f"(z));
    out[i] = __float_as_uint(r);
    out2[i] = __float_as_uint(p);
}

// plain C++: the product in one block, the add after a load under a condition: NVRTC leaves mul.f32 + add.f32,
// ptxas keeps them apart (FMUL, FADD)
extern "C" __global__ void across_blocks(const uint32_t* xyz, uint32_t* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float p = __uint_as_float(xyz[i]) * __uint_as_float(xyz[n + i]);
    float s = 0.0f;
    if (i & 1) s = __uint_as_float(xyz[2 * n + i]);
    out[i] = __float_as_uint(p + s);
}
