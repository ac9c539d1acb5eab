"""The S -> P repack: score accumulators (f32 C fragments) become the A operand of P @ V in registers.

For k16 slice j of P, the A fragment's four registers are built from the C fragments of S's n8 tiles
2j and 2j+1 (PTX ISA, "Matrix fragments for mma.m16n8k16"; proved lane by lane in proofs/prove_repack.py):

    P reg 4j+0 = pack(c0, c1) of S tile 2j       P reg 4j+2 = pack(c0, c1) of S tile 2j+1
    P reg 4j+1 = pack(c2, c3) of S tile 2j       P reg 4j+3 = pack(c2, c3) of S tile 2j+1

With the wide-tile register numbering of flashsim.layout.fragments (S reg = ntile*4 + i) this is
P register q = pack(S register 2q, S register 2q+1), lower half first: the repack never moves a value
between lanes or reorders registers; it only rounds f32 pairs to a 16-bit type and packs them.

The kernel does it with ``cvt.rn.f16x2.f32 d, hi, lo`` (PTX: the first source goes to the upper half),
i.e. ``__floats2half2_rn(lo, hi)``. Rounding is to nearest even, f16 subnormals kept, overflow to inf.
NaN gives the canonical NaN 0x7FFF here (the mma's canonical f16 NaN, tests/data/mma_sm90.npz); the H200
capture (flashsim/gpu/capture/layout.py) checks this and the rest of the conversion on silicon.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .fragments import LANES, pack16

NAN16 = np.uint16(0x7FFF)  # canonical NaN written by cvt.rn.{f16,bf16}x2.f32 (checked on the H200)


def _f32(values, argname) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == np.uint32:
        return values.view(np.float32)
    if isinstance(values, np.ndarray) and values.dtype == np.float32:
        return values
    raise ValueError(
        f"{argname} must be float32 values or uint32 f32 words, got {getattr(values, 'dtype', type(values).__name__)}"
    )


def cvt_rn(values, dtype=np.float16) -> np.ndarray:
    """f32 -> 16-bit bit patterns (uint16), round to nearest even: the per-element half of cvt.rn.*x2.f32.

    dtype: np.float16 or ml_dtypes.bfloat16.
    """
    x = _f32(values, "values")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        raise ValueError(f"dtype must be float16 or bfloat16, got {dt}")
    with np.errstate(over="ignore", invalid="ignore"):
        bits = x.astype(dt).view(np.uint16)  # numpy / ml_dtypes: correctly rounded, ties to even
    nan = np.isnan(x)
    if nan.any():
        bits[nan] = NAN16
    return bits


def cvt_rn_x2(lo, hi, dtype=np.float16) -> np.ndarray:
    """``cvt.rn.f16x2.f32 d, hi, lo`` (or .bf16x2): uint32 words with lo in bits 0..15."""
    lo_bits, hi_bits = cvt_rn(lo, dtype), cvt_rn(hi, dtype)
    return lo_bits.astype(np.uint32) | (hi_bits.astype(np.uint32) << 16)


def repack_s_to_p(s_regs, dtype=np.float16) -> np.ndarray:
    """S accumulator registers (..., 32, 4n) -> P A-operand registers (..., 32, 2n) uint32.

    s_regs: f32 words (uint32) or float32 values of n n8 score tiles (reg = ntile*4 + i), n even.
    Result: n/2 k16 slices of P, 4 registers each (reg = kslice*4 + r), P register q =
    pack(rn(S reg 2q), rn(S reg 2q+1)).
    """
    s = _f32(s_regs, "s_regs")
    if s.ndim < 2 or s.shape[-2] != LANES or s.shape[-1] % 8 or s.shape[-1] == 0:
        raise ValueError(f"s_regs must have shape (..., 32, 4n) with n even (pairs of n8 tiles), got {s.shape}")
    return pack16(cvt_rn(s, dtype))  # S registers 2q, 2q+1 are adjacent: converting in place is the repack


def repack_sources() -> np.ndarray:
    """For P register r of one k16 slice (r = 0..3): (S tile in the pair, c index of lo, c index of hi).

    The table in the module docstring, as data: row r = (r >> 1, 2 (r & 1), 2 (r & 1) + 1).
    """
    r = np.arange(4)
    return np.stack([r >> 1, 2 * (r & 1), 2 * (r & 1) + 1], axis=1)
