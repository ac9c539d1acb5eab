"""Scalar math of the kernel outside the tensor cores, shared bit for bit by the kernel build and the emulator.

The kernel computes ln(l) for the LSE from IEEE-exact operations only (no SFU, no libdevice), so that
the emulator can reproduce it with exactly rounded float32 arithmetic. Its constants live here once and
reach kernel/flash_fwd.cu as the FS_LOG_* defines (bit patterns), see ``kernel_defines``.
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


def kernel_defines() -> dict[str, int]:
    """The FS_LOG_* defines: each constant as the bit pattern of its float32 (all positive, < 2^31)."""
    return {f"FS_LOG_{k}": int(np.asarray(v, np.float32).view(np.uint32)) for k, v in LOG_CONSTANTS.items()}


def log_exact_ops(x: np.ndarray) -> np.ndarray:
    """The kernel's log_exact_ops on float32 arrays of positive normal numbers, bit for bit."""
    from ..numerics import ieee32   # deferred: the kernel build needs only the constants
    c = LOG_CONSTANTS
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    e = ((bits >> 23) & 0xFF) - 127
    m = ((bits & 0x7FFFFF) | 0x3F800000).astype(np.uint32).view(np.float32)
    big = m > c["SQRT2"]
    m = np.where(big, m * np.float32(0.5), m)
    e = e + big
    f = m - np.float32(1.0)
    s = f / (np.float32(2.0) + f)
    z = s * s
    poly = ieee32.fma(z, np.full_like(z, c["C9"]), np.full_like(z, c["C7"]))
    poly = ieee32.fma(z, poly, np.full_like(z, c["C5"]))
    poly = ieee32.fma(z, poly, np.full_like(z, c["C3"]))
    t = (z * s) * poly
    ln1p = ieee32.fma(np.full_like(s, 2.0), s, np.float32(2.0) * t)
    return ieee32.fma(e.astype(np.float32), np.full_like(s, c["LN2"]), ln1p)
