"""The numbers kernel/ and the emulator share: mma shapes, element sizes, the quantization and FP8 constants, and
the constants of the kernel's scalar math (log, tanh), with the defines through which they reach the CUDA source.

A neutral module (numpy and ml_dtypes only): the kernel build (flashsim.gpu, flashsim.provenance), the emulator
(flashsim.emulator) and the configuration (flashsim.config) all read their numbers from here, so that none of them
imports another for a constant, and no number is written twice.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

F16_BYTES = 2  # f16 and bf16 elements alike
MMA_M, MMA_N, MMA_K = 16, 8, 16  # mma.sync.m16n8k16
MMA8_K = 32  # mma.sync.m16n8k32 (8-bit inputs): keys per FP8 P@V step
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
    vals = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return float(vals[np.isfinite(vals) & (vals <= x)].max())


# V's e4m3 range per P@V accumulation (kernel/quantize.cu's v_absmax receives it): v8 = e4m3(v * range / amax).
FP8_V_RANGE = {"f32": E4M3_MAX, "f16x2": e4m3_floor(F16_MAX / (FP8_F16_KEYS * FP8_P_SCALE))}


def fp8_keys(nk: int) -> int:
    """Keys of FP8 P@V's V^T (kernel/quantize.cu): nk rounded up to whole k32 steps, zeros past nk."""
    return -(-nk // MMA8_K) * MMA8_K


QUANT_BLOCK = 16  # query rows / keys per INT8 scale: one m16 tile of Q, one k16 slice of K
# NVFP4 Q K^T (quant "nvfp4", kernel/quantize.cu's quantize_k_fp4 / quantize_q_fp4): each row of Q and K (K smoothed
# by its mean, as INT8's) is cut into FP4_BLOCK elements along d, each block one ue4m3 scale and sixteen e2m1 codes;
# above them one f32 scale per QUANT_BLOCK rows (as INT8's), amax_rows / (E2M1_MAX * E4M3_MAX), so the block scales
# of those rows span ue4m3's whole range [0, 448] (NVFP4's per-tensor global scale, taken per 16 rows).
# mma.sync.m16n8k64 kind::mxf4nvf4 scale_vec::4X ue4m3 multiplies the codes and their block scales (MMA4_K = 64:
# four FP4_BLOCK chunks of a row per k64 step).
FP4_BLOCK = 16
E2M1_MAX = 6.0  # e2m1's largest value (cvt.rn.satfinite.e2m1x2 clamps to it)
NVFP4_ROW_DIV = E2M1_MAX * E4M3_MAX  # 2688: a 16-row block's f32 scale is its amax / this (exact in f32)
MMA4_K = 64
MEAN_SLICES = 16  # interleaved partial sums of K's mean over tokens (kernel/quantize.cu k_mean)
QUANT_WARPS = 4  # quantize_k / quantize_q: warps per block, one per 16-row block
QUANT_V_THREADS = 256  # quantize_v's block (its __launch_bounds__ and loop stride)
INT8_BYTES = 1
# Q fragments stay in registers for the whole KV loop only up to this head dim (d/16 x4 fragments = d/4 registers a
# lane); above it O alone is d/2 f32 registers and Q is re-read from shared memory at each k16 step instead.
Q_IN_REGISTERS_MAX_D = 128


MBARRIER_BYTES = 8  # one mbarrier object (PTX: .b64 in shared memory)


# ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2)): odd series 2(s + s^3/3 + ... + s^9/9).
# |s| <= 0.1716, so the first omitted term, 2 s^11 / 11, is below 7e-10 relative: under half an f32 ulp.
LOG_CONSTANTS = {
    "SQRT2": np.float32(np.sqrt(2.0)),
    "C3": np.float32(1.0 / 3.0),
    "C5": np.float32(1.0 / 5.0),
    "C7": np.float32(1.0 / 7.0),
    "C9": np.float32(1.0 / 9.0),
    "LN2": np.float32(np.log(2.0)),
}


# tanh(a) for a = |y| >= 0: e = ex2(a * -TWO_LOG2E) = exp(-2a); tanh(a) = (1 - e) * rcp(1 + e), then y's sign.
TANH_CONSTANTS = {
    "TWO_LOG2E": np.float32(2.0 / np.log(2.0)),
}


# The combine of split-KV (flash_combine; flashsim.emulator.kernel_program.combine): a part's weight is
# ex2((lse_s - max) * LOG2E), its natural-log LSE taken to base 2 by one IEEE multiply.
COMBINE_CONSTANTS = {
    "LOG2E": np.float32(1.0 / np.log(2.0)),
}
COMBINE_WARPS = 4  # flash_combine: warps per block, one query row each
MAX_SPLITS = 128  # split-KV's most parts per row (FlashAttention-2's bound): flash_combine stages a row's weights
FUSED_HEADER = 4  # u32 words of a fused serving launch's state (kernel/flash_fwd.cu, FUSED)


def math_defines() -> dict[str, int]:
    """The FS_LOG_*, FS_TANH_* and FS_COMBINE_* defines: each constant as the bit pattern of its float32 (all
    positive, < 2^31)."""
    consts = {
        **{f"FS_LOG_{k}": v for k, v in LOG_CONSTANTS.items()},
        **{f"FS_TANH_{k}": v for k, v in TANH_CONSTANTS.items()},
        **{f"FS_COMBINE_{k}": v for k, v in COMBINE_CONSTANTS.items()},
    }
    return {k: int(np.asarray(v, np.float32).view(np.uint32)) for k, v in consts.items()}


def v_scalars(v_range: float):
    """v_absmax's two f32 arguments: (v_range, FP8_P_SCALE * v_range), the product exact in f32 (checked)."""
    r = np.float32(v_range)
    div = np.float32(FP8_P_SCALE) * r
    if float(div) != FP8_P_SCALE * float(v_range) or float(r) != v_range:
        raise ValueError(f"v_range {v_range!r}: {FP8_P_SCALE:g} * v_range must be exact in f32")
    return r, div
