"""The generic routine of the tensor-core model, written once against the array namespace ``xp``.

Each operand is decoded once for the whole chain from its bits (integer operations only): an exact value (float32
for f16, float64 for bf16, built as integer significand times a normal power of two; inf and NaN kept) and an
exponent (subnormals clamped to the minimum, zero -> a sentinel so low that a product with a zero factor is below
every real product). Per block and output: E = max(max over the products of ea + eb, exponent of c); the products
in units of 2^(E - F), ``t = trunc(a * b * 2^(F - E))`` (a float product times a power of two, cast to an integer),
summed in int32 (int64 if F or the block size could overflow it); c's term by integer shifts of its significand;
the exact integer total rounded once by ``rounding.round_scaled``; then the specials. docs/tensorcore.md has the
argument why this is exact on numpy (IEEE, gradual underflow) and under XLA (flush-to-zero on the CPU, contraction)
alike. The k16 steps run in order, as a Python loop on numpy and as one compiled step in a ``lax.fori_loop`` under
JAX; in a fused Triton kernel (``Target.fused``) the step reads its columns of A and rows of B from the decoded
operands staged in memory, and with ``Target.inline_ptx`` a term's cast is one cvt.rzi and an f32 result's rounding
one cvt.rz.f32.f64 of the exact float64 value.
"""

from __future__ import annotations

import numpy as np

from ...arch import Arch
from .. import formats, rounding
from .. import xp as X
from ..target import PLAIN, Target
from .types import BF16, F16, F32, ZERO_BF16, ZERO_F16


def sum_int_dtype(xp, block: int, F: int, ma: int, mb: int):
    """int32 when a block of ``block`` truncated products provably sums in it, int64 otherwise: each |t| <=
    (2^(ma+1) - 1)(2^(mb+1) - 1) 2^(F - ma - mb) for inputs of ma and mb fraction bits (f16: 16 terms of at most
    2^27 (1 - 2^-10) at F = 25 fit)."""
    max_term = ((1 << (ma + 1)) - 1) * ((1 << (mb + 1)) - 1) << max(F - ma - mb, 0)
    return xp.int32 if block * max_term < (1 << 31) else xp.int64


def acc_int_dtype(xp, spec: Arch, is_bf16: bool):
    """``sum_int_dtype`` for the arch's m16n8k16 blocks of f16 (10 fraction bits) or bf16 (7) products."""
    mbits = 7 if is_bf16 else 10
    return sum_int_dtype(xp, spec.mma_block_k, spec.mma_fraction_bits, mbits, mbits)


def pow2(xp, e, dtype):
    """2.0**e from the bits, e an integer array inside the normal range of ``dtype`` (float32 or float64)."""
    if np.dtype(dtype) == F32:
        return X.bitcast(X.shl(xp.astype(e, xp.int32) + 127, 23), np.float32)
    return X.bitcast(X.shl(xp.astype(e, xp.int64) + 1023, 52), np.float64)


def decode(xp, x, is_bf16: bool):
    """f16 / bf16 array -> (exact values: float32 for f16, float64 for bf16, inf / NaN kept; exponents: int8 for
    f16, int16 for bf16, subnormals at the format minimum, zeros at the sentinel)."""
    u = xp.astype(X.bitcast(x, np.uint16), xp.int32)
    if is_bf16:
        field, m, bias, mbits, top, vdt, edt, zero = (
            (u >> 7) & 0xFF,
            u & 0x7F,
            127,
            7,
            0xFF,
            xp.float64,
            xp.int16,
            ZERO_BF16,
        )
    else:
        field, m, bias, mbits, top, vdt, edt, zero = (
            (u >> 10) & 0x1F,
            u & 0x3FF,
            15,
            10,
            0x1F,
            xp.float32,
            xp.int8,
            ZERO_F16,
        )
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    exp = xp.astype(xp.where(sig == 0, zero, e), edt)
    val = xp.astype(sig, vdt) * pow2(xp, e - mbits, vdt)
    val = xp.where(field == top, xp.where(m == 0, xp.asarray(np.inf, dtype=vdt), xp.asarray(np.nan, dtype=vdt)), val)
    val = xp.where(u >= 0x8000, -val, val)
    return val, exp


def decode_acc(xp, c_bits, acc16: bool, e_zero: int):
    """Accumulator bits (uint32 f32 / uint16 f16) -> (negative, significand int64, exponent of its last bit,
    exponent taking part in E: subnormals at the minimum, zero -> e_zero). The fields in int32 (the bits as
    unsigned values, so the shifts bring in zeros); only the significand is widened, for the shifts that align it."""
    c = xp.astype(c_bits, xp.uint32)
    if acc16:
        field, m, bias, mbits, sbit = (c >> 10) & 0x1F, c & 0x3FF, 15, 10, 15
    else:
        field, m, bias, mbits, sbit = (c >> 23) & 0xFF, c & 0x7FFFFF, 127, 23, 31
    field, m = xp.astype(field, xp.int32), xp.astype(m, xp.int32)
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    e_term = xp.where(sig == 0, xp.asarray(e_zero, dtype=xp.int32), e)
    return (c >> sbit) == 1, xp.astype(sig, xp.int64), e - mbits, e_term


def chain(xp, a, b, c, spec: Arch, target: Target = PLAIN):
    """The generic routine (the package docstring): d for c after the k16 steps of a (..., M, K) and b (..., K, N),
    on any namespace; ``target``: how it is traced (flashsim.numerics.target)."""
    X.require_x64(xp)
    is_bf16 = np.dtype(a.dtype) == BF16
    acc16 = np.dtype(c.dtype) == F16
    out_shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2])) + (
        a.shape[-2],
        b.shape[-1],
    )
    A = decode(xp, a, is_bf16)
    B = decode(xp, b, is_bf16)
    ubits = np.uint16 if acc16 else np.uint32
    d = xp.broadcast_to(X.bitcast(c, ubits), out_shape)
    kb = spec.mma_block_k
    if target.fused:  # Triton cannot index a value by k: the decoded operands are read back from memory,
        # exponents as int32 (the same values: Triton computes on int8 / int16 with a sign extension per operation)
        read_a, read_b = X.staged(*((v, xp.astype(e, xp.int32)) for v, e in (A, B)), target)

    def columns(i):  # k16 step i: the 16 columns of A (..., M, 1) and rows of B (..., 1, N), per array
        if target.fused:  # per k a tuple (value, exponent): regrouped per array
            return (
                list(zip(*(read_a(16 * i + j) for j in range(16)))),
                list(zip(*(read_b(16 * i + j) for j in range(16)))),
            )
        return (
            [X.pieces(_k_slice(xp, x, 16 * i, 16, -1), 1, -1, target) for x in A],
            [X.pieces(_k_slice(xp, x, 16 * i, 16, -2), 1, -2, target) for x in B],
        )

    def step(i, d):  # k16 step i: its fused blocks in order
        cols_a, rows_b = columns(i)
        for k0 in range(0, 16, kb):
            d = block(
                xp,
                tuple(c[k0 : k0 + kb] for c in cols_a),
                tuple(r[k0 : k0 + kb] for r in rows_b),
                d,
                acc16,
                spec,
                is_bf16,
                target,
            )
        return d

    with X.errstate():  # numpy: inf / NaN products cast to int are garbage by design (overwritten)
        d = fori(xp, a.shape[-1] // 16, step, d)
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def fori(xp, n: int, body, init):
    """``for i in range(n): x = body(i, x)``: a Python loop on numpy, ``lax.fori_loop`` on JAX.

    Structure, not arithmetic (the bits are the body's).  XLA fuses the whole unrolled chain into one loop over the
    outputs, and past about 7 k16 steps that loop stops being vectorised (measured, CPU time, one core: K = 112
    unrolled 0.5 ns per product, K = 128 2.1 ns); one compiled step per iteration runs at 0.21 ns for any K (two
    or four steps per iteration: 0.26, 0.28)."""
    if X.is_numpy(xp) or n <= 1:
        x = init
        for i in range(n):
            x = body(i, x)
        return x
    from jax import lax

    return lax.fori_loop(0, n, body, init)


def _k_slice(xp, x, start, size: int, axis: int):
    """x[..., start:start + size] along ``axis`` (-1 or -2); ``start`` a Python int or (JAX) a traced index."""
    if isinstance(start, (int, np.integer)):
        return x[..., start : start + size] if axis == -1 else x[..., start : start + size, :]
    from jax import lax

    return lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim + axis)


def _over_k(xp, term, how: str, a, b, *per_output):
    """``how`` ("max" or "sum") over k of ``term(a[k], b[k], *per_output)`` for every output (..., M, N): a the
    block's columns of A, each (..., M, 1), b its rows of B, each (..., 1, N), ``per_output`` arrays (..., M, N).
    Structure only (the arithmetic is ``term``'s, and max and the integer sum are order-free): one (..., M, N) term
    per k, which XLA fuses into one loop over the outputs and a fused Triton kernel computes in registers from the
    columns and rows it loads (a broadcast over k cost it 2.7 times the instructions per emulated product:
    benchmarks/experiments/jax_staged/)."""
    out = None
    for a_k, b_k in zip(a, b):
        t = term(a_k, b_k, *per_output)
        out = t if out is None else (xp.maximum(out, t) if how == "max" else out + t)
    return out


def block(xp, A, B, c_bits, acc16: bool, spec: Arch, is_bf16: bool, target: Target = PLAIN, params=None):
    """One fused block of products for every output: c bits -> d bits. A = (values, exponents) of the block's
    columns of A, each a list of kb arrays (..., M, 1); B the same of its rows of B, each (..., 1, N). ``params``
    (the block parameters of another instruction: m16n8k32 with 8-bit float inputs, k32's ``_Fp8Block``; wgmma,
    warpgroup's ``WgmmaBlock``) replaces the m16n8k16 parameters (F, the smallest product exponent, the integer
    width) and may truncate f32 results further (Ada's and Hopper wgmma's FP8: 13 fraction bits); an ``e_zero``
    attribute that is not None replaces the arch's zero exponent (sm_120a's block-scaled kinds, blockscale's
    ``KindBlock``)."""
    F = spec.mma_fraction_bits if params is None else params.F
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    if getattr(params, "e_zero", None) is not None:  # an instruction with a zero exponent of its own (k64 kinds)
        e_zero = params.e_zero
    av, ae = A
    bv, be = B
    c_neg, c_sig, c_x, ec = decode_acc(xp, c_bits, acc16, e_zero)
    # E: the largest exponent of the non-zero products (a zero factor's sentinel keeps its product below), then c
    e0 = xp.astype(_over_k(xp, lambda ea, eb: ea + eb, "max", ae, be), xp.int32)
    min_product_exp = 2 * (-126 if is_bf16 else -14) if params is None else params.min_product_exp
    E = xp.where(e0 < min_product_exp, ec, xp.maximum(e0, ec))
    # the products in units of 2^(E - F), truncated toward zero by the cast, summed exactly; the plain float sum of
    # c and the products tells inf and NaN (see the module docstring: in any order)
    vdt = av[0].dtype
    if np.dtype(vdt) == F32:
        scale = pow2(xp, xp.minimum(F - E, 125), np.float32)
    else:
        scale = pow2(xp, F - E, np.float64)
    idt = acc_int_dtype(xp, spec, is_bf16) if params is None else params.int_dtype(xp)
    acc = _over_k(xp, lambda va, vb, sc: X.trunc_to_int(va * vb * sc, idt, target), "sum", av, bv, scale)
    fsum = xp.astype(X.bitcast(c_bits, np.float16 if acc16 else np.float32), vdt) + _over_k(
        xp, lambda va, vb: va * vb, "sum", av, bv
    )
    # c in the same units (integer shifts of its significand: truncation toward zero of the magnitude)
    sh = c_x - (E - F)
    tc = xp.where(sh >= 0, X.shl(c_sig, xp.clip(sh, 0, 62)), X.shr(c_sig, xp.clip(-sh, 0, 62)))
    total = xp.astype(acc, xp.int64) + xp.where(c_neg, -tc, tc)
    if idt == xp.int64:  # an inf / NaN product's int64 cast is arbitrary: keep the (overwritten) total small
        total = xp.where(xp.isfinite(fsum), total, xp.zeros_like(total))
    # one rounding: f32 toward zero with |value| >= 2^128 -> inf (the H200), f16 to nearest even; zero -> +0
    fmt = formats.get_format("f16" if acc16 else "f32")
    ut = xp.uint16 if acc16 else xp.uint32
    if target.inline_ptx and not acc16 and params is None:  # a GPU's own f32 rounding toward zero of the exact value
        d = round_rz_ptx(xp, total, E - F, target)
    else:
        d = X.bitcast(
            rounding.round_scaled(
                total, E - F, fmt, "rne" if acc16 else "rz", overflow="inf", signed_zero=False, target=target
            ),
            fmt.uint,
        )
    if params is not None and not acc16 and params.f32_result_frac_bits < 23:  # toward zero again, to fewer bits
        keep = ~np.uint32((1 << (23 - params.f32_result_frac_bits)) - 1)
        d = xp.where((d & 0x7F800000) == 0x7F800000, d, d & xp.asarray(keep, dtype=ut))
    inf_bits = xp.where(
        fsum < 0, xp.asarray(fmt.inf_bits | fmt.sign_mask, dtype=ut), xp.asarray(fmt.inf_bits, dtype=ut)
    )
    d = xp.where(xp.isinf(fsum), inf_bits, d)
    return xp.where(xp.isnan(fsum), xp.asarray(fmt.canonical_nan, dtype=ut), d)


def round_rz_ptx(xp, total, e, target: Target):
    """f32 bits of total * 2^e rounded toward zero as the H200's tensor cores round (``round_scaled``'s "rz" with
    overflow "inf" and an unsigned zero), in a fused kernel compiled for the GPU: total (int64; below 2^33 in
    magnitude for every block of 16 f16 / bf16 products, far below 2^53) is exact in float64, and so is its product
    with 2^e (-158 <= e <= 230: normal); ``cvt.rz.f32.f64`` rounds that once, keeping subnormals; |value| >= 2^128
    becomes inf of its sign (the conversion gives the largest finite number) and -0 becomes +0."""
    v = xp.astype(total, xp.float64) * pow2(xp, e, np.float64)
    d = X.bitcast(X.ptx("cvt.rz.f32.f64 $0, $1;", np.float32, v, target=target), np.uint32)
    inf = xp.where(v < 0, xp.asarray(0xFF800000, dtype=xp.uint32), xp.asarray(0x7F800000, dtype=xp.uint32))
    d = xp.where(xp.abs(v) >= xp.asarray(2.0**128, dtype=xp.float64), inf, d)
    return xp.where(d == xp.asarray(0x80000000, dtype=xp.uint32), xp.zeros_like(d), d)
