"""IEEE 754 binary32 arithmetic as the GPU's PTX instructions do it: add / sub / mul / div / fma (.rn), with
optional .ftz, mul.rn.f16, fmaxf and a NaN-ignoring row max, cvt.rn.f16.f32 / cvt.f32.f16. Every function takes
float32 (float16) numpy or JAX arrays, broadcasts, returns the inputs' library, and gives NaN results as the
canonical NaN 0x7FFFFFFF (0x7FFF for f16), as NVIDIA GPUs do.

Each operation is written once against the array namespace ``xp`` (flashsim.numerics.xp): numpy runs it eagerly,
JAX under jit (with 64-bit types: ``xp.enable_x64()``). XLA does not run float32 arithmetic the way IEEE says: on
the CPU it flushes subnormal inputs and results to zero, and it contracts ``a * b + c`` into one fused
multiply-add. So the generic routines never let a float32 operation produce a result that could be subnormal:

* add, sub, mul, div: computed in float64 on the exact float64 images of the operands (flashsim.numerics.rounding,
  integer conversions), then rounded to float32 by the integer rounding core. A product of two float32 is exact in
  float64 (so a contracted FMA changes nothing); every float64 value that arises is a nonzero multiple of 2^-298
  or zero, hence normal (FTZ/DAZ cannot touch it) and far from overflow; rounding the correctly rounded float64
  result once more to float32 is innocuous for +, -, *, / because 53 >= 2*24 + 2 (Figueroa, "When is double
  rounding innocuous?", SIGNUM 1995). Where the float32 result is subnormal, the exact sum / product is a multiple
  of 2^-149 and so is itself representable; the quotient is checked against IEEE hardware division in the tests.
* fma (one rounding):
  1. p = x * y is exact in float64: 24 + 24 significant bits <= 53, exponents >= -298 stay normal.
  2. s = fl(p + z) and e = (p + z) - s exactly (TwoSum, Knuth): exact in float64 because nothing overflows
     (|p| <= 2^256) and p + z is a multiple of 2^-298, so s and e are normal or zero.
  3. t = the round-to-odd of p + z at 53 bits: t = s if e == 0; otherwise truncate s toward zero by one ulp when
     e points toward zero (|s| > |p + z|), and set the last significand bit. (s != 0 whenever e != 0: a float64
     sum that rounds to 0 is exactly 0.)
  4. Round t to float32 to nearest even. Boldo & Melquiond (IEEE Trans. Computers 57(4), 2008): rounding to odd
     with at least p + 2 bits, then to nearest at p bits, equals one rounding to nearest at p bits. Here 53 >=
     24 + 2, and for f32 subnormal results the f32 grid is coarser still, so the margin only grows.
  Signed zeros follow from float64's own rules (exact zero sums are +0 unless both terms are -0), which are the
  IEEE rules for binary32 too. Infinities and NaNs pass through float64 unchanged in meaning.
* mul_f16: the float32 product of two float16 is exact (11 + 11 bits) and normal (>= 2^-48), then one integer
  rounding to float16.
* fmax, fmax_reduce: integer comparisons of order-preserving keys of the bits (no float compare at all).

numpy fast paths (measured, and held bit for bit equal to the generic routine in tests/test_numerics_engines.py):
numpy's float32 +, -, *, / are IEEE correctly rounded with gradual underflow, so add / sub / mul / div use them
and only canonicalise NaNs (``_check_fp_environment`` refuses to run when the CPU flushes subnormals); fma keeps
the float64 fast path ``_fma64``; the conversions use rounding's own fast paths. ``generic=True`` forces the
portable routine on numpy. Best of 5 on this project's 2-core CPU (shared), 1e6 elements, numpy 2.4 (generic ->
fast path, ms): add 107 -> 0.8, sub 106 -> 0.8, mul 106 -> 0.7, div 104 -> 0.8, fma 145 -> 2.8, mul_f16 76 -> 4.1
(numpy's float16 multiply rounds the exact float32 product once). fmax (3-9 ms) and fmax_reduce (1.1 ms over rows of
64) are generic only: np.fmax (0.1 / 0.5 ms) orders -0 and +0 by operand position, so it would need the key work
anyway, and the kernel calls them on one value per row per tile.

.ftz (PTX): subnormal inputs are replaced by zero of the same sign before the operation, and a result that is tiny
before rounding by zero of its sign, as the H200 does (flashsim.numerics.rounding.round_magnitude gives the rule
and its silicon evidence). That differs from flushing the rounded result only where the rounded result is the
smallest normal 2^-126 itself (a value below it rounding up: possible for mul, div and fma, never for add and sub,
whose tiny results are exact), so there the operation runs once more on operands scaled to make its result 2^64
times as large (``_TINY_SCALE``), far from the subnormal range: that result, rounded as if the exponent were
unbounded, says whether the value was tiny.
"""

from __future__ import annotations

import numpy as np

from . import rounding
from .rounding import check_fp_environment as _check_fp_environment
from .target import PLAIN, Target
from .xp import bitcast, errstate, is_numpy, namespace, ptx, require_x64, shl

__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "fma",
    "mul_f16",
    "add_f16",
    "add_bf16",
    "fmax",
    "fmax_reduce",
    "add_chain",
    "fmax_chain",
    "fabs",
    "cvt_f32_to_f16",
    "cvt_f32_to_bf16",
    "cvt_f32_to",
    "cvt_f16_to_f32",
    "cvt_bf16_to_f32",
    "cvt_to_f32",
    "flush_subnormals",
    "CANONICAL_NAN_F32",
    "CANONICAL_NAN_F16",
]

CANONICAL_NAN_F32 = np.uint32(0x7FFFFFFF)
CANONICAL_NAN_F16 = np.uint16(0x7FFF)
_SIGN = 0x80000000
_NEG_INF = 0xFF800000


def _checked(name: str, x, dtype):
    """``x`` if it is a numpy or JAX array (or numpy scalar) of ``dtype``; ValueError naming ``name`` otherwise.
    Only the dtype is looked at, so the check is free under jit."""
    dtype = np.dtype(dtype)
    is_np = isinstance(x, (np.ndarray, np.generic))
    is_jax = not is_np and not is_numpy(namespace(x))
    if not (is_np or is_jax) or np.dtype(x.dtype) != dtype:
        kind = "array" if is_jax else "numpy array"
        raise ValueError(f"{name} must be a {dtype.name} {kind}, got {getattr(x, 'dtype', type(x).__name__)}")
    return np.asarray(x) if is_np else x


def _f32(name: str, x):
    return _checked(name, x, np.float32)


def _canonical(xp, r):
    """float32 ``r`` with every NaN replaced by 0x7FFFFFFF (integer test and select on the bits)."""
    b = bitcast(r, np.uint32)
    return bitcast(xp.where((b & 0x7FFFFFFF) > 0x7F800000, CANONICAL_NAN_F32, b), np.float32)


def flush_subnormals(x):
    """float32 subnormals replaced by zero of the same sign (PTX .ftz); other values unchanged (a new array)."""
    if type(x) is np.ndarray and x.dtype == np.float32:  # numpy's own arrays: the same test, without dispatch
        b = x.view(np.uint32)
        return np.where((b & 0x7F800000) == 0, b & _SIGN, b).view(np.float32)
    x = _f32("x", x)
    xp = namespace(x)
    b = bitcast(x, np.uint32)
    return bitcast(xp.where((b & 0x7F800000) == 0, b & _SIGN, b), np.float32)


def _flush(x):
    """``flush_subnormals`` for the operations here: numpy arrays with no subnormal come back as they are (the
    usual case: one test, no select; they are not written in place)."""
    if type(x) is np.ndarray and x.dtype == np.float32 and x.ndim:
        b = x.view(np.uint32)
        sub = ((b & np.uint32(0x7FFFFFFF)) - np.uint32(1)) < np.uint32(0x7FFFFF)  # |x| in [1, 2^23) ulps: 0 wraps
        if not sub.any():
            return x
        return np.where(sub, b & np.uint32(_SIGN), b).view(np.float32)
    return flush_subnormals(x)


def _run(fast, generic_fn, args, ftz: bool, generic: bool, target: Target):
    """Apply the operation to float32 ``args`` with the .ftz rule around it; numpy takes ``fast`` unless
    ``generic``; a target with inline PTX runs the instruction itself (``_PTX_OPS``)."""
    xp = namespace(*args)
    if ftz:
        args = [_flush(a) for a in args]
    if is_numpy(xp) and not generic:
        _check_fp_environment()
        with np.errstate(all="ignore"):
            r = np.asarray(fast(*args), dtype=np.float32)
            nan = np.isnan(np.add.reduce(r, axis=None))  # a NaN in r makes the sum NaN (one pass, no array)
        if nan:
            r = _canonical(np, r)
    else:
        # broadcast first: a fused (Triton) kernel's bit casts take no bare constant operand
        args = xp.broadcast_arrays(*[xp.asarray(a) for a in args])
        if target.inline_ptx and generic_fn in _PTX_OPS:  # the PTX instruction the kernel runs, IEEE by definition
            r = _canonical(xp, ptx(_PTX_OPS[generic_fn], np.float32, *args, target=target))
        else:
            r = generic_fn(*args, target=target)
    if not ftz:
        return r
    r = _flush(r)
    scale = _TINY_SCALE.get(generic_fn)
    if scale is None:  # add / sub: a tiny sum is exact, so its flush after rounding is the flush before
        return r
    b = bitcast(r, np.uint32)
    edge = (b & 0x7FFFFFFF) == 0x00800000  # rounded to the smallest normal: tiny before rounding or not
    if is_numpy(xp) and not edge.any():  # the usual case: no second pass (traced engines always run it)
        return r
    with errstate():  # the scaled operands of other elements may overflow: those results are not looked at
        big = bitcast(_run(fast, generic_fn, scale(xp, *args), False, generic, target), np.uint32)
    tiny = (big & 0x7FFFFFFF) < _TINY_SCALED
    return bitcast(xp.where(edge & tiny, b & _SIGN, b), np.float32)


def _f64(x, target: Target):
    """The exact float64 image of float32 ``x``: integer operations, or the backend's own widening where it is
    IEEE's (``Target.native_conversions``: a GPU keeps subnormals)."""
    if target.native_conversions:
        xp = namespace(x)
        return xp.astype(x, xp.float64)
    return rounding.f32_to_f64(x, generic=True, target=target)


def _to_f32(v, target: Target):
    """float64 ``v`` rounded to float32 to nearest even, NaN canonical: the integer rounding core, or the backend's
    own narrowing where it is IEEE's (``Target.native_conversions``)."""
    if target.native_conversions:  # through the bits (_canonical): XLA must not fuse this convert with a later one
        xp = namespace(v)
        return _canonical(xp, xp.astype(v, xp.float32))
    return rounding.f64_to_f32(v, generic=True, target=target)


def _add_generic(x, y, target: Target = PLAIN):
    require_x64(namespace(x, y))
    with errstate():
        return _to_f32(_f64(x, target) + _f64(y, target), target)


def _sub_generic(x, y, target: Target = PLAIN):
    require_x64(namespace(x, y))
    with errstate():
        return _to_f32(_f64(x, target) - _f64(y, target), target)


def _mul_generic(x, y, target: Target = PLAIN):
    require_x64(namespace(x, y))
    with errstate():
        return _to_f32(_f64(x, target) * _f64(y, target), target)


def _div_generic(x, y, target: Target = PLAIN):
    require_x64(namespace(x, y))
    with errstate():  # always the integer narrowing: with XLA's own, its simplifier makes an f32 division of it,
        #                  which the GPU does not round correctly (17,085 of 2^16 raw-bit quotients 1 ulp off:
        #                  benchmarks/experiments/jax_ieee_cvt/2026-12-01/pytest_native_before_div_fix.txt)
        return rounding.f64_to_f32(_f64(x, target) / _f64(y, target), generic=True, target=target)


def add(x, y, ftz: bool = False, *, generic: bool = False, target: Target = PLAIN):
    """add.rn{.ftz}.f32: x + y."""
    return _run(np.add, _add_generic, [_f32("x", x), _f32("y", y)], ftz, generic, target)


def sub(x, y, ftz: bool = False, *, generic: bool = False, target: Target = PLAIN):
    """sub.rn{.ftz}.f32: x - y."""
    return _run(np.subtract, _sub_generic, [_f32("x", x), _f32("y", y)], ftz, generic, target)


def mul(x, y, ftz: bool = False, *, generic: bool = False, target: Target = PLAIN):
    """mul.rn{.ftz}.f32: x * y."""
    return _run(np.multiply, _mul_generic, [_f32("x", x), _f32("y", y)], ftz, generic, target)


def div(x, y, ftz: bool = False, *, generic: bool = False, target: Target = PLAIN):
    """div.rn{.ftz}.f32: x / y, correctly rounded (IEEE division, not div.approx / div.full)."""
    return _run(np.divide, _div_generic, [_f32("x", x), _f32("y", y)], ftz, generic, target)


def _fma_generic(x, y, z, target: Target = PLAIN):
    """x * y + z rounded once to float32 by TwoSum + round-to-odd (the proof in the module docstring)."""
    xp = namespace(x, y, z)
    require_x64(xp)
    with errstate():
        a, b, c = _f64(x, target), _f64(y, target), _f64(z, target)
        p = a * b
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)  # TwoSum: (p + c) - s, exactly
        sb = bitcast(s, np.uint64)
        inexact = xp.isfinite(s) & xp.isfinite(err) & (err != 0)
        toward_zero = (err < 0) != (s < 0)  # |s| > |p + c|: one ulp toward zero
        odd = (sb - toward_zero.astype(xp.uint64)) | 1  # round to odd: last bit set when inexact
        return _to_f32(bitcast(xp.where(inexact, odd, sb), np.float64), target)


_FMA_CHUNK = 1 << 14  # elements per chunk: the float64 temporaries stay in the L1/L2 cache
_HALF_F32_ULP = np.int64(1 << 28)  # in float64 bits: half an f32 ulp below the f32 significand
_LOW29 = np.int64((1 << 29) - 1)


def _fma64(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """numpy fast path of fma: x * y + z with one rounding to float32, in cache-sized chunks.

    s = fl64(x*y + z) rounded to float32.  RN32(RN64(v)) differs from RN32(v) only when RN64(v) is itself a
    float32 midpoint (every f32 midpoint is a float64, and RN64 is monotonic, so s cannot cross one), so only
    elements whose s is a midpoint (low 29 bits of the float64 significand = 2^28), or lies in the f32 subnormal
    range, go through the generic round-to-odd routine.  (s == 0 means x*y + z == 0 exactly: a float64 sum that
    rounds to zero is zero, and its sign follows the IEEE rules already.)
    """
    x, y, z = np.broadcast_arrays(x, y, z)
    shape = x.shape
    x, y, z = (np.ascontiguousarray(a).reshape(-1) for a in (x, y, z))
    n = x.size
    out = np.empty(n, np.float32)
    m = min(n, _FMA_CHUNK)
    s, t = np.empty(m, np.float64), np.empty(m, np.float64)
    bits = np.empty(m, np.int64)
    flag, flag2 = np.empty(m, bool), np.empty(m, bool)
    for lo in range(0, n, _FMA_CHUNK):
        hi = min(n, lo + _FMA_CHUNK)
        k = hi - lo
        sk, tk, bk, fk, gk = s[:k], t[:k], bits[:k], flag[:k], flag2[:k]
        np.multiply(x[lo:hi], y[lo:hi], out=sk, dtype=np.float64)  # exact product
        tk[...] = z[lo:hi]
        np.add(sk, tk, out=sk)
        np.copyto(out[lo:hi], sk, casting="same_kind")
        np.bitwise_and(sk.view(np.int64), _LOW29, out=bk)
        np.equal(bk, _HALF_F32_ULP, out=fk)  # an f32 midpoint (normal range)
        np.abs(sk, out=tk)
        np.less(tk, 2.0**-126, out=gk)  # f32 subnormal range ...
        gk &= tk != 0  # ... (an exact 0 is already right)
        fk |= gk
        if fk.any():
            idx = np.flatnonzero(fk) + lo
            out[idx] = _fma_generic(x[idx], y[idx], z[idx])
    return out.reshape(shape)


def fma(x, y, z, ftz: bool = False, *, generic: bool = False, target: Target = PLAIN):
    """fma.rn{.ftz}.f32: x * y + z with a single rounding to nearest even."""
    return _run(_fma64, _fma_generic, [_f32("x", x), _f32("y", y), _f32("z", z)], ftz, generic, target)


# the operations a fused kernel compiled for the GPU runs as their own PTX instruction (Target.inline_ptx): explicit
# round-to-nearest, no .ftz (subnormals kept), never contracted; a NaN result is made canonical as everywhere here
_PTX_OPS = {
    _add_generic: "add.rn.f32 $0, $1, $2;",
    _sub_generic: "sub.rn.f32 $0, $1, $2;",
    _mul_generic: "mul.rn.f32 $0, $1, $2;",
    _div_generic: "div.rn.f32 $0, $1, $2;",
    _fma_generic: "fma.rn.f32 $0, $1, $2, $3;",
}

_TWO64 = np.float32(2.0**64)
_TINY_SCALED = 0x20800000  # the bits of 2^-62 = 2^-126 * 2^64


def _up(xp, x):
    return x * xp.asarray(_TWO64, dtype=np.float32)


def _smaller_up(xp, x, y):
    """x, y with the one of smaller magnitude times 2^64 (exact: an operand of a product near 2^-126 with the
    other at least as large is at most 2^-63, and the inputs are flushed, so normal)."""
    first = xp.abs(x) <= xp.abs(y)
    return xp.where(first, _up(xp, x), x), xp.where(first, y, _up(xp, y))


# per operation: its operands scaled so that the exact result is 2^64 times as large (``_run``'s tininess test).
# A quotient near 2^-126 has a dividend below 2^2 (the divisor is below 2^128); an fma result near 2^-126 that is
# not 0 has |z| below about 2^-78 (else x * y + z is a multiple of a larger power of two), so nothing overflows.
_TINY_SCALE = {
    _mul_generic: lambda xp, x, y: _smaller_up(xp, x, y),
    _div_generic: lambda xp, x, y: (_up(xp, x), y),
    _fma_generic: lambda xp, x, y, z: (*_smaller_up(xp, x, y), _up(xp, z)),
}


def _mul_f16_generic(x, y, target: Target):
    xp = namespace(x, y)
    with errstate():  # the product is exact and never subnormal
        p = rounding.f16_to_f32(x, generic=True, target=target) * rounding.f16_to_f32(y, generic=True, target=target)
    return rounding.f32_to_f16(xp.asarray(p), generic=True, target=target)


def mul_f16(x, y, *, generic: bool = False, target: Target = PLAIN):
    """mul.rn.f16: x * y for float16 arrays, rounded once to nearest even; NaN -> 0x7FFF. (numpy's float16
    multiply rounds the exact float32 product once: the fast path, NaNs canonicalised.)"""
    x, y = _checked("x", x, np.float16), _checked("y", y, np.float16)
    xp = namespace(x, y)
    if is_numpy(xp) and not generic:
        _check_fp_environment()
        with np.errstate(all="ignore"):
            r = np.asarray(np.multiply(x, y), dtype=np.float16)
        b = r.view(np.uint16)
        return np.where((b & 0x7FFF) > 0x7C00, CANONICAL_NAN_F16, b).view(np.float16)
    return _mul_f16_generic(xp.asarray(x), xp.asarray(y), target)


def _key(xp, x):
    """Order-preserving uint32 key of float32 ``x`` (-0 below +0; a NaN gets the key of -inf): a negative number
    has all its bits flipped, a positive one its sign bit (branch-free: the mask is the sign spread by an
    arithmetic shift)."""
    b = bitcast(x, np.uint32)
    b = xp.where((b & 0x7FFFFFFF) > 0x7F800000, np.uint32(_NEG_INF), b)
    return b ^ (bitcast(bitcast(b, np.int32) >> 31, np.uint32) | _SIGN)


def _from_key(xp, k):
    """The float32 whose key is ``k`` (the inverse of ``_key``)."""
    return bitcast(k ^ (~bitcast(bitcast(k, np.int32) >> 31, np.uint32) | _SIGN), np.float32)


def fmax(x, y):
    """fmaxf (max.f32): the larger of x and y; a NaN operand is ignored; both NaN -> 0x7FFFFFFF.

    Signed zeros: -0 counts as smaller than +0 (IEEE 754-2019 maximumNumber), so fmax(-0, +0) is +0 in either
    operand order. We chose the total order because it makes the result independent of operand and reduction
    order, which the emulator needs (the kernel's max runs in lane and shuffle order); the GPU's choice between
    equal zeros has not been measured (the kernel's scores have never been -0: README)."""
    x, y = _f32("x", x), _f32("y", y)
    if type(x) is np.ndarray and type(y) is np.ndarray and x.shape == y.shape and x.ndim:
        r = _fmax_np(x, y)
        if r is not None:
            return r
    xp = namespace(x, y)
    r = _from_key(xp, xp.maximum(_key(xp, x), _key(xp, y)))
    both = xp.isnan(x) & xp.isnan(y)
    return bitcast(xp.where(both, CANONICAL_NAN_F32, bitcast(r, np.uint32)), np.float32)


def _fmax_np(x: np.ndarray, y: np.ndarray):
    """``fmax`` on numpy arrays of one shape without NaNs, in a few passes instead of the key arithmetic; None where
    an operand holds a NaN (the key routine then: np.fmax's own NaN rule is not one rule, its scalar loop follows C's
    fmaxf, which turns a signalling NaN into a NaN result, its vector loop does not). Without NaNs np.maximum is
    the larger operand (no rounding; subnormals compared as they are in the environment ``_check_fp_environment``
    requires) and what it leaves open, the order of +0 and -0, is fixed where it arises: +0 (the AND of the two
    patterns). tests/test_numerics_engines.py holds it bit for bit to the oracle."""
    if np.isnan(x).any() or np.isnan(y).any():
        return None
    _check_fp_environment()
    r = np.maximum(x, y).view(np.uint32)
    xb, yb = x.view(np.uint32), y.view(np.uint32)
    zeros = (xb | yb) == np.uint32(_SIGN)  # one +0 and one -0 (two -0 or two +0 give the same pattern anyway)
    if zeros.any():
        r = np.where(zeros, xb & yb, r)
    return r.view(np.float32)


def add_chain(x: np.ndarray, ftz: bool = False) -> np.ndarray:
    """The results of the dependent chain of add.rn{.ftz}.f32 ``y1 = x[0] + x[1]``, ``y2 = y1 + x[2]``, ... on a
    float32 numpy array x (n, ...): (n - 1, ...), each exactly ``add(y, x[i], ftz)`` of the previous one. The chain
    is one ``np.add.accumulate`` along axis 0: it adds in order, each step a float32 addition rounded to nearest
    even (the fast path of ``add``), so it is the chain; NaNs are made canonical at the end (a NaN stays NaN down a
    chain of adds whatever its payload); with .ftz the inputs are flushed first, and where a partial sum is
    subnormal (its flush would change the next step) the chain runs step by step instead. tests/test_ieee32.py holds
    it to the steps."""
    if ftz:
        x = _flush(x)
    _check_fp_environment()
    with np.errstate(all="ignore"):
        r = np.add.accumulate(x, axis=0, dtype=np.float32)[1:]
    b = r.view(np.uint32)
    if ftz and (((b & np.uint32(0x7FFFFFFF)) - np.uint32(1)) < np.uint32(0x7FFFFF)).any():
        r = np.empty_like(r)
        y = x[0]
        for i in range(1, x.shape[0]):
            y = r[i - 1] = add(y, x[i], True)
        return r
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        r = np.where(nan, CANONICAL_NAN_F32, b).view(np.float32)
    return r


def fmax_chain(x: np.ndarray, ftz: bool = False) -> np.ndarray:
    """The results of the dependent chain of max{.ftz}.f32 (``fmax`` of the flushed operands) ``y1 = fmax(x[0],
    x[1])``, ``y2 = fmax(y1, x[2])``, ... on a float32 numpy array x (n, ...): (n - 1, ...). fmax is a selection in
    a total order (NaN below -inf; -0 below +0) with two NaNs giving the canonical NaN, so each y_i is the largest of
    x[0..i] by ``_key`` (a running maximum of the keys), or the canonical NaN where x[0..i] are all NaN; a selection
    of flushed operands needs no flush of its own."""
    if ftz:
        x = _flush(x)
    k = np.maximum.accumulate(_key(np, x), axis=0)[1:]
    r = _from_key(np, k).view(np.uint32)
    none = np.logical_and.accumulate(np.isnan(x), axis=0)[1:]
    if none.any():
        r = np.where(none, CANONICAL_NAN_F32, r)
    return r.view(np.float32)


def fmax_reduce(x, axis: int = -1):
    """The fmaxf reduction of float32 ``x`` over ``axis`` from -inf: NaNs are ignored, an all-NaN or empty row
    gives -inf, -0 < +0 as in ``fmax``; any order of reduction gives the same bits."""
    x = _f32("x", x)
    xp = namespace(x)
    k = xp.max(_key(xp, x), axis=axis, initial=np.uint32(~_NEG_INF & 0xFFFFFFFF))
    return _from_key(xp, xp.asarray(k))


def cvt_f32_to_f16(x, *, generic: bool = False, target: Target = PLAIN):
    """cvt.rn.f16.f32: float32 -> float16 to nearest even; overflow -> inf; NaN -> 0x7FFF."""
    return rounding.f32_to_f16(_f32("x", x), generic=generic, target=target)


def cvt_f32_to_bf16(x, *, generic: bool = False, target: Target = PLAIN):
    """cvt.rn.bf16.f32: float32 -> bfloat16 to nearest even; overflow -> inf; NaN -> 0x7FFF."""
    return rounding.f32_to_bf16(_f32("x", x), generic=generic, target=target)


def cvt_f32_to(x, dtype, *, generic: bool = False, target: Target = PLAIN):
    """cvt.rn to the kernel's element type ``dtype`` (float16 or bfloat16, numpy or JAX dtype)."""
    if np.dtype(dtype) == np.dtype(np.float16):
        return cvt_f32_to_f16(x, generic=generic, target=target)
    if np.dtype(dtype).name == "bfloat16":
        return cvt_f32_to_bf16(x, generic=generic, target=target)
    raise ValueError(f"dtype must be float16 or bfloat16, got {dtype}")


def fabs(x):
    """|x| of float32 values by clearing the sign bit (fabsf / abs.f32: exact for every input, NaN payload kept)."""
    x = _f32("x", x)
    xp = namespace(x)
    return bitcast(bitcast(x, np.uint32) & xp.asarray(_SIGN - 1, dtype=xp.uint32), np.float32)


def cvt_bf16_to_f32(b):
    """bfloat16 -> float32 exactly: the bits shifted up 16 (what a kernel does with ``x << 16``; NaN payload kept)."""
    xp = namespace(b)
    if np.dtype(b.dtype).name != "bfloat16":
        raise ValueError(f"b must be bfloat16, got {b.dtype}")
    return bitcast(shl(xp.astype(bitcast(b, np.uint16), xp.uint32), 16), np.float32)


def cvt_to_f32(x, target: Target = PLAIN):
    """The kernel's exact widening of its element type (float16: ``cvt_f16_to_f32``, bfloat16: ``cvt_bf16_to_f32``)
    to float32; the inverse direction of ``cvt_f32_to``."""
    if np.dtype(x.dtype) == np.dtype(np.float16):
        return cvt_f16_to_f32(x, target=target)
    if np.dtype(x.dtype).name == "bfloat16":
        return cvt_bf16_to_f32(x)
    raise ValueError(f"x must be float16 or bfloat16, got {x.dtype}")


def cvt_f16_to_f32(h, *, generic: bool = False, target: Target = PLAIN):
    """cvt.f32.f16: exact widening; NaN -> 0x7FFFFFFF (canonical, assumed from the PTX rule that NaN results are
    canonical; not yet checked on silicon)."""
    return rounding.f16_to_f32(_checked("h", h, np.float16), generic=generic, target=target)


# -- adds of the half formats of atom.add / red.add (numpy only) -----------------------------------------------------
# add.rn of float16 and bfloat16 bit patterns, as atom.add.noftz.f16 / .bf16 (and each half of .f16x2 / .bf16x2)
# round them: subnormals kept, NaN results canonical (0x7FFF). (atom.add.f64 is numerics.ieee.add: the f64 unit
# passes NaN operands on.)


def add_f16(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """float16 x + y to nearest even, subnormals kept (``add.rn.f16``): the float64 sum of two float16 is exact
    (their exponents span 2^15 .. 2^-24, 40 bits < 53), then one rounding (rounding.f64_to_f16, NaN -> 0x7FFF)."""
    x, y = _checked("x", x, np.float16), _checked("y", y, np.float16)
    with np.errstate(all="ignore"):  # inf - inf, signalling NaNs
        return rounding.f64_to_f16(x.astype(np.float64) + y.astype(np.float64))


def add_bf16(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """bfloat16 x + y to nearest even, subnormals kept (``add.rn.bf16``): the float32 sum (``add``: correctly
    rounded, gradual underflow), then float32 -> bfloat16 to nearest even. Rounding twice is innocuous for + because
    24 >= 2 * 8 + 2 (Figueroa 1995; in the subnormal range bfloat16 keeps <= 7 bits and float32 16 more); the
    float32 overflow threshold lies above bfloat16's, and NaN ends as 0x7FFF."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.name != "bfloat16" or y.dtype.name != "bfloat16":
        raise ValueError(f"x and y must be bfloat16, got {x.dtype} and {y.dtype}")
    return rounding.f32_to_bf16(add(cvt_bf16_to_f32(x), cvt_bf16_to_f32(y)))
