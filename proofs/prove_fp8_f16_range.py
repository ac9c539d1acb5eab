"""FP8 P@V with f16 accumulation (quant "int8-fp8", pv_accum "f16x2") can never overflow f16.

The kernel (kernel/flash_fwd.cu, FP8_PV with FS_PV_F16X2) sums P V over groups of G = config.fp8_group_keys <=
FP8_F16_KEYS keys with the f16 mma.sync.m16n8k32 e4m3 from +0, then adds each group's sum to the f32 O. Its
operands are bounded by construction:
  * p8 = cvt.rn.satfinite.e4m3(p * FP8_P_SCALE): saturation keeps |p8| <= 448 whatever p is (p <= 1 up to the
    rounding of the scaled max; satfinite clamps the rest);
  * v8 = e4m3(v * v_inv), v_inv = RN32(Vr / amax) with amax = max |v| of the channel: |v * v_inv| <= Vr (1 + 2^-24)^2
    before the e4m3 rounding, which is below the midpoint of Vr and the next e4m3 value, so |v8| <= Vr.
So every product is at most Pr Vr (Pr = FP8_P_SCALE, Vr = FP8_V_RANGE["f16x2"]) and a group's exact sum of
magnitudes at most S = G Pr Vr <= FP8_F16_KEYS Pr Vr.

The tensor-core model (flashsim.arch): each fused block truncates its terms toward zero (no magnitude grows) and
rounds its result once, to nearest f16 with f16 accumulation (relative error <= u = 2^-11 in the normal range, where
overflow could happen). A native FP8 mma (sm_89, sm_120: MMA-Sim's blocks of mma8_block_k products) is
R = 32 / mma8_block_k such roundings; sm_90's is ptxas's lowering onto the f16 mma (mma8_on_f16_mma): two
HMMA.16816 of 16 / mma_block_k blocks each, then c added with one more rounding to nearest (HADD2), so
R = 2 (16 / mma_block_k) + 1. Either way an mma is at most R roundings of sums of magnitudes, and after the G / 32
mma's of a group every intermediate value is at most
(1 + u)^(R G / 32) S. The proof checks, in exact rationals, that this is below 65504 for every arch with an FP8
model, that Vr is the largest e4m3 value with FP8_F16_KEYS Pr Vr <= 65504 (the next one, 2.5, overflows), and runs
the model on the worst case (every p8 = 448 and every v8 = +-Vr: each group's sum is exactly 64512, finite) and on
the next range (v8 = 2.5: inf), on numpy.
"""

from __future__ import annotations

import pathlib
import sys

try:
    import flashsim  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import ml_dtypes
import numpy as np
import sympy as sp

from flashsim.arch import get_arch
from flashsim.constants import F16_MAX, FP8_F16_KEYS, FP8_P_SCALE, FP8_V_RANGE, MMA8_K, e4m3_floor
from flashsim.prove.runner import run_as_script, run_steps

TITLE = "FP8 P@V with f16 accumulation: no group sum can overflow f16 (V's range FP8_V_RANGE['f16x2'])"

FP8_ARCHES = ("sm_89", "sm_90", "sm_120")  # the presets with an FP8 mma.sync model
U16 = sp.Rational(1, 2**11)  # f16's unit roundoff (round to nearest)
HMMA_K = 16  # k of the f16 mma (m16n8k16, HMMA.16816) sm_90's FP8 mma lowers to
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


def _e4m3_values() -> list[sp.Rational]:
    vals = np.arange(256, dtype=np.uint8).view(E4M3).astype(np.float64)
    return sorted({sp.Rational(float(x)) for x in vals if np.isfinite(x) and x >= 0})


def step_range_is_the_largest():
    vr, pr = sp.Rational(FP8_V_RANGE["f16x2"]), sp.Rational(FP8_P_SCALE)
    g, top = FP8_F16_KEYS, sp.Rational(F16_MAX)
    vals = _e4m3_values()
    nxt = min(x for x in vals if x > vr)
    ok = vr in vals and g * pr * vr <= top < g * pr * nxt and sp.Rational(e4m3_floor(F16_MAX / (g * FP8_P_SCALE))) == vr
    return ok, (
        f"Vr = {vr} is e4m3 and {g} * {pr} * Vr = {g * pr * vr} <= {top}; the next e4m3 value {nxt} gives "
        f"{g * pr * nxt} > {top}"
    )


def step_v8_stays_in_range():
    vr = sp.Rational(FP8_V_RANGE["f16x2"])
    vals = _e4m3_values()
    nxt = min(x for x in vals if x > vr)
    worst = vr * (1 + sp.Rational(1, 2**24)) ** 2  # |v| * RN32(Vr / amax) rounded to f32, |v| <= amax
    ok = worst < (vr + nxt) / 2
    return ok, f"|v * v_inv| <= Vr (1 + 2^-24)^2 = {float(worst):.9g} < midpoint {(vr + nxt) / 2}: e4m3 gives <= Vr"


def _roundings_per_mma(a) -> int:
    """Roundings to nearest in one FP8 m16n8k32 of arch record ``a``: one per native FP8 block, or (the lowering onto
    the f16 mma) one per block of each of its MMA8_K / HMMA_K HMMA.16816, and one for the add of c."""
    if a.mma8_on_f16_mma:
        return (MMA8_K // HMMA_K) * (HMMA_K // a.mma_block_k) + 1
    return MMA8_K // a.mma8_block_k


def step_no_overflow_per_arch():
    vr, pr = sp.Rational(FP8_V_RANGE["f16x2"]), sp.Rational(FP8_P_SCALE)
    s = FP8_F16_KEYS * pr * vr
    rows, ok = [], True
    for arch in FP8_ARCHES:
        a = get_arch(arch)
        r = _roundings_per_mma(a) * (FP8_F16_KEYS // MMA8_K)
        bound = (1 + U16) ** r * s
        ok &= bool(bound < sp.Rational(F16_MAX))
        rows.append(f"{arch}: {r} roundings, (1 + 2^-11)^{r} * {s} = {float(bound):.6g}")
    return ok, "; ".join(rows) + f" (all < {F16_MAX:g})"


def _group_sum(arch, v_value):
    """The model's f16 sum of one group of FP8_F16_KEYS keys with every p8 = 448 and every v8 = v_value (both signs
    in different columns): the kernel's chain of k32 mma's from +0."""
    from flashsim.numerics.tensorcore import mma_chain_k32

    p8 = np.full((16, FP8_F16_KEYS), FP8_P_SCALE, np.float32).astype(E4M3)
    v8 = np.full((FP8_F16_KEYS, 8), v_value, np.float32)
    v8[:, 1::2] *= -1
    return mma_chain_k32(p8, v8.astype(E4M3), np.zeros((16, 8), np.float16), arch).astype(np.float64)


def step_worst_case_on_the_model():
    vr = FP8_V_RANGE["f16x2"]
    nxt = float(min(x for x in _e4m3_values() if x > sp.Rational(vr)))
    exact = FP8_F16_KEYS * FP8_P_SCALE * vr
    rows, ok = [], True
    for arch in FP8_ARCHES:
        d = _group_sum(arch, vr)
        over = _group_sum(arch, nxt)
        ok &= bool(np.all(np.abs(d) == exact) and np.all(np.isinf(over)))
        rows.append(f"{arch}: |sum| = {np.abs(d).max():g}, with v8 = {nxt:g}: {np.abs(over).max():g}")
    return ok, "; ".join(rows)


STEPS = (
    ("Vr is the largest e4m3 range (exact)", step_range_is_the_largest),
    ("v8 stays within Vr", step_v8_stays_in_range),
    ("no f16 overflow, per arch (exact)", step_no_overflow_per_arch),
    ("worst case on the tensor-core model", step_worst_case_on_the_model),
)


def check():
    return run_steps(STEPS)


if __name__ == "__main__":
    run_as_script(TITLE, check)
