"""IEEE 754 arithmetic and conversions in every binary format and rounding direction PTX names, on raw bits.

Formats: f64, f32, tf32, f16, bf16, e4m3, e5m2 (flashsim.numerics.formats); directions: "rne", "rna", "rz",
"rm", "rp" (flashsim.numerics.rounding.MODES). Every function takes and returns bit patterns (unsigned integer
arrays of the format's width; tf32 as its 19-bit pattern) and rounds the exact result once, through the one
rounding core of flashsim.numerics.rounding (``round_magnitude`` / ``round_shift``). NaN results follow the
H200's units (``nan_result``): f32 / f16 / bf16 results are the format's canonical NaN (sign clear, every exponent
and fraction bit set: 0x7FFFFFFF, 0x7FFF); f64 results, and conversions with an f64 side, keep a NaN operand's
sign and payload with the quiet bit set, and an invalid operation gives 0xFFF8000000000000. binary32 to nearest
even is flashsim.numerics.ieee32's (the kernel's own numerics, with its fast paths): ``add`` / ``sub`` / ``mul`` /
``fma`` / ``div`` hand those to it (.ftz too), and so do ``mul`` of f16 to nearest (ieee32.mul_f16) and
``minmax`` for max.f32 (ieee32.fmax).

How the exact result is kept (vectorised integer arithmetic, numpy only: this module serves flashsim.ptx):
* a finite value is (sign, significand m, exponent e) with value m * 2**e; products of two significands are kept
  exactly in 128 bits (``_mul128``: 32-bit limbs in uint64);
* a sum aligns its two terms in 128 bits: the term with the higher leading bit is shifted up until that bit is bit
  125, the other is shifted to the same scale, and where that drops bits they are OR-ed into its lowest bit
  (``_shr_jam128``: "jamming", which gives the round-to-odd image at that unit). The shifted-up term has at most
  106 significant bits, so its lowest 19 bits are zero and adding or subtracting the jammed term gives the
  round-to-odd image of the exact sum (the odd integer inside the unit interval that holds it). Bits are dropped
  only when the other term's leading bit lies more than 19 positions lower, so the sum keeps >= 124 bits;
* quotients and square roots come from restoring division / digit-by-digit square root (one vectorised step per
  result bit, precision + 3 bits) with the nonzero remainder jammed into the last bit;
* the 128-bit result is jammed down to 61 bits and rounded once by rounding.round_magnitude. Rounding a
  round-to-odd value with k >= p + 2 bits to p bits in any direction equals rounding the exact value (Boldo &
  Melquiond, IEEE Trans. Computers 57(4), 2008, for nearest; for the directed modes the odd image lies strictly
  inside the same interval between p-bit numbers as the exact value). Here k >= 55 and p <= 53.
Signed zeros follow IEEE 754: an exact zero sum of opposite-signed terms is +0 (-0 under "rm"); a product or
quotient of zeros takes the XOR of the signs; sqrt(-0) = -0. Subnormals are kept unless ``ftz`` (PTX .ftz):
then subnormal operands read as zeros of their sign and a result that is tiny before rounding becomes the zero of
its sign (rounding.round_magnitude says why: the H200 flushes before rounding, not after).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import ieee32, rounding
from .formats import F16, F32, F64, TF32, AllFiniteFormat, FiniteFormat, Format
from .xp import bit_length

__all__ = [
    "tf32_in_f32",
    "tf32_rna_in_f32",
    "Parts",
    "unpack",
    "flush_subnormal",
    "is_subnormal",
    "canonical_nan",
    "nan_result",
    "F64_DEFAULT_NAN",
    "to_float64",
    "add",
    "sub",
    "mul",
    "fma",
    "div",
    "rcp",
    "sqrt",
    "convert",
    "from_integer",
    "to_integer",
    "round_integral",
    "minmax",
]

_U = np.uint64
_M32 = _U(0xFFFFFFFF)


class Parts(NamedTuple):
    """A format's bit patterns split: value = (-1)**negative * mag * 2**exp for the finite ones."""

    negative: np.ndarray  # bool
    mag: np.ndarray  # uint64 significand with its leading bit (0 for zeros, NaN and inf)
    exp: np.ndarray  # int64
    nan: np.ndarray
    inf: np.ndarray
    zero: np.ndarray


def _bits(x, f: Format) -> np.ndarray:
    return np.asarray(x).astype(np.uint64) & _U((1 << f.bits) - 1)


def unpack(bits, f: Format) -> Parts:
    """Split raw bit patterns of ``f`` (any unsigned integer array) into sign, significand, exponent and class."""
    b = _bits(bits, f)
    negative = (b >> _U(f.bits - 1)) == 1
    field = ((b >> _U(f.frac_bits)) & _U(f.exp_field_max)).astype(np.int64)
    frac = b & _U((1 << f.frac_bits) - 1)
    magbits = b & _U(f.sign_mask - 1)
    if isinstance(f, FiniteFormat):
        nan = magbits == _U(f.inf_bits)
        inf = np.zeros(b.shape, bool)
    elif isinstance(f, AllFiniteFormat):  # every pattern a number
        nan = inf = np.zeros(b.shape, bool)
    else:
        nan = (field == f.exp_field_max) & (frac != 0)
        inf = (field == f.exp_field_max) & (frac == 0)
    mag = np.where(field == 0, frac, frac | _U(1 << f.frac_bits))
    mag = np.where(nan | inf, _U(0), mag).astype(np.uint64)
    exp = np.maximum(field, 1) - (f.bias + f.frac_bits)
    return Parts(negative, mag, exp, nan, inf, (mag == 0) & ~nan & ~inf)


def is_subnormal(bits, f: Format) -> np.ndarray:
    b = _bits(bits, f)
    return ((b >> _U(f.frac_bits)) & _U(f.exp_field_max) == 0) & ((b & _U((1 << f.frac_bits) - 1)) != 0)


def flush_subnormal(bits, f: Format) -> np.ndarray:
    """Subnormals replaced by the zero of their sign (PTX .ftz), other patterns unchanged; f's unsigned dtype.
    Worked in f's own unsigned width (the cast keeps the low bits, as _bits's mask does). The result may be
    ``bits`` itself where nothing is flushed (the usual case: no select then), so it is not to be written in place.
    A subnormal is a magnitude in [1, 2^frac_bits): magnitude - 1 below 2^frac_bits - 1 in unsigned arithmetic, where
    the zero magnitude wraps to the largest value."""
    b = np.asarray(bits)
    if b.dtype != f.uint:
        b = b.astype(f.uint)
    if f.bits < 8 * b.itemsize:  # a format narrower than its container (tf32)
        b = b & f.uint((1 << f.bits) - 1)
    if b.ndim == 0:  # numpy scalar arithmetic would warn on the wrap below
        return np.where((b & f.uint(f.exp_field_max << f.frac_bits)) == 0, b & f.uint(f.sign_mask), b)
    sub = ((b & f.uint(f.sign_mask - 1)) - f.uint(1)) < f.uint((1 << f.frac_bits) - 1)
    if not sub.any():
        return b
    return np.where(sub, b & f.uint(f.sign_mask), b)


def canonical_nan(f: Format, shape=()) -> np.ndarray:
    return np.full(shape, f.canonical_nan, f.uint)


# The NaN of an invalid f64 operation (inf - inf, 0 * inf, 0 / 0, sqrt of a negative number) on the H200: sign set,
# quiet bit only (silicon probes floating/add_*_f64, mul_*_f64, div_*_f64, sqrt_*_f64: tests/data/ptx_isa/).
F64_DEFAULT_NAN = 0xFFF8000000000000


def _quiet(bits, f: Format) -> np.ndarray:
    return _bits(bits, f) | _U(1 << (f.frac_bits - 1))


def nan_result(f: Format, *operands) -> np.ndarray:
    """The bits an operation of format ``f`` returns where its result is NaN; ``operands`` (bit arrays, broadcast)
    in the order the unit prefers them.

    f32, f16, bf16 (FADD / FMUL / FFMA / HADD2 / HFMA2 ...): the canonical NaN, whatever the operands. f64 (the
    H200's DADD / DMUL / DFMA and the double-precision sequences built on them): the first NaN operand, its sign and
    payload kept and its quiet bit set (a signalling NaN becomes quiet), even where the instruction negates or takes
    the absolute value of that operand; with no NaN operand (an invalid operation) ``F64_DEFAULT_NAN``. The order:
    DADD and DMUL take the second source's NaN first (add / sub / mul d, a, b: b, then a), the div / rcp sequences
    the dividend's, max / min of two NaNs the second; the silicon probes floating/*_f64 and memory/*_add_f64 show
    each (tests/data/ptx_isa/). Where several fma operands are NaN the probes have no case: DFMA is taken to prefer
    c, then b, then a, as DADD and DMUL prefer their last source."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in operands)) if operands else ()
    if f != F64:
        return canonical_nan(f, shape)
    out = np.full(shape, _U(F64_DEFAULT_NAN))
    for x in reversed(operands):
        out = np.where(unpack(x, f).nan, _quiet(x, f), out)
    return out.astype(f.uint)


def _flush_inputs(f: Format, ftz: bool, *xs):
    return [flush_subnormal(x, f) for x in xs] if ftz else list(xs)


def to_float64(bits, f: Format) -> np.ndarray:
    """The exact float64 value of each pattern (every format here is a subset of binary64); NaN is a NaN."""
    p = unpack(bits, f)
    with np.errstate(all="ignore"):
        v = np.ldexp(p.mag.astype(np.float64), p.exp.astype(np.int32))
    v = np.where(p.inf, np.inf, v)
    v = np.where(p.negative, -v, v)
    return np.where(p.nan, np.nan, v)


# -- 128-bit unsigned integers as (hi, lo) pairs of uint64 arrays ----------------------------------------------


def _shl64(x, s):
    """x << s for s >= 0 (bits past 63 vanish; s >= 64 gives 0)."""
    s = np.asarray(s, np.int64)
    return np.where(s < 64, x << np.clip(s, 0, 63).astype(np.uint64), _U(0))


def _shr64(x, s):
    s = np.asarray(s, np.int64)
    return np.where(s < 64, x >> np.clip(s, 0, 63).astype(np.uint64), _U(0))


def _bitlen128(hi, lo):
    return np.where(hi != 0, 64 + bit_length(hi).astype(np.int64), bit_length(lo).astype(np.int64))


def _shl128(hi, lo, s):
    """(hi, lo) << s for 0 <= s < 128 (the caller keeps the result below 2**128)."""
    s = np.asarray(s, np.int64)
    big = s >= 64
    t = np.where(big, s - 64, s)
    small_hi = _shl64(hi, t) | _shr64(lo, 64 - t)
    return np.where(big, _shl64(lo, t), small_hi), np.where(big, _U(0), _shl64(lo, t))


def _shr_jam128(hi, lo, s):
    """(hi, lo) >> s for s >= 0, with every dropped bit OR-ed into the lowest bit of the result (jamming)."""
    s = np.clip(np.asarray(s, np.int64), 0, 128)
    big = s >= 64
    t = np.where(big, s - 64, s)
    small_lo = _shr64(lo, t) | _shl64(hi, 64 - t)
    new_hi = np.where(big, _U(0), _shr64(hi, t))
    new_lo = np.where(big, _shr64(hi, t), small_lo)
    low_mask = _shl64(np.ones_like(lo), t) - _U(1)  # t == 64: all ones (wraps)
    lost = np.where(big, (lo != 0) | ((hi & low_mask) != 0), (lo & low_mask) != 0)
    return new_hi, new_lo | lost.astype(np.uint64)


def _add128(ahi, alo, bhi, blo):
    lo = alo + blo
    return ahi + bhi + (lo < alo).astype(np.uint64), lo


def _sub128(ahi, alo, bhi, blo):
    """a - b for a >= b."""
    return ahi - bhi - (alo < blo).astype(np.uint64), alo - blo


def _ge128(ahi, alo, bhi, blo):
    return (ahi > bhi) | ((ahi == bhi) & (alo >= blo))


def _mul128(a, b):
    """The exact 128-bit product of uint64 arrays a and b (32-bit limbs)."""
    a0, a1, b0, b1 = a & _M32, a >> _U(32), b & _M32, b >> _U(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U(32)) + (p01 & _M32) + (p10 & _M32)
    lo = (p00 & _M32) | (mid << _U(32))
    hi = p11 + (p01 >> _U(32)) + (p10 >> _U(32)) + (mid >> _U(32))
    return hi, lo


_LEAD = 125  # where a sum puts the leading bit of its larger term


def _sum(na, ahi, alo, ea, nb, bhi, blo, eb):
    """The round-to-odd image (negative, hi, lo, exp) of (-1)**na A 2**ea + (-1)**nb B 2**eb, for A, B < 2**107
    (the module docstring). An exact zero comes back with hi = lo = 0."""
    la, lb = _bitlen128(ahi, alo), _bitlen128(bhi, blo)
    low = np.int64(-(1 << 40))
    ta = np.where(la == 0, low, ea + la)
    tb = np.where(lb == 0, low, eb + lb)
    swap = tb > ta
    xn, xhi, xlo, xe, xl = (np.where(swap, v, u) for u, v in ((na, nb), (ahi, bhi), (alo, blo), (ea, eb), (la, lb)))
    yn, yhi, ylo, ye = (np.where(swap, u, v) for u, v in ((na, nb), (ahi, bhi), (alo, blo), (ea, eb)))
    up = np.where(xl == 0, 0, _LEAD + 1 - xl)
    xhi, xlo = _shl128(xhi, xlo, up)
    e = xe - up
    shift = ye - e  # >= 0: shift y up (it stays below x's leading bit); < 0: down, jammed
    uhi, ulo = _shl128(yhi, ylo, np.clip(shift, 0, 127))
    dhi, dlo = _shr_jam128(yhi, ylo, np.clip(-shift, 0, None))
    yhi, ylo = np.where(shift >= 0, uhi, dhi), np.where(shift >= 0, ulo, dlo)
    same = xn == yn
    shi, slo = _add128(xhi, xlo, yhi, ylo)
    x_ge = _ge128(xhi, xlo, yhi, ylo)
    d1hi, d1lo = _sub128(xhi, xlo, yhi, ylo)
    d2hi, d2lo = _sub128(yhi, ylo, xhi, xlo)
    rhi = np.where(same, shi, np.where(x_ge, d1hi, d2hi))
    rlo = np.where(same, slo, np.where(x_ge, d1lo, d2lo))
    neg = np.where(same | x_ge, xn, yn)
    return neg, rhi, rlo, e


def _pack(negative, hi, lo, exp, f: Format, mode: str, overflow: str = "ieee", ftz: bool = False):
    """Round (-1)**negative (hi, lo) 2**exp (round-to-odd at >= 55 bits, or exact) to ``f``: its bit patterns
    (``ftz``: a result tiny before rounding flushed to the zero of its sign). The round-to-odd image decides
    tininess as the exact value does: both lie strictly inside one interval between p-bit numbers."""
    s = np.maximum(_bitlen128(hi, lo) - 61, 0)
    _, lo = _shr_jam128(hi, lo, s)
    mag = rounding.round_magnitude(lo, exp + s, f, mode, negative, overflow=overflow, ftz=ftz)
    return (mag.astype(np.uint64) | (negative.astype(np.uint64) << _U(f.bits - 1))).astype(f.uint)


def _finish(bits, f: Format, nan, inf=None, inf_negative=None, nan_from=()):
    """``bits`` with infinite results of their sign and NaN results (``nan_result`` of the operands ``nan_from``,
    in the unit's order) patched in."""
    out = bits
    if inf is not None:
        inf_bits = _U(f.inf_bits) | (inf_negative.astype(np.uint64) << _U(f.bits - 1))
        out = np.where(inf, inf_bits, out)
    return np.where(nan, nan_result(f, *nan_from).astype(np.uint64), out).astype(f.uint)


def _zero_sum_negative(na, nb, mode):
    """The sign of an exact zero sum: -0 only from two -0 terms, or from opposite signs under "rm"."""
    return (na & nb) | ((na != nb) & (mode == "rm"))


def _broadcast(*arrays):
    arrays = [np.asarray(a) for a in arrays]
    if all(a.shape == arrays[0].shape for a in arrays):  # nothing to broadcast (np.broadcast_arrays' views cost)
        return arrays
    return np.broadcast_arrays(*arrays)


# -- arithmetic -------------------------------------------------------------------------------------------------


def _ieee32_rne(fn, f, mode, ftz, *args):
    """binary32 to nearest even (.ftz too: the same rule) is numerics.ieee32's; None for the other cases."""
    if f is F32 and mode == "rne":
        vals = [np.asarray(a).astype(np.uint32).view(np.float32) for a in _broadcast(*args)]
        return np.asarray(fn(*vals, ftz)).view(np.uint32)
    return None


def add(a, b, f: Format, mode: str = "rne", ftz: bool = False):
    """a + b rounded once to ``f``."""
    fast = _ieee32_rne(ieee32.add, f, mode, ftz, a, b)
    if fast is not None:
        return fast
    a, b = _flush_inputs(f, ftz, *_broadcast(a, b))
    A, B = unpack(a, f), unpack(b, f)
    z = np.zeros(A.mag.shape, np.uint64)
    neg, hi, lo, e = _sum(A.negative, z, A.mag, A.exp, B.negative, z, B.mag, B.exp)
    neg = np.where((hi == 0) & (lo == 0), _zero_sum_negative(A.negative, B.negative, mode), neg)
    out = _pack(neg, hi, lo, e, f, mode, ftz=ftz)
    nan = A.nan | B.nan | (A.inf & B.inf & (A.negative != B.negative))
    return _finish(out, f, nan, A.inf | B.inf, np.where(A.inf, A.negative, B.negative), (b, a))


def sub(a, b, f: Format, mode: str = "rne", ftz: bool = False):
    """a - b rounded once to ``f``: a + (-b), a NaN b passed on with its own sign (``nan_result``)."""
    fast = _ieee32_rne(ieee32.sub, f, mode, ftz, a, b)
    if fast is not None:
        return fast
    b = _bits(b, f)
    return add(a, np.where(unpack(b, f).nan, b, b ^ _U(f.sign_mask)), f, mode, ftz)


def mul(a, b, f: Format, mode: str = "rne", ftz: bool = False):
    """a * b rounded once to ``f``."""
    fast = _ieee32_rne(ieee32.mul, f, mode, ftz, a, b)
    if fast is not None:
        return fast
    if f is F16 and mode == "rne" and not ftz:  # mul.rn.f16: the kernel's
        x, y = (np.asarray(v).astype(np.uint16).view(np.float16) for v in _broadcast(a, b))
        return np.asarray(ieee32.mul_f16(x, y)).view(np.uint16)
    a, b = _flush_inputs(f, ftz, *_broadcast(a, b))
    A, B = unpack(a, f), unpack(b, f)
    neg = A.negative != B.negative
    hi, lo = _mul128(A.mag, B.mag)
    out = _pack(neg, hi, lo, A.exp + B.exp, f, mode, ftz=ftz)
    nan = A.nan | B.nan | (A.inf & B.zero) | (A.zero & B.inf)
    return _finish(out, f, nan, A.inf | B.inf, neg, (b, a))


def fma(a, b, c, f: Format, mode: str = "rne", ftz: bool = False):
    """a * b + c with one rounding to ``f`` (the product is never rounded)."""
    fast = _ieee32_rne(ieee32.fma, f, mode, ftz, a, b, c)
    if fast is not None:
        return fast
    a, b, c = _flush_inputs(f, ftz, *_broadcast(a, b, c))
    A, B, C = unpack(a, f), unpack(b, f), unpack(c, f)
    pn = A.negative != B.negative
    phi, plo = _mul128(A.mag, B.mag)
    z = np.zeros(C.mag.shape, np.uint64)
    neg, hi, lo, e = _sum(pn, phi, plo, A.exp + B.exp, C.negative, z, C.mag, C.exp)
    neg = np.where((hi == 0) & (lo == 0), _zero_sum_negative(pn, C.negative, mode), neg)
    out = _pack(neg, hi, lo, e, f, mode, ftz=ftz)
    p_inf = A.inf | B.inf
    nan = A.nan | B.nan | C.nan | (A.inf & B.zero) | (A.zero & B.inf) | (p_inf & C.inf & (pn != C.negative))
    return _finish(out, f, nan, p_inf | C.inf, np.where(p_inf, pn, C.negative), (c, b, a))


def _normalise(mag, width: int):
    """mag (nonzero, < 2**width) shifted up so that its leading bit is bit width - 1; (shifted, shift)."""
    up = width - bit_length(mag).astype(np.int64)
    return _shl64(mag, np.where(mag == 0, 0, up)), up


def div(a, b, f: Format, mode: str = "rne", ftz: bool = False):
    """a / b rounded once to ``f``: restoring division to precision + 3 quotient bits, the remainder jammed."""
    fast = _ieee32_rne(ieee32.div, f, mode, ftz, a, b)
    if fast is not None:
        return fast
    a, b = _flush_inputs(f, ftz, *_broadcast(a, b))
    A, B = unpack(a, f), unpack(b, f)
    neg = A.negative != B.negative
    x, ux = _normalise(A.mag, 54)
    y, uy = _normalise(np.where(B.mag == 0, _U(1), B.mag), 54)
    below = x < y
    r = np.where(below, x << _U(1), x)  # y <= r < 2y < 2**55
    n = f.precision + 3
    q = np.zeros(r.shape, np.uint64)
    for _ in range(n):  # one quotient bit per step, over all elements at once
        take = r >= y
        q = (q << _U(1)) | take.astype(np.uint64)
        r = np.where(take, r - y, r) << _U(1)
    q = q | (r != 0).astype(np.uint64)
    e = (A.exp - ux) - (B.exp - uy) - below.astype(np.int64) - (n - 1)
    out = _pack(neg, np.zeros_like(q), np.where(A.zero, _U(0), q), e, f, mode, ftz=ftz)
    nan = A.nan | B.nan | (A.zero & B.zero) | (A.inf & B.inf)
    out = np.where(B.inf & ~nan, (neg.astype(np.uint64) << _U(f.bits - 1)).astype(f.uint), out)
    return _finish(out, f, nan, (A.inf | B.zero) & ~A.zero, neg, (a, b))


def rcp(a, f: Format, mode: str = "rne", ftz: bool = False):
    """1 / a rounded once to ``f``."""
    one = np.full(np.shape(a), (f.bias << f.frac_bits), np.uint64)
    return div(one, a, f, mode, ftz)


def sqrt(a, f: Format, mode: str = "rne", ftz: bool = False):
    """The square root rounded once to ``f``: digit-by-digit to precision + 3 bits, the remainder jammed (a
    square root is never tiny: ``ftz`` only flushes a subnormal operand)."""
    (a,) = _flush_inputs(f, ftz, _bits(a, f))
    A = unpack(a, f)
    odd = (A.exp & 1) == 1
    m = np.where(odd, A.mag << _U(1), A.mag)
    e = A.exp - odd.astype(np.int64)
    n = f.precision + 3
    k = (2 * n - bit_length(m).astype(np.int64)) // 2  # radicand m * 4**k has 2n - 1 or 2n bits
    root = np.zeros(m.shape, np.uint64)
    rem = np.zeros(m.shape, np.uint64)
    for i in range(n):  # one root bit per step: bring down the next two radicand bits
        sh = (2 * n - 2 - 2 * i) - 2 * k  # those bits are m's bits sh + 1, sh
        two = np.where(sh >= 0, _shr64(m, np.maximum(sh, 0)) & _U(3), np.where(sh == -1, (m & _U(1)) << _U(1), 0))
        rem = (rem << _U(2)) | two.astype(np.uint64)
        trial = (root << _U(2)) | _U(1)
        take = rem >= trial
        rem = np.where(take, rem - trial, rem)
        root = (root << _U(1)) | take.astype(np.uint64)
    root = root | (rem != 0).astype(np.uint64)
    out = _pack(A.negative, np.zeros_like(root), np.where(A.zero, _U(0), root), (e - 2 * k) // 2, f, mode)
    nan = A.nan | (A.negative & ~A.zero)
    return _finish(out, f, nan, A.inf, A.negative, (a,))


# -- conversions ------------------------------------------------------------------------------------------------


def _convert_nan(bits, src: Format, dst: Format) -> np.ndarray:
    """The NaN a conversion gives for the NaN patterns ``bits`` of ``src``. With an f64 side (F2F.F32.F64,
    F2F.F64.F16 ...: the double-precision unit) the sign and the payload's leading bits carry over, aligned at the
    top of the fraction (shifted up when widening, the low bits dropped when narrowing), and the quiet bit is set:
    silicon probes convert/cvt_*_f64 and cvt_f64_* (tests/data/ptx_isa/). Between the other formats: dst's
    canonical NaN (convert/cvt_rn_f16_f32, cvt_rn_bf16_f32 ...)."""
    if F64 not in (src, dst) or isinstance(src, FiniteFormat) or isinstance(dst, FiniteFormat):
        return canonical_nan(dst, np.shape(bits)).astype(np.uint64)
    b = _bits(bits, src)
    frac = b & _U((1 << src.frac_bits) - 1)
    shift = dst.frac_bits - src.frac_bits
    payload = frac << _U(shift) if shift >= 0 else frac >> _U(-shift)
    sign = (b >> _U(src.bits - 1)) << _U(dst.bits - 1)
    return sign | _U(dst.inf_bits) | payload | _U(1 << (dst.frac_bits - 1))


def convert(bits, src: Format, dst: Format, mode: str = "rne", overflow: str = "ieee", ftz: bool = False):
    """Patterns of ``src`` rounded once to ``dst``. ``overflow``: "ieee" (per direction), or "finite" (PTX
    .satfinite: past the largest finite number, infinities included, the largest finite number of the sign). NaN
    gives ``_convert_nan``'s; an infinity becomes dst's (its NaN where dst has none, as without .satfinite).
    ``ftz`` flushes a result tiny before rounding (the .ftz of an f32 destination; an operand's flush is the
    caller's, as .ftz reads only f32 operands as flushed)."""
    if isinstance(dst, AllFiniteFormat) and overflow != "finite":  # its "infinity" pattern is the sign bit
        raise ValueError(f"{dst.name} has no infinity: convert to it with overflow='finite' (PTX .satfinite)")
    A = unpack(bits, src)
    out = _pack(A.negative, np.zeros_like(A.mag), A.mag, A.exp, dst, mode, overflow, ftz)
    sign = A.negative.astype(np.uint64) << _U(dst.bits - 1)
    if overflow == "finite":
        out = np.where(A.inf, _U(dst.max_finite_bits) | sign, out)
    elif isinstance(dst, FiniteFormat):
        out = np.where(A.inf, _U(dst.canonical_nan), out)
    else:
        out = np.where(A.inf, _U(dst.inf_bits) | sign, out)
    return np.where(A.nan, _convert_nan(bits, src, dst), out).astype(dst.uint)


_TF32_LOW = np.uint32(0x1FFF)  # the 13 fraction bits of an f32 that tf32 drops


def tf32_in_f32(bits, mode: str = "rne") -> np.ndarray:
    """f32 patterns rounded to tf32 (10 fraction bits) by ``convert`` in ``mode``, as f32 patterns (the low 13 bits
    zero; a NaN becomes the canonical 0x7FFFE000): cvt.{rn,rz}.tf32.f32's value, and what a TFLOAT32 TMA load
    writes (nearest even, measured on the H100)."""
    return convert(np.asarray(bits).astype(np.uint32), F32, TF32, mode).astype(np.uint32) << np.uint32(13)


def tf32_rna_in_f32(bits, satfinite: bool = False) -> np.ndarray:
    """The SASS of cvt.rna{.satfinite}.tf32.f32 on f32 patterns: a finite x gets half a tf32 unit (0x1000) added to
    its bits (a carry moves into the exponent: ties away from zero, overflow to inf), then the low 13 bits are
    cleared (a NaN keeps its top 19 bits); .satfinite then takes 0x2000 off any result that is inf or NaN (inf ->
    the largest finite tf32)."""
    x = np.asarray(bits).astype(np.uint32)
    finite = (x & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    r = np.where(finite, x + np.uint32(0x1000), x) & ~_TF32_LOW
    if satfinite:
        r = np.where((r & np.uint32(0x7F800000)) == np.uint32(0x7F800000), r - np.uint32(0x2000), r)
    return r.astype(np.uint32)


def from_integer(bits, width: int, signed: bool, f: Format, mode: str = "rne"):
    """The ``width``-bit integers ``bits`` (two's complement when ``signed``) rounded once to ``f``."""
    b = np.asarray(bits).astype(np.uint64) & _U((1 << width) - 1 if width < 64 else 2**64 - 1)
    if signed:
        negative = (b >> _U(width - 1)) == 1
        mag = np.where(negative, (~b + _U(1)) & _U((1 << width) - 1 if width < 64 else 2**64 - 1), b)
    else:
        negative, mag = np.zeros(b.shape, bool), b
    return _pack(negative, np.zeros_like(mag), mag.astype(np.uint64), np.zeros(b.shape, np.int64), f, mode)


def to_integer(bits, f: Format, mode: str, width: int, signed: bool):
    """Patterns of ``f`` rounded to integers in direction ``mode`` and clamped to the ``width``-bit range: the
    result's two's complement bits, uint64. NaN (PTX leaves it open) gives what the H200's F2I gives: 0 from an
    f32 / f16 / bf16 source to an integer of at most 32 bits (convert/cvt_rni_s32_f32, cvt_rzi_u16_f16,
    cvt_rni_s32_bf16 ...), and the destination's sign bit alone, 1 << (width - 1), whether signed or not, from an
    f64 source or to a 64-bit integer (convert/cvt_rmi_s32_f64, cvt_rzi_s64_f64, cvt_rni_u64_f64, cvt_rni_s64_f32,
    cvt_rzi_u64_f32: tests/data/ptx_isa/). f64 to 8- / 16-bit or .u32 and f16 / bf16 to 64 bits have no probe;
    they take the rule of their unit (F2I.*.F64, F2I.64)."""
    A = unpack(bits, f)
    bl = bit_length(A.mag).astype(np.int64)
    too_big = A.inf | ((A.exp >= 0) & (A.mag != 0) & (bl + A.exp > 64))
    q = np.where(
        A.exp >= 0, _shl64(A.mag, np.clip(A.exp, 0, 63)), rounding.round_shift(A.mag, -A.exp, mode, A.negative)
    )
    mask = _U((1 << width) - 1 if width < 64 else 2**64 - 1)
    hi_pos = _U((1 << (width - 1)) - 1) if signed else mask
    hi_neg = _U(1 << (width - 1)) if signed else _U(0)
    pos = np.where(too_big | (q > hi_pos), hi_pos, q)
    negm = np.where(too_big | (q > hi_neg), hi_neg, q)
    out = np.where(A.negative, (~negm + _U(1)) & mask, pos)
    nan_value = _U(1 << (width - 1)) if f.bits == 64 or width == 64 else _U(0)
    return np.where(A.nan, nan_value, out).astype(np.uint64)


def round_integral(bits, f: Format, mode: str):
    """Patterns of ``f`` rounded to integral values of ``f`` (cvt.rni.f32.f32 ...): zeros keep their sign, so do
    values that round to zero; infinities stay; NaN -> ``nan_result`` of the operand."""
    A = unpack(bits, f)
    q = rounding.round_shift(A.mag, np.clip(-A.exp, 0, None), mode, A.negative)
    rounded = _pack(A.negative, np.zeros_like(q), q, np.zeros_like(A.exp), f, "rne")
    out = np.where(A.exp >= 0, _bits(bits, f), rounded)
    return _finish(out, f, A.nan, nan_from=(bits,))


# -- min / max --------------------------------------------------------------------------------------------------


def _order_key(b, f: Format):
    """uint64 keys whose order is the order of the values, -0 below +0 (negative patterns bit-flipped)."""
    all_ones = _U((1 << f.bits) - 1)
    return np.where((b >> _U(f.bits - 1)) == 1, ~b & all_ones, b | _U(f.sign_mask))


def minmax(a, b, f: Format, *, largest: bool, propagate_nan: bool = False, xorsign_abs: bool = False):
    """PTX min / max on patterns of ``f``: -0 < +0; a NaN operand is ignored (both NaN: ``nan_result`` of b, a)
    unless ``propagate_nan`` (.NaN: any NaN operand gives the NaN result); ``xorsign_abs`` (.xorsign.abs) compares
    |a| and |b| and gives the result the XOR of a's and b's signs."""
    if f is F32 and largest and not (propagate_nan or xorsign_abs):  # max.f32: the kernel's fmaxf
        x, y = (np.asarray(v).astype(np.uint32).view(np.float32) for v in _broadcast(a, b))
        return np.asarray(ieee32.fmax(x, y)).view(np.uint32)
    a, b = (_bits(x, f) for x in _broadcast(a, b))
    A, B = unpack(a, f), unpack(b, f)
    sign_xor = (a ^ b) & _U(f.sign_mask)
    if xorsign_abs:
        a, b = a & _U(f.sign_mask - 1), b & _U(f.sign_mask - 1)
    ka, kb = _order_key(a, f), _order_key(b, f)
    pick_a = (ka >= kb) if largest else (ka <= kb)
    r = np.where(B.nan | (pick_a & ~A.nan), a, b)
    if xorsign_abs:
        r = r | sign_xor
    nan = (A.nan | B.nan) if propagate_nan else (A.nan & B.nan)
    return np.where(nan, nan_result(f, b, a).astype(np.uint64), r).astype(f.uint)
