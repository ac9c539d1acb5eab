"""IEEE 754 binary32 arithmetic as the GPU's PTX instructions do it: add / sub / mul / div / fma (.rn), with
optional .ftz, and cvt.rn.f16.f32 / cvt.f32.f16. Every function takes and returns float32 (or float16) numpy
arrays, broadcasts, and gives NaN results as the canonical NaN 0x7FFFFFFF (0x7FFF for f16), as NVIDIA GPUs do.

add, sub, mul, div: numpy's float32 operations are IEEE 754 correctly rounded (one rounding, to nearest even,
gradual underflow), so they are used directly; only NaNs are canonicalised. That presumes the CPU's
flush-to-zero / denormals-are-zero modes are off (numpy's default): ``_check_fp_environment`` refuses to run
otherwise.

fma (one rounding), computed in float64:
  1. p = x * y is exact in float64: 24 + 24 significant bits <= 53, exponents >= -298 stay normal.
  2. s = fl(p + z) and e = (p + z) - s exactly (TwoSum, Knuth): exact in float64 because nothing overflows
     (|p| <= 2^256) and p + z is a multiple of 2^-298, so s and e are normal or zero.
  3. t = the round-to-odd of p + z at 53 bits: t = s if e == 0; otherwise truncate s toward zero by one ulp when
     e points toward zero (|s| > |p + z|), and set the last significand bit. (s != 0 whenever e != 0: a float64
     sum that rounds to 0 is exactly 0.)
  4. Round t to float32 to nearest even. Boldo & Melquiond (IEEE Trans. Computers 57(4), 2008): rounding to odd
     with at least p + 2 bits, then to nearest at p bits, equals one rounding to nearest at p bits. Here 53 >=
     24 + 2, and for f32 subnormal results the f32 grid is coarser still, so the margin only grows.
  Speed: steps 2-4 run only where they can matter, where fl64(x*y + z) is an f32 midpoint or lies in the f32
  subnormal range (``_fma64``); elsewhere fl64 then fl32 is already the single rounding. About 6 ns per element
  on this project's CPU (11.6 ns with round-to-odd everywhere).
Signed zeros follow from float64's own rules (exact zero sums are +0 unless both terms are -0), which are the
IEEE rules for binary32 too. Infinities and NaNs pass through float64 unchanged in meaning.

.ftz (PTX): subnormal inputs are replaced by zero of the same sign before the operation, and a subnormal result
by zero of its sign after rounding.

cvt.rn.f16.f32: numpy's float32 -> float16 conversion rounds once to nearest even (checked against the exact
oracle in tests); NaN -> 0x7FFF. cvt.f32.f16 is exact; NaN -> 0x7FFFFFFF (canonical, assumed from the PTX rule
that NaN results are canonical; not yet checked on silicon).
"""
from __future__ import annotations

import numpy as np

__all__ = ["add", "sub", "mul", "div", "fma", "cvt_f32_to_f16", "cvt_f16_to_f32", "flush_subnormals",
           "CANONICAL_NAN_F32", "CANONICAL_NAN_F16"]

CANONICAL_NAN_F32 = np.uint32(0x7FFFFFFF)
CANONICAL_NAN_F16 = np.uint16(0x7FFF)
_TINY = np.array([1.0e-45], np.float32)   # the smallest subnormal: DAZ would read it as 0


def _check_fp_environment() -> None:
    with np.errstate(all="ignore"):
        if (_TINY * np.float32(1.0))[0] == 0 or (np.float32(2.0 ** -126) * np.array([0.5], np.float32))[0] == 0:
            raise RuntimeError("the CPU flushes float32 subnormals (FTZ/DAZ is on, e.g. torch.set_flush_denormal"
                               "(True)): IEEE binary32 emulation needs it off")


def _f32(name: str, x) -> np.ndarray:
    if not isinstance(x, (np.ndarray, np.floating)) or np.asarray(x).dtype != np.float32:
        raise ValueError(f"{name} must be a float32 numpy array, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}")
    return np.asarray(x)


def _canonical(r: np.ndarray) -> np.ndarray:
    r = np.array(r, dtype=np.float32, copy=True) if np.ndim(r) == 0 else r
    nan = np.isnan(r)
    if nan.any():
        r.view(np.uint32)[nan] = CANONICAL_NAN_F32
    return r


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """float32 subnormals replaced by zero of the same sign (PTX .ftz); other values unchanged (a new array)."""
    x = _f32("x", x)
    bits = np.array(x, copy=True).view(np.uint32)
    sub = (bits & 0x7F800000) == 0
    bits[sub] &= np.uint32(0x80000000)
    return bits.view(np.float32)


def _run(op, args, ftz: bool) -> np.ndarray:
    _check_fp_environment()
    if ftz:
        args = [flush_subnormals(a) for a in args]
    with np.errstate(all="ignore"):
        r = np.asarray(op(*args), dtype=np.float32)
    if ftz:
        r = flush_subnormals(r)
    return _canonical(r)


def add(x, y, ftz: bool = False) -> np.ndarray:
    """add.rn{.ftz}.f32: x + y."""
    return _run(np.add, [_f32("x", x), _f32("y", y)], ftz)


def sub(x, y, ftz: bool = False) -> np.ndarray:
    """sub.rn{.ftz}.f32: x - y."""
    return _run(np.subtract, [_f32("x", x), _f32("y", y)], ftz)


def mul(x, y, ftz: bool = False) -> np.ndarray:
    """mul.rn{.ftz}.f32: x * y."""
    return _run(np.multiply, [_f32("x", x), _f32("y", y)], ftz)


def div(x, y, ftz: bool = False) -> np.ndarray:
    """div.rn{.ftz}.f32: x / y, correctly rounded (IEEE division, not div.approx / div.full)."""
    return _run(np.divide, [_f32("x", x), _f32("y", y)], ftz)


_FMA_CHUNK = 1 << 14   # elements per chunk: the float64 temporaries stay in the L1/L2 cache
_HALF_F32_ULP = np.int64(1 << 28)      # in float64 bits: half an f32 ulp below the f32 significand
_LOW29 = np.int64((1 << 29) - 1)


def _fma_round_to_odd(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x * y + z rounded once to float32 by TwoSum + round-to-odd (the proof in the module docstring)."""
    p = x.astype(np.float64) * y.astype(np.float64)
    zd = z.astype(np.float64)
    s = p + zd
    bp = s - zd
    e = (p - bp) + (zd - (s - bp))        # TwoSum: (p + z) - s, exactly
    inexact = (e != 0) & np.isfinite(s)
    sb = s.view(np.int64)
    sb -= (inexact & ((e < 0) != (s < 0))).astype(np.int64)   # |s| > |p + z|: one ulp toward zero
    sb |= inexact.astype(np.int64)                            # round to odd: last bit set when inexact
    return s.astype(np.float32)


def _fma64(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x * y + z with one rounding to float32, in cache-sized chunks.

    Fast path: s = fl64(x*y + z) rounded to float32.  RN32(RN64(v)) differs from RN32(v) only when RN64(v) is
    itself a float32 midpoint (every f32 midpoint is a float64, and RN64 is monotonic, so s cannot cross one), so
    only elements whose s is a midpoint (low 29 bits of the float64 significand = 2^28), or lies in the f32
    subnormal range, go through the exact round-to-odd path.  (s == 0 means x*y + z == 0 exactly: a float64 sum
    that rounds to zero is zero, and its sign follows the IEEE rules already.)
    """
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
        np.multiply(x[lo:hi], y[lo:hi], out=sk, dtype=np.float64)   # exact product
        tk[...] = z[lo:hi]
        np.add(sk, tk, out=sk)
        np.copyto(out[lo:hi], sk, casting="same_kind")
        np.bitwise_and(sk.view(np.int64), _LOW29, out=bk)
        np.equal(bk, _HALF_F32_ULP, out=fk)                            # an f32 midpoint (normal range)
        np.abs(sk, out=tk)
        np.less(tk, 2.0 ** -126, out=gk)                               # f32 subnormal range ...
        gk &= tk != 0                                                  # ... (an exact 0 is already right)
        fk |= gk
        if fk.any():
            idx = np.flatnonzero(fk) + lo
            out[idx] = _fma_round_to_odd(x[idx], y[idx], z[idx])
    return out.reshape(shape)


def fma(x, y, z, ftz: bool = False) -> np.ndarray:
    """fma.rn{.ftz}.f32: x * y + z with a single rounding to nearest even."""
    x, y, z = _f32("x", x), _f32("y", y), _f32("z", z)
    x, y, z = np.broadcast_arrays(x, y, z)
    return _run(_fma64, [x, y, z], ftz)


def cvt_f32_to_f16(x) -> np.ndarray:
    """cvt.rn.f16.f32: float32 -> float16 to nearest even; overflow -> inf; NaN -> 0x7FFF."""
    x = _f32("x", x)
    _check_fp_environment()
    with np.errstate(all="ignore"):
        h = np.asarray(x.astype(np.float16))
    h = np.array(h, copy=True)
    nan = np.isnan(h)
    if nan.any():
        h.view(np.uint16)[nan] = CANONICAL_NAN_F16
    return h


def cvt_f16_to_f32(h) -> np.ndarray:
    """cvt.f32.f16: exact widening; NaN -> 0x7FFFFFFF."""
    if not isinstance(h, (np.ndarray, np.floating)) or np.asarray(h).dtype != np.float16:
        raise ValueError(f"h must be a float16 numpy array, got {getattr(h, 'dtype', type(h).__name__)}")
    return _canonical(np.asarray(h).astype(np.float32))
