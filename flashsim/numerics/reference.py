"""Slow, obviously-correct oracles on exact rationals (fractions.Fraction): the yardstick for the fast code.

Nothing here is vectorised or clever: each function follows its specification text line by line, one scalar at
a time, so that a disagreement with the fast numpy code in ``rounding``, ``ieee32`` or ``tensorcore`` points at
the fast code.  Scalars are passed as raw bit patterns (Python ints) to keep NaN payloads and signed zeros.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..arch import get_arch
from .formats import F16, F32, Format, get_format

__all__ = [
    "value_of",
    "round_fraction",
    "fma_ref",
    "add_ref",
    "mul_ref",
    "div_ref",
    "mma_ref",
    "mma_ref_element",
    "floor_log2",
]


def value_of(bits: int, fmt) -> Fraction | float:
    """The exact value of a bit pattern: a Fraction for finite numbers, float inf / nan otherwise.

    A zero comes back as Fraction(0) (use the sign bit to tell -0 apart).
    """
    f = get_format(fmt)
    sign = -1 if bits >> (f.bits - 1) & 1 else 1
    field = (bits >> f.frac_bits) & f.exp_field_max
    frac = bits & ((1 << f.frac_bits) - 1)
    if field == f.exp_field_max:
        return math.nan if frac else sign * math.inf
    if field == 0:
        return sign * Fraction(frac) * Fraction(2) ** (f.emin - f.frac_bits)
    return sign * Fraction(frac | (1 << f.frac_bits)) * Fraction(2) ** (field - f.bias - f.frac_bits)


def floor_log2(q: Fraction) -> int:
    """floor(log2(q)) for q > 0, exactly."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if q < Fraction(2) ** e:
        e -= 1
    return e


def round_fraction(q: Fraction, fmt, mode: str = "rne", negative_zero: bool = False) -> int:
    """Bits of the exact rational ``q`` rounded to ``fmt``: mode "rne" (nearest, ties to even) or "rz".

    IEEE 754 rules: subnormal results kept; overflow gives inf under RNE and the largest finite number under RZ.
    A result that is zero (q == 0, or underflow) is -0 if q < 0 or (q == 0 and negative_zero), else +0.
    """
    f = get_format(fmt)
    if mode not in ("rne", "rz"):
        raise ValueError(f"mode must be 'rne' or 'rz', got {mode!r}")
    negative = q < 0 or (q == 0 and negative_zero)
    sign_bits = f.sign_mask if negative else 0
    a = abs(q)
    if a == 0:
        return sign_bits
    e = max(floor_log2(a), f.emin)
    ulp = Fraction(2) ** (e - f.frac_bits)
    m = a / ulp
    n = math.floor(m)
    if mode == "rne":
        r = m - n
        if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2 == 1):
            n += 1
    if n == 1 << (f.frac_bits + 1):  # rounded up to the next binade
        n >>= 1
        e += 1
    if e > f.emax:
        return sign_bits | (f.inf_bits if mode == "rne" else f.max_finite_bits)
    if n < (1 << f.frac_bits):  # subnormal (e == emin) or zero
        return sign_bits | n
    return sign_bits | ((e + f.bias) << f.frac_bits) | (n - (1 << f.frac_bits))


def _finish(q, fmt: Format, mode: str, negative_zero: bool) -> int:
    """Bits for a float special (nan -> canonical NaN, +-inf) or a Fraction (rounded)."""
    if isinstance(q, float):
        if math.isnan(q):
            return fmt.canonical_nan
        return (fmt.sign_mask if q < 0 else 0) | fmt.inf_bits
    return round_fraction(q, fmt, mode, negative_zero)


def _is_neg(bits: int, fmt: Format) -> bool:
    return bool(bits >> (fmt.bits - 1) & 1)


def add_ref(x: int, y: int, mode: str = "rne") -> int:
    """binary32 x + y by the IEEE 754 rules (NaN -> canonical NaN 0x7FFFFFFF)."""
    vx, vy = value_of(x, F32), value_of(y, F32)
    if isinstance(vx, float) or isinstance(vy, float):
        s = float(vx) + float(vy)
        return _finish(s, F32, mode, False)
    s = vx + vy
    if s == 0:
        # exact zero: -0 only if both are -0 (RNE / RZ), IEEE 754 section 6.3
        return round_fraction(s, F32, mode, negative_zero=_is_neg(x, F32) and _is_neg(y, F32) and vx == 0 and vy == 0)
    return round_fraction(s, F32, mode)


def mul_ref(x: int, y: int, mode: str = "rne") -> int:
    """binary32 x * y by the IEEE 754 rules."""
    vx, vy = value_of(x, F32), value_of(y, F32)
    neg = _is_neg(x, F32) != _is_neg(y, F32)
    if isinstance(vx, float) or isinstance(vy, float):
        fx = (
            float(vx)
            if isinstance(vx, float)
            else (math.copysign(0.0, -1 if _is_neg(x, F32) else 1) if vx == 0 else float(vx))
        )
        fy = (
            float(vy)
            if isinstance(vy, float)
            else (math.copysign(0.0, -1 if _is_neg(y, F32) else 1) if vy == 0 else float(vy))
        )
        p = fx * fy
        if math.isnan(p):
            return F32.canonical_nan
        return (F32.sign_mask if neg else 0) | F32.inf_bits
    return round_fraction(vx * vy, F32, mode, negative_zero=neg)


def div_ref(x: int, y: int, mode: str = "rne") -> int:
    """binary32 x / y by the IEEE 754 rules."""
    vx, vy = value_of(x, F32), value_of(y, F32)
    neg = _is_neg(x, F32) != _is_neg(y, F32)
    sign = F32.sign_mask if neg else 0
    if (isinstance(vx, float) and math.isnan(vx)) or (isinstance(vy, float) and math.isnan(vy)):
        return F32.canonical_nan
    x_inf, y_inf = isinstance(vx, float), isinstance(vy, float)
    if x_inf and y_inf:
        return F32.canonical_nan
    if x_inf:
        return sign | F32.inf_bits
    if y_inf:
        return sign
    if vy == 0:
        return F32.canonical_nan if vx == 0 else sign | F32.inf_bits
    return round_fraction(vx / vy, F32, mode, negative_zero=neg)


def fma_ref(x: int, y: int, z: int, mode: str = "rne") -> int:
    """binary32 x * y + z with one rounding, by the IEEE 754 rules (NaN -> canonical)."""
    vx, vy, vz = value_of(x, F32), value_of(y, F32), value_of(z, F32)
    pneg = _is_neg(x, F32) != _is_neg(y, F32)
    if any(isinstance(v, float) for v in (vx, vy, vz)):
        # specials: decide with float arithmetic on infinities / zeros only
        def f(v, bits):
            if isinstance(v, float):
                return v
            return float(v) if v != 0 else (-0.0 if _is_neg(bits, F32) else 0.0)

        fx, fy, fz = f(vx, x), f(vy, y), f(vz, z)
        if math.isnan(fx) or math.isnan(fy) or math.isnan(fz):
            return F32.canonical_nan
        if math.isinf(fx) or math.isinf(fy):
            if fx == 0 or fy == 0:
                return F32.canonical_nan
            pinf = -math.inf if pneg else math.inf
            if math.isinf(fz) and fz != pinf:
                return F32.canonical_nan
            return _finish(pinf, F32, mode, False)
        return _finish(fz, F32, mode, False)  # z is inf, product finite
    p = vx * vy
    s = p + vz
    if s == 0:
        both_neg = (p == 0 and pneg) and (vz == 0 and _is_neg(z, F32))
        return round_fraction(s, F32, mode, negative_zero=both_neg)
    return round_fraction(s, F32, mode)


# ------------------------------------------------------------------------------------------- tensor core


def _input_exponent(v: Fraction, emin: int) -> int:
    return max(floor_log2(abs(v)), emin)


def mma_ref(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch="sm_90") -> np.ndarray:
    """One m16n8k16 mma by the model text of ``flashsim.numerics.tensorcore``, on Fractions, one element at a time.

    a (16,16), b (16,8) float16 / bfloat16; c (16,8) float32 / float16.  Returns d like c.
    """
    spec = get_arch(arch)
    fin = get_format(a.dtype)
    fc = get_format(c.dtype)
    acc16 = fc is F16
    F = spec.mma_fraction_bits
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    abits = a.view(fin.uint).astype(int)
    bbits = b.view(fin.uint).astype(int)
    cbits = c.view(fc.uint).astype(int)
    d = np.zeros((16, 8), dtype=fc.uint)
    for i in range(16):
        for j in range(8):
            acc = int(cbits[i, j])
            for k0 in range(0, 16, spec.mma_block_k):
                ks = range(k0, k0 + spec.mma_block_k)
                acc = _fused_block(
                    [int(abits[i, k]) for k in ks], [int(bbits[k, j]) for k in ks], acc, fin, fc, F, e_zero, acc16
                )
            d[i, j] = acc
    return d.view(fc.dtype)


def mma_ref_element(row, col, c_bits: int, fin, fc, arch="sm_90") -> int:
    """One output element: 16 raw bit patterns of A's row and of B's column, c's bits -> d's bits."""
    spec = get_arch(arch)
    fin, fc = get_format(fin), get_format(fc)
    acc16 = fc is F16
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    acc = int(c_bits)
    for k0 in range(0, 16, spec.mma_block_k):
        ks = range(k0, k0 + spec.mma_block_k)
        acc = _fused_block(
            [int(row[k]) for k in ks], [int(col[k]) for k in ks], acc, fin, fc, spec.mma_fraction_bits, e_zero, acc16
        )
    return acc


def _fused_block(xs, ys, cb, fin: Format, fc: Format, F: int, e_zero: int, acc16: bool) -> int:
    vc = value_of(cb, fc)
    vals = [(value_of(x, fin), value_of(y, fin)) for x, y in zip(xs, ys)]
    # specials
    nan = isinstance(vc, float) and math.isnan(vc)
    infs = set()
    if isinstance(vc, float) and not nan:
        infs.add(vc > 0)
    for (vx, vy), x, y in zip(vals, xs, ys):
        if isinstance(vx, float) or isinstance(vy, float):
            if (isinstance(vx, float) and math.isnan(vx)) or (isinstance(vy, float) and math.isnan(vy)):
                nan = True
            elif vx == 0 or vy == 0:
                nan = True  # 0 * inf
            else:
                infs.add((_is_neg(x, fin) != _is_neg(y, fin)) is False)
    if nan or len(infs) == 2:
        return fc.canonical_nan
    if infs:
        return (0 if infs.pop() else fc.sign_mask) | fc.inf_bits
    # finite: terms (value, exponent)
    terms = []
    for vx, vy in vals:
        p = vx * vy
        if p == 0:
            terms.append((p, e_zero))
        else:
            terms.append((p, _input_exponent(vx, fin.emin) + _input_exponent(vy, fin.emin)))
    terms.append((vc, e_zero if vc == 0 else _input_exponent(vc, fc.emin)))
    E = max(e for _, e in terms)
    unit = Fraction(2) ** (E - F)
    total = sum(int(v / unit) for v, _ in terms)  # int() truncates toward zero
    value = total * unit
    if acc16:
        bits = round_fraction(value, F16, "rne")  # overflow -> inf
        return 0 if bits & 0x7FFF == 0 else bits  # zero -> +0
    if abs(value) >= Fraction(2) ** 128:
        return (F32.sign_mask if value < 0 else 0) | F32.inf_bits
    bits = round_fraction(value, F32, "rz")
    return 0 if bits & 0x7FFFFFFF == 0 else bits
