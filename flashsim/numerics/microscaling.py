"""Conversions between f32 / f16 / bf16 and the OCP Microscaling (MX) formats as PTX's cvt does them (sm_100a and
sm_120a): the element types e2m1 (FP4), e2m3 and e3m2 (FP6), and the power-of-two scale ue8m0 (OCP MX E8M0).

Elements (flashsim.numerics.formats.AllFiniteFormat; codes in the low bits of a uint8): ``to_element`` is
cvt.rn.satfinite{.relu}: one rounding to nearest even (numerics.ieee.convert), a magnitude past the largest finite
one (infinities too) the largest finite code of its sign, a NaN +MAX_NORM (the formats have no NaN: the format's
``canonical_nan``), .relu a negative result (-0 too) +0. ``element_to_f16`` is cvt.rn{.relu}.f16x2.<element>x2,
exact (every element value is an f16 value), .relu likewise.

Scales (ue8m0: code c is 2^(c - 127), 0xFF NaN, no zero, no sign): ``to_ue8m0`` is cvt.{rz,rp}{.satfinite}.ue8m0x2
of f32 or bf16 bits. The sign is ignored (a scale is a magnitude); .rz gives floor(log2 |x|) + 127 and .rp
ceil(log2 |x|) + 127, clamped below at 0 (code 0 for zero and, under .rz, every magnitude below 2^-126; under .rp
every magnitude up to 2^-127); a code past 0xFE (an infinity; under .rp any magnitude above 2^127) is 0xFF, the NaN
code, unless .satfinite makes it 0xFE (2^127); a NaN gives 0xFF either way. ``ue8m0_to_bf16`` is
cvt.rn.bf16x2.ue8m0x2: code c -> the bf16 2^(c - 127) (code 0 -> 2^-127, the subnormal 0x0040), 0xFF -> the
canonical bf16 NaN 0x7FFF. These are the rules NVIDIA's reference conversions state in CUDA 13.0's cuda_fp8.hpp
(__nv_cvt_float_to_e8m0 and friends, the host code of the functions whose device code is these cvt instructions),
taken as the reading of the PTX ISA's prose.
"""

from __future__ import annotations

import numpy as np

from . import ieee
from .formats import BF16, F16, F32, AllFiniteFormat, Format

__all__ = ["to_element", "element_to_f16", "to_ue8m0", "ue8m0_to_bf16", "UE8M0_NAN"]

UE8M0_NAN = 0xFF


def _relu(bits, f: Format):
    """.relu on patterns without NaNs: a set sign bit (a negative number or -0) gives +0."""
    bits = np.asarray(bits)
    return np.where((bits & f.sign_mask) != 0, bits.dtype.type(0), bits)


def to_element(bits, src: Format, dst: AllFiniteFormat, *, relu: bool = False) -> np.ndarray:
    """Patterns of ``src`` (f32 or f16 bits) -> codes of ``dst`` (uint8), cvt.rn.satfinite{.relu} (module docstring)."""
    codes = ieee.convert(np.asarray(bits).astype(src.uint), src, dst, "rne", "finite").astype(np.uint8)
    return _relu(codes, dst) if relu else codes


def element_to_f16(codes, src: AllFiniteFormat, *, relu: bool = False) -> np.ndarray:
    """Codes of ``src`` (their low ``src.bits`` bits; the bits above are not read) -> f16 bits (uint16), exactly."""
    mask = np.uint8((1 << src.bits) - 1)
    bits = ieee.convert(np.asarray(codes).astype(np.uint8) & mask, src, F16).astype(np.uint16)
    return _relu(bits, F16) if relu else bits


def to_ue8m0(bits, src: Format, mode: str, *, satfinite: bool = False) -> np.ndarray:
    """f32 or bf16 bits -> ue8m0 codes (uint8); ``mode`` "rz" (floor) or "rp" (ceil) of log2 |x| (module docstring).

    Both formats have an 8-bit exponent of bias 127, so the code of a normal |x| is its exponent field, plus one under
    "rp" when the fraction is not zero; a subnormal's field is 0, and under "rp" a subnormal above 2^-127 (the one
    whose fraction is the top bit alone) rounds up to 2^-126, code 1."""
    if src not in (F32, BF16):
        raise ValueError(f"ue8m0 conversions read f32 or bf16, not {src.name}")
    if mode not in ("rz", "rp"):
        raise ValueError(f"ue8m0 conversions round toward zero or up (rz, rp), not {mode!r}")
    b = np.asarray(bits).astype(np.uint64) & np.uint64(src.sign_mask - 1)  # |x|
    field = (b >> np.uint64(src.frac_bits)).astype(np.int64)
    frac = b & np.uint64((1 << src.frac_bits) - 1)
    nan = (field == src.exp_field_max) & (frac != 0)
    code = field
    if mode == "rp":
        code = code + ((frac != 0) & (b > np.uint64(1 << (src.frac_bits - 1)))).astype(np.int64)
    code = np.minimum(code, UE8M0_NAN)
    if satfinite:
        code = np.where(code == UE8M0_NAN, UE8M0_NAN - 1, code)
    return np.where(nan, UE8M0_NAN, code).astype(np.uint8)


def ue8m0_to_bf16(codes) -> np.ndarray:
    """ue8m0 codes -> bf16 bits (uint16): 2^(c - 127) exactly (code 0: the subnormal 2^-127), 0xFF the canonical NaN."""
    c = np.asarray(codes).astype(np.uint16)
    out = c << np.uint16(BF16.frac_bits)
    out = np.where(c == 0, np.uint16(1 << (BF16.frac_bits - 1)), out)
    return np.where(c == UE8M0_NAN, np.uint16(BF16.canonical_nan), out).astype(np.uint16)
