"""The kernel configuration: one description shared by the emulator, the budget model and the kernel build.

A ``KernelConfig`` is every compile-time choice of kernel/flash_fwd.cu. The CUDA source receives it as preprocessor
defines (``KernelConfig.defines``), the emulator tiles its loops with it, and the budget model evaluates
``smem_buffers`` on sympy symbols or on these integers: the same formula both ways. The numbers it shares with the
kernel live in flashsim.constants, the measured defaults (tilings, O staging, exponentials in the P V loop) in
flashsim.tuning.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from fractions import Fraction

from .arch import get_arch
from .constants import (
    COMBINE_WARPS,
    E4M3_MAX,
    F16_BYTES,
    FP4_BLOCK,
    FP8_F16_KEYS,
    FP8_P_SCALE,
    FP8_V_RANGE,
    FUSED_HEADER,
    INT8_BYTES,
    MAX_SPLITS,
    MBARRIER_BYTES,
    MEAN_SLICES,
    MMA8_K,
    MMA_K,
    MMA_M,
    MMA_N,
    NVFP4_ROW_DIV,
    Q_IN_REGISTERS_MAX_D,
    QUANT_BLOCK,
    QUANT_V_THREADS,
    QUANT_WARPS,
)
from .tuning import DEFAULT_TILES, EXP_IN_PV, QUANT_TILES, STAGE_O, tile_class

SUPPORTED_HEAD_DIMS = tuple(range(32, 257, 32))
SUPPORTED_DTYPES = ("f16", "bf16")
SUPPORTED_PV_ACCUM = ("f32", "f16", "f16x2")
SUPPORTED_STAGES = (2, 3)
# m16 tiles (16 query rows each) per warp. Each warp reads the whole K and V tile from shared memory for its rows, so
# more rows per warp means fewer shared-memory bytes per mma FLOP (the kernel is generic in FS_M_TILES); 3 and 4 fit
# 255 registers only with a narrow kv_tile and an f16 O (ptxas: benchmarks/experiments/m_tiles/).
SUPPORTED_M_TILES = (1, 2, 3, 4)
# Quantized attention (SageAttention's recipe, flashsim.emulator.quantize): "none", or "int8" (Q and K quantized to
# INT8 by kernel/quantize.cu, Q K^T by mma.sync.m16n8k32 s8 with exact s32 sums, P V as without quant).
# "int8-fp8": INT8 Q K^T as "int8", and P V in FP8 e4m3 (P * 448, V per channel; mma.sync.m16n8k32 e4m3): f16
# inputs, kv_tile a multiple of 32, pv_accum "f32" (f32 accumulation) or "f16x2" (f16 accumulation from zero over
# FP8_F16_KEYS keys, then added to the f32 O; V in the narrower range FP8_V_RANGE["f16x2"] so no sum can overflow).
# "nvfp4": Q and K in NVFP4 (e2m1 codes with a ue4m3 scale per 16 elements along d under an f32 scale per 16 rows; K
# smoothed by its mean as INT8's) by kernel/quantize.cu, Q K^T by sm_120a's block-scaled
# mma.sync.m16n8k64.kind::mxf4nvf4 (scale_vec::4X, ue4m3, f32 accumulation), P V in FP8 e4m3 as "int8-fp8" (the same
# path): SageAttention3's FP4 Q K^T on consumer Blackwell. sm_120 only (no FP4 mma.sync before sm_120a:
# ``check_arch``); d in NVFP4_HEAD_DIMS, f16, no causal / window / softcap, (B, H, N, d) layout.
SUPPORTED_QUANT = ("none", "int8", "int8-fp8", "nvfp4")
NVFP4_HEAD_DIMS = (64, 128)
NVFP4_ARCH = "sm_120"  # the one arch with the FP4 mma.sync (built for its arch-specific target, sm_120a)
# KernelConfig's serving fields (flashsim.serving)
SERVING_SWITCHES = ("seqlens", "paged", "pack_gqa", "split", "fused")
SERVING_COUNTS = {"warp_split": 1}  # KernelConfig's serving counts and their off values (described only when on)


def pv_accums(dtype: str = "f16", quant: str = "none") -> tuple[str, ...]:
    """The P@V accumulations a kernel of element type ``dtype`` and ``quant`` can run: f32 only with bf16 (mma.sync
    has no bf16 accumulator); FP8 P@V those of FP8_V_RANGE (an f16 O over the whole row, pv_accum "f16", has no
    bound: it sums up to Nk products); else SUPPORTED_PV_ACCUM."""
    if dtype == "bf16":
        return ("f32",)
    return tuple(FP8_V_RANGE) if quant in ("int8-fp8", "nvfp4") else SUPPORTED_PV_ACCUM


def overflow_flag_live(pv_accum: str, quant: str = "none") -> bool:
    """Whether the kernel writes its overflow flag (FS_OVERFLOW_FLAG): the P@V mma accumulates in f16 (pv_accum "f16"
    or "f16x2") on f16 P and V, so its sum can overflow f16's range. Not with FP8 P@V (quant "int8-fp8"): V's range
    makes every f16 sum finite (FP8_V_RANGE, proofs/prove_fp8_f16_range.py). The one statement of the rule: the
    kernel build, the emulator's check and every GPU front-end ask it."""
    return pv_accum in ("f16", "f16x2") and quant not in ("int8-fp8", "nvfp4")


def smem_buffers(
    block_m,
    kv_tile,
    head_dim,
    stages,
    elem_bytes=F16_BYTES,
    qk_bytes=None,
    v_bytes=None,
    ring_mbarrier=0,
    k_scale_bytes=0,
    rings=1,
):
    """Shared-memory buffers of one block, name -> bytes.

    ``qk_bytes``: bytes of a Q / K element in shared memory (default ``elem_bytes``; 1 with quant="int8", 1/2 with
    "nvfp4": two e2m1 codes a byte);
    ``k_scale_bytes``: block-scale bytes per key that ride in the K ring beside its codes (NVFP4: d / 16 ue4m3; Q's
    block scales are read into registers once, from global memory);
    ``v_bytes``: of a V element (default ``elem_bytes``; 1 with quant="int8-fp8");
    ``ring_mbarrier``: 1 when the K / V ring is synchronised by mbarriers (KernelConfig.ring_mbarrier): a "full" and
    an "empty" barrier per slot after the V ring, else 0;
    ``rings``: K / V rings, each with its barriers (KernelConfig.warp_split: one per warp).

    Works on ints and on sympy symbols alike (flashsim.budget uses the latter). The Q tile is
    staged once and read with ldmatrix (into registers for the loop with one m16 tile per warp, at each k16 step
    with two); K and V go through a ring of ``stages`` slots filled by cp.async. S/P never leaves registers, O
    accumulates in registers and the epilogue stores it to global memory, straight from them or (``stage_o``)
    through the warp's own rows of the Q tile: neither has a buffer.
    """
    qk_bytes = elem_bytes if qk_bytes is None else qk_bytes
    v_bytes = elem_bytes if v_bytes is None else v_bytes
    return {
        "Q tile": block_m * head_dim * qk_bytes,
        "K ring": rings * stages * kv_tile * (head_dim * qk_bytes + k_scale_bytes),
        "V ring": rings * stages * kv_tile * head_dim * v_bytes,
        "ring barriers": rings * 2 * stages * MBARRIER_BYTES * ring_mbarrier,
    }


def seed_config() -> KernelConfig:
    """The design note's block, which flashsim prove's claims and the budget's what-ifs are about: d = 128, 8 warps of
    16 query rows, kv_tile 64, a 2-stage ring (96 KB on sm_120). Not a default any more: DEFAULT_TILES predicts
    8 warps x 2 m16 tiles with kv_tile 32 for sm_120 at d = 128 (the same 96 KB)."""
    return KernelConfig(head_dim=128, warps=8, m_tiles=1, kv_tile=64, stages=2)


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time shape of the FlashAttention forward kernel.

    head_dim   d, a multiple of 32 from 32 to 256
    dtype      element type of q, k, v, o and of P in P@V: "f16" or "bf16" (bf16 has no f16 accumulator: pv_accum
               must be "f32" with it, since mma.sync has no bf16 accumulation)
    warps      warps per block
    m_tiles    m16 tiles per warp (SUPPORTED_M_TILES, 1 to 4): a warp owns 16 * m_tiles query rows, a block
               16 * m_tiles * warps. Two tiles let one K / V fragment from shared memory feed two mma's (half the
               shared-memory traffic per flop); Q is then re-read from shared memory instead of held in registers.
               Three and four are bit-exact too but slower on the H200 (benchmarks/experiments/m_tiles/).
    kv_tile    keys per KV tile (Bc), a multiple of 16 (pairs of n8 score tiles form one k16 P slice)
    stages     slots in the K/V cp.async ring (2 or 3)
    pv_accum   accumulation of P@V: "f32" (f32 mma accumulator), "f16" (the O accumulator is f16: half the
               registers, and the f16 mma rate, 2x the f32 one on GeForce Blackwell), or "f16x2" (two levels: each KV
               tile's P V is accumulated by the f16 mma from zero, then added to an f32 O: the f16 mma rate with f32
               accuracy across tiles; O costs the f32 registers)
    causal     bottom-right aligned causal mask (as FlashAttention-2)
    local      sliding-window bounds compiled in (the window's left / right are launch arguments; flashsim.masking)
    softcap    logit soft-capping compiled in: scores become softcap * tanh(s / softcap) (the cap is a launch
               argument; tanh from the two modelled SFU functions: flashsim.emulator.kernel_math.softcap_tanh)
    layout     "bhnd" (B, H, N, d) or "bnhd" (B, N, H, d). Compiled in because a runtime row stride costs registers
               where the kernel has none to spare: with "bhnd" a row is d elements apart, a constant (ptxas: the
               d=128 f32 build spills 4 bytes with a runtime row stride, none without), "bnhd" reads the stride
               from the launch arguments. Batch and head strides are launch arguments either way.
    quant      "none", or "int8": Q and K arrive as INT8 with per-16-row / per-16-key f32 scales (K smoothed by
               its mean over tokens) from kernel/quantize.cu; Q K^T runs on mma.sync.m16n8k32 s8 (exact s32 sums),
               each score is float(s32) * (q_scale * k_scale) (two IEEE multiplies), the LSE gets the smoothing's
               q . mean(k) back. P V is unchanged. Not with softcap (tanh does not commute with the smoothing).
               "int8-fp8": P V in FP8 too. "nvfp4": Q and K in NVFP4 (SUPPORTED_QUANT's note), each score
               the k64 block-scaled mma's f32 sum times (q_scale * k_scale), P V as "int8-fp8"; sm_120 only.

    The serving switches (flashsim.serving; all off for flashsim.attention, whose builds they leave unchanged):
    seqlens    per-sequence lengths are launch arguments: each block reads its sequence's query and key counts
               (and, for variable-length batches, offsets) from cu_seqlens / cache_seqlens arrays, so one launch
               serves a batch of different lengths. Needs layout "bnhd" (FlashAttention-2's serving layout) and no
               quant (the quantization pass smooths K over one dense sequence).
    paged      K and V are read through a block table: key j of a row lives in page block_table[j // page_size]
               at slot j % page_size (page_size a launch argument, a power of two from 16 to 256).
    pack_gqa   the query heads that share a K / V head are packed into one block's rows (row r of a block is
               query row r // group of head r % group), so each K / V tile is read once per group, not once per
               query head: decode, where a head has one or a few query rows, fills its m16 tiles this way.
    split      split-KV (flash-decoding): each block covers one of num_splits (a launch argument) contiguous parts
               of its keys and writes its rows' partial O (f32, normalised by the part's own l) and LSE; the
               combine kernel (flash_combine, an entry of kernel/flash_fwd.cu built with it) merges the parts
               (flashsim.emulator.kernel_program.combine).
    fused      the index check inside flash_fwd, one launch fewer per serving call: flashsim.serving.indices'
               rules, otherwise kernel/serving_check.cu's launch, each block checking the entries it reads, the last
               block to finish (a ticket in a state buffer the host zeroes once) writing the record. With split,
               flash_combine still follows (the combine run by each row's last split inside flash_fwd was 5-10 us
               slower on the H100: benchmarks/experiments/serving_host_time/). The same bits as the separate
               launches.
    warp_split split-KV inside the block (KV-cache decode; warps == warp_split): every warp of the block takes the
               block's 16 * m_tiles rows over its own part of the keys (part w of a warp_split-way split,
               flashsim.serving.splits) through its own K / V ring, and the block merges the parts in shared memory
               with flash_combine's operations in warp order: the bits of the warp_split-way split call, without the
               partial outputs' round trip through memory or the combine's launch. With ``split`` too (num_splits S
               across blocks; not ``fused``), warp w of split s writes part s * W + w of S * W and flash_combine merges
               them: the bits of the (S * W)-way split call. 1: off.
    """

    head_dim: int = 128
    warps: int = 8
    m_tiles: int = 1
    kv_tile: int = 64
    stages: int = 2
    pv_accum: str = "f32"
    causal: bool = False
    dtype: str = "f16"
    local: bool = False
    softcap: bool = False
    layout: str = "bhnd"
    quant: str = "none"
    seqlens: bool = False
    paged: bool = False
    pack_gqa: bool = False
    split: bool = False
    fused: bool = False
    warp_split: int = 1

    def __post_init__(self):
        self.validate()

    # ---- derived -------------------------------------------------------------------------
    @property
    def o_f16(self) -> bool:
        """The O accumulator is f16 (pv_accum "f16"); otherwise f32."""
        return self.pv_accum == "f16"

    @property
    def pv_mma_f16(self) -> bool:
        """The kernel's overflow flag is live: the P@V mma accumulates in f16 on f16 P and V
        (``overflow_flag_live``)."""
        return overflow_flag_live(self.pv_accum, self.quant)

    @property
    def fp8_group_keys(self) -> int:
        """FP8 P@V with pv_accum "f16x2": keys per f16 sum before it is added to the f32 O, min(kv_tile,
        FP8_F16_KEYS) (a KV tile holds whole groups); MMA8_K otherwise (unused there)."""
        return min(self.kv_tile, FP8_F16_KEYS) if self.fp8_pv and self.pv_accum == "f16x2" else MMA8_K

    @property
    def fp8_v_range(self) -> float:
        """FP8 P@V: the e4m3 range V is quantized into (FP8_V_RANGE of the P@V accumulation)."""
        return FP8_V_RANGE[self.pv_accum]

    @property
    def q_in_registers(self) -> bool:
        """Q's fragments stay in registers for the KV loop (one m16 tile per warp and d <= Q_IN_REGISTERS_MAX_D);
        otherwise they are re-read from shared memory at each k16 step."""
        return self.m_tiles == 1 and self.head_dim <= Q_IN_REGISTERS_MAX_D

    @property
    def int8(self) -> bool:
        """Q K^T in INT8 (quant "int8")."""
        return self.quant in ("int8", "int8-fp8")

    @property
    def nvfp4(self) -> bool:
        """Q K^T in NVFP4 (quant "nvfp4"): e2m1 codes and ue4m3 block scales, sm_120a's block-scaled mma."""
        return self.quant == "nvfp4"

    @property
    def quantized(self) -> bool:
        """Q and K come from kernel/quantize.cu's pass (any quant): per-16-row f32 scales, K smoothed by its mean."""
        return self.quant != "none"

    @property
    def fp8_pv(self) -> bool:
        """P V in FP8 e4m3 (quant "int8-fp8", and "nvfp4", which takes the same P V path)."""
        return self.quant in ("int8-fp8", "nvfp4")

    @property
    def v_bytes(self) -> int:
        """Bytes of one V element in shared memory: 1 with FP8 P V (e4m3, stored transposed), else 2."""
        return 1 if self.fp8_pv else F16_BYTES

    @property
    def qk_bytes(self) -> int | Fraction:
        """Bytes of one Q / K element in shared memory: 1 with INT8 Q K^T, 1/2 with NVFP4 (two e2m1 codes a byte),
        else the element type's 2."""
        if self.nvfp4:
            return Fraction(1, 2)
        return INT8_BYTES if self.int8 else F16_BYTES

    @property
    def k_scale_bytes(self) -> int:
        """Block-scale bytes of one key in the K ring: d / FP4_BLOCK ue4m3 with NVFP4, else 0."""
        return self.head_dim // FP4_BLOCK if self.nvfp4 else 0

    @property
    def ring_mbarrier(self) -> bool:
        """The K / V ring is synchronised by mbarriers (a warp waits only for the tile it reads, and each slot is
        refilled once every thread is done with it) instead of cp.async groups and a block barrier per tile. Measured
        on the H200 against the block barrier (benchmarks/experiments/mbarrier_ring/): 1.06x f16 P@V, 1.02-1.03x f32,
        1.01x f16x2, 1.10x at d=64 with f16, and 0.94-0.98x with INT8 Q K^T, so every build but the quantized ones."""
        return self.quant == "none"

    @property
    def stage_o(self) -> bool:
        """The epilogue stages O through the warp's own rows of the Q tile and stores whole 16-byte chunks, instead of
        one 4-byte pair per lane and n8 tile from the accumulators (flashsim.tuning.STAGE_O: where it was measured
        to pay, unquantized builds only)."""
        if self.pack_gqa or self.split or self.warp_split > 1:  # packed rows are no head's rows; a part's O is f32
            return False
        return self.quant == "none" and STAGE_O.get((self.pv_accum, self.head_dim), False)

    @property
    def exp_in_pv(self) -> bool:
        """The softmax's exponentials run inside the P V loop: every m16 tile's max, alpha and O rescale first, then
        per k16 slice of P V its scores' exponentials (and row sums) beside its mma's, one basic block, so that ptxas
        issues them together. The same operations in the same order for every element: the bits do not change.
        flashsim.tuning.EXP_IN_PV says where (plain f16 / f32 P V paths only)."""
        if self.fp8_pv:
            return False
        return EXP_IN_PV.get((self.quant, self.pv_accum, self.head_dim), False)

    @property
    def masked(self) -> bool:
        """Some keys below Nk can be invisible (causal or a sliding window): tiles may be skipped and masked."""
        return self.causal or self.local

    @property
    def has_fused_form(self) -> bool:
        """Whether this serving configuration has a build with the index check inside flash_fwd (``fused``): all but
        a warp_split one with splits across blocks too, whose check stays a launch of its own."""
        return self.seqlens and not (self.warp_split > 1 and self.split)

    @property
    def block_m(self) -> int:
        """Query rows per block."""
        return MMA_M * self.m_tiles * self.warps // self.warp_split

    @property
    def warp_m(self) -> int:
        """Query rows per warp."""
        return MMA_M * self.m_tiles

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def score_ntiles(self) -> int:
        """n8 tiles of the S = Q K^T accumulator per warp."""
        return self.kv_tile // MMA_N

    @property
    def out_ntiles(self) -> int:
        """n8 tiles of the O accumulator per warp."""
        return self.head_dim // MMA_N

    @property
    def qk_ksteps(self) -> int:
        """k steps of Q K^T over the head dimension: k16 (f16 / bf16), k32 (INT8, m16n8k32) or k64 (NVFP4,
        m16n8k64): 32 bytes of a row each."""
        return int(self.head_dim * self.qk_bytes // (MMA_K * F16_BYTES))

    @property
    def pv_ksteps(self) -> int:
        """k16 steps of P V (over the keys of one tile)."""
        return self.kv_tile // MMA_K

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory the kernel asks for at launch."""
        return int(
            sum(
                smem_buffers(
                    self.block_m,
                    self.kv_tile,
                    self.head_dim,
                    self.stages,
                    qk_bytes=self.qk_bytes,
                    v_bytes=self.v_bytes,
                    ring_mbarrier=int(self.ring_mbarrier),
                    k_scale_bytes=self.k_scale_bytes,
                    rings=self.warp_split,
                ).values()
            )
        )

    # ---- checks and build ----------------------------------------------------------------
    def validate(self) -> None:
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"head_dim must be a multiple of 32 from 32 to 256, got {self.head_dim!r}")
        if not (isinstance(self.warps, int) and 1 <= self.warps <= 16):
            raise ValueError(f"warps must be an int in 1..16, got {self.warps!r}")
        if self.m_tiles not in SUPPORTED_M_TILES:
            raise ValueError(f"m_tiles must be one of {SUPPORTED_M_TILES}, got {self.m_tiles!r}")
        if not (
            isinstance(self.kv_tile, int) and self.kv_tile >= 16 and self.kv_tile % 16 == 0 and self.kv_tile <= 256
        ):
            raise ValueError(f"kv_tile must be a multiple of 16 in 16..256, got {self.kv_tile!r}")
        if self.stages not in SUPPORTED_STAGES:
            raise ValueError(f"stages must be one of {SUPPORTED_STAGES}, got {self.stages!r}")
        if self.pv_accum not in SUPPORTED_PV_ACCUM:
            raise ValueError(f"pv_accum must be one of {SUPPORTED_PV_ACCUM}, got {self.pv_accum!r}")
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype must be one of {SUPPORTED_DTYPES}, got {self.dtype!r}")
        if self.dtype == "bf16" and self.pv_accum not in pv_accums(self.dtype):
            raise ValueError(
                f"pv_accum={self.pv_accum!r} needs f16 inputs: mma.sync has no bf16 accumulator, so "
                "bf16 runs P@V with pv_accum='f32'"
            )
        if self.layout not in ("bhnd", "bnhd"):
            raise ValueError(f"layout must be 'bhnd' or 'bnhd', got {self.layout!r}")
        if self.quant not in SUPPORTED_QUANT:
            raise ValueError(f"quant must be one of {SUPPORTED_QUANT}, got {self.quant!r}")
        if self.fp8_pv and (
            self.dtype != "f16"
            or self.pv_accum not in pv_accums(self.dtype, self.quant)
            or self.kv_tile % MMA8_K
            or self.kv_tile % self.fp8_group_keys
        ):
            raise ValueError(
                f"quant={self.quant!r} (FP8 P@V) needs f16 inputs, pv_accum in {pv_accums('f16', self.quant)} (an f16 "
                f"O over the whole row has no overflow bound) and a kv_tile that is a multiple of 32 "
                f"(with 'f16x2': at most {FP8_F16_KEYS} or a multiple of it) (got dtype={self.dtype!r}, "
                f"pv_accum={self.pv_accum!r}, kv_tile={self.kv_tile})"
            )
        if self.nvfp4:
            self._validate_nvfp4()
        if self.int8 and self.softcap:
            raise ValueError(
                f"quant={self.quant!r} does not combine with softcap: K is smoothed by its mean over tokens, "
                "which shifts each row's scores by a constant; softmax ignores that shift, "
                "softcap's tanh does not"
            )
        for name in ("causal", "local", "softcap", "seqlens", "paged", "pack_gqa", "split", "fused"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        serving = [name for name in ("paged", "pack_gqa", "split", "fused") if getattr(self, name)]
        if not (isinstance(self.warp_split, int) and 1 <= self.warp_split <= 16):
            raise ValueError(f"warp_split must be an int in 1..16, got {self.warp_split!r}")
        if self.warp_split > 1 and (self.warps != self.warp_split or (self.fused and not self.has_fused_form)):
            raise ValueError(
                f"warp_split={self.warp_split} (split-KV inside the block) needs warps == warp_split and, with split "
                f"across blocks too, fused=False (got warps={self.warps}, split={self.split}, fused={self.fused}); a "
                "serving (KV-cache decode) configuration"
            )
        if serving and not self.seqlens:
            raise ValueError(f"{', '.join(serving)} need(s) seqlens=True (the serving kernel's per-sequence lengths)")
        if self.seqlens and (self.layout != "bnhd" or self.quant != "none"):
            raise ValueError(
                f"seqlens=True (serving: KV cache, variable-length batches) needs layout='bnhd' and quant='none', "
                f"got layout={self.layout!r}, quant={self.quant!r} (the quantization pass smooths K over one "
                "dense sequence)"
            )

    def _validate_nvfp4(self) -> None:
        """The NVFP4 variant's scope: what it was built and checked for, each other case refused by name."""
        off = [name for name in ("causal", "local", "softcap") if getattr(self, name)]
        if self.head_dim not in NVFP4_HEAD_DIMS or off or self.layout != "bhnd":
            raise ValueError(
                f"quant='nvfp4' is built for head_dim in {NVFP4_HEAD_DIMS}, layout 'bhnd', no causal / local / "
                f"softcap (got head_dim={self.head_dim}, layout={self.layout!r}"
                + (f", {', '.join(off)}" if off else "")
                + ")"
            )

    def check_arch(self, arch) -> None:
        """ValueError when this configuration cannot be built for ``arch``: quant 'nvfp4' needs sm_120a's
        block-scaled FP4 mma.sync (kind::mxf4nvf4), which no earlier arch has (sm_90 and sm_100 included: sm_100's
        block-scaled FP4 is tcgen05, not mma.sync)."""
        name = get_arch(arch).name
        if self.nvfp4 and name != NVFP4_ARCH:
            raise ValueError(
                f"quant='nvfp4' cannot be built for {name}: its Q K^T is mma.sync.m16n8k64.kind::mxf4nvf4 "
                f"(block-scaled FP4), which only {NVFP4_ARCH}a has (no FP4 mma.sync before sm_120a); use arch "
                f"{NVFP4_ARCH!r}, or quant 'int8-fp8' on {name}"
            )

    def build_arch(self, arch) -> str:
        """The NVRTC / ptxas target of this configuration's build for ``arch``: ``arch`` as given, or with NVFP4
        its arch-specific target sm_120a (the block-scaled mma and cvt to e2m1 exist only there; ``check_arch``
        refuses every other arch first)."""
        self.check_arch(arch)
        return NVFP4_ARCH + "a" if self.nvfp4 else arch

    def fits(self, arch="sm_120") -> bool:
        """True if the dynamic shared memory fits the arch's per-block opt-in cap."""
        return self.smem_bytes <= get_arch(arch).smem_per_block_optin

    def defines(self) -> dict[str, int]:
        """Preprocessor defines of the kernel build: the only way numbers reach kernel/*.cu."""
        return {
            "FS_HEAD_DIM": self.head_dim,
            "FS_WARPS": self.warps,
            "FS_M_TILES": self.m_tiles,
            "FS_KV_TILE": self.kv_tile,
            "FS_STAGES": self.stages,
            "FS_PV_F16": int(self.pv_accum == "f16"),
            "FS_PV_F16X2": int(self.pv_accum == "f16x2"),
            "FS_CAUSAL": int(self.causal),
            "FS_BF16": int(self.dtype == "bf16"),
            "FS_LOCAL": int(self.local),
            "FS_SOFTCAP": int(self.softcap),
            "FS_Q_IN_REGS": int(self.q_in_registers),
            "FS_MBAR": int(self.ring_mbarrier),
            "FS_OSTAGE": int(self.stage_o),
            "FS_EXP_IN_PV": int(self.exp_in_pv),
            "FS_BNHD": int(self.layout == "bnhd"),
            "FS_QUANT_INT8": int(self.int8),
            "FS_QUANT_FP8": int(self.fp8_pv),
            "FS_QUANT_NVFP4": int(self.nvfp4),
            "FS_FP4_BLOCK": FP4_BLOCK,
            "FS_NVFP4_ROW_DIV": int(NVFP4_ROW_DIV),  # kernel/quantize.cu's NVFP4 scales (exact ints as floats)
            "FS_NVFP4_SF_MAX": int(E4M3_MAX),
            "FS_QUANT_BLOCK": QUANT_BLOCK,
            "FS_MEAN_SLICES": MEAN_SLICES,
            "FS_FP8_P_SCALE": int(FP8_P_SCALE),
            "FS_FP8_GROUP_KEYS": self.fp8_group_keys,
            "FS_OVERFLOW_FLAG": int(self.pv_mma_f16),  # the kernel lowers the overflow flag (flashsim.overflow)
            "FS_QUANT_WARPS": QUANT_WARPS,  # kernel/quantize.cu's block shapes (flash_fwd ignores them; here
            "FS_QUANT_V_THREADS": QUANT_V_THREADS,  # so that an attention capture's record covers the whole pass)
            "FS_SEQLENS": int(self.seqlens),  # the serving switches: off, they compile nothing (the PTX of every
            "FS_PAGED": int(self.paged),  # build without them is the same as before they existed)
            "FS_PACK_GQA": int(self.pack_gqa),
            "FS_SPLIT": int(self.split),
            "FS_COMBINE_WARPS": COMBINE_WARPS,  # flash_combine's block (split builds)
            "FS_MAX_SPLITS": MAX_SPLITS,  # flash_combine's staging of a row's parts
            "FS_FUSED": int(self.fused),  # the index check inside flash_fwd (off: compiles nothing)
            "FS_WARP_SPLIT": self.warp_split,  # split-KV inside the block (1: compiles nothing)
            "FS_FUSED_HEADER": FUSED_HEADER,  # the fused state's words
        }

    def quantize_defines(self) -> dict[str, int]:
        """The defines of kernel/quantize.cu's build (a subset of ``defines``: the quantization pass depends on
        the head dim, the element type, the two quantization constants and its own block shapes)."""
        d = self.defines()
        return {
            k: d[k]
            for k in (
                "FS_HEAD_DIM",
                "FS_BF16",
                "FS_QUANT_NVFP4",
                "FS_FP4_BLOCK",
                "FS_NVFP4_ROW_DIV",
                "FS_NVFP4_SF_MAX",
                "FS_QUANT_BLOCK",
                "FS_MEAN_SLICES",
                "FS_QUANT_WARPS",
                "FS_QUANT_V_THREADS",
            )
        }

    def with_(self, **changes) -> KernelConfig:
        return replace(self, **changes)

    @classmethod
    def default(cls, arch="sm_120", **overrides) -> KernelConfig:
        """The default configuration for an arch; keyword overrides win over it.

        The tiling (warps, m_tiles, kv_tile, stages) comes from DEFAULT_TILES (QUANT_TILES first with a quant) for
        the arch's class (``tile_class``)
        and the P@V accumulation (bf16 takes f32's) and head dim: measured on the H200 for sm_90 (sm_100, untested,
        takes sm_90's), predicted for sm_120 and sm_8x (about 99 KB per block), see DEFAULT_TILES.
        """
        a = get_arch(arch)
        head_dim = overrides.get("head_dim", cls.head_dim)
        acc = overrides.get("pv_accum", cls.pv_accum)
        quant = overrides.get("quant", cls.quant)
        key = (tile_class(a.name), acc, head_dim)
        if key not in DEFAULT_TILES:
            return cls(**overrides)  # validate() names what is unsupported
        # FP8 P@V keeps O in f32 with either accumulation: f16x2 takes f32's tiling unless QUANT_TILES says otherwise
        base = (key[0], "f32", head_dim) if quant in ("int8-fp8", "nvfp4") else key
        warps, m_tiles, kv_tile, stages = QUANT_TILES.get(
            (quant, *key), QUANT_TILES.get((quant, *base), DEFAULT_TILES[base])
        )
        tuned = dict(warps=warps, m_tiles=m_tiles, kv_tile=kv_tile, stages=stages)
        config = cls(**{**tuned, **overrides})
        config.check_arch(a)
        return config

    def describe(self) -> str:
        """Every field as name=value; the serving switches and counts only where they are on (they are off for every
        flashsim.attention configuration)."""
        off = {**{name: False for name in SERVING_SWITCHES}, **SERVING_COUNTS}
        return ", ".join(
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if f.name not in off or getattr(self, f.name) != off[f.name]
        )
