"""Scalar math of the kernel outside the tensor cores, shared bit for bit by the kernel build and the emulator.

The kernel computes ln(l) for the LSE from IEEE-exact operations only (no SFU, no libdevice), so that the emulator
can reproduce it with exactly rounded float32 arithmetic; and the soft-capping tanh from the two SFU functions
flashsim models bit for bit (ex2, rcp) and exactly rounded float32 operations. Their constants live in
flashsim.constants and reach kernel/flash_fwd.cu as the FS_LOG_* / FS_TANH_* defines (bit patterns,
``flashsim.constants.math_defines``).

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

from functools import partial

import numpy as np

from ..constants import LOG_CONSTANTS, TANH_CONSTANTS
from ..numerics import ieee32, sfu
from ..numerics.target import PLAIN, Target
from ..numerics.xp import bitcast, namespace


def softcap_tanh(y, arch, target: Target = PLAIN):
    """The kernel's softcap_tanh on float32 arrays (numpy or JAX), bit for bit: a = |y| (bits), e = ex2.approx.ftz(
    a * -2 log2(e)), t = (1 - e) * rcp.approx.ftz(1 + e), y's sign bit put back on t. Any y: +-inf -> +-1, NaN ->
    NaN with y's sign, +-0 -> +-0. ``target``: the engine's (flashsim.numerics.target)."""
    xp = namespace(y)
    f32, u32 = xp.float32, xp.uint32
    b = bitcast(xp.asarray(y, dtype=f32), np.uint32)
    a = ieee32.fabs(xp.asarray(y, dtype=f32))
    two_log2e = xp.asarray(-TANH_CONSTANTS["TWO_LOG2E"], dtype=f32)
    e = sfu.ex2(ieee32.mul(a, two_log2e, target=target), arch=arch, target=target)
    one = xp.asarray(1.0, dtype=f32)
    r = sfu.rcp(ieee32.add(one, e, target=target), arch=arch, target=target)
    t = ieee32.mul(ieee32.sub(one, e, target=target), r, target=target)
    return bitcast(bitcast(t, np.uint32) | (b & xp.asarray(0x80000000, dtype=u32)), np.float32)


def log_exact_ops(x, target: Target = PLAIN):
    """The kernel's log_exact_ops on float32 arrays of positive normal numbers, bit for bit (numpy or JAX).

    Range reduction to m in [sqrt(1/2), sqrt(2)) through the bits (e = the exponent, m = the significand with
    exponent 0, halved when above sqrt(2)), then ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), as the odd series to
    s^9, then e * ln 2 + ln(m): every operation an exactly rounded flashsim.numerics.ieee32 one, in the kernel's
    order."""
    xp = namespace(x)
    f32 = xp.float32
    c = {k: xp.asarray(v, dtype=f32) for k, v in LOG_CONSTANTS.items()}
    bits = bitcast(xp.asarray(x, dtype=f32), np.uint32)
    e = ((bits >> 23) & 0xFF).astype(xp.int32) - 127
    m = bitcast((bits & 0x7FFFFF) | 0x3F800000, np.float32)
    big = m > c["SQRT2"]
    m = xp.where(big, ieee32.mul(m, xp.asarray(0.5, dtype=f32), target=target), m)
    e = e + big.astype(xp.int32)
    add, sub, mul, div, fma = (
        partial(op, target=target) for op in (ieee32.add, ieee32.sub, ieee32.mul, ieee32.div, ieee32.fma)
    )
    f = sub(m, xp.asarray(1.0, dtype=f32))
    s = div(f, add(xp.asarray(2.0, dtype=f32), f))
    z = mul(s, s)
    poly = fma(z, c["C9"], c["C7"])
    poly = fma(z, poly, c["C5"])
    poly = fma(z, poly, c["C3"])
    t = mul(mul(z, s), poly)
    ln1p = fma(xp.asarray(2.0, dtype=f32), s, mul(xp.asarray(2.0, dtype=f32), t))
    return fma(e.astype(f32), c["LN2"], ln1p)
