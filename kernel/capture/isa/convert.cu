// Silicon probes of PTX cvt (flashsim.ptx.probes.convert): each thread converts its operand(s) with one cvt
// form, written as inline PTX so that its modifiers are exactly the ones named.
typedef unsigned short uint16_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

#define CVT_IMPL(NAME, DT, DC, ST, SC, INSN)                                                                         \
    extern "C" __global__ void NAME(const ST* a, DT* out, int n) {                                            \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
        if (i < n) {                                                                                            \
            DT r;                                                                                               \
            asm(INSN " %0, %1;" : "=" DC(r) : SC(a[i]));                                                        \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// two f32 sources packed into one destination (a -> the upper half)
#define PACK_IMPL(NAME, DT, DC, INSN)                                                                                \
    extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, DT* out, int n) {                   \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
        if (i < n) {                                                                                            \
            DT r;                                                                                               \
            asm(INSN " %0, %1, %2;" : "=" DC(r) : "r"(a[i]), "r"(b[i]));                                       \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }
// CVT / PACK take the destination and source as R16 / R32 / R64 (a type and its asm constraint); the extra level
// expands those before the implementation counts its arguments
#define CVT(NAME, D, S, INSN) CVT_IMPL(NAME, D, S, INSN)
#define PACK(NAME, D, INSN) PACK_IMPL(NAME, D, INSN)
#define R16 uint16_t, "h"
#define R32 uint32_t, "r"
#define R64 uint64_t, "l"

// integer <-> integer (narrow types live in 16- or 32-bit registers: sign- or zero-extended there)
CVT(cvt_u8_u32, R32, R32, "cvt.u8.u32")
CVT(cvt_s8_s32, R32, R32, "cvt.s8.s32")
CVT(cvt_sat_s8_s32, R32, R32, "cvt.sat.s8.s32")
CVT(cvt_sat_u8_s32, R32, R32, "cvt.sat.u8.s32")
CVT(cvt_sat_u16_s32, R32, R32, "cvt.sat.u16.s32")
CVT(cvt_sat_s16_u32, R32, R32, "cvt.sat.s16.u32")
CVT(cvt_s32_s16, R32, R16, "cvt.s32.s16")
CVT(cvt_u32_u16, R32, R16, "cvt.u32.u16")
CVT(cvt_s64_s32, R64, R32, "cvt.s64.s32")
CVT(cvt_u64_u32, R64, R32, "cvt.u64.u32")
CVT(cvt_u32_u64, R32, R64, "cvt.u32.u64")
CVT(cvt_sat_s32_s64, R32, R64, "cvt.sat.s32.s64")
CVT(cvt_sat_u32_s64, R32, R64, "cvt.sat.u32.s64")
CVT(cvt_sat_s32_u64, R32, R64, "cvt.sat.s32.u64")
CVT(cvt_sat_u64_s64, R64, R64, "cvt.sat.u64.s64")
CVT(cvt_sat_s64_u64, R64, R64, "cvt.sat.s64.u64")

// integer -> float
CVT(cvt_rn_f32_s32, R32, R32, "cvt.rn.f32.s32")
CVT(cvt_rz_f32_s32, R32, R32, "cvt.rz.f32.s32")
CVT(cvt_rm_f32_s32, R32, R32, "cvt.rm.f32.s32")
CVT(cvt_rp_f32_s32, R32, R32, "cvt.rp.f32.s32")
CVT(cvt_rn_f32_u32, R32, R32, "cvt.rn.f32.u32")
CVT(cvt_rn_sat_f32_s32, R32, R32, "cvt.rn.sat.f32.s32")
CVT(cvt_rz_f32_u64, R32, R64, "cvt.rz.f32.u64")
CVT(cvt_rm_f32_s64, R32, R64, "cvt.rm.f32.s64")
CVT(cvt_rn_f64_s64, R64, R64, "cvt.rn.f64.s64")
CVT(cvt_rp_f64_u64, R64, R64, "cvt.rp.f64.u64")
CVT(cvt_rn_f64_s32, R64, R32, "cvt.rn.f64.s32")
CVT(cvt_rn_f16_s32, R16, R32, "cvt.rn.f16.s32")
CVT(cvt_rz_f16_u32, R16, R32, "cvt.rz.f16.u32")
CVT(cvt_rn_bf16_s32, R16, R32, "cvt.rn.bf16.s32")
CVT(cvt_rm_bf16_u64, R16, R64, "cvt.rm.bf16.u64")

// float -> integer
CVT(cvt_rni_s32_f32, R32, R32, "cvt.rni.s32.f32")
CVT(cvt_rzi_s32_f32, R32, R32, "cvt.rzi.s32.f32")
CVT(cvt_rmi_s32_f32, R32, R32, "cvt.rmi.s32.f32")
CVT(cvt_rpi_s32_f32, R32, R32, "cvt.rpi.s32.f32")
CVT(cvt_rni_u32_f32, R32, R32, "cvt.rni.u32.f32")
CVT(cvt_rzi_ftz_s32_f32, R32, R32, "cvt.rzi.ftz.s32.f32")
CVT(cvt_rpi_u8_f32, R32, R32, "cvt.rpi.u8.f32")
CVT(cvt_rmi_s16_f32, R32, R32, "cvt.rmi.s16.f32")
CVT(cvt_rzi_u64_f32, R64, R32, "cvt.rzi.u64.f32")
CVT(cvt_rni_s64_f32, R64, R32, "cvt.rni.s64.f32")
CVT(cvt_rzi_s64_f64, R64, R64, "cvt.rzi.s64.f64")
CVT(cvt_rni_u64_f64, R64, R64, "cvt.rni.u64.f64")
CVT(cvt_rmi_s32_f64, R32, R64, "cvt.rmi.s32.f64")
CVT(cvt_rni_s32_f16, R32, R16, "cvt.rni.s32.f16")
CVT(cvt_rzi_u16_f16, R16, R16, "cvt.rzi.u16.f16")
CVT(cvt_rni_s32_bf16, R32, R16, "cvt.rni.s32.bf16")

// float -> float
CVT(cvt_rn_f16_f32, R16, R32, "cvt.rn.f16.f32")
CVT(cvt_rz_f16_f32, R16, R32, "cvt.rz.f16.f32")
CVT(cvt_rm_f16_f32, R16, R32, "cvt.rm.f16.f32")
CVT(cvt_rp_f16_f32, R16, R32, "cvt.rp.f16.f32")
CVT(cvt_rn_ftz_f16_f32, R16, R32, "cvt.rn.ftz.f16.f32")
CVT(cvt_rn_relu_f16_f32, R16, R32, "cvt.rn.relu.f16.f32")
CVT(cvt_rn_satfinite_f16_f32, R16, R32, "cvt.rn.satfinite.f16.f32")
CVT(cvt_rn_bf16_f32, R16, R32, "cvt.rn.bf16.f32")
CVT(cvt_rz_bf16_f32, R16, R32, "cvt.rz.bf16.f32")
CVT(cvt_rm_bf16_f32, R16, R32, "cvt.rm.bf16.f32")
CVT(cvt_rp_bf16_f32, R16, R32, "cvt.rp.bf16.f32")
CVT(cvt_rz_relu_satfinite_bf16_f32, R16, R32, "cvt.rz.relu.satfinite.bf16.f32")
CVT(cvt_rn_f32_f64, R32, R64, "cvt.rn.f32.f64")
CVT(cvt_rz_f32_f64, R32, R64, "cvt.rz.f32.f64")
CVT(cvt_rm_f32_f64, R32, R64, "cvt.rm.f32.f64")
CVT(cvt_rp_f32_f64, R32, R64, "cvt.rp.f32.f64")
CVT(cvt_rn_ftz_f32_f64, R32, R64, "cvt.rn.ftz.f32.f64")
CVT(cvt_rn_f16_f64, R16, R64, "cvt.rn.f16.f64")
CVT(cvt_rz_bf16_f64, R16, R64, "cvt.rz.bf16.f64")
CVT(cvt_rn_bf16_f16, R16, R16, "cvt.rn.bf16.f16")
CVT(cvt_rz_f16_bf16, R16, R16, "cvt.rz.f16.bf16")
CVT(cvt_f16_bf16, R16, R16, "cvt.f16.bf16")
CVT(cvt_f32_f16, R32, R16, "cvt.f32.f16")
CVT(cvt_sat_f32_f16, R32, R16, "cvt.sat.f32.f16")
CVT(cvt_f32_bf16, R32, R16, "cvt.f32.bf16")
CVT(cvt_f64_f32, R64, R32, "cvt.f64.f32")
CVT(cvt_ftz_f64_f32, R64, R32, "cvt.ftz.f64.f32")
CVT(cvt_f64_f16, R64, R16, "cvt.f64.f16")
CVT(cvt_f64_bf16, R64, R16, "cvt.f64.bf16")
CVT(cvt_f32_f32, R32, R32, "cvt.f32.f32")
CVT(cvt_ftz_f32_f32, R32, R32, "cvt.ftz.f32.f32")
CVT(cvt_sat_f32_f32, R32, R32, "cvt.sat.f32.f32")
CVT(cvt_rni_f32_f32, R32, R32, "cvt.rni.f32.f32")
CVT(cvt_rzi_f32_f32, R32, R32, "cvt.rzi.f32.f32")
CVT(cvt_rmi_f32_f32, R32, R32, "cvt.rmi.f32.f32")
CVT(cvt_rpi_f32_f32, R32, R32, "cvt.rpi.f32.f32")
CVT(cvt_rni_ftz_f32_f32, R32, R32, "cvt.rni.ftz.f32.f32")
CVT(cvt_rni_f64_f64, R64, R64, "cvt.rni.f64.f64")
CVT(cvt_rzi_f16_f16, R16, R16, "cvt.rzi.f16.f16")
CVT(cvt_rmi_bf16_bf16, R16, R16, "cvt.rmi.bf16.bf16")

// tf32
CVT(cvt_rna_tf32_f32, R32, R32, "cvt.rna.tf32.f32")
CVT(cvt_rna_satfinite_tf32_f32, R32, R32, "cvt.rna.satfinite.tf32.f32")
CVT(cvt_rn_tf32_f32, R32, R32, "cvt.rn.tf32.f32")
CVT(cvt_rz_tf32_f32, R32, R32, "cvt.rz.tf32.f32")
CVT(cvt_rn_relu_tf32_f32, R32, R32, "cvt.rn.relu.tf32.f32")

// packs and unpacks
PACK(cvt_rn_f16x2_f32, R32, "cvt.rn.f16x2.f32")
PACK(cvt_rz_f16x2_f32, R32, "cvt.rz.f16x2.f32")
PACK(cvt_rn_relu_f16x2_f32, R32, "cvt.rn.relu.f16x2.f32")
PACK(cvt_rn_satfinite_f16x2_f32, R32, "cvt.rn.satfinite.f16x2.f32")
PACK(cvt_rn_bf16x2_f32, R32, "cvt.rn.bf16x2.f32")
PACK(cvt_rz_relu_satfinite_bf16x2_f32, R32, "cvt.rz.relu.satfinite.bf16x2.f32")
PACK(cvt_rn_satfinite_e4m3x2_f32, R16, "cvt.rn.satfinite.e4m3x2.f32")
PACK(cvt_rn_satfinite_relu_e4m3x2_f32, R16, "cvt.rn.satfinite.relu.e4m3x2.f32")
PACK(cvt_rn_satfinite_e5m2x2_f32, R16, "cvt.rn.satfinite.e5m2x2.f32")
CVT(cvt_rn_satfinite_e4m3x2_f16x2, R16, R32, "cvt.rn.satfinite.e4m3x2.f16x2")
CVT(cvt_rn_satfinite_relu_e5m2x2_f16x2, R16, R32, "cvt.rn.satfinite.relu.e5m2x2.f16x2")
CVT(cvt_rn_f16x2_e4m3x2, R32, R16, "cvt.rn.f16x2.e4m3x2")
CVT(cvt_rn_f16x2_e5m2x2, R32, R16, "cvt.rn.f16x2.e5m2x2")
CVT(cvt_rn_relu_f16x2_e4m3x2, R32, R16, "cvt.rn.relu.f16x2.e4m3x2")
