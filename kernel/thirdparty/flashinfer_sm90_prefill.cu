// FlashInfer's Hopper single-sequence prefill (flashinfer-python 0.7.4, include/flashinfer/attention/hopper/: the
// FlashAttention-3-derived kernel, warp-specialised with wgmma, TMA, transaction-count mbarriers and setmaxnreg),
// run from FlashInfer's own host code, for the PTX simulator's third-party check (tests/thirdparty/flashinfer_prefill.py).
//
// This unit only states what FlashInfer's JIT generates for a single prefill with the "fa3" backend and no extras
// (csrc/single_prefill_sm90_customize_config.jinja and single_prefill_sm90_kernel_inst.jinja, rendered as
// flashinfer/jit/attention/modules.py renders them: additional tensor maybe_scale_v, scalars logits_soft_cap,
// sm_scale and scale_v_scalar, variant DefaultAttention<false>), and calls the instantiated
// SinglePrefillWithKVCacheDispatched, which builds the kernel's parameters (its TMA maps through CuTe's make_tma_copy)
// and launches it. The instance is chosen at build time:
//   -DFLASHSIM_HEAD_DIM=64|128, -DFLASHSIM_CAUSAL=0|1, -DFLASHSIM_HALF=0|1 (bf16, or f16, for Q, K, V and O).
//
// The launch goes through cudaLaunchKernel; this unit names four runtime calls to its own wrappers before including
// prefill_sm90.cuh (macros, so FlashInfer's text is untouched):
//   cudaLaunchKernel        writes the launch (grid, block, dynamic shared memory) and each argument's bytes (their
//                           sizes from $FLASHSIM_PARAM_SIZES, the PTX entry's parameter sizes) to
//                           $FLASHSIM_LAUNCH_JSON, then launches unless describing;
//   cudaFuncSetAttribute    passed through, or nothing while describing;
//   cudaGetDevice, cudaDeviceGetAttribute   device 0 and 132 SMs while describing (the scheduler of a single
//                           prefill sizes its grid by the problem alone; the count is the H100 SXM's and the H200's).
// Describing ($FLASHSIM_HARNESS_MODE=describe) needs no GPU: with flashsim.ptx.hostshim's cuTensorMapEncodeTiled
// linked in (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL), the maps are tags flashsim replaces.
//
//     flashinfer_sm90_prefill describe QO_LEN KV_LEN HEADS Q K V O LSE   (device addresses, hex)
//     flashinfer_sm90_prefill run QO_LEN KV_LEN HEADS FOLDER             (a GPU: Q.bin K.bin V.bin in, O.bin LSE.bin out)
// Q, K, V, O are NHD (sequence, head, head_dim) contiguous; LSE is (sequence, head) f32; sm_scale = 1/sqrt(head_dim).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace flashsim {

static void *pointers[5];  // Q, K, V, O, LSE as the host code was given them (the launch JSON says them)

static bool describing() {
    char const *mode = std::getenv("FLASHSIM_HARNESS_MODE");
    return mode && std::strcmp(mode, "describe") == 0;
}

static cudaError_t launch(void const *func, dim3 grid, dim3 block, void **args, size_t shared, cudaStream_t stream) {
    char const *path = std::getenv("FLASHSIM_LAUNCH_JSON");
    char const *sizes = std::getenv("FLASHSIM_PARAM_SIZES");
    if (!path || !sizes) {
        std::fprintf(stderr, "FLASHSIM_LAUNCH_JSON and FLASHSIM_PARAM_SIZES must be set\n");
        std::exit(2);
    }
    FILE *f = std::fopen(path, "w");
    if (!f) {
        std::perror(path);
        std::exit(2);
    }
    std::fprintf(f, "{\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"cluster\": [1, 1, 1], ", grid.x, grid.y,
                 grid.z, block.x, block.y, block.z);
    std::fprintf(f, "\"pointers\": [");
    for (int i = 0; i < 5; ++i) std::fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)(uintptr_t)pointers[i]);
    std::fprintf(f, "], \"shared_bytes\": %zu, \"params\": [", shared);
    char const *p = sizes;
    for (int i = 0; *p; ++i) {
        char *end;
        unsigned long size = std::strtoul(p, &end, 10);
        std::fprintf(f, "%s\"", i ? ", " : "");
        unsigned char const *raw = static_cast<unsigned char const *>(args[i]);
        for (unsigned long j = 0; j < size; ++j) std::fprintf(f, "%02x", raw[j]);
        std::fprintf(f, "\"");
        p = *end == ',' ? end + 1 : end;
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
    return describing() ? cudaSuccess : ::cudaLaunchKernel(func, grid, block, args, shared, stream);
}

static cudaError_t func_set_attribute(void const *func, cudaFuncAttribute attr, int value) {
    return describing() ? cudaSuccess : ::cudaFuncSetAttribute(func, attr, value);
}

static cudaError_t get_device(int *device) {
    if (!describing()) return ::cudaGetDevice(device);
    *device = 0;
    return cudaSuccess;
}

static cudaError_t device_get_attribute(int *value, cudaDeviceAttr attr, int device) {
    if (!describing()) return ::cudaDeviceGetAttribute(value, attr, device);
    if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
    *value = 132;
    return cudaSuccess;
}

}  // namespace flashsim

// What the JIT's single_prefill_sm90_config.inc holds for this instance (customize_config.jinja rendered).
#include <flashinfer/attention/hopper/attention_updater.cuh>
#include <flashinfer/attention/hopper/variant_helper.cuh>
#include <flashinfer/cutlass_utils.cuh>
#include <flashinfer/layout.cuh>
#include <flashinfer/math.cuh>
#include <flashinfer/pos_enc.cuh>
#include <flashinfer/utils.cuh>

using namespace flashinfer;

#if FLASHSIM_HALF
using DTypeQ = cutlass_dtype_t<half>;
using DTypeKV = cutlass_dtype_t<half>;
using DTypeO = cutlass_dtype_t<half>;
#else
using DTypeQ = cutlass_dtype_t<nv_bfloat16>;
using DTypeKV = cutlass_dtype_t<nv_bfloat16>;
using DTypeO = cutlass_dtype_t<nv_bfloat16>;
#endif
using IdType = cutlass_dtype_t<int32_t>;

constexpr int HEAD_DIM_QK = FLASHSIM_HEAD_DIM;
constexpr int HEAD_DIM_VO = FLASHSIM_HEAD_DIM;
constexpr auto USE_LOGITS_SOFT_CAP = false;
constexpr auto USE_SLIDING_WINDOW = false;

struct Params {
    using DTypeQ = ::DTypeQ;
    using DTypeKV = ::DTypeKV;
    using DTypeO = ::DTypeO;
    using IdType = ::IdType;

    DTypeQ *q_ptr;
    DTypeKV *k_ptr;
    DTypeKV *v_ptr;
    DTypeO *o_ptr;
    float *lse_ptr;

    struct AdditionalParams {
        float *maybe_scale_v;
        double logits_soft_cap;
        double sm_scale;
        double scale_v_scalar;
    } additional_params;

    int64_t q_stride_n;
    int64_t k_stride_n;
    int64_t v_stride_n;
    int64_t o_stride_n;
    int64_t q_stride_h;
    int64_t k_stride_h;
    int64_t v_stride_h;
    int64_t o_stride_h;

    int qo_len;
    int kv_len;
    int head_dim;
    int num_qo_heads;
    int num_kv_heads;
    int group_size;
    int window_left;

    bool causal;
};

#include <flashinfer/attention/hopper/variants.cuh>

#define cudaLaunchKernel flashsim::launch
#define cudaFuncSetAttribute flashsim::func_set_attribute
#define cudaGetDevice flashsim::get_device
#define cudaDeviceGetAttribute flashsim::device_get_attribute
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#undef cudaLaunchKernel
#undef cudaFuncSetAttribute
#undef cudaGetDevice
#undef cudaDeviceGetAttribute

constexpr MaskMode kMaskMode = FLASHSIM_CAUSAL ? MaskMode::kCausal : MaskMode::kNone;
using Variant = DefaultAttention<USE_LOGITS_SOFT_CAP>;

// What single_prefill_with_kv_cache_sm90 (csrc/single_prefill_sm90.cu) sets for contiguous NHD tensors, one KV head
// per query head, no LSE scale tensor, no window.
static int prefill(int qo_len, int kv_len, int heads, void *q, void *k, void *v, void *o, void *lse) {
    void *given[5] = {q, k, v, o, lse};
    std::memcpy(flashsim::pointers, given, sizeof(given));
    Params params;
    std::memset(&params, 0, sizeof(params));
    params.q_ptr = static_cast<DTypeQ *>(q);
    params.k_ptr = static_cast<DTypeKV *>(k);
    params.v_ptr = static_cast<DTypeKV *>(v);
    params.o_ptr = static_cast<DTypeO *>(o);
    params.lse_ptr = static_cast<float *>(lse);
    params.q_stride_n = params.k_stride_n = params.v_stride_n = params.o_stride_n = int64_t(heads) * HEAD_DIM_QK;
    params.q_stride_h = params.k_stride_h = params.v_stride_h = params.o_stride_h = HEAD_DIM_QK;
    params.qo_len = qo_len;
    params.kv_len = kv_len;
    params.num_qo_heads = heads;
    params.num_kv_heads = heads;
    params.causal = kMaskMode == MaskMode::kCausal;
    params.group_size = 1;
    params.window_left = -1;
    params.additional_params.maybe_scale_v = nullptr;
    params.additional_params.logits_soft_cap = 0.0;
    params.additional_params.sm_scale = 1.0 / std::sqrt(double(HEAD_DIM_QK));
    params.additional_params.scale_v_scalar = 1.0;
    cudaError_t status =
        SinglePrefillWithKVCacheDispatched<HEAD_DIM_QK, HEAD_DIM_VO, kMaskMode, USE_SLIDING_WINDOW, Variant>(params,
                                                                                                          nullptr);
    if (!flashsim::describing() && status != cudaSuccess) {
        std::fprintf(stderr, "SinglePrefillWithKVCacheDispatched: %s\n", cudaGetErrorString(status));
        return 3;
    }
    return 0;
}

static std::vector<char> read_file(std::string const &path, size_t bytes) {
    std::vector<char> data(bytes);
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f || std::fread(data.data(), 1, bytes, f) != bytes) {
        std::fprintf(stderr, "%s: cannot read %zu bytes\n", path.c_str(), bytes);
        std::exit(2);
    }
    std::fclose(f);
    return data;
}

static int run(int qo_len, int kv_len, int heads, std::string const &folder) {
    size_t row = size_t(heads) * HEAD_DIM_QK * sizeof(DTypeQ);
    size_t bytes[5] = {qo_len * row, kv_len * row, kv_len * row, qo_len * row, size_t(qo_len) * heads * sizeof(float)};
    char const *names[5] = {"/Q.bin", "/K.bin", "/V.bin", "/O.bin", "/LSE.bin"};
    void *d[5];
    for (int i = 0; i < 5; ++i) {
        cudaError_t err = cudaMalloc(&d[i], bytes[i]);
        if (err == cudaSuccess && i < 3)
            err = cudaMemcpy(d[i], read_file(folder + names[i], bytes[i]).data(), bytes[i], cudaMemcpyHostToDevice);
        else if (err == cudaSuccess)
            err = cudaMemset(d[i], 0, bytes[i]);
        if (err != cudaSuccess) {
            std::fprintf(stderr, "%s: %s\n", names[i] + 1, cudaGetErrorString(err));
            return 3;
        }
    }
    if (int rc = prefill(qo_len, kv_len, heads, d[0], d[1], d[2], d[3], d[4])) return rc;
    if (cudaError_t err = cudaDeviceSynchronize()) {
        std::fprintf(stderr, "the prefill: %s\n", cudaGetErrorString(err));
        return 3;
    }
    for (int i = 3; i < 5; ++i) {
        std::vector<char> out(bytes[i]);
        if (cudaError_t err = cudaMemcpy(out.data(), d[i], bytes[i], cudaMemcpyDeviceToHost)) {
            std::fprintf(stderr, "%s: %s\n", names[i] + 1, cudaGetErrorString(err));
            return 3;
        }
        FILE *f = std::fopen((folder + names[i]).c_str(), "wb");
        if (!f || std::fwrite(out.data(), 1, bytes[i], f) != bytes[i]) {
            std::fprintf(stderr, "cannot write %s%s\n", folder.c_str(), names[i]);
            return 2;
        }
        std::fclose(f);
    }
    return 0;
}

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "describe" && argc == 10) {
        setenv("FLASHSIM_HARNESS_MODE", "describe", 1);
        void *p[5];
        for (int i = 0; i < 5; ++i) p[i] = reinterpret_cast<void *>(std::strtoull(argv[5 + i], nullptr, 16));
        return prefill(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), p[0], p[1], p[2], p[3], p[4]);
    }
    if (mode == "run" && argc == 6) return run(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
    std::fprintf(stderr, "usage: %s describe QO_LEN KV_LEN HEADS Q K V O LSE | run QO_LEN KV_LEN HEADS FOLDER\n",
                 argv[0]);
    return 1;
}
