"""Bit-level view of the binary floating-point formats the kernel uses: f16, bf16 (ml_dtypes.bfloat16), f32; and
the format descriptions of the others PTX names (f64, tf32, e4m3, e5m2; e2m1, e2m3, e3m2, which have neither infinity
nor NaN: ``AllFiniteFormat``) for flashsim.numerics.ieee.

``decode`` splits an array into sign, exponent field, unbiased exponent (subnormals clamped to emin),
integer significand (implicit bit included) and a class code; ``encode`` builds values back from the fields.
``ulp_distance`` counts representable values between two arrays of one format (ordered-integer trick).
Everything is vectorised and works on raw bits, so NaN payloads and signed zeros survive.
``fp8_to_f16`` widens e4m3 / e5m2 (ml_dtypes.float8_e4m3fn / float8_e5m2) to f16 exactly, on numpy or JAX arrays.
``CodeFormat`` (``CODE_FORMATS``) describes the element and scale formats of the block-scaled tensor-core
instructions, one code per element: e2m1, e2m3, e3m2, e4m3, e5m2, ue8m0, ue4m3 (PTX ISA, "Alternate Floating-Point
Data Formats"); ``code_values`` gives the exact value of every code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import ml_dtypes
import numpy as np

from . import xp as X

__all__ = [
    "Format",
    "F16",
    "BF16",
    "F32",
    "FORMATS",
    "FiniteFormat",
    "F64",
    "TF32",
    "E4M3",
    "E5M2",
    "AllFiniteFormat",
    "E2M1",
    "E2M3",
    "E3M2",
    "get_format",
    "Decoded",
    "decode",
    "encode",
    "ZERO",
    "SUBNORMAL",
    "NORMAL",
    "INF",
    "NAN",
    "ulp_distance",
    "NAN_DISTANCE",
    "to_bits",
    "from_bits",
    "fp8_to_f16",
    "CodeFormat",
    "CODE_FORMATS",
    "code_format",
    "code_values",
]

# class codes returned by decode
ZERO, SUBNORMAL, NORMAL, INF, NAN = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Format:
    """A binary interchange format: 1 sign bit, ``exp_bits`` exponent bits, ``frac_bits`` stored fraction bits."""

    name: str
    exp_bits: int
    frac_bits: int
    dtype: np.dtype
    uint: type

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.frac_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number (and of every subnormal)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias

    @property
    def precision(self) -> int:
        """Significand bits including the implicit one."""
        return self.frac_bits + 1

    @property
    def exp_field_max(self) -> int:
        return (1 << self.exp_bits) - 1

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def inf_bits(self) -> int:
        return self.exp_field_max << self.frac_bits

    @property
    def canonical_nan(self) -> int:
        """The NaN NVIDIA GPUs produce: all exponent and fraction bits set, sign clear (0x7FFFFFFF / 0x7FFF)."""
        return self.sign_mask - 1

    @property
    def max_finite_bits(self) -> int:
        return self.inf_bits - 1


@dataclass(frozen=True)
class FiniteFormat(Format):
    """A format without infinities whose top exponent field holds numbers too, all but the one all-ones pattern
    (the NaN): e4m3 (OCP FP8 "fn", ml_dtypes.float8_e4m3fn), largest finite 448 = 0x7E, NaN 0x7F / 0xFF.
    ``inf_bits`` is the NaN's magnitude, the first pattern past the largest finite one (where rounding overflows)."""

    @property
    def emax(self) -> int:
        return self.bias + 1

    @property
    def inf_bits(self) -> int:
        return self.sign_mask - 1


F16 = Format("f16", 5, 10, np.dtype(np.float16), np.uint16)
BF16 = Format("bf16", 8, 7, np.dtype(ml_dtypes.bfloat16), np.uint16)
F32 = Format("f32", 8, 23, np.dtype(np.float32), np.uint32)
FORMATS = {f.name: f for f in (F16, BF16, F32)}
# The further formats of PTX's instructions (flashsim.numerics.ieee, flashsim.ptx): not kernel element types, so
# not in FORMATS. tf32 has no numpy type: its 19-bit patterns live in the top of a 32-bit word (the low 13 bits 0).
F64 = Format("f64", 11, 52, np.dtype(np.float64), np.uint64)
TF32 = Format("tf32", 8, 10, np.dtype(np.uint32), np.uint32)
E4M3 = FiniteFormat("e4m3", 4, 3, np.dtype(ml_dtypes.float8_e4m3fn), np.uint8)
E5M2 = Format("e5m2", 5, 2, np.dtype(ml_dtypes.float8_e5m2), np.uint8)


@dataclass(frozen=True)
class AllFiniteFormat(Format):
    """A format whose every pattern is a number, no infinity and no NaN: the OCP MX element types e2m1 (FP4), e2m3
    and e3m2 (FP6) (OCP Microscaling Formats 1.0, section 5.3.3; ml_dtypes.float4_e2m1fn / float6_*fn), one code in
    the low bits of a uint8. The top exponent field holds numbers (``emax`` = bias + 1); ``inf_bits`` is the first
    magnitude past the largest finite one (where rounding overflows: the sign bit); ``canonical_nan`` is the code a NaN
    converts to, +MAX_NORM, as NVIDIA's reference conversions do (cuda_fp4.hpp / cuda_fp6.hpp of CUDA 13.0: "NaN
    converts to positive MAXNORM"), the reading flashsim takes of PTX's cvt .satfinite into these types."""

    @property
    def emax(self) -> int:
        return self.bias + 1

    @property
    def inf_bits(self) -> int:
        return self.sign_mask

    @property
    def canonical_nan(self) -> int:
        return self.max_finite_bits


E2M1 = AllFiniteFormat("e2m1", 2, 1, np.dtype(ml_dtypes.float4_e2m1fn), np.uint8)
E2M3 = AllFiniteFormat("e2m3", 2, 3, np.dtype(ml_dtypes.float6_e2m3fn), np.uint8)
E3M2 = AllFiniteFormat("e3m2", 3, 2, np.dtype(ml_dtypes.float6_e3m2fn), np.uint8)


def get_format(fmt) -> Format:
    """A Format from a Format, its name ("f16", "bf16", "f32") or a numpy dtype."""
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    try:
        dt = np.dtype(fmt)
    except TypeError:
        dt = None
    for f in FORMATS.values():
        if dt == f.dtype:
            return f
    raise ValueError(f"format must be one of {', '.join(FORMATS)} or their numpy dtypes, got {fmt!r}")


def _format_of(x: np.ndarray, fmt) -> Format:
    if fmt is not None:
        return get_format(fmt)
    if not isinstance(x, np.ndarray):
        raise ValueError(f"x must be a numpy array of float16, bfloat16 or float32, got {type(x).__name__}")
    return get_format(x.dtype)


def to_bits(x: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a float16 / bfloat16 / float32 array as uint16 / uint32."""
    f = _format_of(x, None)
    return np.asarray(x).view(f.uint)


def from_bits(bits, fmt) -> np.ndarray:
    """Values of ``fmt`` from raw bit patterns (any integer array; taken modulo 2**bits)."""
    f = get_format(fmt)
    return np.asarray(bits).astype(f.uint).view(f.dtype)


class Decoded(NamedTuple):
    sign: np.ndarray  # uint8, 1 for negative (NaNs included)
    exponent_field: np.ndarray  # int32, the biased exponent bits as stored
    exponent: np.ndarray  # int32, unbiased; subnormals and zeros get emin; inf / NaN get emax + 1
    significand: np.ndarray  # int64, integer significand with the implicit bit (0 for zeros)
    cls: np.ndarray  # uint8: ZERO, SUBNORMAL, NORMAL, INF, NAN


def decode(x: np.ndarray, fmt=None) -> Decoded:
    """Split ``x`` (float16, bfloat16 or float32; or raw uint bits with ``fmt``) into its fields.

    For finite x: x == (-1)**sign * significand * 2**(exponent - frac_bits).
    """
    f = _format_of(x, fmt)
    x = np.asarray(x)
    if x.dtype == f.dtype:
        bits = x.view(f.uint).astype(np.int64)
    elif x.dtype.kind in "iu":
        bits = x.astype(np.int64) & ((1 << f.bits) - 1)
    else:
        raise ValueError(f"x must be {f.name} values or raw integer bits, got dtype {x.dtype}")
    sign = (bits >> (f.bits - 1)).astype(np.uint8)
    field = ((bits >> f.frac_bits) & f.exp_field_max).astype(np.int32)
    frac = bits & ((1 << f.frac_bits) - 1)
    normal = (field > 0) & (field < f.exp_field_max)
    significand = np.where(normal, frac | (1 << f.frac_bits), frac)
    significand = np.where(field == f.exp_field_max, 0, significand)
    exponent = np.maximum(field, 1) - f.bias
    cls = np.full(bits.shape, NORMAL, np.uint8)
    cls[(field == 0) & (frac == 0)] = ZERO
    cls[(field == 0) & (frac != 0)] = SUBNORMAL
    cls[(field == f.exp_field_max) & (frac == 0)] = INF
    cls[(field == f.exp_field_max) & (frac != 0)] = NAN
    return Decoded(sign, field, exponent.astype(np.int32), significand.astype(np.int64), cls)


def encode(sign, exponent_field, fraction, fmt) -> np.ndarray:
    """Assemble values of ``fmt`` from sign (0/1), biased exponent field and stored fraction bits.

    ValueError if a field is out of range for the format.
    """
    f = get_format(fmt)
    sign = np.asarray(sign, np.int64)
    field = np.asarray(exponent_field, np.int64)
    frac = np.asarray(fraction, np.int64)
    if ((sign < 0) | (sign > 1)).any():
        raise ValueError("sign must be 0 or 1")
    if ((field < 0) | (field > f.exp_field_max)).any():
        raise ValueError(f"exponent_field must lie in [0, {f.exp_field_max}] for {f.name}")
    if ((frac < 0) | (frac >= (1 << f.frac_bits))).any():
        raise ValueError(f"fraction must lie in [0, 2**{f.frac_bits}) for {f.name}")
    bits = (sign << (f.bits - 1)) | (field << f.frac_bits) | frac
    return bits.astype(f.uint).view(f.dtype)


NAN_DISTANCE = np.int64(1) << 62
"""ulp_distance between a NaN and a non-NaN: larger than any distance between two numbers."""


def _ordered(bits: np.ndarray, f: Format) -> np.ndarray:
    """Map sign-magnitude bit patterns to integers whose order is the order of the values (+0 and -0 -> 0)."""
    mag = bits & (f.sign_mask - 1)
    return np.where(bits & f.sign_mask, -mag, mag)


def ulp_distance(x: np.ndarray, y: np.ndarray, fmt=None) -> np.ndarray:
    """How many representable values of the format lie between x and y (0 when equal; +0 and -0 are equal).

    x and y: arrays of one format (same dtype), broadcast together.  +-inf count as the values after
    +-max_finite.  NaN: two NaNs (any payload, any sign) are at distance 0; a NaN and a non-NaN are at
    ``NAN_DISTANCE`` (2**62), so a max over an array still flags them.  Returns int64.
    """
    if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
        raise ValueError("x and y must be numpy arrays")
    if x.dtype != y.dtype:
        raise ValueError(f"x and y must have the same dtype, got {x.dtype} and {y.dtype}")
    f = _format_of(x, fmt)
    bx = x.view(f.uint).astype(np.int64)
    by = y.view(f.uint).astype(np.int64)
    dist = np.abs(_ordered(bx, f) - _ordered(by, f))
    nx = (bx & (f.sign_mask - 1)) > f.inf_bits
    ny = (by & (f.sign_mask - 1)) > f.inf_bits
    dist = np.where(nx | ny, np.where(nx & ny, 0, NAN_DISTANCE), dist)
    return dist.astype(np.int64)


# The f16 bit pattern of each of the 256 bit patterns of e4m3 and e5m2 (through float32; every value of both formats
# is an f16 value, so nothing rounds; e4m3's NaNs become f16 NaNs of their sign)
_FP8_TO_F16 = {
    dt: np.arange(256, dtype=np.uint8).view(dt).astype(np.float32).astype(np.float16).view(np.uint16)
    for dt in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))
}


def fp8_to_f16(x):
    """float8_e4m3fn / float8_e5m2 values (a numpy or JAX array) as float16, exactly: one lookup of x's bits in the
    256-entry table of f16 bit patterns. What sm_90's F2FP.F16.E4M3 / E5M2.UNPACK_B do before the f16 mma."""
    xp = X.namespace(x)
    table = xp.asarray(_FP8_TO_F16[np.dtype(x.dtype)])
    return X.bitcast(xp.take(table, X.bitcast(x, np.uint8)), np.float16)


@dataclass(frozen=True)
class CodeFormat:
    """A small floating-point format read from one unsigned integer code per element (PTX ISA 5.2.3, "Alternate
    Floating-Point Data Formats"; OCP Microscaling Formats 1.0 for e2m1 / e2m3 / e3m2 / e8m0).

    ``signed``: the top bit of the ``bits`` is the sign. ``nan``: which codes are NaN: "none" (e2m1, e2m3, e3m2),
    "ones" (the all-ones magnitude: e4m3 0x7F / 0xFF, ue4m3 0x7F, ue8m0 0xFF), "ieee" (the top exponent field with a
    non-zero fraction, and with a zero fraction infinity: e5m2). ``subnormals`` False: the exponent field 0 is a
    normal power of two, there is no zero (ue8m0: code c is 2^(c - 127)). Value of a finite code: (-1)^s *
    significand * 2^(exponent - frac_bits), the exponent of a subnormal the format's smallest one (``emin``)."""

    name: str
    exp_bits: int
    frac_bits: int
    signed: bool = True
    nan: str = "none"
    subnormals: bool = True

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.frac_bits

    @property
    def codes(self) -> int:
        """How many codes the format has (codes are 0 .. codes - 1)."""
        return 1 << self.bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number and of every subnormal."""
        return 1 - self.bias if self.subnormals else -self.bias


CODE_FORMATS = {
    f.name: f
    for f in (
        CodeFormat("e2m1", 2, 1),
        CodeFormat("e2m3", 2, 3),
        CodeFormat("e3m2", 3, 2),
        CodeFormat("e4m3", 4, 3, nan="ones"),
        CodeFormat("e5m2", 5, 2, nan="ieee"),
        CodeFormat("ue8m0", 8, 0, signed=False, nan="ones", subnormals=False),
        CodeFormat("ue4m3", 4, 3, signed=False, nan="ones"),
    )
}


def code_format(name) -> CodeFormat:
    """The CodeFormat named ``name`` ("e2m1", ..., or a CodeFormat); ValueError listing the names."""
    if isinstance(name, CodeFormat):
        return name
    if isinstance(name, str) and name.lower() in CODE_FORMATS:
        return CODE_FORMATS[name.lower()]
    raise ValueError(f"unknown element format {name!r}; known: {', '.join(CODE_FORMATS)}")


def code_fields(xp, codes, fmt: CodeFormat):
    """The fields of integer ``codes`` (any integer array, 0 .. fmt.codes - 1) of ``fmt`` on any array namespace:
    (negative bool, significand int32 with the implicit bit, exponent int32 (subnormals at ``emin``), is_nan,
    is_inf). The one decode every user of these formats builds on (``code_values``, the tensor-core model)."""
    u = xp.astype(codes, xp.int32)
    mag = u & ((1 << (fmt.exp_bits + fmt.frac_bits)) - 1)
    negative = ((u >> (fmt.bits - 1)) & 1) == 1 if fmt.signed else xp.zeros_like(u) == 1
    field = mag >> fmt.frac_bits
    frac = mag & ((1 << fmt.frac_bits) - 1)
    top = (1 << fmt.exp_bits) - 1
    if fmt.subnormals:
        sig = xp.where(field == 0, frac, frac | (1 << fmt.frac_bits))
        exp = xp.maximum(field, 1) - fmt.bias
    else:
        sig = frac | (1 << fmt.frac_bits)
        exp = field - fmt.bias
    if fmt.nan == "ones":
        is_nan, is_inf = mag == (1 << (fmt.exp_bits + fmt.frac_bits)) - 1, xp.zeros_like(u) == 1
    elif fmt.nan == "ieee":
        is_nan, is_inf = (field == top) & (frac != 0), (field == top) & (frac == 0)
    else:
        is_nan = is_inf = xp.zeros_like(u) == 1
    return negative, sig, exp, is_nan, is_inf


def code_values(fmt) -> np.ndarray:
    """float64 value of every code 0 .. codes - 1 of ``fmt`` (a CodeFormat or its name), exactly; NaN and inf where
    the format has them."""
    f = code_format(fmt)
    neg, sig, exp, is_nan, is_inf = code_fields(np, np.arange(f.codes), f)
    v = np.ldexp(sig.astype(np.float64), exp - f.frac_bits)
    v = np.where(is_inf, np.inf, np.where(is_nan, np.nan, v))
    return np.where(neg, -v, v)
