// Silicon probes of the SFU's approximate instructions (flashsim.ptx.probes.sfu): each thread applies one
// instruction, written as inline PTX so that its modifiers are exactly the ones named, to its operand.
typedef unsigned int uint32_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand
typedef unsigned short uint16_t;

#define UNARY_32(NAME, INSN)                                                                  \
    extern "C" __global__ void NAME(const uint32_t* a, uint32_t* out, int n) {               \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                        \
        if (i < n) {                                                                          \
            uint32_t r;                                                                       \
            asm(INSN " %0, %1;" : "=r"(r) : "r"(a[i]));                                       \
            out[i] = r;                                                                       \
        }                                                                                     \
    }
#define UNARY_16(NAME, INSN)                                                                  \
    extern "C" __global__ void NAME(const uint16_t* a, uint16_t* out, int n) {               \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                        \
        if (i < n) {                                                                          \
            uint16_t r;                                                                       \
            asm(INSN " %0, %1;" : "=h"(r) : "h"(a[i]));                                       \
            out[i] = r;                                                                       \
        }                                                                                     \
    }

UNARY_32(ex2_approx_ftz_f32, "ex2.approx.ftz.f32")
UNARY_32(ex2_approx_f32, "ex2.approx.f32")
UNARY_32(rcp_approx_ftz_f32, "rcp.approx.ftz.f32")
UNARY_32(rcp_approx_f32, "rcp.approx.f32")
UNARY_32(rsqrt_approx_ftz_f32, "rsqrt.approx.ftz.f32")
UNARY_32(rsqrt_approx_f32, "rsqrt.approx.f32")
UNARY_32(sqrt_approx_ftz_f32, "sqrt.approx.ftz.f32")
UNARY_32(sqrt_approx_f32, "sqrt.approx.f32")
UNARY_32(lg2_approx_ftz_f32, "lg2.approx.ftz.f32")
UNARY_32(lg2_approx_f32, "lg2.approx.f32")
UNARY_32(sin_approx_ftz_f32, "sin.approx.ftz.f32")
UNARY_32(sin_approx_f32, "sin.approx.f32")
UNARY_32(cos_approx_ftz_f32, "cos.approx.ftz.f32")
UNARY_32(cos_approx_f32, "cos.approx.f32")
UNARY_16(ex2_approx_f16, "ex2.approx.f16")
UNARY_16(ex2_approx_ftz_bf16, "ex2.approx.ftz.bf16")
UNARY_16(tanh_approx_f16, "tanh.approx.f16")
UNARY_16(tanh_approx_bf16, "tanh.approx.bf16")
UNARY_32(ex2_approx_f16x2, "ex2.approx.f16x2")
UNARY_32(ex2_approx_ftz_bf16x2, "ex2.approx.ftz.bf16x2")
UNARY_32(tanh_approx_f16x2, "tanh.approx.f16x2")
UNARY_32(tanh_approx_bf16x2, "tanh.approx.bf16x2")
