"""One record per GPU architecture: the tensor-core model parameters and the SM limits.

An architecture is a handful of numbers, not a code path: the tensor-core model
(flashsim.numerics.tensorcore) and the resource model (flashsim.resources) read them from here.

Sources
- Tensor-core model: MMA-Sim (Xie et al., arXiv:2511.10909) and Khattak & Mikaitis
  (arXiv:2512.07004), checked on the H200 by this project (tests/data/mma_sm90.npz). ``mma_block_k`` is
  how many products are fused per block (16 = one block for k16; 8 = two chained blocks);
  ``mma_fraction_bits`` is the number of fraction bits kept after alignment to the largest exponent;
  ``mma_zero_exponent_*`` is the exponent a zero term takes part in the alignment with (MMA-Sim's e_zero).
- wgmma (``wgmma_*``, sm_90a only: the PTX ISA's Target ISA Notes for wgmma.mma_async): MMA-Sim's Hopper WGMMA
  model (mmasim/nv_ptx/sim.py, class WGMMA): one fused block per ``wgmma_chunk_bytes`` bytes of K (32: 16 f16 / bf16,
  8 tf32 or 32 FP8 products), F = ``wgmma_fraction_bits`` (25) for f16 / bf16 / tf32 and ``wgmma8_fraction_bits``
  (13) for FP8, whose f32 results are truncated to ``wgmma8_f32_result_frac_bits`` (13: E8M13, the accumulation width
  DeepSeek-V3's report, arXiv:2412.19437 section 3.3.2, describes); the zero exponents are mma.sync's of the same arch
  (MMA-Sim uses -133 / -21 for both). Checked on the H200 by flashsim.gpu.capture.wgmma (docs/tensor-cores.md).
- sm_120a's mma.sync kinds with 4-, 6- and 8-bit inputs (``mma_kinds``, ``MmaKind``: ``kind::f8f6f4`` and the
  block-scaled ``kind::mxf8f6f4`` / ``kind::mxf4`` / ``kind::mxf4nvf4``): MMA-Sim's RTX Blackwell models
  (mmasim/nv_ptx/sim.py, classes MMA and MMABlockScale; the mmasim package, held bit for bit by
  tests/test_mma_block_scale.py): k32 forms one fused block of 32 products, F = 25, each product a term of its own
  (its exponent the elements' plus the scales'); k64 forms (FP4 with 2X / 4X scales) sum each group of 16 products
  exactly, one term per group whose exponent is its scales' alone, F = 35, a zero term's exponent -139.
- SM limits: CUDA C++ Programming Guide, compute-capability tables ("Technical Specifications per
  Compute Capability"); NVIDIA CCCL arch_traits.h. Occupancy rules: cuda_occupancy.h.
- ``sm_count``: the SMs of the arch's reference GPU, which the split-KV heuristic fills (flashsim.serving.splits)
  when the emulator chooses num_splits; the GPU runner reads its own device's count, so the two choose alike on that
  GPU. NVIDIA's datasheets / whitepapers: A100 SXM 108 (Ampere whitepaper), RTX 3090 82 (GA102 whitepaper), RTX 4090
  128 (Ada whitepaper), H100 SXM5 and H200 132 (Hopper whitepaper, H200 datasheet; cudaDevAttrMultiProcessorCount
  on this project's H200: KINDS.md's 132), B200 148 (Blackwell datasheet), RTX 5090 170 (RTX Blackwell whitepaper).
  sm_120 max blocks/SM = 24 confirmed by CUDA 13.0 cuda_occupancy.h (cudaOccMaxBlocksPerMultiprocessor: major 12 -> 24).
"""

from __future__ import annotations

from dataclasses import dataclass

KB = 1024


@dataclass(frozen=True)
class MmaKind:
    """The tensor-core arithmetic of one ``.kind`` of mma.sync with 4-, 6- and 8-bit inputs on an arch (module
    docstring): one fused block of the instruction's ``k`` products; ``group`` products summed exactly into one term
    whose exponent is its block scales' alone (1: every product its own term, its exponent its factors'); the terms
    and c aligned to the largest exponent, truncated to ``fraction_bits`` fraction bits, summed exactly and rounded
    once (f32 toward zero, f16 to nearest even); a zero term takes ``zero_exponent_f32`` / ``_f16``."""

    kind: str  # "f8f6f4", "mxf8f6f4", "mxf4", "mxf4nvf4"
    k: int  # K of the instruction (m16n8k32 / m16n8k64)
    fraction_bits: int
    group: int
    zero_exponent_f32: int
    zero_exponent_f16: int | None  # None: f32 accumulators only (the block-scaled kinds)
    source: str


@dataclass(frozen=True)
class Arch:
    name: str  # "sm_90"
    family: str  # marketing name, for reports
    # tensor-core model of mma.sync.m16n8k16 (f16 / bf16 inputs)
    mma_block_k: int  # products fused per block; k=16 runs 16 // mma_block_k blocks
    mma_fraction_bits: int  # F: fraction bits kept after alignment
    mma_zero_exponent_f32: int  # exponent of a zero term, f32 accumulation
    mma_zero_exponent_f16: int  # exponent of a zero term, f16 accumulation
    # SM limits
    smem_per_sm: int  # bytes of shared memory per SM
    smem_per_block_optin: int  # max dynamic shared memory per block (opt-in)
    smem_reserved_per_block: int  # bytes the runtime reserves per block
    smem_alloc_unit: int  # shared memory allocation granularity, bytes
    regs_per_sm: int
    regs_per_thread_max: int
    reg_alloc_unit: int  # registers are allocated per warp in units of this many
    warp_alloc_sub_partitions: int  # register file split into this many sub-partitions
    max_warps_per_sm: int
    max_blocks_per_sm: int
    sm_count: int  # SMs of the arch's reference GPU (module docstring)
    # tensor-core model of mma.sync.m16n8k32 with FP8 inputs (e4m3 / e5m2): a native FP8 block (mma8_block_k), or
    # ptxas's lowering onto the f16 m16n8k16 model above (mma8_on_f16_mma); neither: no model (see mma8_source)
    mma8_block_k: int | None = None  # products fused per native block (k = 32 runs 32 // mma8_block_k blocks)
    mma8_fraction_bits: int | None = None  # F of the native FP8 blocks
    mma8_f32_result_frac_bits: int = 23  # f32 results truncated to this many fraction bits (Ada: 13, "FP22")
    mma8_on_f16_mma: bool = False  # no FP8 mma in silicon: ptxas runs it as two f16 HMMA.16816 (sm_90)
    mma8_source: str = "mma.sync FP8 (m16n8k32 e4m3 / e5m2) exists from sm_89 on"
    # tensor-core model of wgmma.mma_async (module docstring); None: the arch has no wgmma
    wgmma_chunk_bytes: int | None = None  # bytes of K fused per block (f16 / bf16: 2 per product, tf32 4, FP8 1)
    wgmma_fraction_bits: int | None = None  # F of f16 / bf16 / tf32 inputs
    wgmma8_fraction_bits: int | None = None  # F of FP8 (e4m3 / e5m2) inputs
    wgmma8_f32_result_frac_bits: int = 23  # FP8 f32 results truncated toward zero to this many fraction bits
    wgmma_source: str = "wgmma.mma_async exists on sm_90a alone (PTX ISA, wgmma Target ISA Notes: requires sm_90a)"
    # mma.sync kinds with 4-, 6- and 8-bit inputs (module docstring); empty: the arch has none
    mma_kinds: tuple = ()

    def mma_kind(self, kind: str) -> MmaKind:
        """The MmaKind record of ``kind`` on this arch; ValueError saying which archs have it where it has none."""
        for k in self.mma_kinds:
            if k.kind == kind:
                return k
        raise ValueError(
            f"no mma.sync .kind::{kind} on {self.name}: the kinds f8f6f4, mxf8f6f4, mxf4 and mxf4nvf4 need sm_120a "
            "(PTX ISA, mma Target ISA Notes)"
        )

    @property
    def has_wgmma(self) -> bool:
        """Whether the arch has wgmma.mma_async (sm_90a); flashsim.wgmma raises ValueError with ``wgmma_source``
        elsewhere."""
        return self.wgmma_chunk_bytes is not None

    @property
    def has_fp8_model(self) -> bool:
        """Whether flashsim models mma.sync.m16n8k32 with FP8 inputs on this arch (a native FP8 block, or the
        lowering onto the f16 mma); flashsim.mma raises ValueError with ``mma8_source`` where it does not."""
        return self.mma8_block_k is not None or self.mma8_on_f16_mma

    @property
    def compute_capability(self) -> tuple[int, int]:
        digits = self.name.split("_", 1)[1]
        return int(digits[:-1]), int(digits[-1])


# Tensor-core model of a generation: (products per fused block, fraction bits, zero exponent f32 / f16 accumulation)
_AMPERE_TC = dict(mma_block_k=8, mma_fraction_bits=24, mma_zero_exponent_f32=-132, mma_zero_exponent_f16=-20)
_HOPPER_TC = dict(mma_block_k=16, mma_fraction_bits=25, mma_zero_exponent_f32=-133, mma_zero_exponent_f16=-21)


# FP8 m16n8k32 (MMA-Sim's parameters: its block is 16 bytes of inputs on Ada, 32 on RTX Blackwell, i.e. 16 / 32
# one-byte products; Ada keeps F = 13 and truncates f32 results to 13 fraction bits)
_ADA_FP8 = dict(
    mma8_block_k=16,
    mma8_fraction_bits=13,
    mma8_f32_result_frac_bits=13,
    mma8_source="MMA-Sim (arXiv:2511.10909), Ada Lovelace: blocks of 16 products, F = 13, f32 results "
    "truncated to 13 fraction bits; checked against mmasim",
)
_RTX_BLACKWELL_FP8 = dict(
    mma8_block_k=32,
    mma8_fraction_bits=25,
    mma8_f32_result_frac_bits=23,
    mma8_source="MMA-Sim (arXiv:2511.10909), RTX Blackwell: one block of 32 products, F = 25; checked against mmasim",
)
# Hopper: no FP8 mma in silicon. ptxas unpacks the 8-bit registers to f16 (exact) and runs two HMMA.16816, the low
# halves of the registers (k % 4 in {0, 1}) from zero, the high halves (k % 4 in {2, 3}) on that result, then adds
# c with FADD / HADD2 (tools/sass_ops.py, tests/test_sass.py). So the model is that lowering onto this arch's f16
# m16n8k16 model (flashsim.numerics.tensorcore._k32_on_f16_mma), which reproduces every bit of the H200's FP8
# captures; the two-block FP8 model first fitted to them (blocks of 16 in that k order, F = 25, from +0, then c
# rounded to nearest) is the same function (tests/test_mma_k32.py).
_HOPPER_FP8 = dict(
    mma8_on_f16_mma=True,
    mma8_source="ptxas's lowering onto two f16 HMMA.16816 (no FP8 mma in Hopper's silicon), run on "
    "the f16 m16n8k16 model: every bit of tests/data/mma_k32_sm90.npz (5 FP8 types x 11 "
    "categories) and of a held-out capture",
)
# wgmma.mma_async on Hopper (sm_90a): MMA-Sim's WGMMA parameters (module docstring)
_HOPPER_WGMMA = dict(
    wgmma_chunk_bytes=32,
    wgmma_fraction_bits=25,
    wgmma8_fraction_bits=13,
    wgmma8_f32_result_frac_bits=13,
    wgmma_source="MMA-Sim (arXiv:2511.10909), Hopper WGMMA: 32 bytes of K per fused block, F = 25 (f16 / bf16 / tf32)"
    " and F = 13 with f32 results truncated to 13 fraction bits (FP8); tested against mmasim, held to the H200 by "
    "flashsim.gpu.capture.wgmma",
)
# sm_120a's mma.sync kinds (MMA-Sim's RTX Blackwell MMA and MMABlockScale models, module docstring)
_RTX_BLACKWELL_SRC = "MMA-Sim (arXiv:2511.10909), RTX Blackwell; held bit for bit to mmasim"
_RTX_BLACKWELL_KINDS = dict(
    mma_kinds=(
        MmaKind("f8f6f4", 32, 25, 1, -133, -21, _RTX_BLACKWELL_SRC + " (MMA, kind::f8f6f4)"),
        MmaKind("mxf8f6f4", 32, 25, 1, -133, None, _RTX_BLACKWELL_SRC + " (MMABlockScale k32: ST_FDPA)"),
        MmaKind("mxf4", 64, 35, 16, -139, None, _RTX_BLACKWELL_SRC + " (MMABlockScale k64: GST_FDPA, G = 16)"),
        MmaKind("mxf4nvf4", 64, 35, 16, -139, None, _RTX_BLACKWELL_SRC + " (MMABlockScale k64: GST_FDPA, G = 16)"),
    )
)
_BLACKWELL_FP8 = dict(mma8_source="MMA-Sim models sm_100's tcgen05 FP8, not its mma.sync, and there is no B200 here")


def _arch(
    name: str,
    family: str,
    tc: dict,
    smem_per_sm: int,
    optin: int,
    warps: int,
    blocks: int,
    sms: int,
    fp8: dict | None = None,
    wgmma: dict | None = None,
    kinds: dict | None = None,
) -> Arch:
    return Arch(
        name,
        family,
        **tc,
        smem_per_sm=smem_per_sm,
        smem_per_block_optin=optin,
        smem_reserved_per_block=1 * KB,
        smem_alloc_unit=128,
        regs_per_sm=64 * 1024,
        regs_per_thread_max=255,
        reg_alloc_unit=256,
        warp_alloc_sub_partitions=4,
        max_warps_per_sm=warps,
        max_blocks_per_sm=blocks,
        sm_count=sms,
        **(fp8 or {}),
        **(wgmma or {}),
        **(kinds or {}),
    )


ARCHS: dict[str, Arch] = {
    a.name: a
    for a in (
        _arch("sm_80", "Ampere (A100)", _AMPERE_TC, 164 * KB, 163 * KB, 64, 32, 108),
        _arch("sm_86", "Ampere (RTX 30xx)", _AMPERE_TC, 100 * KB, 99 * KB, 48, 16, 82),
        _arch("sm_89", "Ada Lovelace (RTX 40xx)", _AMPERE_TC, 100 * KB, 99 * KB, 48, 24, 128, _ADA_FP8),
        _arch("sm_90", "Hopper (H100/H200)", _HOPPER_TC, 228 * KB, 227 * KB, 64, 32, 132, _HOPPER_FP8, _HOPPER_WGMMA),
        _arch("sm_100", "Blackwell (B200)", _HOPPER_TC, 228 * KB, 227 * KB, 64, 32, 148, _BLACKWELL_FP8),
        _arch(
            "sm_120",
            "consumer Blackwell (RTX 50xx)",
            _HOPPER_TC,
            100 * KB,
            99 * KB,
            48,
            24,
            170,
            _RTX_BLACKWELL_FP8,
            kinds=_RTX_BLACKWELL_KINDS,
        ),
    )
}


def get_arch(arch: str | Arch) -> Arch:
    """Return the record for ``arch`` ("sm_90", "90", "sm_90a" or an Arch); ValueError names the known ones."""
    if isinstance(arch, Arch):
        return arch
    if not isinstance(arch, str):
        raise ValueError(f"arch must be a string such as 'sm_90', got {type(arch).__name__}")
    key = arch.strip().lower()
    if not key.startswith("sm_"):
        key = "sm_" + key
    key = key.rstrip("af") if key not in ARCHS else key  # sm_90a / sm_100f share the record
    if key not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; known architectures: {', '.join(ARCHS)}")
    return ARCHS[key]
