// A CUTLASS 3 GEMM for Hopper, built from the CUTLASS 4.0 headers flash-attn 2.8.3's sdist carries (csrc/cutlass),
// for the PTX simulator's third-party check (tests/thirdparty/hostgemm.py): D = alpha * A B + beta * C with A
// (M x K, row-major) and B (K x N, column-major) in bf16, f32 accumulation and f32 C / D (column-major), through
// CUTLASS's CollectiveBuilder for sm90: the TMA warp-specialised cooperative kernel (one producer warpgroup, two
// consumer warpgroups on one 128 x 128 x 64 tile), a 2 x 1 x 1 cluster (its two blocks share their B tile: each
// loads half of it and multicasts it to both), the TMA warp-specialised epilogue, stage count chosen by the builder.
//
// Unlike the other units this one is a host program too: CUTLASS's own host code (GemmKernel::to_underlying_arguments)
// builds the kernel's Params, TMA descriptors included, and this program writes the parameter bytes and the launch
// (grid, block, cluster, dynamic shared memory) as JSON:
//
//     cutlass_sm90_gemm describe M N K alpha beta A B C D OUT.json   (A..D: device addresses, hex)
//     cutlass_sm90_gemm run M N K alpha beta FOLDER                  (a GPU: A.bin, B.bin, C.bin in, D.bin out)
//
// "describe" needs no GPU: the descriptors come from cuTensorMapEncodeTiled, which the program resolves at link time
// (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, a host-only switch: the device code, so the PTX, is the same without it)
// to flashsim/ptx/hostshim/tensormap_shim.c, which records each call's arguments and, on a machine without a
// driver, writes a tag the simulator's side replaces by flashsim.ptx.tensor_map_tiled's map of the same arguments.
// "run" launches the kernel with CUTLASS's own launcher (a cluster launch) on the Params it also describes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

using ElementA = cutlass::bfloat16_t;
using ElementB = cutlass::bfloat16_t;
using ElementC = float;
using ElementD = float;
using ElementAccumulator = float;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutC = cutlass::layout::ColumnMajor;
constexpr int AlignmentA = 128 / cutlass::sizeof_bits<ElementA>::value;
constexpr int AlignmentB = 128 / cutlass::sizeof_bits<ElementB>::value;
constexpr int AlignmentC = 128 / cutlass::sizeof_bits<ElementC>::value;

using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_2, _1, _1>;
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator, ElementC, LayoutC,
    AlignmentC, ElementD, LayoutC, AlignmentC, EpilogueSchedule>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, AlignmentA, ElementB, LayoutB,
    AlignmentB, ElementAccumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    MainloopSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

// The SM count the persistent tile scheduler sizes its grid by, passed explicitly (never queried) so that the
// describing machine and the GPU build the same Params: the H100 SXM's and the H200's 132.
constexpr int kSmCount = 132;

static typename GemmKernel::Params make_params(int m, int n, int k, float alpha, float beta, void *a, void *b,
                                               void *c, void *d) {
    auto stride_a = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto stride_b = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    auto stride_c = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, make_shape(m, n, 1));
    auto stride_d = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, make_shape(m, n, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = kSmCount;
    typename GemmKernel::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<ElementA const *>(a), stride_a, static_cast<ElementB const *>(b), stride_b},
        {{alpha, beta}, static_cast<ElementC const *>(c), stride_c, static_cast<ElementD *>(d), stride_d},
        hw};
    if (GemmKernel::get_workspace_size(args) != 0) {
        std::fprintf(stderr, "this configuration asks for a workspace; the harness passes none\n");
        std::exit(2);
    }
    if (!GemmKernel::can_implement(args)) {
        std::fprintf(stderr, "CUTLASS cannot implement M=%d N=%d K=%d with this kernel\n", m, n, k);
        std::exit(2);
    }
    return GemmKernel::to_underlying_arguments(args, nullptr);
}

static void describe(typename GemmKernel::Params const &params, void *const pointers[4], char const *path) {
    dim3 grid = GemmKernel::get_grid_shape(params);
    dim3 block = GemmKernel::get_block_shape();
    FILE *f = std::fopen(path, "w");
    if (!f) {
        std::perror(path);
        std::exit(2);
    }
    std::fprintf(f, "{\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], ", grid.x, grid.y, grid.z, block.x, block.y,
                 block.z);
    std::fprintf(f, "\"pointers\": [");
    for (int i = 0; i < 4; ++i) std::fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)(uintptr_t)pointers[i]);
    std::fprintf(f, "], ");
    std::fprintf(f, "\"cluster\": [%d, %d, %d], \"shared_bytes\": %d, \"params_align\": %zu, \"params\": \"",
                 int(size<0>(ClusterShape{})), int(size<1>(ClusterShape{})), int(size<2>(ClusterShape{})),
                 int(GemmKernel::SharedStorageSize), alignof(typename GemmKernel::Params));
    unsigned char const *raw = reinterpret_cast<unsigned char const *>(&params);
    for (size_t i = 0; i < sizeof(params); ++i) std::fprintf(f, "%02x", raw[i]);
    std::fprintf(f, "\"}\n");
    std::fclose(f);
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

static void check(cudaError_t err, char const *what) {
    if (err != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
        std::exit(3);
    }
}

static int run(int m, int n, int k, float alpha, float beta, std::string const &folder) {
    size_t bytes_a = size_t(m) * k * sizeof(ElementA), bytes_b = size_t(n) * k * sizeof(ElementB);
    size_t bytes_c = size_t(m) * n * sizeof(ElementC), bytes_d = size_t(m) * n * sizeof(ElementD);
    void *a, *b, *c, *d;
    check(cudaMalloc(&a, bytes_a), "cudaMalloc A");
    check(cudaMalloc(&b, bytes_b), "cudaMalloc B");
    check(cudaMalloc(&c, bytes_c), "cudaMalloc C");
    check(cudaMalloc(&d, bytes_d), "cudaMalloc D");
    check(cudaMemcpy(a, read_file(folder + "/A.bin", bytes_a).data(), bytes_a, cudaMemcpyHostToDevice), "copy A");
    check(cudaMemcpy(b, read_file(folder + "/B.bin", bytes_b).data(), bytes_b, cudaMemcpyHostToDevice), "copy B");
    check(cudaMemcpy(c, read_file(folder + "/C.bin", bytes_c).data(), bytes_c, cudaMemcpyHostToDevice), "copy C");
    check(cudaMemset(d, 0, bytes_d), "clear D");
    typename GemmKernel::Params params = make_params(m, n, k, alpha, beta, a, b, c, d);
    void *const pointers[4] = {a, b, c, d};
    describe(params, pointers, (folder + "/launch.json").c_str());
    // what GemmUniversalAdapter::initialize does before a launch (its static run() leaves it to the caller)
    check(cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(GemmKernel::SharedStorageSize)),
          "cudaFuncSetAttribute");
    cutlass::Status status = Gemm::run(params);
    if (status != cutlass::Status::kSuccess) {
        std::fprintf(stderr, "Gemm::run: %s\n", cutlass::cutlassGetStatusString(status));
        return 3;
    }
    check(cudaDeviceSynchronize(), "the GEMM");
    std::vector<char> out(bytes_d);
    check(cudaMemcpy(out.data(), d, bytes_d, cudaMemcpyDeviceToHost), "copy D");
    FILE *f = std::fopen((folder + "/D.bin").c_str(), "wb");
    if (!f || std::fwrite(out.data(), 1, bytes_d, f) != bytes_d) return 2;
    std::fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "describe" && argc == 12) {
        void *p[4];
        for (int i = 0; i < 4; ++i) p[i] = reinterpret_cast<void *>(std::strtoull(argv[7 + i], nullptr, 16));
        auto params = make_params(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::strtof(argv[5], 0),
                                  std::strtof(argv[6], 0), p[0], p[1], p[2], p[3]);
        describe(params, p, argv[11]);
        return 0;
    }
    if (mode == "run" && argc == 8)
        return run(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::strtof(argv[5], 0),
                   std::strtof(argv[6], 0), argv[7]);
    std::fprintf(stderr, "usage: %s describe M N K alpha beta A B C D OUT.json | run M N K alpha beta FOLDER\n",
                 argv[0]);
    return 1;
}
