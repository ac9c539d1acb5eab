"""Round exact values to a binary format once, in any IEEE direction: to nearest-even ("rne"), to nearest with
ties away from zero ("rna"), toward zero ("rz"), toward -inf ("rm"), toward +inf ("rp"); and the exact
conversions between f16, f32 and f64: one integer rounding core, written against the array namespace ``xp``
(flashsim.numerics.xp), so numpy runs it eagerly and JAX under jit (JAX needs 64-bit types: ``xp.enable_x64()``).

Entry points (numpy or JAX arrays in, the same library out; broadcasting as usual):
  ``round_scaled(m, e, fmt, mode)``   the value m * 2**e, m an integer array with |m| < 2**62, e an integer array;
  ``round_float64(v, fmt, mode)``     a float64 array taken as exact;
  ``f64_to_f32`` (rne), ``f64_to_f32_rz`` (the tensor cores' rounding), ``f64_to_f16`` (rne), ``f32_to_f16``
  (``cvt.rn.f16.f32``), and the exact widenings ``f16_to_f32`` and ``f32_to_f64``.
On numpy each conversion has a measured fast path (the table at the end of this module); ``generic=True`` forces
the portable routine, for the tests that hold the two equal bit for bit.
Subnormal results are kept (gradual underflow). Overflow follows IEEE 754 (``overflow="ieee"``): "rne" / "rna" give
+-inf, "rz" the largest finite number of the sign, "rm" / "rp" infinity on the side they round to and the largest
finite number on the other; ``overflow="finite"`` gives the largest finite number of the sign (PTX .satfinite);
``overflow="inf"`` makes every result past the largest finite number
+-inf (the tensor cores' f32 rule: |v| >= 2**128 -> inf under "rz"). A zero result keeps the sign of the value (an
exact 0 of ``round_scaled`` is +0; ``round_float64`` keeps the sign of a zero input) unless ``signed_zero=False``
(every zero result is +0, as the tensor cores give). Infinities pass through; NaN becomes the format's canonical
NaN (0x7FFFFFFF, 0x7FFF, 0x7FFF for bf16), the NaN NVIDIA GPUs produce.

Why it is exact: everything is integer arithmetic on the bits (no float operation at all, so XLA's flush-to-zero
and FMA contraction have nothing to act on). The significand's bit length (xp.bit_length) gives the leading-bit
exponent; the bits below the target precision (or below the subnormal quantum 2**(emin - frac_bits)) are split
off with a shift (clamped at 63: with mag < 2**62 the remainder is then below half and the quotient 0, which is
what an unbounded shift gives); the rounding increment is decided from the remainder against half; and a carry
out of the significand moves into the exponent field by plain addition of ((exponent - emin) << frac_bits) +
significand, the significand still holding its leading bit. Exponents are clamped to +-2**20 before the int32
arithmetic: beyond that every value overflows or rounds to zero either way. ``round_magnitude`` and
``round_shift`` expose the core to flashsim.numerics.ieee (every PTX rounding of f64 / f32 / f16 / bf16 / fp8
arithmetic and conversion goes through this one decision, ``_increment``).
"""

from __future__ import annotations

import numpy as np

from .formats import BF16, F16, F32, Format, get_format
from .target import PLAIN, Target
from .xp import bit_length, bitcast, is_numpy, namespace, require_x64, shl, shr

__all__ = [
    "round_scaled",
    "round_float64",
    "round_magnitude",
    "round_shift",
    "f64_to_f32",
    "f64_to_f32_rz",
    "f64_to_f16",
    "f32_to_f16",
    "f16_to_f32",
    "f32_to_f64",
    "check_fp_environment",
    "MODES",
    "OVERFLOWS",
    "CANONICAL_NAN_F64",
]

MODES = ("rne", "rna", "rz", "rm", "rp")
OVERFLOWS = ("ieee", "inf", "finite")
_F64 = Format("f64", 11, 52, np.dtype(np.float64), np.uint64)  # a source format only (not in formats.FORMATS)
_EXP_CLAMP = 1 << 20


def _check(mode: str, overflow: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if overflow not in OVERFLOWS:
        raise ValueError(f"overflow must be one of {OVERFLOWS}, got {overflow!r}")


def _increment(xp, q, rem, half, mode: str, negative):
    """Whether the truncated quotient ``q`` rounds up one unit, from the dropped bits ``rem`` and half a unit
    ``half`` (0 when nothing was dropped): the one decision of every rounding direction (``MODES``)."""
    inexact = rem != 0
    if mode == "rne":
        return (rem > half) | ((rem == half) & inexact & ((q & 1) == 1))
    if mode == "rna":
        return inexact & (rem >= half)
    if mode == "rz":
        return xp.zeros(q.shape, bool)
    if negative is None:
        raise ValueError(f"mode {mode!r} rounds by the sign: pass negative")
    return inexact & (negative if mode == "rm" else ~negative)


def round_shift(mag, shift, mode: str = "rne", negative=None):
    """``mag`` (uint64) divided by 2**``shift`` (int, >= 0, any size) and rounded to an integer in direction
    ``mode`` (``MODES``; "rm" / "rp" need ``negative``, the sign of the value whose magnitude is ``mag``): the
    integer rounding of float -> integer conversions, with the same decision as every format rounding here."""
    xp = namespace(mag)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    mag = xp.asarray(mag).astype(xp.uint64)
    shift = xp.asarray(shift).astype(xp.int64)
    s = xp.clip(shift, 0, 64)
    small = s < 64
    sc = xp.clip(s, 0, 63).astype(xp.uint64)
    q = xp.where(small, mag >> sc, 0).astype(xp.uint64)
    mask = xp.where(small, (xp.ones_like(mag) << sc) - 1, ~xp.zeros_like(mag))
    rem = mag & mask
    half = xp.where(s == 0, 0, xp.where(small, xp.ones_like(mag) << xp.clip(s - 1, 0, 63).astype(xp.uint64), 0))
    half = xp.where(s == 64, xp.ones_like(mag) << 63, half).astype(xp.uint64)
    if negative is not None:
        negative = xp.broadcast_to(xp.asarray(negative, dtype=bool), q.shape)
    return q + _increment(xp, q, rem, half, mode, negative).astype(xp.uint64)


def _tiny_before_rounding(xp, mag, bl, e_lead, f: Format, mode: str, negative):
    """Where mag * 2**x (leading bit at 2**e_lead, ``bl`` bits) is tiny before rounding (IEEE 754 section 7.5):
    rounded in ``mode`` to f's precision with an unbounded exponent range it still lies below 2**emin. Only a
    value in the binade just below 2**emin needs the rounding: there tininess fails exactly when the rounding
    carries into 2**emin."""
    p = f.precision
    drop = xp.clip(bl - p, 0, 63)
    q = shr(mag, drop)
    unit = shl(xp.ones_like(mag), drop)
    up = _increment(xp, q, mag & (unit - 1), shr(unit, 1), mode, negative)
    carries = up & (q == (1 << p) - 1)  # q all ones: one more unit gives 2**p, the value 2**emin
    return (mag != 0) & ((e_lead < f.emin - 1) | ((e_lead == f.emin - 1) & ~carries))


def _round_core(xp, mag, x, f: Format, mode: str, overflow: str, target: Target, negative=None, ftz: bool = False):
    """Magnitude bits (int64) of mag * 2**x rounded to ``f``: mag uint64 < 2**62, x int32 within +-2**20;
    ``negative`` (bool) the sign of the value, needed by "rm" / "rp" and by their overflow rule; ``ftz``: a value
    tiny before rounding (``_tiny_before_rounding``) gives 0 (the PTX .ftz result flush, ``round_magnitude``)."""
    p = f.precision
    bl = bit_length(mag, target)
    e_lead = x + bl - 1  # the value lies in [2**e_lead, 2**(e_lead + 1))
    normal = e_lead >= f.emin
    r = xp.where(normal, bl - p, (f.emin - p + 1) - x)  # bits to drop (negative: to add)
    r_dn = xp.clip(r, 0, 63)
    q = shl(shr(mag, r_dn), xp.clip(-r, 0, 63))
    if mode != "rz":
        unit = shl(xp.ones_like(mag), r_dn)
        rem = mag & (unit - 1)
        half = shr(unit, 1)
        q = q + _increment(xp, q, rem, half, mode, negative).astype(q.dtype)
    over = e_lead > f.emax  # already past the largest binade (kept apart: its bits could wrap the int64 below)
    e_c = xp.clip(e_lead, f.emin, f.emax).astype(xp.int64)
    out = xp.where(normal, (e_c - f.emin) << (p - 1), 0) + q.astype(xp.int64)
    out = xp.where(over, f.inf_bits, out)
    if overflow == "finite" or (overflow == "ieee" and mode == "rz"):
        big = f.max_finite_bits
    elif overflow == "inf" or mode in ("rne", "rna"):
        big = f.inf_bits
    else:  # "rm" / "rp" (IEEE): infinity in the direction of rounding, the largest finite number against it
        big = xp.where(negative == (mode == "rm"), f.inf_bits, f.max_finite_bits)
    out = xp.where(out >= f.inf_bits, big, out)
    if ftz:
        out = xp.where(_tiny_before_rounding(xp, mag, bl, e_lead, f, mode, negative), 0, out)
    return xp.where(mag == 0, 0, out)


def round_magnitude(
    mag, x, fmt, mode: str = "rne", negative=None, *, overflow: str = "ieee", ftz: bool = False, target: Target = PLAIN
):
    """The magnitude bits (int64, no sign) of ``fmt`` nearest mag * 2**x in direction ``mode``: mag uint64 <
    2**62, x integer (clamped to +-2**20 as ``round_scaled`` does); ``negative`` the value's sign (for "rm" / "rp").
    For callers that build the exact value themselves (flashsim.numerics.ieee) and attach the sign afterwards.

    ``ftz``: the result flush of PTX .ftz as the H200 does it, a value that is tiny before rounding gives 0 (IEEE
    754's "tininess before rounding": rounded to fmt's precision with an unbounded exponent it lies below the
    smallest normal), so a value just below the smallest normal that rounds up to it is flushed too. Flushing
    subnormal results after rounding would keep it: the silicon probes floating/mul_rn_ftz_sat_f32,
    fma_rn_ftz_sat_f32, mul_rn_ftz_sat_f16, fma_rn_ftz_f16 and contraction/mul_add_ftz show the H200 gives 0
    for 2**-126 * (1 - 2**-24) (f16: 2**-14 * (1 - 2**-11)), and convert/cvt_rn_ftz_f32_f64 that it keeps
    2**-126 for 2**-126 - 2**-151, which rounds to 2**-126 already at 24 bits (tests/data/ptx_isa/)."""
    f = get_format(fmt)
    _check(mode, overflow)
    xp = namespace(mag, x)
    require_x64(xp)
    x = xp.clip(xp.asarray(x).astype(xp.int64), -_EXP_CLAMP, _EXP_CLAMP).astype(xp.int32)
    if negative is not None:
        negative = xp.asarray(negative, dtype=bool)
    return _round_core(xp, xp.asarray(mag).astype(xp.uint64), x, f, mode, overflow, target, negative, ftz)


def _finish(xp, mag_bits, negative, special, special_bits, f: Format, signed_zero: bool):
    """Attach the sign (not to a zero when ``signed_zero`` is False), patch the specials, return ``f`` values."""
    if not signed_zero:
        negative = negative & (mag_bits != 0)
    bits = mag_bits | (negative.astype(xp.int64) << (f.bits - 1))
    if special is not None:
        bits = xp.where(special, special_bits, bits)
    return bitcast(bits.astype(f.uint), f.dtype)


def _convert(
    v, src: Format, dst: Format, mode: str, overflow: str = "ieee", signed_zero: bool = True, target: Target = PLAIN
):
    """Values of format ``src`` (a float array of its dtype) rounded once to ``dst``."""
    xp = namespace(v)
    require_x64(xp)
    b = bitcast(v, src.uint).astype(xp.uint64)
    negative = (b >> (src.bits - 1)) == 1
    field = ((b >> src.frac_bits) & src.exp_field_max).astype(xp.int32)
    frac = b & ((1 << src.frac_bits) - 1)
    special = field == src.exp_field_max
    mag = xp.where(field == 0, frac, frac | (1 << src.frac_bits))
    mag = xp.where(special, 0, mag)
    x = xp.maximum(field, 1) - (src.bias + src.frac_bits)
    bits = _round_core(xp, mag, x, dst, mode, overflow, target, negative)
    inf = xp.where(negative, dst.inf_bits | dst.sign_mask, dst.inf_bits)
    special_bits = xp.where(frac == 0, inf, dst.canonical_nan)
    return _finish(xp, bits, negative, special, special_bits, dst, signed_zero)


def _float_input(name: str, v, dtype):
    """``v`` as an array of ``dtype`` (numpy: anything array-like of that dtype; JAX: checked, not converted)."""
    xp = namespace(v)
    v = xp.asarray(v)
    if v.dtype != dtype:
        raise ValueError(f"{name} must be a {np.dtype(dtype).name} array, got {v.dtype}")
    return v


def round_scaled(
    m, e, fmt, mode: str = "rne", *, overflow: str = "ieee", signed_zero: bool = True, target: Target = PLAIN
):
    """Round the exact values m * 2**e (m integer with |m| < 2**62, e integer) to ``fmt``; returns fmt's dtype.

    m == 0 gives +0; a negative m that rounds to zero gives -0 (+0 with ``signed_zero=False``).
    """
    f = get_format(fmt)
    _check(mode, overflow)
    xp = namespace(m, e)
    m, e = xp.asarray(m), xp.asarray(e)
    if np.dtype(m.dtype).kind not in "iu" or np.dtype(e.dtype).kind not in "iu":
        raise ValueError(f"m and e must be integer arrays, got {m.dtype} and {e.dtype}")
    require_x64(xp)
    if is_numpy(xp):
        m, e = np.broadcast_arrays(m, e)
        if ((m >= (1 << 62)) | (m <= -(1 << 62))).any():
            raise ValueError("m must satisfy |m| < 2**62")
    m = m.astype(xp.int64)
    x = xp.clip(e.astype(xp.int64), -_EXP_CLAMP, _EXP_CLAMP).astype(xp.int32)
    bits = _round_core(xp, xp.abs(m).astype(xp.uint64), x, f, mode, overflow, target, m < 0)
    return _finish(xp, bits, m < 0, None, None, f, signed_zero)


def round_float64(
    v,
    fmt,
    mode: str = "rne",
    *,
    overflow: str = "ieee",
    signed_zero: bool = True,
    generic: bool = False,
    target: Target = PLAIN,
):
    """Round the float64 values ``v`` (taken as exact) to ``fmt`` once; returns fmt's dtype. (numpy: the cases
    f64_to_f32 / f64_to_f32_rz / f64_to_f16 cover take their fast paths unless ``generic``.)"""
    f = get_format(fmt)
    _check(mode, overflow)
    v = _float_input("v", v, np.float64)
    if is_numpy(namespace(v)) and not generic:
        fast = {
            (F32, "rne", True): _np_f64_to_f32,
            (F16, "rne", True): _np_f64_to_f16,
            (F32, "rz", False): _np_f64_to_f32_rz,
        }.get((f, mode, signed_zero))
        if fast is not None and (mode == "rne" or overflow == "inf"):
            return fast(v)
    return _convert(v, _F64, f, mode, overflow, signed_zero, target)


def f64_to_f32(v, *, generic: bool = False, target: Target = PLAIN):
    """float64 -> float32 to nearest even (IEEE: overflow -> inf, signed zeros kept, NaN -> 0x7FFFFFFF)."""
    v = _float_input("v", v, np.float64)
    if is_numpy(namespace(v)) and not generic:
        return _np_f64_to_f32(v)
    return _convert(v, _F64, F32, "rne", target=target)


def f64_to_f32_rz(v, *, generic: bool = False, target: Target = PLAIN):
    """float64 -> float32 toward zero as the tensor cores round their f32 result: |v| >= 2**128 -> +-inf, every
    zero result +0, subnormal results kept, NaN -> 0x7FFFFFFF."""
    v = _float_input("v", v, np.float64)
    if is_numpy(namespace(v)) and not generic:
        return _np_f64_to_f32_rz(v)
    return _convert(v, _F64, F32, "rz", overflow="inf", signed_zero=False, target=target)


def f64_to_f16(v, *, generic: bool = False, target: Target = PLAIN):
    """float64 -> float16 to nearest even (IEEE: overflow -> inf, signed zeros kept, NaN -> 0x7FFF)."""
    v = _float_input("v", v, np.float64)
    if is_numpy(namespace(v)) and not generic:
        return _np_f64_to_f16(v)
    return _convert(v, _F64, F16, "rne", target=target)


def f32_to_f16(x, *, generic: bool = False, target: Target = PLAIN):
    """float32 -> float16 to nearest even, ``cvt.rn.f16.f32``: overflow -> inf, signed zeros kept, NaN -> 0x7FFF."""
    x = _float_input("x", x, np.float32)
    if is_numpy(namespace(x)) and not generic:
        with np.errstate(invalid="ignore"):  # signalling NaNs
            return _np_f64_to_f16(x.astype(np.float64))
    return _convert(x, F32, F16, "rne", target=target)


def f32_to_bf16(x, *, generic: bool = False, target: Target = PLAIN):
    """float32 -> bfloat16 to nearest even, ``cvt.rn.bf16.f32`` (and each half of ``cvt.rn.bf16x2.f32``): overflow
    -> inf, subnormals rounded (bf16 has f32's exponent range), signed zeros kept, NaN -> 0x7FFF."""
    x = _float_input("x", x, np.float32)
    if is_numpy(namespace(x)) and not generic:
        return _np_f32_to_bf16(x)
    return _convert(x, F32, BF16, "rne", target=target)


def f16_to_f32(h, *, generic: bool = False, target: Target = PLAIN):
    """float16 -> float32 exactly (``cvt.f32.f16``; NaN -> 0x7FFFFFFF). Generic: integer operations only, an f16
    subnormal m * 2**-24 becoming the normal f32 with m's bits shifted up to the leading position."""
    h = _float_input("h", h, np.float16)
    xp = namespace(h)
    if is_numpy(xp) and not generic:
        with np.errstate(invalid="ignore"):  # signalling NaNs
            return _np_canonical(h.astype(np.float32), np.isnan(h), np.uint32, F32.canonical_nan)
    b = bitcast(h, np.uint16).astype(xp.uint32)
    field = (b >> 10) & 0x1F
    m = b & 0x3FF
    bl = bit_length(m, target)
    sub = ((bl + (127 - 25)).astype(xp.uint32) << 23) | (shl(m, 24 - bl) & 0x7FFFFF)
    sub = xp.where(m == 0, 0, sub)
    normal = ((field + (127 - 15)) << 23) | (m << 13)
    out = xp.where(field == 0, sub, xp.where(field == 0x1F, 0x7F800000, normal)) | ((b >> 15) << 31)
    out = xp.where((field == 0x1F) & (m != 0), F32.canonical_nan, out).astype(xp.uint32)
    return bitcast(out, np.float32)


def f32_to_f64(x, *, generic: bool = False, target: Target = PLAIN):
    """float32 -> float64 exactly; NaN -> 0x7FFFFFFFFFFFFFFF. Generic: integer operations only, so XLA's
    denormals-are-zero cannot touch an f32 subnormal m * 2**-149 (its bits are shifted up to the leading position
    of a normal float64)."""
    x = _float_input("x", x, np.float32)
    xp = namespace(x)
    if is_numpy(xp) and not generic:
        with np.errstate(invalid="ignore"):  # signalling NaNs
            return _np_canonical(x.astype(np.float64), np.isnan(x), np.uint64, CANONICAL_NAN_F64)
    require_x64(xp)
    b = bitcast(x, np.uint32)
    field = ((b >> 23) & 0xFF).astype(xp.uint64)
    m = (b & 0x7FFFFF).astype(xp.uint64)
    bl = bit_length(b & 0x7FFFFF, target)
    sub = ((bl + (1023 - 150)).astype(xp.uint64) << 52) | (shl(m, (53 - bl).astype(xp.uint64)) & ((1 << 52) - 1))
    sub = xp.where(m == 0, 0, sub)
    normal = ((field + (1023 - 127)) << 52) | (m << 29)
    out = xp.where(field == 0, sub, xp.where(field == 0xFF, 0x7FF << 52, normal))
    out = out | ((b >> 31).astype(xp.uint64) << 63)
    out = xp.where((field == 0xFF) & (m != 0), CANONICAL_NAN_F64, out)
    return bitcast(out, np.float64)


# ---------------------------------------------------------------------------------------------------------------
# numpy fast paths. numpy's casts round once to nearest even with gradual underflow (check_fp_environment makes
# sure the CPU does not flush), so f64 -> f32 and the widenings are the hardware casts plus NaN canonicalisation.
# f16 results use the float64 trick below (numpy's own cast to float16 is a slow scalar loop), f32 "rz" the mask
# trick. Best of 5 on this project's 2-core CPU (shared), 1e6 elements, numpy 2.4 (generic -> fast path, ms):
#   f64_to_f32 52 -> 0.2;  f32_to_f64 23 -> 0.2;  f16_to_f32 16 -> 2.1;  f32_to_f16 51 -> 12 (numpy's own cast: 18);
#   f64_to_f16 50 -> 10.5;  f64_to_f32_rz 45 -> 8.
# tests/test_numerics_engines.py checks each bit for bit against the generic routine.

CANONICAL_NAN_F64 = 0x7FFFFFFFFFFFFFFF
# numpy scalars (a scalar product costs a tenth of an array one; it runs on the same SSE unit under the same MXCSR)
_TINY = np.float32(1.0e-45)  # the smallest subnormal: DAZ would read it as 0
_ONE, _MIN_NORMAL, _HALF = np.float32(1.0), np.float32(2.0**-126), np.float32(0.5)


def check_fp_environment() -> None:
    """RuntimeError if the CPU flushes float32 subnormals (FTZ/DAZ, e.g. torch.set_flush_denormal(True)): the
    numpy fast paths rely on IEEE gradual underflow."""
    with np.errstate(all="ignore"):
        if _TINY * _ONE == 0 or _MIN_NORMAL * _HALF == 0:
            raise RuntimeError(
                "the CPU flushes float32 subnormals (FTZ/DAZ is on, e.g. torch.set_flush_denormal"
                "(True)): IEEE binary32 emulation needs it off"
            )


def _np_canonical(r: np.ndarray, nan: np.ndarray, uint, nan_bits: int) -> np.ndarray:
    """``r`` (a fresh array) with the canonical NaN bits where ``nan``."""
    r = np.asarray(r)
    if nan.any():
        r = np.array(r, copy=True) if r.ndim == 0 else r
        np.copyto(r.view(uint), uint(nan_bits), where=nan)
    return r


def _np_f64_to_f32(v: np.ndarray) -> np.ndarray:
    check_fp_environment()
    with np.errstate(all="ignore"):
        r = v.astype(np.float32)
    return _np_canonical(r, np.isnan(v), np.uint32, F32.canonical_nan)


def _np_f64_to_f32_rz(v: np.ndarray) -> np.ndarray:
    """Clear the 29 low significand bits (toward zero at 24 bits); below 2**-126 truncate to multiples of 2**-149
    (exact scaling); +0.0 turns -0 into +0; the cast is then exact, or inf for |v| >= 2**128."""
    check_fp_environment()
    t = np.array(v, dtype=np.float64, copy=True)
    t.view(np.int64)[...] &= ~np.int64((1 << 29) - 1)
    tiny = np.abs(t) < 2.0**-126
    if tiny.any():
        t[tiny] = np.trunc(t[tiny] * 2.0**149) * 2.0**-149
    with np.errstate(all="ignore"):
        t += 0.0
        r = t.astype(np.float32)
    return _np_canonical(r, np.isnan(v), np.uint32, F32.canonical_nan)


def _np_f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round the f32 bits at bit 16 to nearest even by integer addition: b + 0x7FFF + (bit 16 of b), then drop the
    low half; a carry moves into the exponent (to inf past the largest finite). NaN is patched to 0x7FFF."""
    b = np.asarray(x).view(np.uint32).astype(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return _np_canonical(r.view(BF16.dtype), nan, np.uint16, BF16.canonical_nan)


def _np_f64_to_f16(v: np.ndarray) -> np.ndarray:
    """f16 to nearest even from exact float64 values: with e = the value's exponent clamped to [-14, 16],
    m = rint(|v| * 2**(10 - e)) is the significand rounded at f16 precision (or at the subnormal quantum 2**-24);
    the scaling is by a power of two and its result is normal, so only rint rounds, once. ((e + 14) << 10) + m is
    then the bit pattern, a carry (m = 2**11) moving into the exponent; past 0x7C00 it is inf. |v| is capped at
    2**17 first (already inf) so that m stays a small integer."""
    a = np.minimum(np.abs(v), 2.0**17)
    e = (a.view(np.int64) >> 52) - 1023
    np.clip(e, -14, 16, out=e)
    with np.errstate(invalid="ignore"):  # NaN: patched below
        m = a * ((1033 - e) << 52).view(np.float64)
        np.rint(m, out=m)
        bits = ((e + 14) << 10) + m.astype(np.int64)
    np.minimum(bits, 0x7C00, out=bits)
    bits |= np.signbit(v).astype(np.int64) << 15
    out = bits.astype(np.uint16).view(np.float16)
    return _np_canonical(out, np.isnan(v), np.uint16, F16.canonical_nan)
