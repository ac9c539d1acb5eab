// Silicon probes of PTX integer, bit and predicate instructions (flashsim.ptx.probes.integer): each thread applies
// one instruction, written as inline PTX so that its modifiers are exactly the ones named, to its operands.
typedef unsigned short uint16_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define INDEX int i = blockIdx.x * blockDim.x + threadIdx.x

// d = INSN a (TD/CD: the result's C type and asm constraint; TA/CA the operand's)
#define OP1(NAME, INSN, TD, CD, TA, CA)                                                                        \
    extern "C" __global__ void NAME(const TA* a, TD* out, int n) {                                           \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            TD r;                                                                                               \
            asm volatile(INSN " %0, %1;" : "=" CD(r) : CA(a[i]));                                              \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define OP2(NAME, INSN, TD, CD, TA, CA, TB, CB)                                                                \
    extern "C" __global__ void NAME(const TA* a, const TB* b, TD* out, int n) {                              \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            TD r;                                                                                               \
            asm volatile(INSN " %0, %1, %2;" : "=" CD(r) : CA(a[i]), CB(b[i]));                                \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define OP3(NAME, INSN, TD, CD, TA, CA, TB, CB, TC, CC)                                                        \
    extern "C" __global__ void NAME(const TA* a, const TB* b, const TC* c, TD* out, int n) {                 \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            TD r;                                                                                               \
            asm volatile(INSN " %0, %1, %2, %3;" : "=" CD(r) : CA(a[i]), CB(b[i]), CC(c[i]));                  \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
#define OP4(NAME, INSN, TD, CD, TA, CA, TC, CC)                                                                \
    extern "C" __global__ void NAME(const TA* a, const TA* b, const TC* c, const TC* e, TD* out, int n) {    \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            TD r;                                                                                               \
            asm volatile(INSN " %0, %1, %2, %3, %4;" : "=" CD(r) : CA(a[i]), CA(b[i]), CC(c[i]), CC(e[i]));    \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// the same width for every operand
#define BIN16(NAME, INSN) OP2(NAME, INSN, uint16_t, "h", uint16_t, "h", uint16_t, "h")
#define BIN32(NAME, INSN) OP2(NAME, INSN, uint32_t, "r", uint32_t, "r", uint32_t, "r")
#define BIN64(NAME, INSN) OP2(NAME, INSN, uint64_t, "l", uint64_t, "l", uint64_t, "l")
#define TER16(NAME, INSN) OP3(NAME, INSN, uint16_t, "h", uint16_t, "h", uint16_t, "h", uint16_t, "h")
#define TER32(NAME, INSN) OP3(NAME, INSN, uint32_t, "r", uint32_t, "r", uint32_t, "r", uint32_t, "r")
#define TER64(NAME, INSN) OP3(NAME, INSN, uint64_t, "l", uint64_t, "l", uint64_t, "l", uint64_t, "l")
#define UN16(NAME, INSN) OP1(NAME, INSN, uint16_t, "h", uint16_t, "h")
#define UN32(NAME, INSN) OP1(NAME, INSN, uint32_t, "r", uint32_t, "r")
#define UN64(NAME, INSN) OP1(NAME, INSN, uint64_t, "l", uint64_t, "l")

// the same form at 16, 32 and 64 bits, signed and unsigned
#define ALL_WIDTHS(MACRO, NAME, OP) \
    MACRO##16(NAME##_u16, OP ".u16") MACRO##16(NAME##_s16, OP ".s16") \
    MACRO##32(NAME##_u32, OP ".u32") MACRO##32(NAME##_s32, OP ".s32") \
    MACRO##64(NAME##_u64, OP ".u64") MACRO##64(NAME##_s64, OP ".s64")

ALL_WIDTHS(BIN, add, "add")
ALL_WIDTHS(BIN, sub, "sub")
ALL_WIDTHS(BIN, mul_lo, "mul.lo")
ALL_WIDTHS(BIN, mul_hi, "mul.hi")
ALL_WIDTHS(TER, mad_lo, "mad.lo")
ALL_WIDTHS(TER, mad_hi, "mad.hi")
ALL_WIDTHS(TER, sad, "sad")
ALL_WIDTHS(BIN, div, "div")
ALL_WIDTHS(BIN, rem, "rem")
ALL_WIDTHS(BIN, min, "min")
ALL_WIDTHS(BIN, max, "max")

BIN32(add_sat_s32, "add.sat.s32")
BIN32(sub_sat_s32, "sub.sat.s32")
TER32(mad_hi_sat_s32, "mad.hi.sat.s32")
BIN32(add_u16x2, "add.u16x2")
BIN32(add_s16x2, "add.s16x2")
BIN32(min_u16x2, "min.u16x2")
BIN32(max_u16x2, "max.u16x2")
BIN32(min_s16x2, "min.s16x2")
BIN32(max_s16x2, "max.s16x2")
BIN32(min_relu_s16x2, "min.relu.s16x2")
BIN32(max_relu_s16x2, "max.relu.s16x2")
BIN32(min_relu_s32, "min.relu.s32")
BIN32(max_relu_s32, "max.relu.s32")

OP2(mul_wide_u16, "mul.wide.u16", uint32_t, "r", uint16_t, "h", uint16_t, "h")
OP2(mul_wide_s16, "mul.wide.s16", uint32_t, "r", uint16_t, "h", uint16_t, "h")
OP2(mul_wide_u32, "mul.wide.u32", uint64_t, "l", uint32_t, "r", uint32_t, "r")
OP2(mul_wide_s32, "mul.wide.s32", uint64_t, "l", uint32_t, "r", uint32_t, "r")
OP3(mad_wide_u32, "mad.wide.u32", uint64_t, "l", uint32_t, "r", uint32_t, "r", uint64_t, "l")
OP3(mad_wide_s32, "mad.wide.s32", uint64_t, "l", uint32_t, "r", uint32_t, "r", uint64_t, "l")
OP3(mad_wide_s16, "mad.wide.s16", uint32_t, "r", uint16_t, "h", uint16_t, "h", uint32_t, "r")

BIN32(mul24_lo_u32, "mul24.lo.u32")
BIN32(mul24_lo_s32, "mul24.lo.s32")
BIN32(mul24_hi_u32, "mul24.hi.u32")
BIN32(mul24_hi_s32, "mul24.hi.s32")
TER32(mad24_lo_s32, "mad24.lo.s32")
TER32(mad24_hi_u32, "mad24.hi.u32")
TER32(mad24_hi_s32, "mad24.hi.s32")
TER32(mad24_hi_sat_s32, "mad24.hi.sat.s32")

UN16(abs_s16, "abs.s16")
UN32(abs_s32, "abs.s32")
UN64(abs_s64, "abs.s64")
UN16(neg_s16, "neg.s16")
UN32(neg_s32, "neg.s32")
UN64(neg_s64, "neg.s64")

UN32(popc_b32, "popc.b32")
OP1(popc_b64, "popc.b64", uint32_t, "r", uint64_t, "l")
UN32(clz_b32, "clz.b32")
OP1(clz_b64, "clz.b64", uint32_t, "r", uint64_t, "l")
UN32(bfind_u32, "bfind.u32")
UN32(bfind_s32, "bfind.s32")
UN32(bfind_shiftamt_s32, "bfind.shiftamt.s32")
OP1(bfind_u64, "bfind.u64", uint32_t, "r", uint64_t, "l")
OP1(bfind_shiftamt_s64, "bfind.shiftamt.s64", uint32_t, "r", uint64_t, "l")
UN32(brev_b32, "brev.b32")
UN64(brev_b64, "brev.b64")
TER32(bfe_u32, "bfe.u32")
TER32(bfe_s32, "bfe.s32")
OP3(bfe_u64, "bfe.u64", uint64_t, "l", uint64_t, "l", uint32_t, "r", uint32_t, "r")
OP3(bfe_s64, "bfe.s64", uint64_t, "l", uint64_t, "l", uint32_t, "r", uint32_t, "r")
OP4(bfi_b32, "bfi.b32", uint32_t, "r", uint32_t, "r", uint32_t, "r")
OP4(bfi_b64, "bfi.b64", uint64_t, "l", uint64_t, "l", uint32_t, "r")
BIN32(bmsk_clamp_b32, "bmsk.clamp.b32")
BIN32(bmsk_wrap_b32, "bmsk.wrap.b32")
BIN32(szext_clamp_u32, "szext.clamp.u32")
BIN32(szext_clamp_s32, "szext.clamp.s32")
BIN32(szext_wrap_u32, "szext.wrap.u32")
BIN32(szext_wrap_s32, "szext.wrap.s32")
TER32(fns_b32, "fns.b32")
TER32(dp4a_u32_u32, "dp4a.u32.u32")
TER32(dp4a_u32_s32, "dp4a.u32.s32")
TER32(dp4a_s32_u32, "dp4a.s32.u32")
TER32(dp4a_s32_s32, "dp4a.s32.s32")
TER32(dp2a_lo_u32_s32, "dp2a.lo.u32.s32")
TER32(dp2a_hi_s32_u32, "dp2a.hi.s32.u32")
TER32(dp2a_lo_s32_s32, "dp2a.lo.s32.s32")
TER32(dp2a_hi_u32_u32, "dp2a.hi.u32.u32")

BIN16(and_b16, "and.b16")
BIN32(or_b32, "or.b32")
BIN64(xor_b64, "xor.b64")
UN16(not_b16, "not.b16")
UN32(cnot_b32, "cnot.b32")
UN64(cnot_b64, "cnot.b64")
OP2(shl_b16, "shl.b16", uint16_t, "h", uint16_t, "h", uint32_t, "r")
OP2(shl_b32, "shl.b32", uint32_t, "r", uint32_t, "r", uint32_t, "r")
OP2(shl_b64, "shl.b64", uint64_t, "l", uint64_t, "l", uint32_t, "r")
OP2(shr_u16, "shr.u16", uint16_t, "h", uint16_t, "h", uint32_t, "r")
OP2(shr_s16, "shr.s16", uint16_t, "h", uint16_t, "h", uint32_t, "r")
OP2(shr_b32, "shr.b32", uint32_t, "r", uint32_t, "r", uint32_t, "r")
OP2(shr_s32, "shr.s32", uint32_t, "r", uint32_t, "r", uint32_t, "r")
OP2(shr_u64, "shr.u64", uint64_t, "l", uint64_t, "l", uint32_t, "r")
OP2(shr_s64, "shr.s64", uint64_t, "l", uint64_t, "l", uint32_t, "r")
TER32(shf_l_clamp_b32, "shf.l.clamp.b32")
TER32(shf_l_wrap_b32, "shf.l.wrap.b32")
TER32(shf_r_clamp_b32, "shf.r.clamp.b32")
TER32(shf_r_wrap_b32, "shf.r.wrap.b32")
TER32(prmt_b32, "prmt.b32")
TER32(prmt_f4e, "prmt.b32.f4e")
TER32(prmt_b4e, "prmt.b32.b4e")
TER32(prmt_rc8, "prmt.b32.rc8")
TER32(prmt_ecl, "prmt.b32.ecl")
TER32(prmt_ecr, "prmt.b32.ecr")
TER32(prmt_rc16, "prmt.b32.rc16")

// lop3 with every truth table: out[256 * i + lut] = lop3(a, b, c, lut)
template <int LO, int HI>  // the tables LO .. HI - 1, split in halves (instantiation depth 8)
__device__ __forceinline__ void lop3_range(uint32_t a, uint32_t b, uint32_t c, uint32_t* out) {
    if constexpr (HI - LO == 1) {
        uint32_t r;
        asm volatile("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"(c), "n"(LO));
        out[LO] = r;
    } else {
        lop3_range<LO, (LO + HI) / 2>(a, b, c, out);
        lop3_range<(LO + HI) / 2, HI>(a, b, c, out);
    }
}
extern "C" __global__ void lop3_every_lut(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* out,
                                          int n) {
    INDEX;
    if (i < n) lop3_range<0, 256>(a[i], b[i], c[i], out + 256 * i);
}

// lop3.BoolOp: out = d, outp = p = (d != 0) BoolOp q, q = c's bit 0
#define LOP3_BOOL(NAME, BOP, LUT)                                                                              \
    extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* out,  \
                                    uint32_t* outp, int n) {                                                   \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r, p;                                                                                      \
            asm volatile("{ .reg .pred q, p; and.b32 %1, %4, 1; setp.ne.b32 q, %1, 0; lop3." BOP ".b32 %0|p, " \
                         "%2, %3, %4, " #LUT ", q; selp.u32 %1, 1, 0, p; }"                                     \
                         : "=r"(r), "=r"(p) : "r"(a[i]), "r"(b[i]), "r"(c[i]));                                 \
            out[i] = r;                                                                                         \
            outp[i] = p;                                                                                        \
        }                                                                                                       \
    }
LOP3_BOOL(lop3_or_b32, "or", 0x3c)
LOP3_BOOL(lop3_and_b32, "and", 0xe8)

// setp.CMP{.BOP}.T p|q, a, b{, !c}: out = p | q << 1 (c: bit 0 of the third operand)
#define SETP(NAME, T, C, INSN)                                                                                 \
    extern "C" __global__ void NAME(const T* a, const T* b, const uint32_t* c, uint32_t* out, int n) {       \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r, t;                                                                                      \
            asm volatile("{ .reg .pred p, q, cc; and.b32 %1, %4, 1; setp.ne.b32 cc, %1, 0; " INSN             \
                         " p|q, %2, %3, !cc; selp.u32 %0, 1, 0, p; selp.u32 %1, 2, 0, q; or.b32 %0, %0, %1; }" \
                         : "=r"(r), "=r"(t) : C(a[i]), C(b[i]), "r"(c[i]));                                     \
            out[i] = r + 0 * t;                                                                                 \
        }                                                                                                       \
    }
#define SETP_PLAIN(NAME, T, C, INSN)                                                                           \
    extern "C" __global__ void NAME(const T* a, const T* b, uint32_t* out, int n) {                          \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            uint32_t r, t;                                                                                      \
            asm volatile("{ .reg .pred p, q; " INSN " p|q, %2, %3; selp.u32 %0, 1, 0, p; selp.u32 %1, 2, 0, q; " \
                         "or.b32 %0, %0, %1; }"                                                                 \
                         : "=r"(r), "=r"(t) : C(a[i]), C(b[i]));                                                 \
            out[i] = r + 0 * t;                                                                                         \
        }                                                                                                       \
    }
SETP_PLAIN(setp_lt_s32, uint32_t, "r", "setp.lt.s32")
SETP_PLAIN(setp_ge_s32, uint32_t, "r", "setp.ge.s32")
SETP_PLAIN(setp_lo_u32, uint32_t, "r", "setp.lo.u32")
SETP_PLAIN(setp_hs_u32, uint32_t, "r", "setp.hs.u32")
SETP_PLAIN(setp_le_u16, uint16_t, "h", "setp.le.u16")
SETP_PLAIN(setp_gt_s16, uint16_t, "h", "setp.gt.s16")
SETP_PLAIN(setp_ne_b64, uint64_t, "l", "setp.ne.b64")
SETP_PLAIN(setp_lt_s64, uint64_t, "l", "setp.lt.s64")
SETP_PLAIN(setp_hi_u64, uint64_t, "l", "setp.hi.u64")
SETP(setp_eq_and_b32, uint32_t, "r", "setp.eq.and.b32")
SETP(setp_lt_or_s32, uint32_t, "r", "setp.lt.or.s32")
SETP(setp_ls_xor_u64, uint64_t, "l", "setp.ls.xor.u64")
OP2(set_lt_u32_s32, "set.lt.u32.s32", uint32_t, "r", uint32_t, "r", uint32_t, "r")
OP2(set_hi_s32_u64, "set.hi.s32.u64", uint32_t, "r", uint64_t, "l", uint64_t, "l")
TER32(slct_b32_s32, "slct.b32.s32")
TER32(slct_b32_f32, "slct.b32.f32")
TER32(slct_ftz_b32_f32, "slct.ftz.b32.f32")

// carry chains: a 3-word add (add.cc, addc.cc, addc), a 3-word subtract, and mad.lo.cc + madc.hi, out[8 i + k]
#define CARRY(NAME, T, C, W)                                                                                   \
    extern "C" __global__ void NAME(const T* a, const T* b, const T* c, const T* e, T* out, int n) {         \
        INDEX;                                                                                                  \
        if (i < n) {                                                                                            \
            T* o = out + 8 * i;                                                                                 \
            asm volatile("add.cc.u" #W " %0, %3, %4; addc.cc.u" #W " %1, %4, %5; addc.u" #W " %2, %5, %3;"     \
                         : "=" C(o[0]), "=" C(o[1]), "=" C(o[2]) : C(a[i]), C(b[i]), C(c[i]));                  \
            asm volatile("sub.cc.u" #W " %0, %3, %4; subc.cc.u" #W " %1, %4, %5; subc.u" #W " %2, %5, %3;"     \
                         : "=" C(o[3]), "=" C(o[4]), "=" C(o[5]) : C(a[i]), C(b[i]), C(c[i]));                  \
            asm volatile("mad.lo.cc.u" #W " %0, %2, %3, %4; madc.hi.u" #W " %1, %2, %3, %5;"                    \
                         : "=" C(o[6]), "=" C(o[7]) : C(a[i]), C(b[i]), C(c[i]), C(e[i]));                      \
        }                                                                                                       \
    }
CARRY(carry_u32, uint32_t, "r", 32)
CARRY(carry_u64, uint64_t, "l", 64)
