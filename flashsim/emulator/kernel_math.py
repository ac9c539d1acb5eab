"""Scalar math of the kernel outside the tensor cores, shared bit for bit by the kernel build and the emulator.

The kernel computes ln(l) for the LSE from IEEE-exact operations only (no SFU, no libdevice), so that
the emulator can reproduce it with exactly rounded float32 arithmetic; and the soft-capping tanh from the two SFU
functions flashsim models bit for bit (ex2, rcp) and exactly rounded float32 operations. Their constants live here
once and reach kernel/flash_fwd.cu as the FS_LOG_* / FS_TANH_* defines (bit patterns), see ``kernel_defines``.

Why not ``tanh.approx.f32`` (FlashAttention-2's choice): its bits have no published model, it has no structure
that a small table captures (ex2's result is a table over the fraction, shifted by the integer part; rcp's a table
over the significand), and a table over all 2^32 inputs does not ship small. tanh(a) = (1 - 2^(-2a log2 e)) /
(1 + 2^(-2a log2 e)) needs one ex2.approx and one rcp.approx (two MUFU operations instead of one) plus four FP32
operations, and its absolute error is about 2^-22 (ex2's and rcp's relative errors are below 2^-22, the
subtraction is exact near 1 by Sterbenz): soft-capped logits c * tanh(.) are then off by about c * 2^-22 in score
units, below the float32 rounding of the scores themselves. Its cost is measured by ``flashsim bench kernel``
(benchmarks/RESULTS.md, softcap rows).
"""

from __future__ import annotations

import numpy as np

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


def kernel_defines() -> dict[str, int]:
    """The FS_LOG_* and FS_TANH_* defines: each constant as the bit pattern of its float32 (all positive, < 2^31)."""
    consts = {
        **{f"FS_LOG_{k}": v for k, v in LOG_CONSTANTS.items()},
        **{f"FS_TANH_{k}": v for k, v in TANH_CONSTANTS.items()},
    }
    return {k: int(np.asarray(v, np.float32).view(np.uint32)) for k, v in consts.items()}


def softcap_tanh(y, arch):
    """The kernel's softcap_tanh on float32 arrays (numpy or JAX), bit for bit: a = |y| (bits), e = ex2.approx.ftz(
    a * -2 log2(e)), t = (1 - e) * rcp.approx.ftz(1 + e), y's sign bit put back on t. Any y: +-inf -> +-1, NaN ->
    NaN with y's sign, +-0 -> +-0."""
    from ..numerics import ieee32, sfu  # deferred: the kernel build needs only the constants
    from ..numerics.xp import bitcast, namespace

    xp = namespace(y)
    f32, u32 = xp.float32, xp.uint32
    b = bitcast(xp.asarray(y, dtype=f32), np.uint32)
    a = ieee32.fabs(xp.asarray(y, dtype=f32))
    e = sfu.ex2(ieee32.mul(a, xp.asarray(-TANH_CONSTANTS["TWO_LOG2E"], dtype=f32)), arch=arch)
    one = xp.asarray(1.0, dtype=f32)
    t = ieee32.mul(ieee32.sub(one, e), sfu.rcp(ieee32.add(one, e), arch=arch))
    return bitcast(bitcast(t, np.uint32) | (b & xp.asarray(0x80000000, dtype=u32)), np.float32)


def log_exact_ops(x):
    """The kernel's log_exact_ops on float32 arrays of positive normal numbers, bit for bit (numpy or JAX).

    Range reduction to m in [sqrt(1/2), sqrt(2)) through the bits (e = the exponent, m = the significand with
    exponent 0, halved when above sqrt(2)), then ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), as the odd series to
    s^9, then e * ln 2 + ln(m): every operation an exactly rounded flashsim.numerics.ieee32 one, in the kernel's
    order."""
    from ..numerics import ieee32  # deferred: the kernel build needs only the constants
    from ..numerics.xp import bitcast, namespace

    xp = namespace(x)
    f32 = xp.float32
    c = {k: xp.asarray(v, dtype=f32) for k, v in LOG_CONSTANTS.items()}
    bits = bitcast(xp.asarray(x, dtype=f32), np.uint32)
    e = ((bits >> 23) & 0xFF).astype(xp.int32) - 127
    m = bitcast((bits & 0x7FFFFF) | 0x3F800000, np.float32)
    big = m > c["SQRT2"]
    m = xp.where(big, ieee32.mul(m, xp.asarray(0.5, dtype=f32)), m)
    e = e + big.astype(xp.int32)
    f = ieee32.sub(m, xp.asarray(1.0, dtype=f32))
    s = ieee32.div(f, ieee32.add(xp.asarray(2.0, dtype=f32), f))
    z = ieee32.mul(s, s)
    poly = ieee32.fma(z, c["C9"], c["C7"])
    poly = ieee32.fma(z, poly, c["C5"])
    poly = ieee32.fma(z, poly, c["C3"])
    t = ieee32.mul(ieee32.mul(z, s), poly)
    ln1p = ieee32.fma(xp.asarray(2.0, dtype=f32), s, ieee32.mul(xp.asarray(2.0, dtype=f32), t))
    return ieee32.fma(e.astype(f32), c["LN2"], ln1p)
