"""The kernel configuration: one description shared by the emulator, the budget model and the kernel build.

Every number that shapes the kernel lives here once. The CUDA source receives it as preprocessor
defines (``KernelConfig.defines``), the emulator tiles its loops with it, and the budget model
evaluates ``smem_buffers`` on sympy symbols or on these integers: the same formula both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .arch import get_arch

F16_BYTES = 2  # f16 and bf16 elements alike
MMA_M, MMA_N, MMA_K = 16, 8, 16  # mma.sync.m16n8k16
MMA8_K = 32  # mma.sync.m16n8k32 (8-bit inputs): keys per FP8 P@V step
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
SUPPORTED_QUANT = ("none", "int8", "int8-fp8")
E4M3_MAX = 448.0  # e4m3's largest finite value (cvt.rn.satfinite clamps to it)
F16_MAX = 65504.0  # f16's largest finite value
FP8_P_SCALE = E4M3_MAX  # P in [0, 1] times this into e4m3
# FP8 P@V with f16 accumulation (pv_accum "f16x2"): the f16 mma sums FP8_F16_KEYS keys (two k32 mma's, as
# SageAttention2++'s delayed FP32 buffering) from zero, then the sum is added to the f32 O. Every product is at most
# FP8_P_SCALE * v_range, so V is quantized into the largest e4m3 range v_range with FP8_F16_KEYS * FP8_P_SCALE *
# v_range <= F16_MAX: 2.25 (64 * 448 * 2.25 = 64512; SageAttention2++ narrows P and V to the same end).
# proofs/prove_fp8_f16_range.py proves that no f16 sum the mma makes can then reach inf, rounding included.
FP8_F16_KEYS = 64


def e4m3_floor(x: float) -> float:
    """The largest finite e4m3 value <= x (x >= 0), from the format's 256 bit patterns."""
    import ml_dtypes
    import numpy as np

    vals = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return float(vals[np.isfinite(vals) & (vals <= x)].max())


# V's e4m3 range per P@V accumulation (kernel/quantize.cu's v_absmax receives it): v8 = e4m3(v * range / amax).
FP8_V_RANGE = {"f32": E4M3_MAX, "f16x2": e4m3_floor(F16_MAX / (FP8_F16_KEYS * FP8_P_SCALE))}


def pv_accums(dtype: str = "f16", quant: str = "none") -> tuple[str, ...]:
    """The P@V accumulations a kernel of element type ``dtype`` and ``quant`` can run: f32 only with bf16 (mma.sync
    has no bf16 accumulator); FP8 P@V those of FP8_V_RANGE (an f16 O over the whole row, pv_accum "f16", has no
    bound: it sums up to Nk products); else SUPPORTED_PV_ACCUM."""
    if dtype == "bf16":
        return ("f32",)
    return tuple(FP8_V_RANGE) if quant == "int8-fp8" else SUPPORTED_PV_ACCUM


def fp8_keys(nk: int) -> int:
    """Keys of FP8 P@V's V^T (kernel/quantize.cu): nk rounded up to whole k32 steps, zeros past nk."""
    return -(-nk // MMA8_K) * MMA8_K


QUANT_BLOCK = 16  # query rows / keys per INT8 scale: one m16 tile of Q, one k16 slice of K
MEAN_SLICES = 16  # interleaved partial sums of K's mean over tokens (kernel/quantize.cu k_mean)
QUANT_WARPS = 4  # quantize_k / quantize_q: warps per block, one per 16-row block
QUANT_V_THREADS = 256  # quantize_v's block (its __launch_bounds__ and loop stride)
INT8_BYTES = 1
# Q fragments stay in registers for the whole KV loop only up to this head dim (d/16 x4 fragments = d/4 registers a
# lane); above it O alone is d/2 f32 registers and Q is re-read from shared memory at each k16 step instead.
Q_IN_REGISTERS_MAX_D = 128


MBARRIER_BYTES = 8  # one mbarrier object (PTX: .b64 in shared memory)


def smem_buffers(
    block_m, kv_tile, head_dim, stages, elem_bytes=F16_BYTES, qk_bytes=None, v_bytes=None, ring_mbarrier=0
):
    """Shared-memory buffers of one block, name -> bytes.

    ``qk_bytes``: bytes of a Q / K element in shared memory (default ``elem_bytes``; 1 with quant="int8");
    ``v_bytes``: of a V element (default ``elem_bytes``; 1 with quant="int8-fp8");
    ``ring_mbarrier``: 1 when the K / V ring is synchronised by mbarriers (KernelConfig.ring_mbarrier): a "full" and
    an "empty" barrier per slot after the V ring, else 0.

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
        "K ring": stages * kv_tile * head_dim * qk_bytes,
        "V ring": stages * kv_tile * head_dim * v_bytes,
        "ring barriers": 2 * stages * MBARRIER_BYTES * ring_mbarrier,
    }


# The default tiling per (arch class, pv_accum, head_dim), generated by tools/choose_defaults.py from
# benchmarks/logs/2026-11-30b/ (register_sweep.json: ptxas registers and spills of every candidate for sm_90 and
# sm_120; tile_sweep*.json: H200 timings at 4 x 16 x 4096 x d, f16, non-causal).
# sm_90: the fastest measured tiling that builds without spills, or with a few spill bytes where measured more than
#   3% faster (d=128 f32: 4x2x32 spills 8 B and runs 339 TFLOP/s against 294 for the best spill-free one; d=128
#   f16x2: 8x2x64 spills 28 B and runs 304 against 286 for the best spill-free one); d=256 with f32 (48 B) and
#   f16x2 at d=192 and 256 (16 B) have no spill-free tiling on sm_90.
#   Re-timed once the mbarrier ring landed (benchmarks/logs/2026-12-01/: register_sweep.json, tile_sweep.txt, then
#   tools/tile_ab.py, the old and the new tiling in alternating rounds, tile_ab.txt), two rows changed:
#   d=64 f16 8x2x128x2 -> 4x2x128x3 (1.032x at 4,16,4096, 1.086x causal, 1.056x at 16,16,1024; bit-identical O);
#   d=128 f32 4x2x32x3 -> 4x2x64x2 (spills 48 B; 1.029x, 1.087x causal, 1.033x at 16,16,1024). d=64 f32 stays at
#   4x2x64x3: 4x2x128x3 ran 1.054x full but 0.937x causal.
#   Once O staging landed (KernelConfig.stage_o; benchmarks/logs/2026-12-01e/tile_ab.txt): d=128 f16x2 8x2x64x2 ->
#   4x2x64x2 (no spill now: 1.095x, 1.150x causal, 1.101x at 16,16,1024; bit-identical O). d=128 f32 keeps 4x2x64x2
#   (8x2x64x2 0.90-0.93x, 4x2x32x3 0.90-0.92x).
# sm_120 (a prediction: nothing runs here): the spill-free tiling (sm_120 ptxas) that fits 99 KB with the most warps
#   per SM, then the most rows per block, the widest kv_tile, the fewest registers (tools/choose_defaults.py).
DEFAULT_TILES = {  # (arch class, pv_accum, head_dim) -> (warps, m_tiles, kv_tile, stages)
    ("sm_120", "f16", 32): (4, 1, 32, 2),
    ("sm_120", "f16", 64): (8, 1, 32, 3),
    ("sm_120", "f16", 96): (8, 2, 64, 2),
    ("sm_120", "f16", 128): (8, 2, 32, 2),
    ("sm_120", "f16", 160): (8, 1, 32, 2),
    ("sm_120", "f16", 192): (8, 1, 32, 2),
    ("sm_120", "f16", 224): (4, 1, 32, 2),
    ("sm_120", "f16", 256): (4, 1, 32, 2),
    ("sm_120", "f16x2", 32): (4, 1, 32, 3),
    ("sm_120", "f16x2", 64): (4, 1, 32, 3),
    ("sm_120", "f16x2", 96): (8, 2, 32, 3),
    ("sm_120", "f16x2", 128): (8, 2, 32, 2),
    ("sm_120", "f16x2", 160): (8, 1, 32, 2),
    ("sm_120", "f16x2", 192): (8, 1, 32, 2),
    ("sm_120", "f16x2", 224): (4, 1, 32, 2),
    ("sm_120", "f16x2", 256): (4, 1, 32, 2),
    ("sm_120", "f32", 32): (4, 1, 32, 3),
    ("sm_120", "f32", 64): (8, 1, 32, 3),
    ("sm_120", "f32", 96): (8, 2, 64, 2),
    ("sm_120", "f32", 128): (8, 2, 32, 2),
    ("sm_120", "f32", 160): (8, 1, 32, 2),
    ("sm_120", "f32", 192): (8, 1, 32, 2),
    ("sm_120", "f32", 224): (4, 1, 32, 2),
    ("sm_120", "f32", 256): (4, 1, 32, 2),
    ("sm_90", "f16", 32): (4, 2, 64, 3),
    ("sm_90", "f16", 64): (4, 2, 128, 3),
    ("sm_90", "f16", 96): (4, 2, 64, 3),
    ("sm_90", "f16", 128): (4, 2, 64, 2),
    ("sm_90", "f16", 160): (4, 2, 32, 2),
    ("sm_90", "f16", 192): (4, 2, 32, 2),
    ("sm_90", "f16", 224): (8, 1, 64, 2),
    ("sm_90", "f16", 256): (4, 1, 32, 2),
    ("sm_90", "f16x2", 32): (4, 1, 128, 2),
    ("sm_90", "f16x2", 64): (8, 2, 64, 2),
    ("sm_90", "f16x2", 96): (4, 1, 64, 2),
    ("sm_90", "f16x2", 128): (4, 2, 64, 2),
    ("sm_90", "f16x2", 160): (8, 1, 64, 3),
    ("sm_90", "f16x2", 192): (4, 1, 32, 3),
    ("sm_90", "f16x2", 224): (4, 1, 32, 3),
    ("sm_90", "f16x2", 256): (8, 1, 32, 3),
    ("sm_90", "f32", 32): (4, 2, 128, 2),
    ("sm_90", "f32", 64): (4, 2, 64, 3),
    ("sm_90", "f32", 96): (8, 1, 128, 3),
    ("sm_90", "f32", 128): (4, 2, 64, 2),
    ("sm_90", "f32", 160): (4, 1, 64, 2),
    ("sm_90", "f32", 192): (8, 1, 64, 3),
    ("sm_90", "f32", 224): (8, 1, 32, 3),
    ("sm_90", "f32", 256): (8, 1, 32, 2),
}


# quant="int8" takes DEFAULT_TILES' tiling except where its own sweep chose another (benchmarks/logs/2026-11-30c:
# register_sweep_int8.json, tile_sweep_int8*.json, attention kernel alone on the H200): d=64 f16, where the f16
# table's 8x2x128 spills 60 B under int8 and 4x2x64 builds clean and ran 342 TFLOP/s against 332 (bench_quant).
# At d = 64 / 128 with f32 and f16 P@V the sweep's best is the f16 table's tiling (within 1%); the other head dims
# are not re-timed for int8 (the f16 table's tiling spills 16-48 B under int8 at sm_90 d=224/256 and sm_120 d=96
# f32: flashsim budget --every-head-dim --quant int8).
# quant="int8-fp8" (f32 P@V): the f32 table's tiling where it builds without spills under FP8 P@V, else (ptxas,
# register_sweep_int8_fp8.json) the same warps x m16 tiles with the largest kv_tile that does; at d = 64 and 128 the
# fastest timed on the H200 (tile_sweep_int8_fp8.txt: 272.0 and 325.0 TFLOP/s, kernel alone), elsewhere a prediction.
# quant="int8-fp8" with f16x2 (two-level f16 accumulation, O still f32): the f32 row's tiling, which builds without
# spills under f16x2 everywhere (benchmarks/logs/2026-11-30d/register_sweep_int8_fp8_f16x2.json) but at sm_90 d=64
# (52 B: 4x2x32 instead, the same warps x m16 tiles with the widest spill-free kv_tile) and sm_90 d=224 (16 B, as
# with f32: no spill-free tiling there). Timed on the H200 at d = 64 and 128 (tile_sweep_int8_fp8_f16x2.txt, every
# spill-free candidate): these two are within 1% of the fastest (239.7 vs 241.7, 306.8 vs 308.6 TFLOP/s), run-to-run
# noise, so they stay; the other head dims are a prediction.
QUANT_TILES = {  # (quant, arch class, pv_accum, head_dim) -> (warps, m_tiles, kv_tile, stages)
    ("int8", "sm_90", "f16", 64): (4, 2, 64, 2),
    ("int8", "sm_90", "f32", 128): (4, 2, 32, 3),  # the f32 row before 2026-12-01's re-timing (timed with INT8 then)
    ("int8-fp8", "sm_90", "f32", 32): (4, 2, 64, 2),
    ("int8-fp8", "sm_90", "f32", 64): (4, 2, 64, 2),
    ("int8-fp8", "sm_90", "f32", 96): (8, 1, 64, 3),
    ("int8-fp8", "sm_90", "f32", 128): (4, 2, 32, 2),
    ("int8-fp8", "sm_90", "f32", 160): (4, 1, 32, 2),
    ("int8-fp8", "sm_90", "f32", 192): (8, 1, 32, 3),
    ("int8-fp8", "sm_120", "f32", 96): (8, 2, 32, 2),
    ("int8-fp8", "sm_90", "f16x2", 64): (4, 2, 32, 2),
}


# The most spill bytes (stores + loads) a default tiling may have: DEFAULT_TILES takes a spilling tiling only where
# it was measured faster than every spill-free one, or where none builds without spills (see above).
MAX_DEFAULT_SPILL_BYTES = 128


def seed_config() -> KernelConfig:
    """The design note's block, which flashsim prove's claims and the budget's what-ifs are about: d = 128, 8 warps of
    16 query rows, kv_tile 64, a 2-stage ring (96 KB on sm_120). Not a default any more: DEFAULT_TILES predicts
    8 warps x 2 m16 tiles with kv_tile 32 for sm_120 at d = 128 (the same 96 KB)."""
    return KernelConfig(head_dim=128, warps=8, m_tiles=1, kv_tile=64, stages=2)


def tile_class(arch: str) -> str:
    """The DEFAULT_TILES row an arch reads: "sm_90" for the 227 KB-per-block GPUs (sm_90, sm_100), "sm_120" for
    the 99 KB ones (sm_120, sm_8x)."""
    return "sm_90" if get_arch(arch).smem_per_block_optin > 200 * 1024 else "sm_120"


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

    def __post_init__(self):
        self.validate()

    # ---- derived -------------------------------------------------------------------------
    @property
    def o_f16(self) -> bool:
        """The O accumulator is f16 (pv_accum "f16"); otherwise f32."""
        return self.pv_accum == "f16"

    @property
    def pv_mma_f16(self) -> bool:
        """The P@V mma accumulates in f16 (pv_accum "f16" or "f16x2") on f16 P and V, so its result can overflow
        f16's range (the kernel's overflow flag is live). Not with FP8 P@V: V's range makes every f16 sum finite
        (FP8_V_RANGE, proofs/prove_fp8_f16_range.py)."""
        return self.pv_accum in ("f16", "f16x2") and not self.fp8_pv

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
    def fp8_pv(self) -> bool:
        """P V in FP8 e4m3 (quant "int8-fp8")."""
        return self.quant == "int8-fp8"

    @property
    def v_bytes(self) -> int:
        """Bytes of one V element in shared memory: 1 with FP8 P V (e4m3, stored transposed), else 2."""
        return 1 if self.fp8_pv else F16_BYTES

    @property
    def qk_bytes(self) -> int:
        """Bytes of one Q / K element in shared memory: 1 with INT8 Q K^T, else the element type's 2."""
        return INT8_BYTES if self.int8 else F16_BYTES

    @property
    def ring_mbarrier(self) -> bool:
        """The K / V ring is synchronised by mbarriers (a warp waits only for the tile it reads, and each slot is
        refilled once every thread is done with it) instead of cp.async groups and a block barrier per tile. Measured
        on the H200 against the block barrier (benchmarks/RESULTS.md, seventh round): 1.06x f16 P@V, 1.02-1.03x f32,
        1.01x f16x2, 1.10x at d=64 with f16, and 0.94-0.98x with INT8 Q K^T, so every build but the quantized ones."""
        return self.quant == "none"

    @property
    def stage_o(self) -> bool:
        """The epilogue stages O through the warp's own rows of the Q tile and stores whole 16-byte chunks, instead of
        one 4-byte pair per lane and n8 tile from the accumulators. With it ptxas holds the O of the wide builds in
        fewer registers or without the spill the direct stores' per-row addresses cost (ptxas, not a measured cause).
        Measured on the H200, in alternating rounds against the same build unstaged (benchmarks/RESULTS.md, eighth
        and ninth rounds): at d=128 1.07-1.09x with f32 P@V (its 48 B of spill gone), 1.02-1.04x with f16x2, but
        0.99-1.00x with f16 P@V (nothing to remove); at d=192 f16 1.02-1.07x (20 B of spill gone), d=256 f16
        1.01-1.04x, d=160 f16x2 1.03-1.05x, d=224 f16x2 1.01-1.04x (32 -> 16 B); at d=64 f32 0.97-1.01x. So every
        build from d=128 up but f16 P@V at d=128, and never f16x2 at d=192 / 256, where the staging's addresses make
        the sm_90 defaults spill more: 96 -> 104 B and 8 -> 584 B (benchmarks/experiments/stage_o_wider/regs_all.txt).
        Never below d=128 (d=64 gains nothing; ptxas: sm_120's d=96 f32 default would spill 56 B) nor with INT8 Q K^T:
        its Q rows (1 byte an element) are half an O row."""
        if self.quant != "none" or self.head_dim < 128:
            return False
        if self.pv_accum == "f16":
            return self.head_dim > 128
        return self.pv_accum == "f32" or self.head_dim not in (192, 256)

    @property
    def exp_in_pv(self) -> bool:
        """The softmax's exponentials run inside the P V loop: every m16 tile's max, alpha and O rescale first, then
        per k16 slice of P V its scores' exponentials (and row sums) beside its mma's, one basic block, so that ptxas
        issues them together (the rescale's warp vote, from d=128 up, otherwise splits them). The same operations in
        the same order for every element: the bits do not change. The plain f16 / f32 P V path only (f16x2 and FP8
        P V pack all of P first). Measured on the H200 against the same build without it, at 4,16,4096 / 16,16,1024
        (benchmarks/RESULTS.md, tenth round; benchmarks/experiments/exp_in_pv/): d=128 f16 P@V 1.018-1.021 /
        1.014-1.016, d=160 f16 1.049 / 1.024, f32 1.046 / 1.046, d=192 f32 1.041 / 1.056, d=224 f16 1.046 / 1.008,
        f32 1.050 / 1.053, d=256 f16 1.019 / 1.028, f32 1.018 / 1.017, causal d=160-256 1.015-1.042, INT8 d=160 f16
        1.018 / 0.997, d=256 f16 1.056 / 1.045; timed after it landed, without it against with it (run_off.sh):
        d=160-256 causal f32 / f16 and INT8 d=224 f16 ran 1.01-1.13x faster with it; causal d=128 f16 over N
        (run_causal.sh): 1.009, 1.007, 1.018, 1.015-1.024, 1.017 at N = 512 ... 8192 (two earlier readings at
        N = 1024, 0.918 and 0.971, lie within the short launches' spread: the same build twice read 0.954 at N = 512).
        Left out: f32 P@V at d=128 (255 registers: 8-88 B of spill with it and 0.94-0.97x; its tilings that do not
        spill run 0.90-0.93x the default, and interleaving fewer slices without spill 0.96-0.99x), f16 P@V at d=192
        (ptxas: 32-152 B of spill with it) and INT8 but with f16 P@V from d=160 up (INT8 d=128: 240 B of spill and
        0.97-0.99x with fewer slices; INT8 f32 P@V unmeasured)."""
        d, acc = self.head_dim, self.pv_accum
        if d < 128 or acc not in ("f16", "f32") or self.fp8_pv:
            return False
        if self.quant != "none":
            return acc == "f16" and d >= 160 and d != 192
        if d == 128:
            return acc == "f16"
        return not (d == 192 and acc == "f16")

    @property
    def masked(self) -> bool:
        """Some keys below Nk can be invisible (causal or a sliding window): tiles may be skipped and masked."""
        return self.causal or self.local

    @property
    def block_m(self) -> int:
        """Query rows per block."""
        return MMA_M * self.m_tiles * self.warps

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
        """k steps of Q K^T over the head dimension: k16 (f16 / bf16), or k32 (INT8, m16n8k32)."""
        return self.head_dim * self.qk_bytes // (MMA_K * F16_BYTES)

    @property
    def pv_ksteps(self) -> int:
        """k16 steps of P V (over the keys of one tile)."""
        return self.kv_tile // MMA_K

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory the kernel asks for at launch."""
        return sum(
            smem_buffers(
                self.block_m,
                self.kv_tile,
                self.head_dim,
                self.stages,
                qk_bytes=self.qk_bytes,
                v_bytes=self.v_bytes,
                ring_mbarrier=int(self.ring_mbarrier),
            ).values()
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
                f"quant='int8-fp8' needs f16 inputs, pv_accum in {pv_accums('f16', self.quant)} (an f16 "
                f"O over the whole row has no overflow bound) and a kv_tile that is a multiple of 32 "
                f"(with 'f16x2': at most {FP8_F16_KEYS} or a multiple of it) (got dtype={self.dtype!r}, "
                f"pv_accum={self.pv_accum!r}, kv_tile={self.kv_tile})"
            )
        if self.int8 and self.softcap:
            raise ValueError(
                f"quant={self.quant!r} does not combine with softcap: K is smoothed by its mean over tokens, "
                "which shifts each row's scores by a constant; softmax ignores that shift, "
                "softcap's tanh does not"
            )
        for name in ("causal", "local", "softcap"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")

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
            "FS_QUANT_BLOCK": QUANT_BLOCK,
            "FS_MEAN_SLICES": MEAN_SLICES,
            "FS_FP8_P_SCALE": int(FP8_P_SCALE),
            "FS_FP8_GROUP_KEYS": self.fp8_group_keys,
            "FS_OVERFLOW_FLAG": int(self.pv_mma_f16),  # the kernel lowers the overflow flag (flashsim.overflow)
            "FS_QUANT_WARPS": QUANT_WARPS,  # kernel/quantize.cu's block shapes (flash_fwd ignores them; here
            "FS_QUANT_V_THREADS": QUANT_V_THREADS,  # so that an attention capture's record covers the whole pass)
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
        base = (key[0], "f32", head_dim) if quant == "int8-fp8" else key
        warps, m_tiles, kv_tile, stages = QUANT_TILES.get(
            (quant, *key), QUANT_TILES.get((quant, *base), DEFAULT_TILES[base])
        )
        tuned = dict(warps=warps, m_tiles=m_tiles, kv_tile=kv_tile, stages=stages)
        return cls(**{**tuned, **overrides})

    def describe(self) -> str:
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))
