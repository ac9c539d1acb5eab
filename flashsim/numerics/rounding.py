"""Round exact values to f32 / f16 / bf16 once, to nearest-even ("rne") or toward zero ("rz"), vectorised.

Two entry points on one integer core:
  ``round_scaled(m, e, fmt, mode)``   the value m * 2**e, m an int64 array with |m| < 2**62, e an int array;
  ``round_float64(v, fmt, mode)``     a float64 array taken as exact.
Subnormal results are kept (gradual underflow). Overflow follows IEEE 754: "rne" gives +-inf, "rz" the largest
finite number of the sign (callers with other rules, such as the tensor core's f32 overflow to inf, apply them
on top). A zero result keeps the sign of the value (an exact 0 of ``round_scaled`` is +0; ``round_float64`` keeps
the sign of a zero input). Infinities pass through; NaN becomes the format's canonical NaN (0x7FFFFFFF, 0x7FFF,
0x7FFF for bf16), the NaN NVIDIA GPUs produce.

Why it is exact: everything is integer arithmetic on the significand. The leading-bit position is found from
the float64 conversion of m and corrected by one when that conversion rounded up to a power of two; the bits
below the target precision are split off with a shift (shifts are clamped at 63, where |m| < 2**62 makes the
remainder smaller than half and the quotient 0, which is what an unbounded shift gives); the rounding increment
is decided from the remainder against half, and a carry out of the significand moves into the exponent field
by plain addition of ((exponent + bias - 1) << frac_bits) + significand.
"""
from __future__ import annotations

import numpy as np

from .formats import Format, get_format

__all__ = ["round_scaled", "round_float64", "MODES"]

MODES = ("rne", "rz")


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def _bit_length(m: np.ndarray) -> np.ndarray:
    """Number of significant bits of positive int64 values (< 2**62), exactly."""
    _, ex = np.frexp(m.astype(np.float64))          # m < 2**ex; may be one too high if the cast rounded up
    ex = ex.astype(np.int64)
    too_high = (m >> np.minimum(ex - 1, 62)) == 0
    return ex - too_high


def _round_core(negative: np.ndarray, m: np.ndarray, e: np.ndarray, f: Format, mode: str) -> np.ndarray:
    """Bits (int64) of (-1)**negative * m * 2**e rounded to f; m >= 0 int64 (< 2**62), e int64."""
    nonzero = m != 0
    msafe = np.where(nonzero, m, 1)
    lead = e + _bit_length(msafe) - 1                # value in [2**lead, 2**(lead+1))
    te = np.maximum(lead, f.emin)
    shift = te - f.frac_bits - e                     # low bits of m below the target ulp
    right = np.clip(shift, 0, 63)
    left = np.clip(-shift, 0, 62)
    mant = (msafe >> right) << left
    if mode == "rne":
        rem = msafe & ((np.int64(1) << right) - 1)
        half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 1)
        up = (right > 0) & ((rem > half) | ((rem == half) & ((mant & 1) == 1)))
        mant = mant + up
    bits = ((te + f.bias - 1) << f.frac_bits) + mant
    over = bits >= f.inf_bits
    bits = np.where(over, f.inf_bits if mode == "rne" else f.max_finite_bits, bits)
    bits = np.where(nonzero, bits, 0)
    return bits | (negative.astype(np.int64) << (f.bits - 1))


def round_scaled(m, e, fmt, mode: str = "rne") -> np.ndarray:
    """Round the exact values m * 2**e (m int64 with |m| < 2**62, e int) to ``fmt``; returns fmt's dtype.

    m == 0 gives +0.
    """
    f = get_format(fmt)
    _check_mode(mode)
    m = np.asarray(m)
    e = np.asarray(e)
    if m.dtype.kind not in "iu" or e.dtype.kind not in "iu":
        raise ValueError(f"m and e must be integer arrays, got {m.dtype} and {e.dtype}")
    m, e = np.broadcast_arrays(m.astype(np.int64), e.astype(np.int64))
    if (np.abs(m) >= (1 << 62)).any():
        raise ValueError("m must satisfy |m| < 2**62")
    bits = _round_core(m < 0, np.abs(m), e, f, mode)
    return bits.astype(f.uint).view(f.dtype)


def round_float64(v, fmt, mode: str = "rne") -> np.ndarray:
    """Round the float64 values ``v`` (taken as exact) to ``fmt`` once; returns fmt's dtype."""
    f = get_format(fmt)
    _check_mode(mode)
    v = np.asarray(v)
    if v.dtype != np.float64:
        raise ValueError(f"v must be a float64 array, got {v.dtype}")
    b = v.view(np.int64)
    negative = b < 0
    field = (b >> 52) & 0x7FF
    frac = b & ((np.int64(1) << 52) - 1)
    m = np.where(field > 0, frac | (np.int64(1) << 52), frac)
    e = np.maximum(field, 1) - 1075
    bits = _round_core(negative, np.where(field == 0x7FF, 0, m), e, f, mode)
    special = field == 0x7FF
    if special.any():
        inf = (frac == 0) & special
        bits = np.where(inf, f.inf_bits | (negative.astype(np.int64) << (f.bits - 1)), bits)
        bits = np.where(special & ~inf, f.canonical_nan, bits)
    return bits.astype(f.uint).view(f.dtype)
