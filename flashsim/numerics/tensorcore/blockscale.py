"""sm_120a's mma.sync with 4-, 6- and 8-bit inputs at matrix level, bit for bit: ``kind::f8f6f4`` (m16n8k32, any
pair of e2m1 / e2m3 / e3m2 / e4m3 / e5m2, f32 or f16 accumulator) and the block-scaled kinds ``kind::mxf8f6f4``
(m16n8k32, scale_vec 1X, ue8m0), ``kind::mxf4`` (m16n8k64 e2m1, 2X ue8m0) and ``kind::mxf4nvf4`` (m16n8k64 e2m1, 2X /
4X ue8m0, 4X ue4m3), f32 accumulator. D = (A * scale_A) (B * scale_B) + C, each row of A and column of B cut into
``scale_vec`` chunks of K / scale_vec elements, each chunk times its own scale (PTX ISA, "Block Scaling for
mma.sync").

The arithmetic is the tensor-core model family's one block routine (``generic.block``) with the kind's parameters
from flashsim.arch (``Arch.mma_kind``: MMA-Sim's RTX Blackwell models, arXiv:2511.10909; the ``mmasim`` package is the
oracle of tests/test_mma_block_scale.py and benchmarks/experiments/block_scale_vs_mmasim/):

* k32 kinds (f8f6f4, mxf8f6f4): every product a_k b_k sa sb is exact and is one term, its exponent the sum of its
  four factors' (subnormals at their format's smallest exponent); c joins; E = the largest exponent; each term
  truncated toward zero to F = 25 fraction bits below 2^E, summed exactly, rounded once (f32 toward zero, f16 to
  nearest even). The scales are powers of two, so they are folded into the elements' values and exponents first.
* k64 kinds (mxf4, mxf4nvf4): the products of each group of 16 consecutive k are summed exactly (e2m1 products are
  multiples of 1/4 below 36); each group sum times its chunk's two scales is one term whose exponent is the scales'
  exponents alone (not the sum's magnitude: a group that cancels to zero still sets E); a group whose 16 products
  are all zero, or whose scale is zero (ue4m3 code 0), is a zero term; F = 35, a zero term's exponent -139.
* Specials: a NaN scale (ue8m0 0xFF, ue4m3 0x7F) or element (e4m3 0x7F / 0xFF, e5m2 NaNs) makes the result the
  canonical NaN, even times a zero element; inf elements (e5m2) and inf / NaN in c follow IEEE sums (inf - inf NaN);
  a finite result of magnitude >= 2^128 is inf.

The PTX ISA fixes the operands (each scale serves K / scale_vec consecutive k of its row of A or column of B) and
leaves the rest open ("the accumulation order, rounding, and handling of subnormal inputs are unspecified"); there
flashsim takes mmasim's model, the only one fitted to the silicon, and nowhere found do the two disagree. ue4m3 is the
ISA's 7-bit unsigned format: matrix level takes codes 0..127; where registers carry its padding bit 7 it is ignored,
as mmasim clears it (docs/tensor-cores.md, "sm_120a's FP4 / FP6 / FP8 kinds", lists every such reading).

Entry points: ``mma_block_scale`` (``flashsim.mma_block_scale``), ``mma_f8f6f4`` (``flashsim.mma(..., kind=
"f8f6f4")``), both checking every operand before anything runs, ``block_scale_unchecked`` for the PTX simulator, and
``mma_chain_block_scale`` (a kernel's loop of k steps on whole matrices: the NVFP4 attention's Q K^T).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...arch import Arch, MmaKind, get_arch
from .. import formats
from .. import xp as X
from ..target import PLAIN, Target
from .generic import block, pow2
from .types import F8F6F4_FORMATS, F16, F32, block_scale_form, check_batch, kind_name

M, N = 16, 8
M_TILE, N_TILE = M, N  # an mma's tile of d, as the chain cuts whole matrices
ZERO_EXP = -2048  # exponent of a zero element or scale (int16): every sum with it is below MIN_TERM_EXP
MIN_TERM_EXP = -1024  # below every real term's exponent (the smallest: 2 (-127) + 2 (-14) = -282)


def decode_codes(xp, codes, fmt, vdt=np.float64, edt=np.int16, zero=ZERO_EXP):
    """Codes of ``fmt`` (a formats.CodeFormat) -> (exact values of ``vdt``, inf / NaN kept; exponents of ``edt``,
    subnormals at the format's smallest exponent, zeros at ``zero``). Built from the integer fields
    (formats.code_fields) as significand times a normal power of two, so no float rounding or flush acts on it."""
    neg, sig, e, is_nan, is_inf = formats.code_fields(xp, codes, fmt)
    val = xp.astype(sig, vdt) * pow2(xp, e - fmt.frac_bits, vdt)
    exp = xp.astype(xp.where(sig == 0, xp.asarray(zero, dtype=xp.int32), e), edt)
    val = xp.where(is_inf, xp.asarray(np.inf, dtype=vdt), xp.where(is_nan, xp.asarray(np.nan, dtype=vdt), val))
    return xp.where(neg, -val, val), exp


@dataclass(frozen=True)
class KindBlock:
    """The parameters ``generic.block`` takes for one kind on an arch (flashsim.arch.MmaKind): the whole K is one
    fused block of terms; a zero term's exponent is the kind's."""

    F: int
    block: int
    e_zero: int
    f32_result_frac_bits: int = 23
    min_product_exp: int = MIN_TERM_EXP

    def int_dtype(self, xp):
        return xp.int64  # terms below 2^(F + 10) (k64: a group sum below 2^10), K + 1 of them

    @classmethod
    def of(cls, kind: MmaKind, acc16: bool) -> KindBlock:
        e_zero = kind.zero_exponent_f16 if acc16 else kind.zero_exponent_f32
        return cls(F=kind.fraction_bits, block=kind.k, e_zero=e_zero)


def _chunk_index(K: int, n: int):
    """(K,) chunk of each k: K / n consecutive k share a scale."""
    return np.arange(K) // (K // n)


def _scaled(xp, values, exps, s_values, s_exps, axis: int):
    """Elements (values, exponents) times their chunk's scale along ``axis`` (-1: A's k, -2: B's k), exactly: the
    scales are powers of two (ue8m0) or zero / NaN; a zero element keeps the zero exponent."""
    idx = xp.asarray(_chunk_index(values.shape[axis], s_values.shape[axis]))
    sv, se = (xp.take(x, idx, axis=axis) for x in (s_values, s_exps))
    e = xp.where(exps == ZERO_EXP, exps, exps + se)
    return values * sv, xp.astype(e, xp.int16)


def block_scale_unchecked(
    a, b, c, scale_a, scale_b, *, kind, a_format, b_format, scale_format=None, arch="sm_120", target: Target = PLAIN
):
    """One mma.sync of ``kind`` on operands already checked (``mma_block_scale`` / ``mma_f8f6f4`` check them; the PTX
    simulator's decoder has): a (..., 16, K), b (..., K, 8) codes of ``a_format`` / ``b_format``, c float32 (f16 too
    for kind f8f6f4), scale_a (..., 16, n) and scale_b (..., n, 8) codes of ``scale_format`` (None for f8f6f4);
    leading dimensions broadcast. numpy or JAX arrays (JAX under ``flashsim.numerics.xp.enable_x64()``)."""
    spec = get_arch(arch)
    rec = spec.mma_kind(kind)
    xp = X.namespace(a, b, c, scale_a, scale_b)
    X.require_x64(xp)
    acc16 = np.dtype(c.dtype) == F16
    fa, fb = formats.code_format(a_format), formats.code_format(b_format)
    av, ae = decode_codes(xp, a, fa)
    bv, be = decode_codes(xp, b, fb)
    if scale_format is not None:
        fs = formats.code_format(scale_format)
        sav, sae = decode_codes(xp, scale_a, fs)
        sbv, sbe = decode_codes(xp, scale_b, fs)
    lead = np.broadcast_shapes(*(tuple(x.shape[:-2]) for x in (a, b, c) + ((scale_a, scale_b) if scale_format else ())))
    d = xp.broadcast_to(X.bitcast(c, np.uint16 if acc16 else np.uint32), lead + (M, N))
    params = KindBlock.of(rec, acc16)
    with X.errstate():  # inf / NaN terms cast to int are garbage by design (overwritten by the specials)
        if rec.group == 1:
            if scale_format is not None:
                av, ae = _scaled(xp, av, ae, sav, sae, -1)
                bv, be = _scaled(xp, bv, be, sbv, sbe, -2)
            A = tuple(X.pieces(x, 1, -1, target) for x in (av, ae))
            B = tuple(X.pieces(x, 1, -2, target) for x in (bv, be))
        else:
            A, B = _group_terms(xp, av, bv, sav, sae, sbv, sbe, rec.group)
        d = block(xp, A, B, d, acc16, spec, False, target, params=params)
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def mma_chain_block_scale(
    a, b, c, scale_a, scale_b, *, kind, scale_vec, a_format, b_format, scale_format, arch="sm_120", target=PLAIN
):
    """A kernel's loop of one block-scaled mma.sync form on whole matrices: for each k step s (the kind's K: 64 for
    mxf4 / mxf4nvf4, 32 for mxf8f6f4) in order, every (m16, n8) tile of d gets d = mma(a[:, sK:sK+K], b[sK:sK+K, :],
    d) with the step's scales, starting from d = c.

    a (..., M, Kt) and b (..., Kt, N) uint8 codes of ``a_format`` / ``b_format`` (one per element), c float32 (..., M,
    N), scale_a (..., M, Kt / block) and scale_b (..., Kt / block, N) uint8 codes of ``scale_format``, block = K /
    scale_vec consecutive k per scale; M % 16, N % 8, Kt % K == 0, leading dimensions broadcast. The form is checked
    (Table 36) and the shapes; the codes are the caller's (the kernel's own quantization made them). Returns d
    float32 (..., M, N), each tile's chain bit for bit ``block_scale_unchecked``'s."""
    k, n = block_scale_form(kind, scale_vec, a_format, b_format, scale_format)
    K = get_arch(arch).mma_kind(k).k
    xp = X.namespace(a, b, c, scale_a, scale_b)
    M, Kt, N = a.shape[-2], a.shape[-1], b.shape[-1]
    per = K // n  # k per scale
    if b.shape[-2] != Kt or Kt % K or M % M_TILE or N % N_TILE:
        raise ValueError(
            f"mma_chain_block_scale: shapes (..., M, K) x (..., K, N) with M % 16, N % 8, K % {K} == 0 expected, "
            f"got {tuple(a.shape)} x {tuple(b.shape)}"
        )
    if tuple(scale_a.shape[-2:]) != (M, Kt // per) or tuple(scale_b.shape[-2:]) != (Kt // per, N):
        raise ValueError(
            f"mma_chain_block_scale: scale_a (..., {M}, {Kt // per}) and scale_b (..., {Kt // per}, {N}) expected "
            f"({per} k per scale), got {tuple(scale_a.shape)} and {tuple(scale_b.shape)}"
        )
    lead = np.broadcast_shapes(*(tuple(x.shape[:-2]) for x in (a, b, c, scale_a, scale_b)))

    def rows(x, cols):  # (..., M, cols) -> (..., M / 16, 1, 16, cols)
        return xp.reshape(xp.broadcast_to(x, lead + (M, cols)), lead + (M // M_TILE, 1, M_TILE, cols))

    def columns(x, rows_):  # (..., rows, N) -> (..., 1, N / 8, rows, 8)
        x = xp.reshape(xp.broadcast_to(x, lead + (rows_, N)), lead + (1, rows_, N // N_TILE, N_TILE))
        return xp.swapaxes(x, -3, -2)

    at, sat = rows(a, Kt), rows(scale_a, Kt // per)
    bt, sbt = columns(b, Kt), columns(scale_b, Kt // per)
    d = xp.swapaxes(
        xp.reshape(xp.broadcast_to(c, lead + (M, N)), lead + (M // M_TILE, M_TILE, N // N_TILE, N_TILE)), -3, -2
    )
    fa, fb, fs = (formats.code_format(f) for f in (a_format, b_format, scale_format))
    for s in range(0, Kt, K):
        j = slice(s // per, (s + K) // per)
        d = block_scale_unchecked(
            at[..., s : s + K],
            bt[..., s : s + K, :],
            d,
            sat[..., j],
            sbt[..., j, :],
            kind=k,
            a_format=fa,
            b_format=fb,
            scale_format=fs,
            arch=arch,
            target=target,
        )
    return xp.reshape(xp.swapaxes(d, -3, -2), lead + (M, N))


def _group_terms(xp, av, bv, sav, sae, sbv, sbe, G: int):
    """The k64 kinds' terms as ``generic.block`` operands: per group of G k, the exact sum of its products times its
    chunk's scales (..., 16, 8) with the scales' exponent (zero exponent where every product of the group is zero or
    a scale is zero), as A's columns, against B rows of ones with exponent 0."""
    K, n = av.shape[-1], sav.shape[-1]
    nz_a, nz_b = xp.astype(av != 0, xp.float64), xp.astype(bv != 0, xp.float64)
    vals, exps = [], []
    for g in range(K // G):
        s = slice(g * G, (g + 1) * G)
        j = g * G // (K // n)
        p = xp.matmul(av[..., s], bv[..., s, :])  # exact: multiples of 1/4 below 2^10
        any_nz = xp.matmul(nz_a[..., s], nz_b[..., s, :]) > 0
        sa_v, sa_e = sav[..., :, j : j + 1], sae[..., :, j : j + 1]
        sb_v, sb_e = sbv[..., j : j + 1, :], sbe[..., j : j + 1, :]
        live = any_nz & (sa_e != ZERO_EXP) & (sb_e != ZERO_EXP)
        vals.append(p * sa_v * sb_v)
        exps.append(xp.astype(xp.where(live, xp.astype(sa_e, xp.int32) + sb_e, ZERO_EXP), xp.int16))
    one, zero = xp.ones((1, 1), dtype=xp.float64), xp.zeros((1, 1), dtype=xp.int16)
    return (vals, exps), ([one] * len(vals), [zero] * len(vals))


# ---- checked entry points -----------------------------------------------------------------------------------------


def _check_codes(name: str, x, fmt, shape: tuple) -> None:
    """x a uint8 numpy array (..., *shape) of codes of ``fmt``: one ValueError naming the rule otherwise."""
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy uint8 array of {fmt.name} codes, got {type(x).__name__}")
    if x.dtype != np.uint8:
        raise ValueError(f"{name} must have dtype uint8 (one {fmt.name} code per element), got {x.dtype}")
    if x.ndim < 2 or tuple(x.shape[-2:]) != shape:
        raise ValueError(f"{name} must have shape (..., {shape[0]}, {shape[1]}), got {x.shape}")
    if fmt.codes < 256 and x.size and int(x.max()) >= fmt.codes:
        where = tuple(int(i) for i in np.argwhere(x >= fmt.codes)[0])
        raise ValueError(
            f"{name} holds codes outside {fmt.name} (0..{fmt.codes - 1}): {int(x[where])} at index {where}"
        )


def _check_c(c, f16_ok: bool) -> None:
    dts = (F32, F16) if f16_ok else (F32,)
    if not isinstance(c, np.ndarray) or c.dtype not in dts:
        got = c.dtype if isinstance(c, np.ndarray) else type(c).__name__
        raise ValueError(f"c must be a numpy {' or '.join(str(d) for d in dts)} array, got {got}")
    if c.ndim < 2 or tuple(c.shape[-2:]) != (M, N):
        raise ValueError(f"c must have shape (..., 16, 8), got {c.shape}")


def _execute(backend: str, fn, *arrays):
    """``fn(*arrays)`` on the numpy engine, or on JAX copies of the (checked numpy) arrays with ``backend="jax"``
    (the result comes back as numpy)."""
    return fn(*arrays) if backend == "numpy" else X.on_jax(fn, *arrays)


def mma_block_scale(
    a,
    b,
    c,
    scale_a,
    scale_b,
    *,
    kind,
    scale_vec,
    a_format,
    b_format,
    scale_format,
    arch: str | Arch = "sm_120",
    backend: str = "numpy",
):
    """D = (A * scale_A) (B * scale_B) + C as ``mma.sync.aligned.kind::<kind>.block_scale.scale_vec::<n>X`` computes
    it on ``arch`` (sm_120a), bit for bit (the module docstring).

    a (..., 16, K) and b (..., K, 8): uint8, one code per element of ``a_format`` / ``b_format`` (e2m1 0..15, e2m3 /
    e3m2 0..63, e4m3 / e5m2 any byte); K = 32 for kind "mxf8f6f4", 64 for "mxf4" / "mxf4nvf4". c float32 (..., 16, 8).
    scale_a (..., 16, n) and scale_b (..., n, 8): uint8 codes of ``scale_format`` ("ue8m0" any byte, "ue4m3"
    0..127), n = scale_vec ("1X", "2X", "4X"): each scale serves K / n consecutive k of its row of A / column of B.
    Valid forms (PTX ISA Table 36): mxf8f6f4 1X ue8m0 with any of e2m1 / e2m3 / e3m2 / e4m3 / e5m2; mxf4 2X ue8m0
    e2m1; mxf4nvf4 2X ue8m0, 4X ue8m0, 4X ue4m3, e2m1. Leading dimensions of every operand broadcast to c's batch
    shape. Returns d float32 with c's shape. A bad form, dtype, shape or code raises one ValueError before anything
    runs. backend: "numpy" (default) or "jax" (the same routine on JAX arrays; needs jax; returns numpy)."""
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    k, n = block_scale_form(kind, scale_vec, a_format, b_format, scale_format)
    rec = get_arch(arch).mma_kind(k)
    K = rec.k
    fa, fb, fs = (formats.code_format(f) for f in (a_format, b_format, scale_format))
    _check_codes("a", a, fa, (M, K))
    _check_codes("b", b, fb, (K, N))
    _check_c(c, f16_ok=False)
    _check_codes("scale_a", scale_a, fs, (M, n))
    _check_codes("scale_b", scale_b, fs, (n, N))
    check_batch(c.shape, a=a, b=b, scale_a=scale_a, scale_b=scale_b)
    run = functools.partial(block_scale_unchecked, kind=k, a_format=fa, b_format=fb, scale_format=fs, arch=arch)
    return _execute(backend, run, a, b, c, scale_a, scale_b)


def mma_f8f6f4(a, b, c, *, a_format, b_format, arch: str | Arch = "sm_120", backend: str = "numpy"):
    """``mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4`` on ``arch`` (sm_120a), bit for bit: a (..., 16, 32) and b
    (..., 32, 8) uint8 codes of ``a_format`` / ``b_format`` (any of e2m1 / e2m3 / e3m2 / e4m3 / e5m2), c float32 or
    float16 (..., 16, 8); leading dimensions broadcast to c's. Returns d with c's dtype and shape; one ValueError
    for a bad operand before anything runs. backend as ``mma_block_scale``'s."""
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    for name, fmt in (("a_format", a_format), ("b_format", b_format)):
        if str(fmt).lower() not in F8F6F4_FORMATS:
            raise ValueError(f"{name} must be one of {', '.join(F8F6F4_FORMATS)} for kind f8f6f4, got {fmt!r}")
    rec = get_arch(arch).mma_kind(kind_name("f8f6f4"))
    fa, fb = formats.code_format(a_format), formats.code_format(b_format)
    _check_codes("a", a, fa, (M, rec.k))
    _check_codes("b", b, fb, (rec.k, N))
    _check_c(c, f16_ok=True)
    check_batch(c.shape, a=a, b=b)
    run = functools.partial(block_scale_unchecked, kind="f8f6f4", a_format=fa, b_format=fb, arch=arch)
    return _execute(backend, lambda a, b, c: run(a, b, c, None, None), a, b, c)
