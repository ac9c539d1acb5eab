// Silicon probes of PTX floating-point arithmetic (flashsim.ptx.probes.floating): each thread applies one
// instruction, written as inline PTX so that its modifiers are exactly the ones named, to its operands.
typedef unsigned int uint32_t;  // NVRTC ships no C++ standard headers: the fixed-width types by hand

#define BINARY_F32(NAME, INSN)                                                                                  \
    extern "C" __global__ void NAME(const uint32_t* a, const uint32_t* b, uint32_t* out, int n) {             \
        int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
        if (i < n) {                                                                                            \
            uint32_t r;                                                                                         \
            asm(INSN " %0, %1, %2;" : "=r"(r) : "r"(a[i]), "r"(b[i]));                                       \
            out[i] = r;                                                                                         \
        }                                                                                                       \
    }

BINARY_F32(add_rn_f32, "add.rn.f32")
BINARY_F32(mul_rn_f32, "mul.rn.f32")
BINARY_F32(add_rn_ftz_f32, "add.rn.ftz.f32")

extern "C" __global__ void fma_rn_f32(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* out,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t r;
        asm("fma.rn.f32 %0, %1, %2, %3;" : "=r"(r) : "r"(a[i]), "r"(b[i]), "r"(c[i]));
        out[i] = r;
    }
}
