"""A piecewise-quadratic fixed-point interpolator of the Oberman-Siu kind (ARITH-17 2005; US patent 8,037,119), the
family the SFU's ``tanh.approx.f32`` is being fitted to (benchmarks/experiments/tanh_interpolator).

One binade of inputs x = 2^e (1 + m 2^-M) (M mantissa bits read, m < 2^M) is cut into 2^k segments by the top k
bits of m; with n = M - k and X = m mod 2^n (the low bits, Xl in the paper), the unit forms the integer

    A = C0[i] + floor(C1[i] X / 2^t1) + floor(C2[i] floor(Sq(X) / 2^s) / 2^t2)      (i = m >> n)

(floors: two's-complement truncation of the products and of the squarer's output) and returns A 2^L rounded to f32
(``rn``: to nearest even, ``rz``: toward zero). Sq(X) is X^2, or with ``sq_drop`` = D > 0 the square of a truncated
folded squarer array: the partial products of X^2 = sum_i x_i 2^2i + sum_{i<j} x_i x_j 2^(i+j+1) that fall in
columns below D are left out (not summed, so not even their carries reach the kept columns). The reads of fewer
than 23 mantissa bits (``mant_bits`` M: the input's low 23 - M bits are ignored) and the truncated squarer are what
the H100 / H200 ``tanh.approx.f32`` shows (benchmarks/experiments/tanh_interpolator/README.md). ``QuadUnit``
adds the range reduction seen on the H200: odd symmetry, x below a binade returned as is, saturation to +-1 from a
binade on (and where the sum reaches 1).

``synthetic_tanh`` designs such a unit for tanh from float64 (Chebyshev interpolation per segment, coefficients
rounded to the widths asked for): a known member of the family for testing the analysis, not a model of any GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .rounding import f32_to_f64, f64_to_f32, f64_to_f32_rz

SIGN = np.uint32(0x80000000)
ONE = np.uint32(0x3F800000)
CANONICAL_NAN = np.uint32(0x7FFFFFFF)
ROUNDINGS = ("rn", "rz")

__all__ = ["QuadFormat", "QuadBinade", "QuadUnit", "round_to_f32", "synthetic_tanh", "chebyshev_fit"]


@dataclass(frozen=True)
class QuadFormat:
    """The evaluation of one binade: ``index_bits`` k, ``mant_bits`` M, squarer shift s, product shifts t1 / t2,
    accumulator lsb 2^``lsb_exp``, the final ``rounding`` and the squarer's dropped columns ``sq_drop``."""

    index_bits: int
    lsb_exp: int
    sq_shift: int = 0
    t1: int = 0
    t2: int = 0
    rounding: str = "rn"
    mant_bits: int = 23
    sq_drop: int = 0

    def __post_init__(self):
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"rounding must be one of {ROUNDINGS}, got {self.rounding!r}")
        if min(self.sq_shift, self.t1, self.t2, self.sq_drop) < 0:
            raise ValueError(
                f"shifts must be >= 0, got s={self.sq_shift}, t1={self.t1}, t2={self.t2}, drop={self.sq_drop}"
            )
        if not 0 <= self.index_bits <= self.mant_bits <= 23:
            raise ValueError(f"need 0 <= index_bits <= mant_bits <= 23, got {self.index_bits}, {self.mant_bits}")

    @property
    def low_bits(self) -> int:
        return self.mant_bits - self.index_bits


def round_to_f32(v: np.ndarray, rounding: str) -> np.ndarray:
    """float64 values -> f32 bits, to nearest even or toward zero (flashsim.numerics.rounding)."""
    r = f64_to_f32(v) if rounding == "rn" else f64_to_f32_rz(v)
    return np.asarray(r, np.float32).view(np.uint32)


def folded_square(X: np.ndarray, drop: int = 0) -> np.ndarray:
    """X^2 (int64, X < 2^31) less the partial products of the folded squarer array in columns below ``drop``: x_i at
    column 2i, x_i x_j (i < j) at column i + j + 1 (module docstring)."""
    X = np.asarray(X, np.int64)
    if drop <= 0:
        return X * X
    bits = int(X.max(initial=0)).bit_length()
    lost = np.zeros_like(X)
    for i in range(min(bits, (drop + 1) // 2)):  # x_i: its own column 2i and its products with x_j, j > i
        xi = (X >> i) & 1
        if 2 * i < drop:
            lost += xi << (2 * i)
        hi = drop - i - 1  # x_j (j > i) lands below drop for j < hi
        if hi > i + 1:
            lost += (xi * ((X & ((1 << hi) - 1)) >> (i + 1) << (i + 1))) << (i + 1)
    return X * X - lost


def accumulate(fmt: QuadFormat, c0, c1, c2, i: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The integer A of the module docstring for segment indices ``i`` and low bits ``X`` (int64, exact)."""
    c0, c1, c2 = (np.asarray(c, np.int64) for c in (c0, c1, c2))
    X = np.asarray(X, np.int64)
    sq = folded_square(X, fmt.sq_drop) >> fmt.sq_shift
    bits = int(np.abs(c2).max(initial=0)).bit_length() + int(sq.max(initial=0)).bit_length()
    if bits > 62 or int(np.abs(c1).max(initial=0)).bit_length() + fmt.low_bits > 62:
        raise ValueError("coefficients too wide for exact int64 products")
    return c0[i] + ((c1[i] * X) >> fmt.t1) + ((c2[i] * sq) >> fmt.t2)


@dataclass
class QuadBinade:
    """One binade's format and its per-segment coefficient tables (int64, 2^k entries each)."""

    fmt: QuadFormat
    c0: np.ndarray
    c1: np.ndarray
    c2: np.ndarray

    def bits(self, m: np.ndarray) -> np.ndarray:
        """Positive result bits for mantissa grid points ``m`` (< 2^M)."""
        m = np.asarray(m, np.int64)
        n = self.fmt.low_bits
        A = accumulate(self.fmt, self.c0, self.c1, self.c2, m >> n, m & ((1 << n) - 1))
        if np.abs(A).max(initial=0) >= 1 << 53:
            raise ValueError("accumulator beyond float64's exact integers")
        v = np.minimum(A.astype(np.float64) * 2.0**self.fmt.lsb_exp, 1.0)  # the sum saturates at 1
        return round_to_f32(v, self.fmt.rounding)


@dataclass
class QuadUnit:
    """A whole unit: ``binades`` keyed by the biased input exponent; below ``identity_below`` the input is returned,
    from ``saturate_from`` on +-1; odd; NaN -> canonical NaN. Binades missing from ``binades`` between the two
    raise (no model there)."""

    binades: dict = field(default_factory=dict)
    identity_below: int = 119
    saturate_from: int = 130

    def bits(self, x) -> np.ndarray:
        x = np.asarray(x, np.uint32)
        sign, mag = x & SIGN, x & ~SIGN
        E = (mag >> np.uint32(23)).astype(np.int64)
        out = np.where(E < self.identity_below, mag, ONE).astype(np.uint32)
        for e, b in self.binades.items():
            sel = E == e
            if sel.any():
                out[sel] = b.bits((mag[sel] & np.uint32(0x7FFFFF)) >> np.uint32(23 - b.fmt.mant_bits))
        gap = (E >= self.identity_below) & (E < self.saturate_from) & ~np.isin(E, list(self.binades))
        if gap.any():
            raise ValueError(f"no binade model for biased exponents {sorted(set(E[gap].tolist()))}")
        out = out | sign
        return np.where(mag > np.uint32(0x7F800000), CANONICAL_NAN, out).astype(np.uint32)


def chebyshev_fit(f, x0: float, h: float, n: int, degree: int = 2) -> np.ndarray:
    """Coefficients (lowest first) of the polynomial in X (x = x0 + X h, X in [0, 2^n)) interpolating ``f`` at the
    Chebyshev nodes of the segment (near-minimax)."""
    w = float(1 << n)
    t = np.cos((2 * np.arange(degree + 1) + 1) * np.pi / (2 * degree + 2))
    X = (t + 1) * w / 2
    return np.polynomial.polynomial.polyfit(X, f(x0 + X * h), degree)


def synthetic_tanh(
    biased_exponents,
    *,
    index_bits: int = 5,
    mant_bits: int = 23,
    guard_bits: int = 2,
    c1_bits: int = 16,
    c2_bits: int = 10,
    sq_shift: int = 0,
    rounding: str = "rn",
) -> QuadUnit:
    """A member of the family that approximates tanh on ``biased_exponents``: per binade the accumulator lsb is
    ``guard_bits`` below the ulp of tanh(2^e), C1 and C2 have at most ``c1_bits`` / ``c2_bits`` bits in magnitude
    where the function allows it (which fixes t1 / t2 >= 0; a C1 or C2 wider than asked keeps t = 0), C0 = the
    rounded constant term."""
    binades = {}
    for E in biased_exponents:
        e = E - 127
        n = mant_bits - index_bits
        h = 2.0**e * 2.0**-mant_bits
        L = int(np.floor(np.log2(np.tanh(2.0**e)))) - 23 - guard_bits
        a = np.array(
            [chebyshev_fit(np.tanh, 2.0**e * (1 + i * 2.0**-index_bits), h, n) for i in range(1 << index_bits)]
        )
        a = a * 2.0**-L  # accumulator units
        t1 = max(0, c1_bits - int(np.ceil(np.log2(np.abs(a[:, 1]).max()))))
        t2 = max(0, c2_bits - int(np.ceil(np.log2(np.abs(a[:, 2]).max() * 2.0**sq_shift))))
        fmt = QuadFormat(index_bits, L, sq_shift, t1, t2, rounding, mant_bits)
        c0 = np.rint(a[:, 0]).astype(np.int64)
        c1 = np.rint(a[:, 1] * 2.0**t1).astype(np.int64)
        c2 = np.rint(a[:, 2] * 2.0 ** (sq_shift + t2)).astype(np.int64)
        binades[E] = QuadBinade(fmt, c0, c1, c2)
    lo, hi = min(biased_exponents), max(biased_exponents) + 1
    return QuadUnit(binades, identity_below=lo, saturate_from=hi)


def tanh_reference_bits(x) -> np.ndarray:
    """float32(tanh(x)) through float64 (a reference for error statistics, not always correctly rounded)."""
    x = np.asarray(x, np.uint32)
    with np.errstate(all="ignore"):
        y = np.tanh(f32_to_f64(x.view(np.float32)))
    return np.asarray(f64_to_f32(y), np.float32).view(np.uint32)
