"""Hopper's ``wgmma.mma_async`` at matrix level: d = a @ b + c for one 64 x N tile per warpgroup, bit for bit.

The arithmetic is the tensor-core model family of mma.sync (``generic.block``), with wgmma's parameters from
flashsim.arch (``wgmma_*``, MMA-Sim's Hopper WGMMA model, arXiv:2511.10909): the K products of each output and c are
aligned to the largest exponent, truncated to F fraction bits, summed exactly and rounded once, one fused block per
``wgmma_chunk_bytes`` bytes of K (on sm_90a 32 bytes: 16 f16 / bf16, 8 tf32 or 32 FP8 products, i.e. the whole K of
one instruction); F = 25 for f16 / bf16 / tf32 (f32 results toward zero, f16 results to nearest even), F = 13 for FP8
with f32 results truncated toward zero to 13 fraction bits (E8M13); a zero term takes mma.sync's zero exponent (-133
f32, -21 f16). Integer forms (s8 / u8 in any pair, s32 accumulator) are exact, wrapped to 32 bits or, with
``.satfinite``, clamped to the int32 range (the PTX ISA's words).

Operand decisions, from the PTX ISA's wgmma text (and held to the H200 by flashsim.gpu.capture.wgmma):
* tf32: the ISA says wgmma "will truncate lower 13 bits of the 32-bit input data before multiplication": the inputs
  are float32 arrays of which the low 13 bits are ignored (MMA-Sim truncates the same way);
* ``scale-d`` false: D = A * B, c not read (as a +0 accumulator: it takes part in the alignment with the zero
  exponent, as every zero term does);
* ``imm-scale-a`` / ``imm-scale-b`` = -1: every element of A (B) negated, exactly (floating-point forms only);
* ``.satfinite``: integer forms only (the ISA has no .satfinite for floating-point wgmma).

The entry points:
* ``wgmma(a, b, c, *, arch="sm_90", scale_d=True, scale_a=1, scale_b=1, satfinite=False)`` (``flashsim.wgmma``):
  checked numpy operands a (..., 64, K), b (..., K, N), c (..., 64, N) whose leading dimensions broadcast as
  ``flashsim.mma``'s; K follows from the input type; d has c's dtype and shape.
* ``wgmma_unchecked(a, b, c, arch, scale_d=True, scale_a=1, scale_b=1, satfinite=False)``: the same on operands
  already of the element dtypes of ``WGMMA_TYPES`` (tf32 as float32 bits) and shapes, for the PTX simulator's
  ``wgmma.mma_async`` on a batch of W warpgroups: a (W, 64, K), b (W, K, N), c (W, 64, N) -> d (W, 64, N);
  ``scale_d`` a bool or a bool array of shape (W,) (the instruction's predicate, per warpgroup); ``scale_a`` /
  ``scale_b`` +1 or -1; ``satfinite`` a bool. Nothing is checked: the caller's decoder has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...arch import Arch, get_arch
from .. import xp as X
from ..target import PLAIN, Target
from . import fast
from .generic import block, decode, pow2, sum_int_dtype
from .k32 import _decode_fp8
from .types import BF16, E4M3, E5M2, F16, F32, FP8_FIELDS, S8, S32, ZERO_BF16, check_batch

U8 = np.dtype(np.uint8)
TF32 = F32  # tf32 operands travel as float32 arrays (the low 13 bits ignored)
M = 64  # rows of every wgmma tile

# input dtype -> (PTX type, exponent bits, fraction bits, bias, bytes per element)
INPUTS = {
    F16: ("f16", 5, 10, 15, 2),
    BF16: ("bf16", 8, 7, 127, 2),
    TF32: ("tf32", 8, 10, 127, 4),
    E4M3: ("e4m3",) + FP8_FIELDS[E4M3] + (1,),
    E5M2: ("e5m2",) + FP8_FIELDS[E5M2] + (1,),
    S8: ("s8", 0, 0, 0, 1),
    U8: ("u8", 0, 0, 0, 1),
}
_FP8 = (E4M3, E5M2)
_INT8 = (S8, U8)
_ACC_NAMES = {F32: "f32", F16: "f16", S32: "s32"}


def _wgmma_types() -> dict:
    """(a dtype, b dtype, c dtype) -> (PTX type string d.a.b, K): every dense wgmma.mma_async form of sm_90a."""
    out = {}
    pairs = [(F16, F16, (F32, F16)), (BF16, BF16, (F32,)), (TF32, TF32, (F32,))]
    pairs += [(x, y, (F32, F16)) for x in _FP8 for y in _FP8]
    pairs += [(x, y, (S32,)) for x in _INT8 for y in _INT8]
    for x, y, accs in pairs:
        k = 32 // INPUTS[x][4]
        for c in accs:
            out[(x, y, c)] = (f"{_ACC_NAMES[c]}.{INPUTS[x][0]}.{INPUTS[y][0]}", k)
    return out


WGMMA_TYPES = _wgmma_types()
# N of the shapes m64nNkK: every multiple of 8 up to 256 for the floating-point forms; the integer forms have
# n8, n16, n24, then multiples of 16 (PTX ISA, wgmma "Matrix shape" table)
N_FLOAT = tuple(range(8, 257, 8))
N_INT = (8, 16, 24) + tuple(range(32, 257, 16))


def wgmma_type(a_dtype, b_dtype, c_dtype) -> tuple[str, int]:
    """(PTX type string "f32.bf16.bf16", K) of the wgmma for these operand dtypes; ValueError listing the forms."""
    key = (np.dtype(a_dtype), np.dtype(b_dtype), np.dtype(c_dtype))
    if key not in WGMMA_TYPES:
        raise ValueError(
            f"no wgmma.mma_async for a {key[0]}, b {key[1]}, c {key[2]}; the sm_90a forms: float16 x float16 + "
            "float32 / float16, bfloat16 x bfloat16 + float32, float32 (as tf32) x float32 + float32, "
            "float8_e4m3fn / float8_e5m2 in any pair + float32 / float16, int8 / uint8 in any pair + int32"
        )
    return WGMMA_TYPES[key]


@dataclass(frozen=True)
class WgmmaBlock:
    """The block parameters ``generic.block`` takes for one wgmma type on an arch (flashsim.arch: ``wgmma_*``)."""

    F: int  # fraction bits kept after alignment
    block: int  # products per fused block
    f32_result_frac_bits: int  # f32 results truncated toward zero to this many fraction bits
    min_product_exp: int  # the smallest exponent of a non-zero product (the two formats' smallest exponents)
    fraction_bits: tuple  # of the a and b formats

    def int_dtype(self, xp):
        return sum_int_dtype(xp, self.block, self.F, *self.fraction_bits)

    @classmethod
    def of(cls, spec: Arch, a_dt, b_dt) -> WgmmaBlock:
        _, _, ma, ba, size = INPUTS[np.dtype(a_dt)]
        _, _, mb, bb, _ = INPUTS[np.dtype(b_dt)]
        fp8 = np.dtype(a_dt) in _FP8
        return cls(
            F=spec.wgmma8_fraction_bits if fp8 else spec.wgmma_fraction_bits,
            block=spec.wgmma_chunk_bytes // size,
            f32_result_frac_bits=spec.wgmma8_f32_result_frac_bits if fp8 else 23,
            min_product_exp=(1 - ba) + (1 - bb),
            fraction_bits=(ma, mb),
        )


def decode_tf32(xp, x):
    """float32 array read as tf32 -> (exact values float64, inf / NaN kept; exponents int16, subnormals at -126,
    zeros at the sentinel): the low 13 bits are ignored (the ISA's truncation). Built from the bits like
    ``generic.decode`` (integer significand times a normal power of two), so XLA's flush-to-zero cannot act."""
    u = xp.astype(X.bitcast(x, np.uint32), xp.int64)
    field, m = (u >> 23) & 0xFF, (u >> 13) & 0x3FF
    sig = xp.where(field == 0, m, m | (1 << 10))
    e = xp.maximum(field, 1) - 127
    exp = xp.astype(xp.where(sig == 0, ZERO_BF16, e), xp.int16)
    val = xp.astype(sig, xp.float64) * pow2(xp, e - 10, np.float64)
    special = xp.where(m == 0, xp.asarray(np.inf, dtype=xp.float64), xp.asarray(np.nan, dtype=xp.float64))
    val = xp.where(field == 0xFF, special, val)
    val = xp.where((u >> 31) == 1, -val, val)
    return val, exp


def _decode(xp, x):
    """(values, exponents) of a wgmma float operand by its dtype."""
    dt = np.dtype(x.dtype)
    if dt in _FP8:
        return _decode_fp8(xp, x, dt)
    if dt == TF32:
        return decode_tf32(xp, x)
    return decode(xp, x, dt == BF16)


def _apply_scale_d(xp, c, scale_d):
    """c where ``scale_d`` holds, else +0 (D = A * B): a bool, or a bool array over c's leading dimensions."""
    if isinstance(scale_d, (bool, np.bool_)):
        return c if scale_d else xp.zeros_like(c)
    mask = xp.asarray(scale_d, dtype=bool)
    if isinstance(mask, np.ndarray) and mask.all():  # numpy, every accumulator kept: c itself (a traced mask: where)
        return c
    return xp.where(xp.reshape(mask, tuple(mask.shape) + (1, 1)), c, xp.zeros_like(c))


def _negate(xp, x):
    """Every element of a floating-point operand negated, exactly: its sign bit flipped (imm-scale = -1)."""
    width = np.dtype(x.dtype).itemsize
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
    sign = xp.asarray(1 << (8 * width - 1), dtype=u)
    return X.bitcast(X.bitcast(x, u) ^ sign, np.dtype(x.dtype))


def wgmma_unchecked(a, b, c, arch: str | Arch = "sm_90", scale_d=True, scale_a=1, scale_b=1, satfinite=False):
    """``wgmma.mma_async`` on operands already of a ``WGMMA_TYPES`` form and of wgmma's shapes (the module docstring):
    a (W, 64, K), b (W, K, N), c (W, 64, N) (any leading dimensions that broadcast) -> d of c's dtype, (W, 64, N).
    ``scale_d`` a bool or a bool array over the leading dimensions; numpy or JAX arrays (JAX: under
    ``flashsim.numerics.xp.enable_x64()``)."""
    spec = get_arch(arch)
    xp = X.namespace(a, b, c)
    X.require_x64(xp)
    lead = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    if tuple(c.shape[:-2]) != lead:  # (a broadcast view is read-only: the compiled kernel would copy it)
        c = xp.broadcast_to(c, lead + tuple(c.shape[-2:]))
    c = _apply_scale_d(xp, c, scale_d)
    a_dt = np.dtype(a.dtype)
    if a_dt in _INT8:
        return _integer(xp, a, b, c, satfinite)
    if scale_a * scale_b == -1:  # (-a)(-b) = ab exactly: only a single negation changes anything
        a, b = (_negate(xp, a), b) if scale_a == -1 else (a, _negate(xp, b))
    P = WgmmaBlock.of(spec, a_dt, b.dtype)
    if X.is_numpy(xp):
        d = _fast(np.asarray(a), np.asarray(b), np.asarray(c), spec, P)
        if d is not None:
            return d
    return _float(xp, a, b, c, spec, P)


def _fast(a, b, c, spec: Arch, P: WgmmaBlock):
    """The numpy engine's compiled kernel (``fast.chain_block``) with the wgmma block's parameters, for every
    floating-point form; f32 results then truncated toward zero to ``P.f32_result_frac_bits`` fraction bits as
    ``generic.block`` does (a truncation toward zero of a truncation toward zero is the truncation to the coarser
    grid, f32 subnormals included). None where the kernel does not apply. tests/test_wgmma.py holds it bit for bit
    to the generic routine."""
    e_zero = spec.mma_zero_exponent_f16 if c.dtype == F16 else spec.mma_zero_exponent_f32
    d = fast.chain_block(a, b, c, P.F, P.block, e_zero, P.int_dtype(np))
    if d is None or d.dtype == F16 or P.f32_result_frac_bits >= 23:
        return d
    u = d.view(np.uint32)
    keep = np.uint32(~((1 << (23 - P.f32_result_frac_bits)) - 1) & 0xFFFFFFFF)
    return np.where((u & 0x7F800000) == 0x7F800000, u, u & keep).view(np.float32)


def _float(xp, a, b, c, spec: Arch, P: WgmmaBlock, target: Target = PLAIN):
    """The generic routine: the K products through ``generic.block`` in chunks of ``P.block``, c in the first."""
    acc16 = np.dtype(c.dtype) == F16
    A = tuple(X.pieces(x, 1, -1, target) for x in _decode(xp, a))
    B = tuple(X.pieces(x, 1, -2, target) for x in _decode(xp, b))
    K = a.shape[-1]
    d = X.bitcast(c, np.uint16 if acc16 else np.uint32)
    with X.errstate():  # inf / NaN products cast to int are garbage by design (overwritten)
        for k0 in range(0, K, P.block):
            d = block(
                xp,
                tuple(x[k0 : k0 + P.block] for x in A),
                tuple(x[k0 : k0 + P.block] for x in B),
                d,
                acc16,
                spec,
                np.dtype(a.dtype) in (BF16, TF32),
                target,
                params=P,
            )
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def wgmma_generic(a, b, c, arch: str | Arch = "sm_90", scale_d=True, scale_a=1, scale_b=1):
    """``wgmma_unchecked`` of a floating-point form always through the generic routine (never the compiled mma
    kernel), on numpy or JAX arrays: the definition the fast route is tested against."""
    spec = get_arch(arch)
    xp = X.namespace(a, b, c)
    X.require_x64(xp)
    lead = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    c = _apply_scale_d(xp, xp.broadcast_to(c, lead + tuple(c.shape[-2:])), scale_d)
    if scale_a == -1:
        a = _negate(xp, a)
    if scale_b == -1:
        b = _negate(xp, b)
    return _float(xp, a, b, c, spec, WgmmaBlock.of(spec, a.dtype, b.dtype))


def _integer(xp, a, b, c, satfinite: bool):
    """s8 / u8 products summed exactly plus c (int32), wrapped to 32 bits, or clamped to the int32 range with
    .satfinite. The dot product (|sum| <= 32 * 255 * 255 < 2^21) is a float64 matmul, exact, so BLAS does it."""
    dot = xp.matmul(xp.astype(a, xp.float64), xp.astype(b, xp.float64))
    total = xp.astype(dot, xp.int64) + xp.astype(c, xp.int64)
    if satfinite:
        return xp.astype(xp.clip(total, -(2**31), 2**31 - 1), xp.int32)
    return X.bitcast(xp.astype(total & 0xFFFFFFFF, xp.uint32), np.int32)


# ------------------------------------------------------------------------------------------------- checked entry


def wgmma(a, b, c, *, arch: str | Arch = "sm_90", scale_d=True, scale_a: int = 1, scale_b: int = 1, satfinite=False):
    """d = a @ b + c as ``wgmma.mma_async.sync.aligned.m64nNkK`` computes it on ``arch`` (sm_90 / sm_90a), bit for bit.

    a (..., 64, K) and b (..., K, N) numpy arrays: float16 (K = 16, c float32 or float16), ml_dtypes.bfloat16 (K = 16,
    c float32), float32 read as tf32 (K = 8, the low 13 bits ignored, c float32), ml_dtypes.float8_e4m3fn /
    float8_e5m2 in any pair (K = 32, c float32 or float16), int8 / uint8 in any pair (K = 32, c int32);
    N = 8..256 in steps of 8 (the integer forms: 8, 16, 24, then steps of 16). c (..., 64, N); the leading
    dimensions of a and b must broadcast to c's, and d has c's dtype and shape.
    scale_d: False computes D = A * B (c not read); a bool array of c's leading shape chooses per tile.
    scale_a / scale_b: +1 or -1 (negate A or B; floating-point forms). satfinite: clamp instead of wrapping (integer
    forms). Nothing is cast: a wrong dtype, shape, option or arch raises ValueError naming the argument."""
    spec = get_arch(arch)
    if not spec.has_wgmma:
        raise ValueError(f"arch: no wgmma.mma_async on {spec.name}: {spec.wgmma_source}")
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not isinstance(x, np.ndarray):
            raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
        if x.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions, got shape {x.shape}")
    for name, x in (("a", a), ("b", b)):
        if x.dtype not in INPUTS:
            raise ValueError(
                f"{name} must have dtype float16, bfloat16, float32 (tf32), float8_e4m3fn, float8_e5m2, int8 or "
                f"uint8, got {x.dtype}"
            )
    if c.dtype not in (F32, F16, S32):
        raise ValueError(f"c must have dtype float32, float16 or int32, got {c.dtype}")
    try:
        ptx, K = wgmma_type(a.dtype, b.dtype, c.dtype)
    except ValueError as e:
        raise ValueError(f"a, b, c: {e}") from None
    integer = a.dtype in _INT8
    if a.shape[-2:] != (M, K):
        raise ValueError(f"a must have shape (..., 64, {K}) for wgmma .{ptx}, got {a.shape}")
    N = b.shape[-1]
    allowed = N_INT if integer else N_FLOAT
    if b.shape[-2] != K or N not in allowed:
        ns = "8, 16, 24, 32, 48, ..., 256 (steps of 16 from 32)" if integer else "8, 16, ..., 256"
        raise ValueError(f"b must have shape (..., {K}, N) with N in {ns} for wgmma .{ptx}, got {b.shape}")
    if c.shape[-2:] != (M, N):
        raise ValueError(f"c must have shape (..., 64, {N}), got {c.shape}")
    batch = c.shape[:-2]
    check_batch(c.shape, a=a, b=b)
    if isinstance(scale_d, np.ndarray):
        if scale_d.dtype != np.bool_:
            raise ValueError(f"scale_d must be a bool or a bool array, got an array of {scale_d.dtype}")
        try:
            ok = np.broadcast_shapes(scale_d.shape, batch) == batch
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"scale_d's shape {scale_d.shape} does not broadcast to c's batch dimensions {batch}")
    elif not isinstance(scale_d, (bool, np.bool_)):
        raise ValueError(f"scale_d must be a bool or a bool array, got {type(scale_d).__name__}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if isinstance(s, bool) or s not in (1, -1):
            raise ValueError(f"{name} must be 1 or -1 (wgmma's imm-scale), got {s!r}")
        if integer and s != 1:
            raise ValueError(f"{name}: the integer wgmma forms have no imm-scale (negation); got {s}")
    if not isinstance(satfinite, (bool, np.bool_)):
        raise ValueError(f"satfinite must be a bool, got {type(satfinite).__name__}")
    if satfinite and not integer:
        raise ValueError("satfinite: only the integer wgmma forms (s32 accumulator) have .satfinite")
    return np.asarray(wgmma_unchecked(a, b, c, spec, scale_d, scale_a, scale_b, bool(satfinite)))


__all__ = ["wgmma", "wgmma_unchecked", "wgmma_generic", "wgmma_type", "WGMMA_TYPES", "WgmmaBlock", "TF32", "U8"]
