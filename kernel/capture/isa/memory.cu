// Silicon probes of PTX atomics (flashsim.ptx.probes.memory), each instruction written as inline PTX.
//
// own_*: every thread updates a location of its own (no collision), so the old value it gets back and the final
// value are the GPU's arithmetic alone: roundings, flushes, NaNs, wraps, signedness. `space` picks the form:
// 0 .global, 1 .shared, 2 generic to global, 3 generic to shared (each block copies its part of `mem` to shared
// memory and back around the atomic).
// collide_*: the threads of a block hit `locs` shared or global locations (thread t: location t % locs), so the
// order the GPU applies them in is its own. Outputs are what no order changes: the final values of operations that
// commute, and for every operation the chain check  h(init) + sum h(new_t) - sum h(old_t) - h(final)  per location
// (0 for every serialisation: the updates' new values are the next updates' old values, the last one's the final
// value), accumulated with 32-bit atomic adds of a mixing hash h.
typedef unsigned short uint16_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;

#define THREADS 256

__device__ __forceinline__ uint32_t mix(uint64_t x) {
    uint32_t h = (uint32_t)x ^ (uint32_t)(x >> 32) * 0x27D4EB2Fu;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    h *= 0xC2B2AE3Du;
    return h ^ (h >> 16);
}

// ---- own location: atom (returns) -------------------------------------------------------------------------------

#define OWN_ATOM(NAME, OP, T, C, ...)                                                                             \
    extern "C" __global__ void NAME(T* mem, const T* b, const T* c, T* old, int space) {                         \
        __shared__ T tile[THREADS];                                                                               \
        int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;                                                     \
        tile[t] = mem[i];                                                                                         \
        __syncthreads();                                                                                          \
        T r, bv = b[i], cv = c[i];                                                                                \
        T* g = mem + i;                                                                                           \
        uint32_t s = (uint32_t)__cvta_generic_to_shared(tile + t);                                                \
        T* gs = tile + t;                                                                                         \
        (void)cv;                                                                                                 \
        if (space == 0) asm volatile("atom.global" OP : "=" C(r) : "l"(g), __VA_ARGS__ : "memory");              \
        if (space == 1) asm volatile("atom.shared" OP : "=" C(r) : "r"(s), __VA_ARGS__ : "memory");              \
        if (space == 2) asm volatile("atom" OP : "=" C(r) : "l"(g), __VA_ARGS__ : "memory");                     \
        if (space == 3) asm volatile("atom" OP : "=" C(r) : "l"(gs), __VA_ARGS__ : "memory");                    \
        __syncthreads();                                                                                          \
        if (space & 1) mem[i] = tile[t];                                                                          \
        old[i] = r;                                                                                               \
    }

#define OWN2(NAME, OPTYPE, T, C) OWN_ATOM(NAME, OPTYPE " %0, [%1], %2;", T, C, C(bv))
OWN2(own_atom_add_u32, ".add.u32", uint32_t, "r")
OWN2(own_atom_add_s32, ".add.s32", uint32_t, "r")
OWN2(own_atom_add_u64, ".add.u64", uint64_t, "l")
OWN2(own_atom_add_f32, ".add.f32", uint32_t, "r")
OWN2(own_atom_add_f64, ".add.f64", uint64_t, "l")
OWN2(own_atom_add_f16, ".add.noftz.f16", uint16_t, "h")
OWN2(own_atom_add_bf16, ".add.noftz.bf16", uint16_t, "h")
OWN2(own_atom_add_f16x2, ".add.noftz.f16x2", uint32_t, "r")
OWN2(own_atom_add_bf16x2, ".add.noftz.bf16x2", uint32_t, "r")
OWN2(own_atom_min_u32, ".min.u32", uint32_t, "r")
OWN2(own_atom_min_s32, ".min.s32", uint32_t, "r")
OWN2(own_atom_min_u64, ".min.u64", uint64_t, "l")
OWN2(own_atom_min_s64, ".min.s64", uint64_t, "l")
OWN2(own_atom_max_u32, ".max.u32", uint32_t, "r")
OWN2(own_atom_max_s32, ".max.s32", uint32_t, "r")
OWN2(own_atom_max_u64, ".max.u64", uint64_t, "l")
OWN2(own_atom_max_s64, ".max.s64", uint64_t, "l")
OWN2(own_atom_inc_u32, ".inc.u32", uint32_t, "r")
OWN2(own_atom_dec_u32, ".dec.u32", uint32_t, "r")
OWN2(own_atom_and_b32, ".and.b32", uint32_t, "r")
OWN2(own_atom_and_b64, ".and.b64", uint64_t, "l")
OWN2(own_atom_or_b32, ".or.b32", uint32_t, "r")
OWN2(own_atom_or_b64, ".or.b64", uint64_t, "l")
OWN2(own_atom_xor_b32, ".xor.b32", uint32_t, "r")
OWN2(own_atom_xor_b64, ".xor.b64", uint64_t, "l")
OWN2(own_atom_exch_b32, ".exch.b32", uint32_t, "r")
OWN2(own_atom_exch_b64, ".exch.b64", uint64_t, "l")
#define OWN3(NAME, OPTYPE, T, C) OWN_ATOM(NAME, OPTYPE " %0, [%1], %2, %3;", T, C, C(bv), C(cv))
OWN3(own_atom_cas_b16, ".cas.b16", uint16_t, "h")
OWN3(own_atom_cas_b32, ".cas.b32", uint32_t, "r")
OWN3(own_atom_cas_b64, ".cas.b64", uint64_t, "l")

// ---- own location: red (no result) ------------------------------------------------------------------------------

#define OWN_RED(NAME, OPTYPE, T, C)                                                                               \
    extern "C" __global__ void NAME(T* mem, const T* b, int space) {                                             \
        __shared__ T tile[THREADS];                                                                               \
        int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;                                                     \
        tile[t] = mem[i];                                                                                         \
        __syncthreads();                                                                                          \
        T bv = b[i];                                                                                              \
        T* g = mem + i;                                                                                           \
        uint32_t s = (uint32_t)__cvta_generic_to_shared(tile + t);                                                \
        if (space == 0) asm volatile("red.global" OPTYPE " [%0], %1;" ::"l"(g), C(bv) : "memory");              \
        if (space == 1) asm volatile("red.shared" OPTYPE " [%0], %1;" ::"r"(s), C(bv) : "memory");              \
        __syncthreads();                                                                                          \
        if (space == 1) mem[i] = tile[t];                                                                         \
    }

OWN_RED(own_red_add_u32, ".add.u32", uint32_t, "r")
OWN_RED(own_red_add_f32, ".add.f32", uint32_t, "r")
OWN_RED(own_red_add_f64, ".add.f64", uint64_t, "l")
OWN_RED(own_red_add_f16x2, ".add.noftz.f16x2", uint32_t, "r")
OWN_RED(own_red_add_bf16, ".add.noftz.bf16", uint16_t, "h")
OWN_RED(own_red_min_s32, ".min.s32", uint32_t, "r")
OWN_RED(own_red_max_u64, ".max.u64", uint64_t, "l")
OWN_RED(own_red_inc_u32, ".inc.u32", uint32_t, "r")
OWN_RED(own_red_dec_u32, ".dec.u32", uint32_t, "r")
OWN_RED(own_red_xor_b64, ".xor.b64", uint64_t, "l")

// ---- own location: the sm_90 vector forms on .global ------------------------------------------------------------

#define OWN_VEC4(NAME, OPTYPE, T, C)                                                                              \
    extern "C" __global__ void NAME(T* mem, const T* b, T* old, int returns) {                                   \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                            \
        T* g = mem + 4 * i;                                                                                       \
        const T* bv = b + 4 * i;                                                                                  \
        T r0, r1, r2, r3;                                                                                         \
        if (returns) {                                                                                            \
            asm volatile("atom.global" OPTYPE " {%0, %1, %2, %3}, [%4], {%5, %6, %7, %8};"                      \
                         : "=" C(r0), "=" C(r1), "=" C(r2), "=" C(r3)                                             \
                         : "l"(g), C(bv[0]), C(bv[1]), C(bv[2]), C(bv[3])                                         \
                         : "memory");                                                                             \
            old[4 * i] = r0, old[4 * i + 1] = r1, old[4 * i + 2] = r2, old[4 * i + 3] = r3;                       \
        } else {                                                                                                  \
            asm volatile("red.global" OPTYPE " [%0], {%1, %2, %3, %4};" ::"l"(g), C(bv[0]), C(bv[1]), C(bv[2]),   \
                         C(bv[3])                                                                                 \
                         : "memory");                                                                             \
        }                                                                                                         \
    }

OWN_VEC4(own_vec_add_v4_f32, ".add.v4.f32", uint32_t, "r")
OWN_VEC4(own_vec_add_v4_f16, ".add.noftz.v4.f16", uint16_t, "h")
OWN_VEC4(own_vec_add_v4_bf16, ".add.noftz.v4.bf16", uint16_t, "h")
OWN_VEC4(own_vec_add_v4_f16x2, ".add.noftz.v4.f16x2", uint32_t, "r")
OWN_VEC4(own_vec_add_v4_bf16x2, ".add.noftz.v4.bf16x2", uint32_t, "r")

extern "C" __global__ void own_vec_add_v2_f32(uint32_t* mem, const uint32_t* b, uint32_t* old) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t r0, r1;
    asm volatile("atom.global.add.v2.f32 {%0, %1}, [%2], {%3, %4};"
                 : "=r"(r0), "=r"(r1)
                 : "l"(mem + 2 * i), "r"(b[2 * i]), "r"(b[2 * i + 1])
                 : "memory");
    old[2 * i] = r0, old[2 * i + 1] = r1;
}

extern "C" __global__ void own_vec_add_v8_bf16(uint16_t* mem, const uint16_t* b, uint16_t* old) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const uint16_t* v = b + 8 * i;
    uint16_t r[8];
    asm volatile(
        "atom.global.add.noftz.v8.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], {%9, %10, %11, %12, %13, %14, %15, "
        "%16};"
        : "=h"(r[0]), "=h"(r[1]), "=h"(r[2]), "=h"(r[3]), "=h"(r[4]), "=h"(r[5]), "=h"(r[6]), "=h"(r[7])
        : "l"(mem + 8 * i), "h"(v[0]), "h"(v[1]), "h"(v[2]), "h"(v[3]), "h"(v[4]), "h"(v[5]), "h"(v[6]), "h"(v[7])
        : "memory");
    for (int k = 0; k < 8; ++k) old[8 * i + k] = r[k];
}

// ---- colliding locations ----------------------------------------------------------------------------------------
// One block; thread t updates location t % locs of shared memory (space 1) or of `mem` (space 0) with b[t] (c[t]).
// chain[loc] gets the chain check; mem the final values.

#define COLLIDE(NAME, OP, T, C, NEW, ...)                                                                         \
    extern "C" __global__ void NAME(T* mem, const T* b, const T* c, uint32_t* chain, int space, int locs) {      \
        __shared__ T tile[THREADS];                                                                               \
        __shared__ uint32_t sums[THREADS];                                                                        \
        int t = threadIdx.x, loc = t % locs;                                                                      \
        T init = mem[loc];                                                                                        \
        if (t < locs) tile[t] = init;                                                                             \
        sums[t] = 0;                                                                                              \
        __syncthreads();                                                                                          \
        T o, bv = b[t], cv = c[t];                                                                                \
        (void)cv;                                                                                                 \
        uint32_t s = (uint32_t)__cvta_generic_to_shared(tile + loc);                                              \
        if (space == 0) asm volatile("atom.global" OP : "=" C(o) : "l"(mem + loc), __VA_ARGS__ : "memory");      \
        if (space == 1) asm volatile("atom.shared" OP : "=" C(o) : "r"(s), __VA_ARGS__ : "memory");              \
        T nv = NEW;                                                                                               \
        atomicAdd(&sums[loc], mix(nv) - mix(o));                                                                  \
        __syncthreads();                                                                                          \
        if (t < locs) {                                                                                           \
            T fin = space == 0 ? mem[t] : tile[t];                                                                \
            chain[t] = sums[t] + mix(init) - mix(fin);                                                            \
            if (space == 1) mem[t] = fin;                                                                         \
        }                                                                                                         \
    }

#define COLLIDE2(NAME, OPTYPE, T, C, NEW) COLLIDE(NAME, OPTYPE " %0, [%1], %2;", T, C, NEW, C(bv))
COLLIDE2(collide_add_u32, ".add.u32", uint32_t, "r", o + bv)
COLLIDE2(collide_add_u64, ".add.u64", uint64_t, "l", o + bv)
COLLIDE2(collide_min_s32, ".min.s32", uint32_t, "r", (int32_t)o < (int32_t)bv ? o : bv)
COLLIDE2(collide_max_u32, ".max.u32", uint32_t, "r", o > bv ? o : bv)
COLLIDE2(collide_min_u64, ".min.u64", uint64_t, "l", o < bv ? o : bv)
COLLIDE2(collide_max_s64, ".max.s64", uint64_t, "l", (int64_t)o > (int64_t)bv ? o : bv)
COLLIDE2(collide_inc_u32, ".inc.u32", uint32_t, "r", o >= bv ? 0u : o + 1u)
COLLIDE2(collide_dec_u32, ".dec.u32", uint32_t, "r", (o == 0u || o > bv) ? bv : o - 1u)
COLLIDE2(collide_and_b32, ".and.b32", uint32_t, "r", o & bv)
COLLIDE2(collide_or_b64, ".or.b64", uint64_t, "l", o | bv)
COLLIDE2(collide_xor_b32, ".xor.b32", uint32_t, "r", o ^ bv)
COLLIDE2(collide_exch_b32, ".exch.b32", uint32_t, "r", bv)
COLLIDE2(collide_exch_b64, ".exch.b64", uint64_t, "l", bv)
#define COLLIDE3(NAME, OPTYPE, T, C, NEW) COLLIDE(NAME, OPTYPE " %0, [%1], %2, %3;", T, C, NEW, C(bv), C(cv))
COLLIDE3(collide_cas_b16, ".cas.b16", uint16_t, "h", o == bv ? cv : o)
COLLIDE3(collide_cas_b32, ".cas.b32", uint32_t, "r", o == bv ? cv : o)
COLLIDE3(collide_cas_b64, ".cas.b64", uint64_t, "l", o == bv ? cv : o)

// Float adds of small integers: every partial sum is exact, so the final value is the same in every order.
#define COLLIDE_FLOAT(NAME, OPTYPE, T, C)                                                                         \
    extern "C" __global__ void NAME(T* mem, const T* b, int space, int locs) {                                   \
        __shared__ T tile[THREADS];                                                                               \
        int t = threadIdx.x, loc = t % locs;                                                                      \
        if (t < locs) tile[t] = mem[t];                                                                           \
        __syncthreads();                                                                                          \
        T o, bv = b[t];                                                                                           \
        uint32_t s = (uint32_t)__cvta_generic_to_shared(tile + loc);                                              \
        if (space == 0) asm volatile("atom.global" OPTYPE " %0, [%1], %2;" : "=" C(o) : "l"(mem + loc), C(bv) : "memory"); \
        if (space == 1) asm volatile("atom.shared" OPTYPE " %0, [%1], %2;" : "=" C(o) : "r"(s), C(bv) : "memory");  \
        (void)o;                                                                                                  \
        __syncthreads();                                                                                          \
        if (t < locs && space == 1) mem[t] = tile[t];                                                             \
    }

COLLIDE_FLOAT(collide_add_f32, ".add.f32", uint32_t, "r")
COLLIDE_FLOAT(collide_add_f64, ".add.f64", uint64_t, "l")
COLLIDE_FLOAT(collide_add_f16, ".add.noftz.f16", uint16_t, "h")
COLLIDE_FLOAT(collide_add_bf16x2, ".add.noftz.bf16x2", uint32_t, "r")

extern "C" __global__ void collide_vec_add_v4_f32(uint32_t* mem, const uint32_t* b, int locs) {
    int t = threadIdx.x, loc = t % locs;
    const uint32_t* v = b + 4 * t;
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mem + 4 * loc), "r"(v[0]), "r"(v[1]),
                 "r"(v[2]), "r"(v[3])
                 : "memory");
}
