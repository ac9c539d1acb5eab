"""Bit-exact model of ``mma.sync.aligned.m16n8k16.row.col`` (f16 / bf16 inputs), vectorised with numpy.

The model (ANCHORS section 1; MMA-Sim, arXiv:2511.10909; Khattak & Mikaitis, arXiv:2512.07004), per output
element d[i, j] and per fused block of ``arch.mma_block_k`` products:

* every product a[i,k] * b[k,j] is exact; its exponent is ea + eb, where a subnormal input keeps its value
  and takes the format's minimum exponent (the product significand lies in [0, 4) and is not renormalised);
* c[i,j] joins as one more term (its own exponent, subnormals clamped to the minimum);
* a zero term (zero product or zero c) takes the architecture's zero exponent (``mma_zero_exponent_f32`` or
  ``_f16``, chosen by the accumulator type);
* E = the largest exponent of all terms; each term is truncated toward zero (sign-magnitude) to F =
  ``arch.mma_fraction_bits`` fraction bits relative to 2^E; the truncated terms are summed exactly;
* the sum is normalised once and rounded: f32 toward zero, f16 to nearest-even, subnormal results kept;
  a zero result is +0; an f32 result of magnitude >= 2^128 becomes inf (what the H200 does), f16 overflow
  rounds to inf as RNE does;
* NaN anywhere, 0 * inf, or +inf and -inf together give the canonical NaN (0x7FFFFFFF / 0x7FFF); otherwise an
  infinite product or c gives inf of its sign.

With ``mma_block_k == 8`` (sm_80/86/89) the k = 16 reduction runs as two chained blocks: block 1's rounded result
is block 2's c.

Why the fast path is exact.  Work per output is done in units of 2^(E - F):
``t = trunc(a * b * 2^(F - E))``.  For f16 inputs the product has at most 22 significant bits and an exponent
>= -48, so it is exact in float32; multiplying by a power of two is exact unless the result leaves the
float32 normal range, and a result below 2^-126 can only come from a term that truncates to 0 anyway
(|t| < 1), so its rounding is harmless.  |t| < 4 * 2^F <= 2^27, so the float32 -> int32 cast (which truncates
toward zero) is exact, and 16 such terms sum in int32 without overflow (16 * (2^27 - 2^17) < 2^31).  The c term
and the final sum (< 2^32) are exact in float64, and value = sum * 2^(E - F) is exact in float64 because
E - F >= -158.  The one rounding to f32 / f16 is then done from an exact float64.  bf16 products span 2^-266 ..
2^256; a chunk whose bf16 exponents all lie in [-50, 50] takes the same float32 path (products >= 2^-100 stay
normal, scale factors stay finite), any other chunk computes products in float64 (exact: 16 bits).

Layout: the batch is the innermost axis inside the kernel ((16, 16, n) for A etc.), so every numpy ufunc runs
over long contiguous rows; the batch is processed in chunks that stay in the L2 cache.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..arch import Arch, get_arch

__all__ = ["mma", "mma_unchecked", "mma_type", "MMA_TYPES"]

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# (input dtype, accumulator dtype) -> PTX type string d.a.b.c
MMA_TYPES = {
    (F16, F32): "f32.f16.f16.f32",
    (F16, F16): "f16.f16.f16.f16",
    (BF16, F32): "f32.bf16.bf16.f32",
}

_CHUNK = 128          # mmas per chunk: the chunk's temporaries (~0.5 MB) stay in L2
_BF16_FAST_EXP = 50   # bf16 chunks with every exponent in [-50, 50] use float32 products
_ZERO = -1000         # exponent given to zero inputs: any sum involving it is below every zero exponent


def mma_type(a_dtype, c_dtype) -> str:
    """PTX type string ("f32.f16.f16.f32", ...) for input dtype ``a_dtype`` and accumulator ``c_dtype``."""
    key = (np.dtype(a_dtype), np.dtype(c_dtype))
    if key not in MMA_TYPES:
        raise ValueError(f"no mma.sync m16n8k16 for inputs {key[0]} with accumulator {key[1]}; "
                         f"supported: {', '.join(MMA_TYPES.values())}")
    return MMA_TYPES[key]


def _check_array(name: str, x, dtypes: tuple, shape: tuple) -> None:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype {' or '.join(str(d) for d in dtypes)}, got {x.dtype}")
    if x.ndim < 2 or x.shape[-2:] != shape:
        raise ValueError(f"{name} must have shape (..., {shape[0]}, {shape[1]}), got {x.shape}")


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90") -> np.ndarray:
    """d = a @ b + c as ``mma.sync.aligned.m16n8k16.row.col`` computes it on ``arch``, bit for bit.

    a: (..., 16, 16) float16 or bfloat16 (row-major M x K); b: (..., 16, 8) of a's dtype (K x N); c: (..., 16, 8)
    float32, or float16 with float16 inputs.  Returns d with c's dtype and shape.  The leading (batch) dimensions of
    a and b must broadcast to c's batch shape (numpy rules), so that one B can serve many A's; d always has c's shape.
    Nothing is cast: a wrong dtype, shape or arch raises ValueError naming the argument.
    """
    spec = get_arch(arch)
    _check_array("a", a, (F16, BF16), (16, 16))
    _check_array("b", b, (a.dtype,), (16, 8))
    _check_array("c", c, (F32, F16), (16, 8))
    mma_type(a.dtype, c.dtype)
    batch = c.shape[:-2]
    for name, x in (("a", a), ("b", b)):
        try:
            ok = np.broadcast_shapes(x.shape[:-2], batch) == batch
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{name}'s batch dimensions {x.shape[:-2]} do not broadcast to c's batch "
                             f"dimensions {batch}")
    n = math.prod(batch)
    a2 = np.broadcast_to(a, batch + (16, 16)).reshape(n, 16, 16)
    b2 = np.broadcast_to(b, batch + (16, 8)).reshape(n, 16, 8)
    d = mma_unchecked(a2, b2, c.reshape(n, 16, 8), spec)
    return d.reshape(c.shape)


def mma_unchecked(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90",
                  out: np.ndarray | None = None) -> np.ndarray:
    """The batched kernel behind ``mma`` without validation: a (n,16,16), b (n,16,8), c (n,16,8) -> (n,16,8).

    The caller guarantees the dtypes of ``MMA_TYPES`` and the shapes; ``out`` (n,16,8) of c's dtype may be given.
    """
    spec = get_arch(arch)
    n = c.shape[0]
    if out is None:
        out = np.empty((n, 16, 8), dtype=c.dtype)
    if n == 0:
        return out
    step = _CHUNK
    with np.errstate(all="ignore"):
        for s in range(0, n, step):
            e = min(n, s + step)
            out[s:e] = _mma_chunk(a[s:e], b[s:e], c[s:e], spec).transpose(2, 0, 1)
    return out


# ---------------------------------------------------------------------------------------------------------
# decoding


def _input_exponents(x16: np.ndarray, is_bf16: bool):
    """Exponents of f16/bf16 bit patterns (subnormals clamped, zeros -> _ZERO) and a non-finite mask."""
    if is_bf16:
        field = (x16 >> 7) & 0xFF
        emax_field, bias = 0xFF, 127
    else:
        field = (x16 >> 10) & 0x1F
        emax_field, bias = 0x1F, 15
    e = np.maximum(field, 1).astype(np.int16) - bias
    e[(x16 & 0x7FFF) == 0] = _ZERO
    return e, field == emax_field


def _accumulator_terms(c: np.ndarray, e_zero: int):
    """c (16, 8, n) -> (value as float64, exponent int32 with zero -> e_zero, non-finite mask)."""
    if c.dtype == F32:
        bits = c.view(np.uint32)
        field = ((bits >> 23) & 0xFF).astype(np.int32)
        e = np.maximum(field, 1) - 127
        special = field == 0xFF
        zero = (bits & 0x7FFFFFFF) == 0
    else:
        bits = c.view(np.uint16)
        field = ((bits >> 10) & 0x1F).astype(np.int32)
        e = np.maximum(field, 1) - 15
        special = field == 0x1F
        zero = (bits & 0x7FFF) == 0
    e[zero] = e_zero
    return c.astype(F64), e, special


# ---------------------------------------------------------------------------------------------------------
# the kernel


def _mma_chunk(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch) -> np.ndarray:
    """One chunk: a (n,16,16), b (n,16,8), c (n,16,8) -> d (16, 8, n) of c's dtype."""
    is_bf16 = a.dtype == BF16
    acc16 = c.dtype == F16
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    # batch-last layouts
    a16 = np.ascontiguousarray(a.view(np.uint16).transpose(1, 2, 0))   # (i, k, n)
    b16 = np.ascontiguousarray(b.view(np.uint16).transpose(1, 2, 0))   # (k, j, n)
    ct = np.ascontiguousarray(c.transpose(1, 2, 0))                     # (i, j, n)
    ea, sa = _input_exponents(a16, is_bf16)
    eb, sb = _input_exponents(b16, is_bf16)
    cv, ec, sc = _accumulator_terms(ct, e_zero)

    if is_bf16:
        finite_e = np.concatenate([ea[ea > _ZERO].ravel(), eb[eb > _ZERO].ravel()])
        fast = not (sa.any() or sb.any()) and (finite_e.size == 0 or np.abs(finite_e).max() <= _BF16_FAST_EXP)
        pdt = F32 if fast else F64
        av = a16.astype(np.uint32) << 16
        bv = b16.astype(np.uint32) << 16
        av = av.view(F32).astype(pdt, copy=False)
        bv = bv.view(F32).astype(pdt, copy=False)
        exp_dt = np.int16
    else:
        pdt = F32
        av = a16.view(F16).astype(F32)
        bv = b16.view(F16).astype(F32)
        exp_dt = np.int8
    ea = ea.astype(exp_dt) if exp_dt == np.int16 else np.maximum(ea, -64).astype(np.int8)
    eb = eb.astype(exp_dt) if exp_dt == np.int16 else np.maximum(eb, -64).astype(np.int8)
    min_product_exp = 2 * (-126 if is_bf16 else -14)

    block = spec.mma_block_k
    special_inputs = bool(sa.any() or sb.any())
    d = None
    for k0 in range(0, 16, block):
        ks = slice(k0, k0 + block)
        d = _block(av[:, ks], bv[ks], ea[:, ks], eb[ks], cv, ec, spec.mma_fraction_bits,
                   pdt, min_product_exp, acc16)
        if special_inputs or sc.any():
            _specials(av[:, ks], bv[ks], cv, d, acc16)
        if k0 + block < 16:   # chained block: the rounded result is the next block's c
            cv, ec, sc = _accumulator_terms(d, e_zero)
    return d


def _block(av, bv, ea, eb, cv, ec, F, pdt, min_product_exp, acc16):
    """One fused block: sum of len(k) exact products and c, truncated at 2^(E-F), rounded once."""
    nk = av.shape[1]
    shape = (16, 8, av.shape[2])
    # E = max over the terms' exponents
    emax = np.empty(shape, ea.dtype)
    tmp8 = np.empty(shape, ea.dtype)
    np.add(ea[:, 0, None, :], eb[None, 0, :, :], out=emax)
    for k in range(1, nk):
        np.add(ea[:, k, None, :], eb[None, k, :, :], out=tmp8)
        np.maximum(emax, tmp8, out=emax)
    eprod = emax.astype(np.int32)
    eprod[eprod < min_product_exp] = -(1 << 20)   # no non-zero product
    E = np.maximum(eprod, ec)
    # products scaled to units of 2^(E - F), truncated toward zero, summed in int32
    scale_exp = F - E
    if pdt == F32:
        np.minimum(scale_exp, 125, out=scale_exp)   # only all-zero-product outputs reach the clamp
    scale = np.ldexp(np.ones(shape, pdt), scale_exp.astype(np.int32))
    acc = np.zeros(shape, np.int32)
    prod = np.empty(shape, pdt)
    term = np.empty(shape, np.int32)
    for k in range(nk):
        np.multiply(av[:, k, None, :], bv[None, k, :, :], out=prod)
        np.multiply(prod, scale, out=prod)
        np.copyto(term, prod, casting="unsafe")          # float -> int32 truncates toward zero
        np.add(acc, term, out=acc)
    # the c term, exact in float64
    tc = np.trunc(cv * np.ldexp(1.0, F - E))
    total = acc.astype(F64) + tc
    value = np.ldexp(total, E - F)
    return _round_f16(value) if acc16 else _round_f32_rz(value)


def _round_f32_rz(v: np.ndarray) -> np.ndarray:
    """Exact float64 -> float32 toward zero; |v| >= 2^128 -> inf; zero -> +0."""
    f = v.astype(F32)
    bits = f.view(np.int32)
    over = np.abs(f.astype(F64)) > np.abs(v)       # RNE went away from zero: step back one ulp
    bits -= over.astype(np.int32)
    inf = np.abs(v) >= 2.0 ** 128
    if inf.any():
        bits[inf] = np.where(v[inf] > 0, 0x7F800000, np.int32(-0x800000))
    bits[f == 0] = 0
    return f


def _round_f16(v: np.ndarray) -> np.ndarray:
    """Exact float64 -> float16 to nearest even (numpy rounds float64 -> float16 once); zero -> +0."""
    h = v.astype(F16)
    h.view(np.uint16)[h == 0] = 0
    return h


def _specials(av, bv, cv, d, acc16):
    """Overwrite outputs touched by inf / NaN with the canonical NaN or the signed inf."""
    shape = d.shape
    nan = np.isnan(cv)
    pinf = cv == np.inf
    ninf = cv == -np.inf
    p = np.empty(shape, F64)
    for k in range(av.shape[1]):
        np.multiply(av[:, k, None, :].astype(F64), bv[None, k, :, :].astype(F64), out=p)
        nan |= np.isnan(p)
        pinf |= p == np.inf
        ninf |= p == -np.inf
    nan |= pinf & ninf
    if acc16:
        bits = d.view(np.uint16)
        bits[pinf] = 0x7C00
        bits[ninf] = 0xFC00
        bits[nan] = 0x7FFF
    else:
        bits = d.view(np.uint32)
        bits[pinf] = 0x7F800000
        bits[ninf] = 0xFF800000
        bits[nan] = 0x7FFFFFFF
