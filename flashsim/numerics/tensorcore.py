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
E - F >= -158.  The one rounding is then done on that exact float64: toward zero to 24 significant bits by
clearing the low 29 bits of its significand (below 2^-126: truncation to a multiple of 2^-149), after which the
float64 -> float32 cast is exact, or gives inf exactly when |value| >= 2^128; f16 by rint of the significand at
the value's f16 exponent, assembled into bits with integers.  bf16 products span 2^-266 .. 2^256; a chunk whose
bf16 exponents all lie in [-50, 50] takes the same float32 path (products >= 2^-100 stay normal, scale factors
stay finite), any other chunk computes products in float64 (exact: 16 bits).

Checked against: the Fraction oracle (numerics.reference.mma_ref), mmasim on every arch it knows, and an H200
capture of 6.6 million outputs (tests/test_mma_silicon.py), which also refutes every neighbouring model.

Layout: the batch is the innermost axis inside the kernel ((16, 16, n) for A etc.), so every numpy ufunc runs
over long contiguous rows; the batch is processed in chunks of 256 mmas.
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

_CHUNK = 256          # mmas per chunk: long rows for numpy, temporaries of ~1 MB (L2 / L3)
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


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90", backend: str = "numpy") -> np.ndarray:
    """d = a @ b + c as ``mma.sync.aligned.m16n8k16.row.col`` computes it on ``arch``, bit for bit.

    a: (..., 16, 16) float16 or bfloat16 (row-major M x K); b: (..., 16, 8) of a's dtype (K x N); c: (..., 16, 8)
    float32, or float16 with float16 inputs.  Returns d with c's dtype and shape.  The leading (batch) dimensions of
    a and b must broadcast to c's batch shape (numpy rules), so that one B can serve many A's; d always has c's shape.
    Nothing is cast: a wrong dtype, shape or arch raises ValueError naming the argument.
    backend: "numpy" (default) or "jax" (flashsim.numerics.jax_ops, jit-compiled, bit-identical; needs jax).
    """
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
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
    if backend == "jax":
        try:
            from . import jax_ops
        except ImportError as e:
            raise ValueError(f"backend='jax' needs jax: pip install 'flashsim[jax]' ({e})") from None
        return np.asarray(jax_ops.mma(np.broadcast_to(a, batch + (16, 16)), np.broadcast_to(b, batch + (16, 8)), c,
                                      arch=spec))
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
            _mma_chunk(a[s:e], b[s:e], c[s:e], spec, out[s:e].transpose(1, 2, 0))
    return out


# ---------------------------------------------------------------------------------------------------------
# decoding (integer bit tricks: numpy's float16 -> float32 cast is slow on many builds).  The inputs arrive as
# strided batch-last views; the first operation on each (a cast with order="C") makes the contiguous copy.

_TWO_112 = np.float32(2.0 ** 112)


def _inputs(x16: np.ndarray, is_bf16: bool, pdt):
    """f16/bf16 bits (16, 16|8, n), any strides -> (values in pdt, exponents, any non-finite), contiguous.

    Exponents: subnormals clamped to the format minimum; zeros get a sentinel so low that a product with a zero
    factor is below every product of non-zero factors (int8 -64 for f16, int16 -1000 for bf16).
    """
    u = x16.astype(np.uint32, order="C")
    if is_bf16:
        u <<= 16
        vals = u.view(F32)
        field = (u >> 23) & 0xFF
        e = (np.maximum(field, _full(1, field)) - 127).astype(np.int16)
        e[(u & 0x7FFFFFFF) == 0] = _ZERO
        special = bool((field == 0xFF).any())
        if pdt == F64:
            vals = vals.astype(F64)
        return vals, e, special
    # f16: the magnitude bits shifted into a float32 are the value times 2^-112, subnormals included
    mag = u & 0x7FFF
    field = mag >> 10
    e = (np.maximum(field, _full(1, field)).view(np.int32) - 15).astype(np.int8)
    e[mag == 0] = -64
    special = bool((field == 0x1F).any())
    u ^= mag                   # the sign bit alone
    u <<= 16
    mag <<= 13
    u |= mag
    vals = u.view(F32)
    vals *= _TWO_112
    return vals, e, special


def _exact_values(x16: np.ndarray, is_bf16: bool) -> np.ndarray:
    """f16/bf16 bits -> float64 values, inf and NaN included (for the rare special-value path)."""
    return x16.view(BF16 if is_bf16 else F16).astype(F64)


def _accumulator_terms(c: np.ndarray, e_zero: int):
    """c (16, 8, n) f32 / f16, any strides -> (value float64, exponent int32 with zero -> e_zero, any non-finite).

    The exponent comes from the float64 image: clamped to the format's minimum (subnormal c), e_zero for zero.
    """
    cv = c.astype(F64, order="C")
    field = (cv.view(np.int64) >> 52) & 0x7FF
    special = bool((field == 0x7FF).any())
    e = (np.maximum(field, _full(1023 - (126 if c.dtype == F32 else 14), field)) - 1023).astype(np.int32)
    e[cv == 0] = e_zero
    return cv, e, special


_CONSTANTS: dict = {}


def _full(value: int, like: np.ndarray) -> np.ndarray:
    """A cached constant array shaped like ``like``: numpy's maximum / minimum against a scalar take a slow loop
    (about ten times the instructions of the array-array loop)."""
    key = (value, like.shape, like.dtype.str)
    arr = _CONSTANTS.get(key)
    if arr is None:
        if len(_CONSTANTS) > 64:
            _CONSTANTS.clear()
        arr = _CONSTANTS[key] = np.full(like.shape, value, like.dtype)
        arr.flags.writeable = False
    return arr


def _pow2_f64(e: np.ndarray) -> np.ndarray:
    """2.0**e for int arrays with -1022 <= e <= 1023, built from the bits (np.ldexp is slow)."""
    return ((e.astype(np.int64) + 1023) << 52).view(F64)


# ---------------------------------------------------------------------------------------------------------
# the kernel


def _mma_chunk(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch, out_t: np.ndarray) -> None:
    """One chunk: a (n,16,16), b (n,16,8), c (n,16,8) -> d written to out_t, a (16, 8, n) view of the output."""
    is_bf16 = a.dtype == BF16
    acc16 = c.dtype == F16
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    a16 = a.view(np.uint16).transpose(1, 2, 0)          # (i, k, n) strided views: batch last
    b16 = b.view(np.uint16).transpose(1, 2, 0)          # (k, j, n)
    pdt = F32
    if is_bf16:   # exponents outside [-50, 50]: float64 products (float32 would under/overflow)
        lo, hi = (127 - _BF16_FAST_EXP) << 7, (127 + _BF16_FAST_EXP) << 7
        for x in (a, b):
            mag = x.view(np.uint16) & 0x7FFF
            if ((mag != 0) & ((mag < lo) | (mag >= hi + 128))).any():
                pdt = F64
    av, ea, sa = _inputs(a16, is_bf16, pdt)
    bv, eb, sb = _inputs(b16, is_bf16, pdt)
    cv, ec, sc = _accumulator_terms(c.transpose(1, 2, 0), e_zero)
    min_product_exp = 2 * (-126 if is_bf16 else -14)
    F = spec.mma_fraction_bits
    block = spec.mma_block_k
    for k0 in range(0, 16, block):
        ks = slice(k0, k0 + block)
        value = _block(av[:, ks], bv[ks], ea[:, ks], eb[ks], cv, ec, F, min_product_exp)
        last = k0 + block >= 16
        d = out_t if last else np.empty(value.shape, c.dtype)
        _round_into(value, d)
        if sa or sb or sc:
            _specials(_exact_values(a16[:, ks], is_bf16), _exact_values(b16[ks], is_bf16), cv, d, acc16)
        if not last:   # chained block: the rounded result is the next block's c
            cv, ec, sc = _accumulator_terms(d, e_zero)


def _block(av, bv, ea, eb, cv, ec, F, min_product_exp) -> np.ndarray:
    """One fused block: the exact float64 value of (sum of truncated products + truncated c), before rounding."""
    nk = av.shape[1]
    shape = (16, 8, av.shape[2])
    # E = max over the terms' exponents
    emax = np.empty(shape, ea.dtype)
    tmp = np.empty(shape, ea.dtype)
    np.add(ea[:, 0, None, :], eb[None, 0, :, :], out=emax)
    for k in range(1, nk):
        np.add(ea[:, k, None, :], eb[None, k, :, :], out=tmp)
        np.maximum(emax, tmp, out=emax)
    E = emax.astype(np.int32)
    E[E < min_product_exp] = -(1 << 20)           # no non-zero product
    np.maximum(E, ec, out=E)
    # products scaled to units of 2^(E - F), truncated toward zero (float -> int32 cast), summed in int32
    if av.dtype == F32:   # 2^(F - E) as float32; only outputs whose products are all zero reach the clamp
        scale = (np.minimum((F + 127) - E, _full(252, E)) << 23).view(F32)
    else:
        scale = _pow2_f64(F - E)
    acc = np.zeros(shape, np.int32)
    prod = np.empty(shape, av.dtype)
    term = np.empty(shape, np.int32)
    for k in range(nk):
        np.multiply(av[:, k, None, :], bv[None, k, :, :], out=prod)
        np.multiply(prod, scale, out=prod)
        np.copyto(term, prod, casting="unsafe")          # float -> int32 truncates toward zero
        np.add(acc, term, out=acc)
    # the c term and the total, exact in float64 (units of 2^(E - F), then scaled back by an exact division)
    unit = _pow2_f64(F - E)
    total = cv * unit
    np.trunc(total, out=total)
    total += acc
    total /= unit
    return total


def _round_into(v: np.ndarray, d: np.ndarray) -> None:
    """Round the exact float64 values v once into d (float32: toward zero, |v| >= 2^128 -> inf; float16: to
    nearest even); a zero result is +0.  The rounding is done in float64 so that the final cast is exact."""
    if d.dtype == F32:
        v.view(np.int64)[...] &= ~np.int64((1 << 29) - 1)      # 24 significant bits, toward zero
        tiny = np.abs(v) < 2.0 ** -126
        if tiny.any():                                          # f32 subnormal range: multiples of 2^-149
            v[tiny] = np.trunc(v[tiny] * 2.0 ** 149) * 2.0 ** -149
        v += 0.0                                                # -0 -> +0
        np.copyto(d, v, casting="same_kind")                    # exact, or inf for |v| >= 2^128
    else:
        np.copyto(d.view(np.uint16), _f16_bits_rne(v), casting="unsafe")


def _f16_bits_rne(v: np.ndarray) -> np.ndarray:
    """Exact float64 -> f16 bits, to nearest even, overflow -> inf, zero -> +0 (numpy's own float64 -> float16 cast
    is a slow scalar loop).  m = rint(|v| * 2^(10 - e)) is the rounded significand at the value's f16 exponent e
    (>= -14); ((e + 14) << 10) + m is then the bit pattern, a carry (m = 2^11) moving into the exponent."""
    a = np.abs(v)
    e = (a.view(np.int64) >> 52) - 1023
    np.maximum(e, _full(-14, e), out=e)
    m = a * ((1033 - e) << 52).view(F64)
    np.rint(m, out=m)
    bits = ((e + 14) << 10) + m.astype(np.int64)
    np.minimum(bits, _full(0x7C00, bits), out=bits)
    bits |= ((v < 0) & (bits != 0)).astype(np.int64) << 15
    return bits


def _specials(av, bv, cv, d, acc16):
    """Overwrite outputs touched by inf / NaN with the canonical NaN or the signed inf (float64 inputs)."""
    shape = d.shape
    nan = np.isnan(cv)
    pinf = cv == np.inf
    ninf = cv == -np.inf
    p = np.empty(shape, F64)
    for k in range(av.shape[1]):
        np.multiply(av[:, k, None, :], bv[None, k, :, :], out=p)
        nan |= np.isnan(p)
        pinf |= p == np.inf
        ninf |= p == -np.inf
    nan |= pinf & ninf
    bits = d.view(np.uint16 if acc16 else np.uint32)
    if acc16:
        bits[pinf] = 0x7C00
        bits[ninf] = 0xFC00
        bits[nan] = 0x7FFF
    else:
        bits[pinf] = 0x7F800000
        bits[ninf] = 0xFF800000
        bits[nan] = 0x7FFFFFFF
