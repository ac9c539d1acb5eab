"""The numpy engine's fast path of ``tensorcore.mma_chain`` (m16n8k16, f16 / bf16 inputs) and of
``mma_chain_k32`` / ``mma_k32`` with FP8 inputs (e4m3 / e5m2): one compiled kernel (numba) for a whole batch of
chains, the input format a parameter.

Integer arithmetic only, the model of ``flashsim.numerics.tensorcore`` term for term (that module's docstring has
the design, the exactness argument and the measurements).  Imported lazily by ``tensorcore``: numba is a
dependency of the base install, and without it ``mma_chain`` falls back to the generic routine on numpy.

Compilation: ``chain`` is ``@njit(cache=True, nogil=True)``, compiled on first use for the argument types it meets:
once per accumulator bit type (uint32 for f32, uint16 for f16) and per sum type (int32; int64 only for a fraction
width past the presets); the machine code, callees included, is cached on disk (numba's cache: ``__pycache__``
beside this file, or NUMBA_CACHE_DIR), so later processes load it instead of compiling (tensorcore's docstring
has the times).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

# Decoded exponents of the operands: a finite non-zero value has its own (subnormals at the format minimum); a zero
# takes ZERO, far below every real exponent (so that a product with a zero factor is below every other term); inf
# and NaN take the codes below ZERO (their terms are replaced by the specials rule, and their significand is 0).
ZERO = -(1 << 20)
POS_INF = ZERO - 1
NEG_INF = ZERO - 2
NAN = ZERO - 3


# ------------------------------------------------------------------------------------------------ intrinsics
# numba widens int32 arithmetic to int64; these keep a shift in the operand's own width (so that LLVM vectorises
# it over 16 int32 lanes) and give count-leading-zeros.  Callers keep the shift amount in [0, width).


@intrinsic
def _lshr(typingctx, x, s):
    """x >> s (logical) in x's integer type."""

    def codegen(context, builder, sig, args):
        return builder.lshr(args[0], context.cast(builder, args[1], sig.args[1], sig.args[0]))

    return x(x, s), codegen


@intrinsic
def _ashr(typingctx, x, s):
    """x >> s (arithmetic) in x's integer type."""

    def codegen(context, builder, sig, args):
        return builder.ashr(args[0], context.cast(builder, args[1], sig.args[1], sig.args[0]))

    return x(x, s), codegen


@intrinsic
def _shl(typingctx, x, s):
    """x << s in x's integer type."""

    def codegen(context, builder, sig, args):
        return builder.shl(args[0], context.cast(builder, args[1], sig.args[1], sig.args[0]))

    return x(x, s), codegen


@intrinsic
def _clz(typingctx, x):
    """Count of leading zero bits of x (its width for 0)."""

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return x(x), codegen


def _f16_bits(x):
    """Whether the array x holds f16 accumulator bits (uint16): a constant of the compiled code (see below)."""
    return x.dtype == np.uint16


@overload(_f16_bits)
def _f16_bits_overload(x):
    is16 = x.dtype == types.uint16
    return lambda x: is16


# ------------------------------------------------------------------------------------------------ decoding

# The input formats, by code (flashsim.numerics.tensorcore picks it from the dtype): F16 and BF16 are the m16n8k16
# inputs, E4M3 (finite-only e4m3fn: no inf, NaN only where exponent and fraction are all ones) and E5M2 the m16n8k32
# FP8 ones, TF32 wgmma's (32-bit words of which the top 19 bits count: the low 13 are ignored, as the PTX ISA says).
# _decode_into holds each format's fields.
F16, BF16, E4M3, E5M2, TF32 = 0, 1, 2, 3, 4


@njit(inline="always")
def _fraction_bits(fmt):
    """Stored fraction bits of input format ``fmt``."""
    return 10 if fmt == F16 or fmt == TF32 else (7 if fmt == BF16 else (3 if fmt == E4M3 else 2))


@njit(nogil=True)
def _decode_into(u, transpose, fmt, sig, exp, tmp_s, tmp_e):
    """Input bits u (R, C) (uint16 f16 / bf16, uint8 e4m3 / e5m2, uint32 tf32; ``fmt`` its code) -> signed integer
    significands sig and exponents exp, int32 (R, C), or (C, R) with ``transpose`` (then decoded into the flat
    scratch tmp_s / tmp_e first, vectorised, and transposed).

    value = sig * 2^(exp - mbits) (mbits the format's fraction bits), subnormals with exp at the format minimum;
    zeros: sig 0, exp ZERO; inf / NaN: sig 0, exp POS_INF / NEG_INF / NAN."""
    low = 0  # bits below the format's (tf32: the 13 ignored ones)
    if fmt == F16:
        fshift, fmask, bias, sbit, fn = 10, 0x1F, 15, 15, False
    elif fmt == TF32:
        fshift, fmask, bias, sbit, fn, low = 10, 0xFF, 127, 18, False, 13
    elif fmt == BF16:
        fshift, fmask, bias, sbit, fn = 7, 0xFF, 127, 15, False
    elif fmt == E4M3:
        fshift, fmask, bias, sbit, fn = 3, 0xF, 7, 7, True
    else:
        fshift, fmask, bias, sbit, fn = 2, 0x1F, 15, 7, False
    mmask = (1 << fshift) - 1
    R, C = u.shape
    flat = u.reshape(R * C)
    ds, de = (tmp_s, tmp_e) if transpose else (sig.reshape(R * C), exp.reshape(R * C))
    for i in range(R * C):  # one long loop: vectorised
        ds[i], de[i] = _decode1(flat[i] >> low, fshift, fmask, mmask, bias, sbit, fn)
    if transpose:
        for q in range(C):
            for r in range(R):
                sig[q, r] = tmp_s[r * C + q]
                exp[q, r] = tmp_e[r * C + q]


@njit(inline="always")
def _decode1(bits, fshift, fmask, mmask, bias, sbit, fn):
    """One input's (signed significand, exponent), in int32 masks and no branch (so that LLVM vectorises the loop
    above and scalar code does not mispredict on signs). ``fn``: finite-only format (only all ones is NaN)."""
    i32 = np.int32
    b = i32(bits)
    field = (b >> fshift) & fmask
    m = b & mmask
    negbit = b >> sbit
    top = -i32((field == fmask) & ((m == mmask) | (not fn)))  # inf / NaN: -1
    s = (m | (i32(field != 0) << fshift)) & ~top  # significand (implicit bit at 2^mbits); 0 for inf / NaN
    e = i32(ZERO) + ((max(field, 1) - bias - ZERO) & -i32(s != 0))
    nan = -i32(m != 0)
    e_top = (i32(NAN) & nan) | ((i32(POS_INF) - negbit) & ~nan)
    e = (e_top & top) | (e & ~top)
    return i32((s ^ -negbit) + negbit), i32(e)


# ------------------------------------------------------------------------------------------------ the kernel


@njit(cache=True, nogil=True)
def chain(ua, ta, ia, ub, tb, ib, cb, ic, out, b0, b1, F, block, e_zero, fa, fb, transposed, acc):
    """The chains of batch elements b0..b1-1: out[b] = chain(A[ia[b]], B[ib[b]], c[ic[b]]).

    ua (nA, M, K) and ub (nB, K, N): the inputs' bits (uint16 f16 / bf16, uint8 FP8; formats ``fa``, ``fb``: the
    codes above), or with ``ta`` / ``tb`` their transposes (nA, K, M) / (nB, N, K); cb (nC, M, N) and out (nb, M, N):
    accumulator bits (uint32 f32 / uint16 f16); F, block, e_zero: the arch's parameters (m16n8k16's, or its
    m16n8k32 FP8 ones: blocks in the order of the columns given, c included in the first block).  ``transposed``:
    compute d^T = B^T A^T + c^T, the same arithmetic per element (products
    commute, the sum is exact), so that the vectorised loops run over M (for narrow outputs).  acc: scratch (2, .)
    of the products' sum type (int32, or int64 where int32 could overflow), which selects the specialisation.

    Each batch element's operands are decoded into per-call scratch (not again when the next element has the same
    one, e.g. a broadcast B).  Rows are taken two at a time (they share every load of B) and products four at a
    time (block % 4 == 0: the caller sends other block sizes to the generic routine), so that each vectorised loop
    over the N columns does enough work to pay its set-up."""
    acc16 = _f16_bits(out)  # a constant: one specialisation per accumulator type
    mab = _fraction_bits(fa) + _fraction_bits(fb)
    M, N = (out.shape[2], out.shape[1]) if transposed else (out.shape[1], out.shape[2])
    K = ua.shape[1] if ta else ua.shape[2]
    # a product's term: t = trunc(|sa sb| * 2^(F - (ma + mb) - (E - pe))) = (|sa sb| << L) >> (E - pe + R)
    L = max(F - mab, 0)
    R = max(mab - F, 0)
    i32 = np.int32
    aE, aS = np.empty((M, K), i32), np.empty((M, K), i32)  # the left operand (A, or B^T), decoded
    bE, bS = np.empty((K, N), i32), np.empty((K, N), i32)  # the right operand (B, or A^T), decoded
    tmp_s, tmp_e = np.empty(max(M, N) * K, i32), np.empty(max(M, N) * K, i32)
    E = np.empty((2, N), i32)
    crow = np.empty((2, N), out.dtype)
    st = np.empty((M, N), out.dtype)  # the running accumulator when ``transposed`` (else out[b] is)
    a_row_special = np.empty(M, np.bool_)
    last_a, last_b = -1, -1
    for b in range(b0, b1):
        xa, xb = ia[b], ib[b]
        if xa != last_a:
            if transposed:
                _decode_into(ua[xa], not ta, fa, bS, bE, tmp_s, tmp_e)
            else:
                _decode_into(ua[xa], ta, fa, aS, aE, tmp_s, tmp_e)
        if xb != last_b:
            if transposed:
                _decode_into(ub[xb], not tb, fb, aS, aE, tmp_s, tmp_e)
            else:
                _decode_into(ub[xb], tb, fb, bS, bE, tmp_s, tmp_e)
        last_a, last_b = xa, xb
        c = cb[ic[b]]
        if transposed:
            o = st
            for i in range(M):
                for j in range(N):
                    o[i, j] = c[j, i]
        else:
            o = out[b]
            for i in range(M):
                for j in range(N):
                    o[i, j] = c[i, j]
        for i in range(M):  # rows of the left operand holding an inf or NaN anywhere
            s = False
            for k in range(K):
                s |= aE[i, k] < ZERO
            a_row_special[i] = s
        for k0 in range(0, K, block):
            k1 = k0 + block
            b_special = False
            for k in range(k0, k1):
                for j in range(N):
                    b_special |= bE[k, j] < ZERO
            for i in range(0, M, 2):
                rE, rS = aE[i : i + 2], aS[i : i + 2]
                special = b_special
                for r in range(2):
                    special |= _c_exponents(o[i + r], E[r], e_zero, acc16)
                    if a_row_special[i + r]:
                        for k in range(k0, k1):
                            special |= rE[r, k] < ZERO
                if special:
                    for r in range(2):
                        for j in range(N):
                            crow[r, j] = o[i + r, j]
                _exponents4(E, rE, bE, k0, k1)
                _products4(acc, E, rE, rS, bE, bS, k0, k1, L, R)
                for r in range(2):
                    _round_row(o[i + r], E[r], acc[r], F, acc16)
                if special:
                    for r in range(2):
                        _specials(o[i + r], crow[r], rE[r], rS[r], bE, bS, k0, k1, acc16)
        if transposed:
            d = out[b]
            for i in range(M):
                for j in range(N):
                    d[j, i] = o[i, j]


@njit(inline="always")
def _exponents4(E, aE, bE, k0, k1):
    """E[r, j] = max(E[r, j], max over k of aE[r, k] + bE[k, j]), rows r = 0, 1, four k per pass."""
    i32 = np.int32
    E0, E1 = E[0], E[1]
    for k in range(k0, k1, 4):
        a0, a1, a2, a3 = aE[0, k], aE[0, k + 1], aE[0, k + 2], aE[0, k + 3]
        c0, c1, c2, c3 = aE[1, k], aE[1, k + 1], aE[1, k + 2], aE[1, k + 3]
        b0, b1, b2, b3 = bE[k], bE[k + 1], bE[k + 2], bE[k + 3]
        for j in range(E0.shape[0]):
            x0, x1, x2, x3 = b0[j], b1[j], b2[j], b3[j]
            E0[j] = max(max(E0[j], i32(a0 + x0)), max(max(i32(a1 + x1), i32(a2 + x2)), i32(a3 + x3)))
            E1[j] = max(max(E1[j], i32(c0 + x0)), max(max(i32(c1 + x1), i32(c2 + x2)), i32(c3 + x3)))


@njit(inline="always")
def _term(T, top, e, ea_k, sa_k, eb, mb):
    """The truncated term of one product in T: (|sa mb| >> min(e - ea_k - eb, top)) with the product's sign (ea_k
    already less R, sa_k already shifted by L).  Every operation in T (int32: 16 lanes of AVX-512)."""
    d = min(T(e - ea_k - eb), top)
    p = T(sa_k * mb)
    s = _ashr(p, top)  # 0 or -1
    t = _lshr(T(abs(p)), d)
    return T(T(t ^ s) - s)


@njit(inline="always")
def _products4(acc, E, aE, aS, bE, bS, k0, k1, L, R):
    """acc[r, j] = the sum of the truncated terms of a[r, k] * b[k, j] for k in k0..k1-1, rows r = 0, 1, four k
    per pass over the columns."""
    T = acc.dtype.type
    top = T(acc.itemsize * 8 - 1)  # T's width - 1: the sign shift and the shift clamp
    acc0, acc1, E0, E1 = acc[0], acc[1], E[0], E[1]
    for j in range(acc0.shape[0]):
        acc0[j] = 0
        acc1[j] = 0
    for k in range(k0, k1, 4):
        a0, a1, a2, a3 = T(aE[0, k] - R), T(aE[0, k + 1] - R), T(aE[0, k + 2] - R), T(aE[0, k + 3] - R)
        c0, c1, c2, c3 = T(aE[1, k] - R), T(aE[1, k + 1] - R), T(aE[1, k + 2] - R), T(aE[1, k + 3] - R)
        s0, s1, s2, s3 = T(aS[0, k] << L), T(aS[0, k + 1] << L), T(aS[0, k + 2] << L), T(aS[0, k + 3] << L)
        u0, u1, u2, u3 = T(aS[1, k] << L), T(aS[1, k + 1] << L), T(aS[1, k + 2] << L), T(aS[1, k + 3] << L)
        b0, b1, b2, b3 = bE[k], bE[k + 1], bE[k + 2], bE[k + 3]
        m0, m1, m2, m3 = bS[k], bS[k + 1], bS[k + 2], bS[k + 3]
        for j in range(acc0.shape[0]):
            x0, x1, x2, x3 = b0[j], b1[j], b2[j], b3[j]
            y0, y1, y2, y3 = m0[j], m1[j], m2[j], m3[j]
            e = E0[j]
            acc0[j] = T(
                acc0[j]
                + T(
                    T(_term(T, top, e, a0, s0, x0, y0) + _term(T, top, e, a1, s1, x1, y1))
                    + T(_term(T, top, e, a2, s2, x2, y2) + _term(T, top, e, a3, s3, x3, y3))
                )
            )
            e = E1[j]
            acc1[j] = T(
                acc1[j]
                + T(
                    T(_term(T, top, e, c0, u0, x0, y0) + _term(T, top, e, c1, u1, x1, y1))
                    + T(_term(T, top, e, c2, u2, x2, y2) + _term(T, top, e, c3, u3, x3, y3))
                )
            )


@njit(inline="always")
def _c_parts(cbits, acc16):
    """Accumulator bits -> (field, fraction), in the type of ``cbits``."""
    if acc16:
        return (cbits >> 10) & 0x1F, cbits & 0x3FF
    return (cbits >> 23) & 0xFF, cbits & 0x7FFFFF


@njit(inline="always")
def _c_exponents(row, E, e_zero, acc16):
    """E[j] = c[j]'s exponent in the alignment (subnormals at the minimum, zero -> e_zero); returns whether some
    c[j] is inf or NaN."""
    top, bias = (0x1F, 15) if acc16 else (0xFF, 127)
    special = False
    for j in range(row.shape[0]):
        field, m = _c_parts(np.int32(row[j]), acc16)  # int32: 16 lanes
        E[j] = np.int32(e_zero) if (field | m) == 0 else np.int32(max(field, np.int32(1)) - bias)
        special |= field == top
    return special


@njit(inline="always")
def _round_row(row, E, acc, F, acc16):
    """row[j] = round(acc[j] + c[j]'s truncated term, at 2^(E[j] - F)): f32 toward zero with |v| >= 2^128 -> inf,
    f16 to nearest even; a zero result is +0."""
    if acc16:
        cfrac, bias, p, emin, inf_bits, sbit = 10, 15, 11, -14, 0x7C00, 15
    else:
        cfrac, bias, p, emin, inf_bits, sbit = 23, 127, 24, -126, 0x7F800000, 31
    for j in range(row.shape[0]):
        cbits = np.int64(row[j])
        field, m = _c_parts(cbits, acc16)
        csig = m | (1 << cfrac) if field != 0 else m
        x = np.int64(E[j]) - F  # the unit of the sum is 2^x
        sh = (max(field, 1) - (bias + cfrac)) - x  # c's last bit in units of 2^x (<= F - cfrac)
        left = max(sh, 0)
        tc = _lshr(_shl(csig, left), min(left - sh, 62))
        cneg = -((cbits >> sbit) & 1)
        total = np.int64(acc[j]) + ((tc ^ cneg) - cneg)
        mag = abs(total)
        bl = 64 - _clz(mag)
        lead = x + bl - 1  # mag * 2^x lies in [2^lead, 2^(lead + 1))
        normal = (lead >= emin) & (mag != 0)
        r = bl - p if normal else (emin - p + 1) - x  # bits to drop (negative: to add)
        rd = min(max(r, 0), 62)
        q = _shl(_lshr(mag, rd), max(rd - r, 0))
        if acc16:  # to nearest, ties to even
            unit = _shl(np.int64(1), rd)
            rem = mag & (unit - 1)
            half = unit >> 1
            q += np.int64((rem > half) | ((rem == half) & (rd > 0) & ((q & 1) == 1)))
        bits = min(((lead - emin) << (p - 1)) + q if normal else q, inf_bits)
        if total < 0 and bits != 0:
            bits |= 1 << sbit
        row[j] = bits


@njit
def _kind(e, s):
    """(is zero, is inf, is NaN, negative) of a decoded operand."""
    return e == ZERO, (e == POS_INF) | (e == NEG_INF), e == NAN, (e == NEG_INF) | (s < 0)


@njit
def _specials(row, crow, ea_i, ma_i, eb, mb, k0, k1, acc16):
    """Outputs touched by inf / NaN: NaN (canonical) for a NaN term, 0 * inf, or +inf and -inf together; else inf
    of the infinite terms' sign.  crow: the block's c bits; row: the rounded results, overwritten here."""
    if acc16:
        top, nan_bits, inf_bits, sign = 0x1F, 0x7FFF, 0x7C00, 0x8000
    else:
        top, nan_bits, inf_bits, sign = 0xFF, 0x7FFFFFFF, 0x7F800000, 0x80000000
    for j in range(row.shape[0]):
        cbits = np.int64(crow[j])
        field, m = _c_parts(cbits, acc16)
        nan = field == top and m != 0
        pinf = field == top and m == 0 and cbits < sign
        ninf = field == top and m == 0 and cbits >= sign
        for k in range(k0, k1):
            za, ia, na, sa = _kind(ea_i[k], ma_i[k])
            zb, ib, nb, sb = _kind(eb[k, j], mb[k, j])
            if na or nb or (ia and zb) or (ib and za):
                nan = True
            elif ia or ib:
                if sa != sb:
                    ninf = True
                else:
                    pinf = True
        if nan or (pinf and ninf):
            row[j] = nan_bits
        elif pinf:
            row[j] = inf_bits
        elif ninf:
            row[j] = inf_bits | sign
