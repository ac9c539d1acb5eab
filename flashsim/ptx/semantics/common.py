"""Helpers the semantics modules share: numpy dtypes of PTX types, sign handling, and lane-wise predicates."""

from __future__ import annotations

import numpy as np

from .. import isa

__all__ = ["bits_of", "udtype", "sdtype", "fdtype", "kind_of", "to_signed", "widen", "F16", "BF16"]

F16 = np.dtype(np.float16)
try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a base dependency
    BF16 = None


def bits_of(t: str) -> int:
    if t not in isa.TYPES:
        raise isa.Unsupported(f"type {t}")
    return isa.TYPES[t][1]


def kind_of(t: str) -> str:
    return isa.TYPES[t][0]


def udtype(t_or_bits) -> np.dtype:
    """The unsigned dtype that holds the bits of type ``t`` (or of that many bits)."""
    bits = t_or_bits if isinstance(t_or_bits, int) else bits_of(t_or_bits)
    if bits == 1:
        return np.dtype(bool)
    if bits not in (8, 16, 32, 64):
        raise isa.Unsupported(f"{bits}-bit values")
    return np.dtype(f"u{bits // 8}")


def sdtype(bits: int) -> np.dtype:
    return np.dtype(f"i{bits // 8}")


def fdtype(t: str) -> np.dtype:
    return {".f16": F16, ".f32": np.dtype(np.float32), ".f64": np.dtype(np.float64), ".bf16": BF16}[t]


def to_signed(x, bits: int):
    """The bits of ``x`` (unsigned) read as a signed integer of ``bits``."""
    return np.asarray(x).astype(udtype(bits), copy=False).view(sdtype(bits))


def widen(x, from_bits: int, to_bits: int, signed: bool):
    """``x`` (unsigned, ``from_bits`` wide) zero- or sign-extended to ``to_bits`` (unsigned result)."""
    x = np.asarray(x).astype(udtype(from_bits), copy=False)
    if signed:
        return x.view(sdtype(from_bits)).astype(sdtype(to_bits)).view(udtype(to_bits))
    return x.astype(udtype(to_bits))
