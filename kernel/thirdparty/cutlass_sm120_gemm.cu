// CUTLASS 3 block-scaled GEMMs for consumer Blackwell (sm_120a), built from the CUTLASS 4.2 headers of NVIDIA's
// nvidia-cutlass wheel for the PTX simulator's third-party check (tests/thirdparty/cutlass_sm120.py): D = alpha * A B
// + beta * C with A (M x K, row-major) and B (K x N, column-major: both K-major, the only layout the sm120 builder
// takes), f32 accumulation, f32 C / D (row-major), through CUTLASS's CollectiveBuilder for cutlass::arch::Sm120 and
// OpClassBlockScaledTensorOp: the TMA warp-specialised kernel (a producer warp loading A, B and both scale-factor
// tensors by TMA, consumer warps on the block-scaled mma.sync), a 128 x 128 x 128 tile, no cluster (sm120 has no
// multicast), the schedule and stage count chosen by the builder, and the builder's default epilogue (a linear
// combination) through TMA. Operands: NVFP4 x NVFP4 (e2m1 codes, two per byte, a ue4m3 scale per 16 k:
// kind::mxf4nvf4.block_scale.scale_vec::4X m16n8k64), or with FLASHSIM_MXFP8_MXFP6 defined MXFP8 x MXFP6 (e4m3 and
// e3m2 codes, a ue8m0 scale per 32 k: kind::mxf8f6f4.block_scale m16n8k32).
//
// The unit is a host program too: CUTLASS's own host code (GemmKernel::to_underlying_arguments) builds the kernel's
// Params, TMA descriptors included, and this program writes the parameter bytes and the launch (grid, block,
// dynamic shared memory) as JSON, with where CUTLASS's scale-factor layouts (Sm1xxBlkScaledConfig's SFA / SFB: an
// interleaved layout of 128-row x 4-scale atoms) put each scale:
//
//     cutlass_sm120_gemm describe M N K alpha beta A B SFA SFB C D OUT.json   (pointers: device addresses, hex)
//
// No GPU is needed (nor exists here): the descriptors come from cuTensorMapEncodeTiled, resolved at link time
// (CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, a host-only switch) to flashsim/ptx/hostshim/tensormap_shim.c, which
// records each call's arguments and writes a tag the simulator's side replaces by flashsim.ptx.tensor_map_tiled's
// map of the same arguments.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

#ifdef FLASHSIM_MXFP8_MXFP6
// the mixed variant: A in MXFP8 (e4m3 with a ue8m0 scale per 32 k), B in MXFP6 (e3m2, likewise), through
// kind::mxf8f6f4.block_scale (m16n8k32, one byte per code in shared memory: B by a padded 6-bit TMA map)
using ElementA = cutlass::mx_float8_t<cutlass::float_e4m3_t>;
using ElementB = cutlass::mx_float6_t<cutlass::float_e3m2_t>;
constexpr int AlignmentA = 16;   // 16 bytes of e4m3
constexpr int AlignmentB = 128;  // the padded 6-bit map's box: 128 codes
constexpr int kSfVec = 32;
#else
using ElementA = cutlass::nv_float4_t<cutlass::float_e2m1_t>;  // e2m1 data with ue4m3 scales per 16
using ElementB = cutlass::nv_float4_t<cutlass::float_e2m1_t>;
constexpr int AlignmentA = 32;  // 16 bytes of e2m1
constexpr int AlignmentB = 32;
constexpr int kSfVec = 16;
#endif
using ElementC = float;
using ElementD = float;
using ElementAccumulator = float;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutC = cutlass::layout::RowMajor;
constexpr int AlignmentC = 128 / cutlass::sizeof_bits<ElementC>::value;

using TileShape = Shape<_128, _128, _128>;
using ClusterShape = Shape<_1, _1, _1>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm120, cutlass::arch::OpClassBlockScaledTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementAccumulator, ElementC, LayoutC,
    AlignmentC, ElementD, LayoutC, AlignmentC, cutlass::epilogue::collective::EpilogueScheduleAuto>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm120, cutlass::arch::OpClassBlockScaledTensorOp, ElementA, LayoutA, AlignmentA, ElementB,
    LayoutB, AlignmentB, ElementAccumulator, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::collective::KernelScheduleAuto>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                        CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
using ScaleConfig = typename CollectiveMainloop::Sm1xxBlkScaledConfig;
using DataA = typename ElementA::DataType;
using DataB = typename ElementB::DataType;
using ScaleA = typename ElementA::ScaleFactorType;
using ScaleB = typename ElementB::ScaleFactorType;

// The kernel itself: naming it here instantiates it (the harness never launches it: no sm_120 GPU)
void const *const kKernel = reinterpret_cast<void const *>(&cutlass::device_kernel<GemmKernel>);

// The SM count the persistent tile scheduler sizes its grid by, passed explicitly (never queried): the RTX 5090's 170.
constexpr int kSmCount = 170;

static typename GemmKernel::Params make_params(int m, int n, int k, float alpha, float beta, void *const p[6]) {
    auto stride_a = cutlass::make_cute_packed_stride(typename GemmKernel::StrideA{}, make_shape(m, k, 1));
    auto stride_b = cutlass::make_cute_packed_stride(typename GemmKernel::StrideB{}, make_shape(n, k, 1));
    auto stride_c = cutlass::make_cute_packed_stride(typename GemmKernel::StrideC{}, make_shape(m, n, 1));
    auto stride_d = cutlass::make_cute_packed_stride(typename GemmKernel::StrideD{}, make_shape(m, n, 1));
    auto layout_sfa = ScaleConfig::tile_atom_to_shape_SFA(make_shape(m, n, k, 1));
    auto layout_sfb = ScaleConfig::tile_atom_to_shape_SFB(make_shape(m, n, k, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = kSmCount;
    typename GemmKernel::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<DataA const *>(p[0]), stride_a, static_cast<DataB const *>(p[1]), stride_b,
         static_cast<ScaleA const *>(p[2]), layout_sfa, static_cast<ScaleB const *>(p[3]), layout_sfb},
        {{alpha, beta}, static_cast<ElementC const *>(p[4]), stride_c, static_cast<ElementD *>(p[5]), stride_d},
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

// "offsets": the scale-factor element each (row, k / kSfVec) of A and (column, k / kSfVec) of B is read from,
// row-major
template <class Layout>
static void offsets(FILE *f, char const *name, Layout layout, int rows, int k) {
    std::fprintf(f, "\"%s\": [", name);
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < k / kSfVec; ++j)
            std::fprintf(f, "%s%lld", r || j ? ", " : "", (long long)layout(r, j * kSfVec, 0));
    std::fprintf(f, "], \"%s_size\": %lld, ", name, (long long)size(filter_zeros(layout)));
}

static void describe(int m, int n, int k, typename GemmKernel::Params const &params, char const *path) {
    dim3 grid = GemmKernel::get_grid_shape(params);
    dim3 block = GemmKernel::get_block_shape();
    FILE *f = std::fopen(path, "w");
    if (!f) {
        std::perror(path);
        std::exit(2);
    }
    std::fprintf(f, "{\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], ", grid.x, grid.y, grid.z, block.x, block.y,
                 block.z);
    offsets(f, "sfa", ScaleConfig::tile_atom_to_shape_SFA(make_shape(m, n, k, 1)), m, k);
    offsets(f, "sfb", ScaleConfig::tile_atom_to_shape_SFB(make_shape(m, n, k, 1)), n, k);
    std::fprintf(f, "\"shared_bytes\": %d, \"params\": \"", int(GemmKernel::SharedStorageSize));
    unsigned char const *raw = reinterpret_cast<unsigned char const *>(&params);
    for (size_t i = 0; i < sizeof(params); ++i) std::fprintf(f, "%02x", raw[i]);
    std::fprintf(f, "\"}\n");
    std::fclose(f);
}

int main(int argc, char **argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "describe" && argc == 14) {
        void *p[6];
        for (int i = 0; i < 6; ++i) p[i] = reinterpret_cast<void *>(std::strtoull(argv[7 + i], nullptr, 16));
        int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
        auto params = make_params(m, n, k, std::strtof(argv[5], 0), std::strtof(argv[6], 0), p);
        describe(m, n, k, params, argv[13]);
        return 0;
    }
    std::fprintf(stderr, "usage: %s describe M N K alpha beta A B SFA SFB C D OUT.json\n", argv[0]);
    return 1;
}
