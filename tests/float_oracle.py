"""An exact oracle for binary floating-point results, independent of flashsim.numerics: bit patterns decoded to
fractions.Fraction, the operation done exactly (square roots by math.isqrt), one rounding to the target format in
the named direction, and the bits encoded again. Used by tests/test_ptx_float.py and tests/test_ptx_convert.py.

Formats are (exponent bits, fraction bits, has_inf); a format without infinities (e4m3) keeps numbers in its top
binade except the all-ones pattern (its NaN). NaN results are the canonical NaN (sign clear, the other bits set),
except where ``nan_result`` gives the H200's f64 rule.
"""

from __future__ import annotations

import math
from fractions import Fraction

FORMATS = {
    "f64": (11, 52, True),
    "f32": (8, 23, True),
    "tf32": (8, 10, True),
    "f16": (5, 10, True),
    "bf16": (8, 7, True),
    "e5m2": (5, 2, True),
    "e4m3": (4, 3, False),
}
INF = "inf"
NAN = "nan"


def width(fmt: str) -> int:
    e, m, _ = FORMATS[fmt]
    return 1 + e + m


def _bias(fmt: str) -> int:
    return (1 << (FORMATS[fmt][0] - 1)) - 1


def max_finite(fmt: str) -> Fraction:
    e, m, has_inf = FORMATS[fmt]
    top = (1 << e) - 2 if has_inf else (1 << e) - 1
    frac = (1 << m) - 1 if has_inf else (1 << m) - 2
    return Fraction((1 << m) + frac, 1 << m) * Fraction(2) ** (top - _bias(fmt))


def decode(bits: int, fmt: str):
    """(negative, value): value a Fraction (its magnitude), INF or NAN."""
    e, m, has_inf = FORMATS[fmt]
    negative = bool(bits >> (e + m) & 1)
    field = bits >> m & ((1 << e) - 1)
    frac = bits & ((1 << m) - 1)
    if has_inf and field == (1 << e) - 1:
        return negative, (INF if frac == 0 else NAN)
    if not has_inf and field == (1 << e) - 1 and frac == (1 << m) - 1:
        return negative, NAN
    emin = 1 - _bias(fmt)
    if field == 0:
        return negative, Fraction(frac) * Fraction(2) ** (emin - m)
    return negative, Fraction((1 << m) | frac) * Fraction(2) ** (field - _bias(fmt) - m)


def value(bits: int, fmt: str):
    """The signed value: a Fraction, +-INF as float('inf') or NAN; -0 and +0 are both Fraction(0)."""
    negative, v = decode(bits, fmt)
    if v == NAN:
        return NAN
    if v == INF:
        return -math.inf if negative else math.inf
    return -v if negative else v


def nan(fmt: str) -> int:
    return (1 << (width(fmt) - 1)) - 1


def nan_result(fmt: str, *operands: int) -> int:
    """The NaN an H200 operation gives (as its silicon probes show): f64, the first NaN among ``operands`` (in the
    unit's order of preference) with its quiet bit set, or -0x7FF8... (0xFFF8000000000000) when none is NaN; every
    other format, the canonical NaN."""
    if fmt != "f64":
        return nan(fmt)
    for b in operands:
        if decode(b, fmt)[1] == NAN:
            return b | (1 << 51)
    return 0xFFF8000000000000


def convert_nan(bits: int, src: str, dst: str) -> int:
    """The NaN an H200 conversion of the NaN ``bits`` of ``src`` gives: with an f64 side, the sign and the leading
    payload bits aligned at the top of dst's fraction, quiet bit set; otherwise dst's canonical NaN."""
    if "f64" not in (src, dst):
        return nan(dst)
    (_, ms, _), (e, m, _) = FORMATS[src], FORMATS[dst]
    frac = bits & ((1 << ms) - 1)
    payload = frac << (m - ms) if m >= ms else frac >> (ms - m)
    sign = bits >> (width(src) - 1) & 1
    return (sign << (e + m)) | (((1 << e) - 1) << m) | payload | (1 << (m - 1))


def tiny_before_rounding(v: Fraction, fmt: str, mode: str) -> bool:
    """Whether nonzero ``v`` is tiny before rounding (IEEE 754 section 7.5): rounded in ``mode`` to fmt's precision
    with no bound on the exponent, its magnitude is below the smallest normal number (what .ftz flushes)."""
    m = FORMATS[fmt][1]
    a = abs(v)
    quantum = Fraction(2) ** (_ilog2(a) - m)
    return _round_int(a / quantum, mode, v < 0) * quantum < Fraction(2) ** (1 - _bias(fmt))


def _ilog2(a: Fraction) -> int:
    """floor(log2 a) for a > 0."""
    k = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** k > a:
        k -= 1
    return k


def _round_int(q: Fraction, mode: str, negative: bool) -> int:
    """q >= 0 rounded to an integer in direction mode (the magnitude of a value of sign ``negative``)."""
    n = math.floor(q)
    rem = q - n
    if rem == 0 or mode == "rz":
        return n
    if mode == "rne":
        return n + (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1))
    if mode == "rna":
        return n + (rem >= Fraction(1, 2))
    if mode == "rp":
        return n + (not negative)
    if mode == "rm":
        return n + negative
    raise ValueError(mode)


def round_to(v: Fraction, fmt: str, mode: str, *, negative_zero: bool = False, satfinite: bool = False) -> int:
    """The bits of exact value ``v`` rounded once to ``fmt``; an exact zero is -0 when ``negative_zero``;
    overflow as IEEE says per direction (``satfinite``: the largest finite number of the sign)."""
    e, m, has_inf = FORMATS[fmt]
    sign = (1 << (e + m)) if (v < 0 or (v == 0 and negative_zero)) else 0
    a = abs(v)
    if a == 0:
        return sign
    emin = 1 - _bias(fmt)
    exp = max(_ilog2(a), emin)
    quantum = Fraction(2) ** (exp - m)
    r = _round_int(a / quantum, mode, v < 0) * quantum
    top = max_finite(fmt)
    if r > top:
        to_inf = mode in ("rne", "rna") or (mode == "rp" and v > 0) or (mode == "rm" and v < 0)
        if satfinite or not to_inf:
            r = top
        elif not has_inf:
            return nan(fmt)
        else:
            return sign | (((1 << e) - 1) << m)
    if r == 0:
        return sign
    if r < Fraction(2) ** emin:
        return sign | int(r / Fraction(2) ** (emin - m))
    k = _ilog2(r)
    return sign | ((k + _bias(fmt)) << m) | int(r / Fraction(2) ** (k - m) - (1 << m))


def sqrt_jammed(a: Fraction) -> Fraction:
    """A value that rounds as sqrt(a) does at every precision below 100 bits (a >= 0 with a power-of-two
    denominator): isqrt at a granularity of 2**-120 or finer, plus half a unit when inexact."""
    half_scale = 120 + (a.denominator.bit_length() + 1) // 2
    n = a * Fraction(4) ** half_scale
    assert n.denominator == 1
    r = math.isqrt(n.numerator)
    out = Fraction(r) + (Fraction(1, 2) if r * r != n.numerator else 0)
    return out / Fraction(2) ** half_scale
