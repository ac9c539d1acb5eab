// Silicon probes of PTX floating-point arithmetic (flashsim.ptx.probes.floating): each thread applies one
// instruction, written as inline PTX so that its modifiers are exactly the ones named, to its operands.
typedef unsigned short uint16_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define INDEX int i = blockIdx.x * blockDim.x + threadIdx.x
#define UNARY(NAME, T, C, INSN)                                                                                 \
    extern "C" __global__ void NAME(const T* a, T* out, int n) {                                              \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            T r;                                                                                                \
            asm(INSN " %0, %1;" : "=" C(r) : C(a[i]));                                                          \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define BINARY(NAME, T, C, INSN)                                                                                \
    extern "C" __global__ void NAME(const T* a, const T* b, T* out, int n) {                                  \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            T r;                                                                                                \
            asm(INSN " %0, %1, %2;" : "=" C(r) : C(a[i]), C(b[i]));                                            \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define TERNARY(NAME, T, C, INSN)                                                                               \
    extern "C" __global__ void NAME(const T* a, const T* b, const T* c, T* out, int n) {                      \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            T r;                                                                                                \
            asm(INSN " %0, %1, %2, %3;" : "=" C(r) : C(a[i]), C(b[i]), C(c[i]));                               \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// a compare into one predicate (bit 0 of out) or two (p in bit 0, q in bit 1)
#define SETP(NAME, T, C, INSN)                                                                                  \
    extern "C" __global__ void NAME(const T* a, const T* b, uint32_t* out, int n) {                           \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r;                                                                                         \
            asm("{ .reg .pred p, q; .reg .b32 t;\n\t" INSN " p|q, %1, %2;\n\t"                                  \
                "selp.b32 %0, 1, 0, p; selp.b32 t, 2, 0, q; or.b32 %0, %0, t; }"                                \
                : "=r"(r) : C(a[i]), C(b[i]));                                                                  \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// the scalar half compares (.f16, .bf16) write one predicate only (bit 0 of out): p|q is not their form
#define SETP1(NAME, T, C, INSN)                                                                                 \
    extern "C" __global__ void NAME(const T* a, const T* b, uint32_t* out, int n) {                           \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r;                                                                                         \
            asm("{ .reg .pred p;\n\t" INSN " p, %1, %2;\n\tselp.b32 %0, 1, 0, p; }" : "=r"(r) : C(a[i]), C(b[i]));  \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// setp with a combining predicate c = (c_in != 0)
#define SETP_BOP(NAME, T, C, INSN)                                                                              \
    extern "C" __global__ void NAME(const T* a, const T* b, const uint32_t* c, uint32_t* out, int n) {        \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r;                                                                                         \
            asm("{ .reg .pred p, q, c; .reg .b32 t;\n\tsetp.ne.u32 c, %3, 0;\n\t" INSN " p|q, %1, %2, !c;\n\t"  \
                "selp.b32 %0, 1, 0, p; selp.b32 t, 2, 0, q; or.b32 %0, %0, t; }"                                \
                : "=r"(r) : C(a[i]), C(b[i]), "r"(c[i]));                                                       \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define SET(NAME, DT, DC, T, C, INSN)                                                                           \
    extern "C" __global__ void NAME(const T* a, const T* b, DT* out, int n) {                                 \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            DT r;                                                                                               \
            asm(INSN " %0, %1, %2;" : "=" DC(r) : C(a[i]), C(b[i]));                                           \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// every testp property of one value: bit k of out for the k-th of finite, infinite, number, notanumber, normal,
// subnormal
#define TESTP(NAME, T, C, TY)                                                                                   \
    extern "C" __global__ void NAME(const T* a, uint32_t* out, int n) {                                       \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r;                                                                                         \
            asm("{ .reg .pred p0, p1, p2, p3, p4, p5; .reg .b32 t;\n\t"                                         \
                "testp.finite" TY " p0, %1; testp.infinite" TY " p1, %1; testp.number" TY " p2, %1;\n\t"        \
                "testp.notanumber" TY " p3, %1; testp.normal" TY " p4, %1; testp.subnormal" TY " p5, %1;\n\t"   \
                "selp.b32 %0, 1, 0, p0; selp.b32 t, 2, 0, p1; or.b32 %0, %0, t;\n\t"                            \
                "selp.b32 t, 4, 0, p2; or.b32 %0, %0, t; selp.b32 t, 8, 0, p3; or.b32 %0, %0, t;\n\t"           \
                "selp.b32 t, 16, 0, p4; or.b32 %0, %0, t; selp.b32 t, 32, 0, p5; or.b32 %0, %0, t; }"           \
                : "=r"(r) : C(a[i]));                                                                           \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }

#define B32(NAME, INSN) BINARY(NAME, uint32_t, "r", INSN)
#define B64(NAME, INSN) BINARY(NAME, uint64_t, "l", INSN)
#define B16(NAME, INSN) BINARY(NAME, uint16_t, "h", INSN)
#define T32(NAME, INSN) TERNARY(NAME, uint32_t, "r", INSN)
#define T64(NAME, INSN) TERNARY(NAME, uint64_t, "l", INSN)
#define T16(NAME, INSN) TERNARY(NAME, uint16_t, "h", INSN)
#define U32(NAME, INSN) UNARY(NAME, uint32_t, "r", INSN)
#define U64(NAME, INSN) UNARY(NAME, uint64_t, "l", INSN)
#define U16(NAME, INSN) UNARY(NAME, uint16_t, "h", INSN)

// f32
B32(add_rn_f32, "add.rn.f32")
B32(add_rz_f32, "add.rz.f32")
B32(add_rm_f32, "add.rm.f32")
B32(add_rp_f32, "add.rp.f32")
B32(add_rn_ftz_f32, "add.rn.ftz.f32")
B32(add_rn_sat_f32, "add.rn.sat.f32")
B32(add_rm_ftz_sat_f32, "add.rm.ftz.sat.f32")
B32(add_f32, "add.f32")
B32(sub_rn_f32, "sub.rn.f32")
B32(sub_rp_ftz_f32, "sub.rp.ftz.f32")
B32(mul_rn_f32, "mul.rn.f32")
B32(mul_rz_f32, "mul.rz.f32")
B32(mul_rm_f32, "mul.rm.f32")
B32(mul_rp_f32, "mul.rp.f32")
B32(mul_rn_ftz_sat_f32, "mul.rn.ftz.sat.f32")
B32(div_rn_f32, "div.rn.f32")
B32(div_rz_f32, "div.rz.f32")
B32(div_rm_f32, "div.rm.f32")
B32(div_rp_f32, "div.rp.f32")
B32(div_rn_ftz_f32, "div.rn.ftz.f32")
B32(div_approx_f32, "div.approx.f32")
B32(div_approx_ftz_f32, "div.approx.ftz.f32")
B32(div_full_f32, "div.full.f32")
B32(div_full_ftz_f32, "div.full.ftz.f32")
B32(min_f32, "min.f32")
B32(min_ftz_f32, "min.ftz.f32")
B32(min_nan_f32, "min.NaN.f32")
B32(min_xorsign_abs_f32, "min.xorsign.abs.f32")
B32(max_f32, "max.f32")
B32(max_nan_ftz_f32, "max.NaN.ftz.f32")
B32(max_xorsign_abs_f32, "max.xorsign.abs.f32")
B32(copysign_f32, "copysign.f32")
T32(fma_rn_f32, "fma.rn.f32")
T32(fma_rz_f32, "fma.rz.f32")
T32(fma_rm_f32, "fma.rm.f32")
T32(fma_rp_f32, "fma.rp.f32")
T32(fma_rn_ftz_sat_f32, "fma.rn.ftz.sat.f32")
T32(mad_rm_f32, "mad.rm.f32")
U32(rcp_rn_f32, "rcp.rn.f32")
U32(rcp_rz_f32, "rcp.rz.f32")
U32(rcp_rm_f32, "rcp.rm.f32")
U32(rcp_rp_f32, "rcp.rp.f32")
U32(rcp_rn_ftz_f32, "rcp.rn.ftz.f32")
U32(sqrt_rn_f32, "sqrt.rn.f32")
U32(sqrt_rz_f32, "sqrt.rz.f32")
U32(sqrt_rm_f32, "sqrt.rm.f32")
U32(sqrt_rp_f32, "sqrt.rp.f32")
U32(sqrt_rn_ftz_f32, "sqrt.rn.ftz.f32")
U32(abs_f32, "abs.f32")
U32(abs_ftz_f32, "abs.ftz.f32")
U32(neg_f32, "neg.f32")
U32(neg_ftz_f32, "neg.ftz.f32")

// f64
B64(add_rn_f64, "add.rn.f64")
B64(add_rz_f64, "add.rz.f64")
B64(add_rm_f64, "add.rm.f64")
B64(add_rp_f64, "add.rp.f64")
B64(sub_rn_f64, "sub.rn.f64")
B64(mul_f64, "mul.f64")
B64(mul_rn_f64, "mul.rn.f64")
B64(mul_rz_f64, "mul.rz.f64")
B64(mul_rm_f64, "mul.rm.f64")
B64(mul_rp_f64, "mul.rp.f64")
B64(div_rn_f64, "div.rn.f64")
B64(div_rz_f64, "div.rz.f64")
B64(div_rm_f64, "div.rm.f64")
B64(div_rp_f64, "div.rp.f64")
B64(min_f64, "min.f64")
B64(max_f64, "max.f64")
B64(copysign_f64, "copysign.f64")
T64(fma_rn_f64, "fma.rn.f64")
T64(fma_rz_f64, "fma.rz.f64")
T64(fma_rm_f64, "fma.rm.f64")
T64(fma_rp_f64, "fma.rp.f64")
U64(rcp_rn_f64, "rcp.rn.f64")
U64(rcp_rz_f64, "rcp.rz.f64")
U64(rcp_rm_f64, "rcp.rm.f64")
U64(rcp_rp_f64, "rcp.rp.f64")
U64(sqrt_rn_f64, "sqrt.rn.f64")
U64(sqrt_rz_f64, "sqrt.rz.f64")
U64(sqrt_rm_f64, "sqrt.rm.f64")
U64(sqrt_rp_f64, "sqrt.rp.f64")
U64(abs_f64, "abs.f64")
U64(neg_f64, "neg.f64")

// f16
B16(add_rn_f16, "add.rn.f16")
B16(add_f16, "add.f16")
B16(add_rn_ftz_f16, "add.rn.ftz.f16")
B16(add_rn_sat_f16, "add.rn.sat.f16")
B16(sub_rn_f16, "sub.rn.f16")
B16(mul_rn_f16, "mul.rn.f16")
B16(mul_rn_ftz_sat_f16, "mul.rn.ftz.sat.f16")
B16(min_f16, "min.f16")
B16(min_nan_f16, "min.NaN.f16")
B16(max_ftz_f16, "max.ftz.f16")
B16(max_xorsign_abs_f16, "max.xorsign.abs.f16")
T16(fma_rn_f16, "fma.rn.f16")
T16(fma_rn_ftz_f16, "fma.rn.ftz.f16")
T16(fma_rn_sat_f16, "fma.rn.sat.f16")
T16(fma_rn_relu_f16, "fma.rn.relu.f16")
U16(abs_f16, "abs.f16")
U16(neg_ftz_f16, "neg.ftz.f16")

// f16x2
B32(add_rn_f16x2, "add.rn.f16x2")
B32(sub_rn_ftz_f16x2, "sub.rn.ftz.f16x2")
B32(mul_rn_sat_f16x2, "mul.rn.sat.f16x2")
B32(min_f16x2, "min.f16x2")
B32(max_nan_f16x2, "max.NaN.f16x2")
T32(fma_rn_f16x2, "fma.rn.f16x2")
T32(fma_rn_relu_f16x2, "fma.rn.relu.f16x2")
U32(abs_f16x2, "abs.f16x2")
U32(neg_f16x2, "neg.f16x2")

// bf16
B16(add_rn_bf16, "add.rn.bf16")
B16(sub_rn_bf16, "sub.rn.bf16")
B16(mul_rn_bf16, "mul.rn.bf16")
B16(min_bf16, "min.bf16")
B16(max_nan_bf16, "max.NaN.bf16")
B16(min_xorsign_abs_bf16, "min.xorsign.abs.bf16")
T16(fma_rn_bf16, "fma.rn.bf16")
T16(fma_rn_relu_bf16, "fma.rn.relu.bf16")
U16(abs_bf16, "abs.bf16")
U16(neg_bf16, "neg.bf16")

// bf16x2
B32(add_rn_bf16x2, "add.rn.bf16x2")
B32(mul_bf16x2, "mul.bf16x2")
B32(max_bf16x2, "max.bf16x2")
B32(min_nan_bf16x2, "min.NaN.bf16x2")
T32(fma_rn_bf16x2, "fma.rn.bf16x2")
T32(fma_rn_relu_bf16x2, "fma.rn.relu.bf16x2")
U32(abs_bf16x2, "abs.bf16x2")
U32(neg_bf16x2, "neg.bf16x2")

// compares
SETP(setp_lt_f32, uint32_t, "r", "setp.lt.f32")
SETP(setp_equ_f32, uint32_t, "r", "setp.equ.f32")
SETP(setp_ne_ftz_f32, uint32_t, "r", "setp.ne.ftz.f32")
SETP(setp_num_f32, uint32_t, "r", "setp.num.f32")
SETP(setp_nan_f64, uint64_t, "l", "setp.nan.f64")
SETP(setp_gtu_f64, uint64_t, "l", "setp.gtu.f64")
SETP1(setp_le_f16, uint16_t, "h", "setp.le.f16")
SETP1(setp_neu_ftz_f16, uint16_t, "h", "setp.neu.ftz.f16")
SETP1(setp_ge_bf16, uint16_t, "h", "setp.ge.bf16")
SETP(setp_lt_f16x2, uint32_t, "r", "setp.lt.f16x2")
SETP(setp_nan_bf16x2, uint32_t, "r", "setp.nan.bf16x2")
SETP_BOP(setp_lt_or_f32, uint32_t, "r", "setp.lt.or.f32")
SETP_BOP(setp_eq_and_f16x2, uint32_t, "r", "setp.eq.and.f16x2")
SET(set_lt_f32_f32, uint32_t, "r", uint32_t, "r", "set.lt.f32.f32")
SET(set_geu_u32_f32, uint32_t, "r", uint32_t, "r", "set.geu.u32.f32")
SET(set_eq_s32_f64, uint32_t, "r", uint64_t, "l", "set.eq.s32.f64")
SET(set_lt_f32_s32, uint32_t, "r", uint32_t, "r", "set.lt.f32.s32")
SET(set_lt_f16_f16, uint16_t, "h", uint16_t, "h", "set.lt.f16.f16")
SET(set_le_bf16_bf16, uint16_t, "h", uint16_t, "h", "set.le.bf16.bf16")
SET(set_lt_f16x2_f16x2, uint32_t, "r", uint32_t, "r", "set.lt.f16x2.f16x2")
SET(set_gt_u32_f16x2, uint32_t, "r", uint32_t, "r", "set.gt.u32.f16x2")
SET(set_ltu_bf16x2_bf16x2, uint32_t, "r", uint32_t, "r", "set.ltu.bf16x2.bf16x2")
TESTP(testp_f32, uint32_t, "r", ".f32")
TESTP(testp_f64, uint64_t, "l", ".f64")
