// CuTe's Hopper tutorial GEMM (CUTLASS 4.2, examples/cute/tutorial/hopper/wgmma_tma_sm90.cu, included from the
// pinned nvidia-cutlass wheel, not copied) run from its own host code, for the PTX simulator's third-party check
// (tests/thirdparty/cute_tutorial.py): gemm_tn, the tutorial's TN GEMM (fp16 A and B, K-major; fp16 C; 128 x 128 x 64
// tiles, a 3-stage TMA + mbarrier pipeline, SM90_64x64x16_F16F16F16_SS wgmma, 2 x 1 x 1 clusters).
//
// The tutorial launches through cutlass::launch_kernel_on_cluster (cudaLaunchKernelExC with one pointer per kernel
// argument). This unit names three runtime calls to its own wrappers before including the tutorial (macros, so the
// tutorial's text is untouched), and the tutorial's main becomes an uninstantiated template (so its two GEMMs are not
// instantiated: the PTX holds the one kernel this program launches):
//   cudaLaunchKernelExC  writes the launch (grid, block, cluster, dynamic shared memory) and each argument's bytes
//                        (their sizes from $FLASHSIM_PARAM_SIZES: the PTX entry's parameter sizes, which the caller
//                        reads from the PTX) to $FLASHSIM_LAUNCH_JSON, then launches unless describing;
//   cudaFuncSetAttribute, CUTE_CHECK_LAST: passed through, or nothing while describing.
// Describing ($FLASHSIM_HARNESS_MODE=describe) needs no GPU: with flashsim.ptx.hostshim's cuTensorMapEncodeTiled
// linked in (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL), the maps are tags flashsim replaces.
//
//     cute_wgmma_tma_tutorial describe M N K A B C               (A, B, C: device addresses, hex)
//     cute_wgmma_tma_tutorial run M N K FOLDER                   (a GPU: A.bin, B.bin, C.bin in, C.bin out)
// alpha = 1 and beta = 0.5 (fp16), as this unit passes them.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace flashsim {

static bool describing() {
    char const *mode = std::getenv("FLASHSIM_HARNESS_MODE");
    return mode && std::strcmp(mode, "describe") == 0;
}

static cudaError_t launch_ex(cudaLaunchConfig_t const *config, void const *func, void **args) {
    char const *path = std::getenv("FLASHSIM_LAUNCH_JSON");
    char const *sizes = std::getenv("FLASHSIM_PARAM_SIZES");
    if (!path || !sizes) {
        std::fprintf(stderr, "FLASHSIM_LAUNCH_JSON and FLASHSIM_PARAM_SIZES must be set\n");
        std::exit(2);
    }
    unsigned cluster[3] = {1, 1, 1};
    for (unsigned i = 0; i < config->numAttrs; ++i)
        if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
            cluster[0] = config->attrs[i].val.clusterDim.x;
            cluster[1] = config->attrs[i].val.clusterDim.y;
            cluster[2] = config->attrs[i].val.clusterDim.z;
        }
    FILE *f = std::fopen(path, "w");
    if (!f) {
        std::perror(path);
        std::exit(2);
    }
    std::fprintf(f, "{\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"cluster\": [%u, %u, %u], ",
                 config->gridDim.x, config->gridDim.y, config->gridDim.z, config->blockDim.x, config->blockDim.y,
                 config->blockDim.z, cluster[0], cluster[1], cluster[2]);
    std::fprintf(f, "\"shared_bytes\": %zu, \"params\": [", config->dynamicSmemBytes);
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
    return describing() ? cudaSuccess : ::cudaLaunchKernelExC(config, func, args);
}

template <class T>
static cudaError_t func_set_attribute(T *func, cudaFuncAttribute attr, int value) {
    return describing() ? cudaSuccess : ::cudaFuncSetAttribute(func, attr, value);
}

static void check_last() {
    if (describing()) return;
    for (cudaError_t err : {cudaPeekAtLastError(), cudaDeviceSynchronize()})
        if (err != cudaSuccess) {
            std::fprintf(stderr, "the tutorial's GEMM: %s\n", cudaGetErrorString(err));
            std::exit(3);
        }
}

}  // namespace flashsim

#define cudaLaunchKernelExC flashsim::launch_ex
#define cudaFuncSetAttribute flashsim::func_set_attribute
#define CUTE_CHECK_LAST() flashsim::check_last()
#define main cute_tutorial_main_declared(); template <class FlashsimUnused = void> int cute_tutorial_main
#include "wgmma_tma_sm90.cu"
#undef main
#undef cudaLaunchKernelExC
#undef cudaFuncSetAttribute

using T = cute::half_t;

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

static void gemm_tn_here(int m, int n, int k, T const *a, T const *b, T *c) {
    gemm_tn(m, n, k, T(1.0f), a, k, b, k, T(0.5f), c, m);  // A M x K and B N x K K-major, C M x N column-major
    CUTE_CHECK_LAST();
}

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "describe" && argc == 8) {
        setenv("FLASHSIM_HARNESS_MODE", "describe", 1);
        void *p[3];
        for (int i = 0; i < 3; ++i) p[i] = reinterpret_cast<void *>(std::strtoull(argv[5 + i], nullptr, 16));
        gemm_tn_here(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), static_cast<T const *>(p[0]),
                     static_cast<T const *>(p[1]), static_cast<T *>(p[2]));
        return 0;
    }
    if (mode == "run" && argc == 6) {
        int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
        std::string folder = argv[5];
        size_t bytes[3] = {size_t(m) * k * sizeof(T), size_t(n) * k * sizeof(T), size_t(m) * n * sizeof(T)};
        char const *names[3] = {"/A.bin", "/B.bin", "/C.bin"};
        void *d[3];
        for (int i = 0; i < 3; ++i) {
            if (cudaMalloc(&d[i], bytes[i]) != cudaSuccess) return 3;
            if (cudaMemcpy(d[i], read_file(folder + names[i], bytes[i]).data(), bytes[i], cudaMemcpyHostToDevice))
                return 3;
        }
        gemm_tn_here(m, n, k, static_cast<T const *>(d[0]), static_cast<T const *>(d[1]), static_cast<T *>(d[2]));
        std::vector<char> out(bytes[2]);
        if (cudaMemcpy(out.data(), d[2], bytes[2], cudaMemcpyDeviceToHost) != cudaSuccess) return 3;
        FILE *f = std::fopen((folder + names[2]).c_str(), "wb");
        if (!f || std::fwrite(out.data(), 1, bytes[2], f) != bytes[2]) return 2;
        std::fclose(f);
        return 0;
    }
    std::fprintf(stderr, "usage: %s describe M N K A B C | run M N K FOLDER\n", argv[0]);
    return 1;
}
