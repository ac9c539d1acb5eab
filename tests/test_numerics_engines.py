"""One numerics, two engines: every routine of rounding, ieee32 and sfu run three ways on the same raw bit patterns
(subnormals, +-0, +-inf, NaN, rounding midpoints and their neighbours included):

* the generic routine on numpy (``generic=True``),
* the generic routine on JAX (jax.jit, under xp.enable_x64()),
* the numpy fast path (the default on numpy),

all three bit for bit equal, and equal to the exact Fraction oracles of flashsim.numerics.reference (or a small
one here) where one exists. The sfu models (synthetic tables in every variant, the shipped tables, the correctly
rounded fallback with its host-settled hard cases) are held equal between JAX (jit) and numpy.

Arrays have a fixed length, so each jitted suite compiles once.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the JAX engine needs jax: pip install 'flashsim[jax]'")

import jax.numpy as jnp  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flashsim.numerics import ieee32, rounding, sfu  # noqa: E402
from flashsim.numerics.formats import BF16, F16, F32  # noqa: E402
from flashsim.numerics.reference import add_ref, div_ref, fma_ref, mul_ref, round_fraction, value_of  # noqa: E402
from flashsim.numerics.target import PLAIN, Target  # noqa: E402
from flashsim.numerics.xp import enable_x64  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
N = 32  # elements per hypothesis example
HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def ubits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize])


def same_bits(a, b, what=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    bad = ubits(a) != ubits(b)
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {bad.size} differ; first at {np.argwhere(bad)[0]}: "
        f"{ubits(a)[bad][0]:#x} vs {ubits(b)[bad][0]:#x}"
    )


_JITTED: dict = {}


def three_ways(suite, *args):
    """``suite(generic, *arrays) -> tuple of arrays`` run as numpy fast path, numpy generic and JAX (jit); asserts
    the three equal bit for bit and returns the numpy results."""
    fast = suite(False, *args)
    generic = suite(True, *args)
    if suite not in _JITTED:
        _JITTED[suite] = jax.jit(lambda *a: suite(True, *a))
    with enable_x64():
        on_jax = _JITTED[suite](*[jnp.asarray(a) for a in args])
    for i, (f, g, j) in enumerate(zip(fast, generic, on_jax)):
        same_bits(g, f, f"{suite.__name__}[{i}] generic vs fast")
        same_bits(np.asarray(j), g, f"{suite.__name__}[{i}] jax vs generic")
    return fast


# ------------------------------------------------------------------------------------------------ inputs

F32_SPECIALS = [
    0,
    0x80000000,
    1,
    0x80000001,
    0x007FFFFF,
    0x00800000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0xFFC00001,
    0x7F800001,
    0x3F800000,
    0xBF800000,
    0x33000000,
    0x477FE000,
    0x477FF000,
    0x38800000,
    0x33800000,
    0x337FFFFF,
]


@st.composite
def f32_bits(draw, near=None):
    """Raw float32 bits: anything, a special, a subnormal, mid-range, or near ``near``'s exponent."""
    kind = draw(
        st.sampled_from(
            ["any", "special", "subnormal", "near", "near"]
            if near is not None
            else ["any", "special", "subnormal", "mid", "f16"]
        )
    )
    if kind == "any":
        return draw(st.integers(0, 0xFFFFFFFF))
    if kind == "special":
        return draw(st.sampled_from(F32_SPECIALS))
    if kind == "subnormal":
        return draw(st.integers(0, 1)) << 31 | draw(st.integers(1, 0x7FFFFF))
    if kind == "mid":
        field = draw(st.integers(100, 154))
    elif kind == "f16":  # the f16 range with its subnormals and overflow edge; ties made on purpose
        field = draw(st.integers(127 - 26, 127 + 16))
    else:
        field = min(254, max(0, ((near >> 23) & 0xFF) + draw(st.integers(-30, 30))))
    frac = draw(st.one_of(st.integers(0, 0x7FFFFF), st.sampled_from([0, 1, 0x400000, 0x7FFFFF, 0x1000, 0x3000])))
    if kind == "f16" and draw(st.booleans()):
        frac = (frac & ~0x1FFF) | 0x1000
    return draw(st.integers(0, 1)) << 31 | field << 23 | frac


def f32_array(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


@st.composite
def f64_near_grid(draw, fmt):
    """A float64 at or next to a rounding boundary of ``fmt`` (a value of fmt plus 0, 1/4, 1/2, 3/4 of its ulp,
    +- a nudge of 2^-20 ulp; any binade, subnormals and the overflow edge included), or a raw float64."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.integers(0, (1 << 64) - 1))
    b = draw(
        st.integers(0, (1 << fmt.bits) - 1).filter(
            lambda b: (b >> fmt.frac_bits) & fmt.exp_field_max != fmt.exp_field_max
        )
    )
    v = value_of(b, fmt)
    field = (b >> fmt.frac_bits) & fmt.exp_field_max
    ulp = Fraction(2) ** (max(field, 1) - fmt.bias - fmt.frac_bits)
    part = draw(st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)]))
    nudge = draw(st.sampled_from([0, 1, -1])) * ulp * Fraction(1, 1 << 20)
    q = v + (-1 if b >> (fmt.bits - 1) else 1) * (part * ulp + nudge)
    x = float(q)
    assert Fraction(x) == q
    if q == 0 and b >> (fmt.bits - 1):
        x = -0.0
    return int(np.array([x]).view(np.uint64)[0])


def f64_array(bits) -> np.ndarray:
    return np.array(bits, dtype=np.uint64).view(np.float64)


def is_nan_bits(b: int, f) -> bool:
    return (b & (f.sign_mask - 1)) > f.inf_bits


def oracle_round(b64: int, f, mode, overflow="ieee", signed_zero=True) -> int:
    """round_float64's contract on one float64 (bits), through reference.round_fraction."""
    x = float(np.array([b64], np.uint64).view(np.float64)[0])
    if math.isnan(x):
        return f.canonical_nan
    if math.isinf(x):
        return f.inf_bits | (f.sign_mask if x < 0 else 0)
    r = round_fraction(Fraction(x), f, mode, negative_zero=math.copysign(1, x) < 0)
    if (
        overflow == "inf"
        and (r & (f.sign_mask - 1)) == f.max_finite_bits
        and abs(Fraction(x)) >= Fraction(2) ** (f.emax + 1)
    ):
        r = (r & f.sign_mask) | f.inf_bits
    if not signed_zero and (r & (f.sign_mask - 1)) == 0:
        r = 0
    return r


# ------------------------------------------------------------------------------------------------ rounding

ROUND_VARIANTS = [
    (f, mode, ov, sz) for f in (F32, F16, BF16) for mode in ("rne", "rz") for ov, sz in (("ieee", True), ("inf", False))
]


def rounding_f64_suite(generic, v):
    out = [
        rounding.round_float64(v, f, mode, overflow=ov, signed_zero=sz, generic=generic)
        for f, mode, ov, sz in ROUND_VARIANTS
    ]
    return tuple(out) + (
        rounding.f64_to_f32(v, generic=generic),
        rounding.f64_to_f32_rz(v, generic=generic),
        rounding.f64_to_f16(v, generic=generic),
    )


@HYP
@given(st.data())
def test_round_float64_and_conversions_three_ways_and_oracle(data):
    fmt = data.draw(st.sampled_from([F32, F16, BF16]))
    b = data.draw(st.lists(f64_near_grid(fmt), min_size=N, max_size=N))
    out = three_ways(rounding_f64_suite, f64_array(b))
    for i, (f, mode, ov, sz) in enumerate(ROUND_VARIANTS):
        got = ubits(out[i])
        for j, bj in enumerate(b):
            assert int(got[j]) == oracle_round(bj, f, mode, ov, sz), (f.name, mode, ov, sz, hex(bj), hex(got[j]))
    n = len(ROUND_VARIANTS)
    for j, bj in enumerate(b):
        assert int(ubits(out[n])[j]) == oracle_round(bj, F32, "rne")
        assert int(ubits(out[n + 1])[j]) == oracle_round(bj, F32, "rz", "inf", False)
        assert int(ubits(out[n + 2])[j]) == oracle_round(bj, F16, "rne")


def round_scaled_suite(generic, m, e):
    return tuple(
        rounding.round_scaled(m, e, f, mode, overflow=ov, signed_zero=sz) for f, mode, ov, sz in ROUND_VARIANTS
    )


@HYP
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.integers(-(1 << 62) + 1, (1 << 62) - 1),
                st.integers(-3000, 3000),
                st.sampled_from([0, 1, -1, 3, (1 << 61) + 1]),
            ),
            st.one_of(st.integers(-300, 200), st.integers(-(1 << 40), 1 << 40)),
        ),
        min_size=N,
        max_size=N,
    )
)
def test_round_scaled_three_ways_and_oracle(pairs):
    m = np.array([p[0] for p in pairs], np.int64)
    e = np.array([p[1] for p in pairs], np.int64)
    # round_scaled has no fast path: "fast" and "generic" are the same numpy call; JAX must agree
    out = three_ways(round_scaled_suite, m, e)
    for i, (f, mode, ov, sz) in enumerate(ROUND_VARIANTS):
        for j, (mj, ej) in enumerate(pairs):
            if abs(ej) > 4000:  # beyond any format: overflow or zero, by sign
                q = Fraction(mj) * (Fraction(2) ** 4000 if ej > 0 else Fraction(1, 2**4000))
            else:
                q = Fraction(mj) * Fraction(2) ** ej
            want = round_fraction(q, f, mode, negative_zero=mj < 0)
            if ov == "inf" and (want & (f.sign_mask - 1)) == f.max_finite_bits and abs(q) >= 2 ** (f.emax + 1):
                want = (want & f.sign_mask) | f.inf_bits
            if not sz and (want & (f.sign_mask - 1)) == 0:
                want = 0
            assert int(ubits(out[i])[j]) == want, (f.name, mode, ov, sz, mj, ej)


def widen_suite(generic, x, h):
    return (
        rounding.f32_to_f64(x, generic=generic),
        rounding.f32_to_f16(x, generic=generic),
        rounding.f16_to_f32(h, generic=generic),
        ieee32.cvt_f32_to_f16(x, generic=generic),
        ieee32.cvt_f16_to_f32(h, generic=generic),
        ieee32.flush_subnormals(x),
    )


@HYP
@given(st.lists(f32_bits(), min_size=N, max_size=N), st.lists(st.integers(0, 0xFFFF), min_size=N, max_size=N))
def test_conversions_three_ways_and_oracle(xb, hb):
    x = f32_array(xb)
    h = np.array(hb, np.uint16).view(np.float16)
    d, h16, w32, cvt16, cvt32, flushed = three_ways(widen_suite, x, h)
    same_bits(cvt16, h16)
    same_bits(cvt32, w32)
    for j, b in enumerate(xb):
        v = value_of(b, F32)
        if isinstance(v, float) and math.isnan(v):
            assert ubits(d)[j] == rounding.CANONICAL_NAN_F64 and ubits(h16)[j] == 0x7FFF
        else:
            assert d[j] == v or (math.isinf(v) and d[j] == v)
            assert math.copysign(1, d[j]) == (-1 if b >> 31 else 1)
            assert int(ubits(h16)[j]) == oracle_round(int(ubits(d)[j]), F16, "rne")
        assert int(ubits(flushed)[j]) == (b & 0x80000000 if (b & 0x7F800000) == 0 else b)
    for j, b in enumerate(hb):
        v = value_of(b, F16)
        if isinstance(v, float) and math.isnan(v):
            assert ubits(w32)[j] == 0x7FFFFFFF
        else:
            assert w32[j] == v and math.copysign(1, w32[j]) == (-1 if b >> 15 else 1)


def test_widenings_exhaustive_f16_and_every_f32_subnormal_class():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = f32_array(list(range(0, 1 << 23, 97)) + [b | 0x80000000 for b in range(1, 1 << 23, 1013)] + F32_SPECIALS)
    x = np.resize(x, h.shape)
    three_ways(widen_suite, x, h)


# ------------------------------------------------------------------------------------------------ ieee32


def binary_suite(generic, x, y, target=PLAIN):
    out = []
    for ftz in (False, True):
        out += [
            ieee32.add(x, y, ftz, generic=generic, target=target),
            ieee32.sub(x, y, ftz, generic=generic, target=target),
            ieee32.mul(x, y, ftz, generic=generic, target=target),
            ieee32.div(x, y, ftz, generic=generic, target=target),
        ]
    return tuple(out) + (ieee32.fmax(x, y),)


def flush_bits(b: int) -> int:
    return b & 0x80000000 if (b & 0x7F800000) == 0 else b


def ftz_result(b: int, exact) -> int:
    """The .ftz result of an operation whose rounded result is ``b`` and exact value ``exact`` (a Fraction; a float
    for inf / NaN): the zero of its sign where the value is tiny before rounding (rounded to 24 bits with no
    exponent bound, below 2^-126: the H200's rule), else ``b``."""
    if not isinstance(exact, Fraction) or exact == 0:
        return b
    a = abs(exact)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e -= Fraction(2) ** e > a  # floor(log2 a)
    quantum = Fraction(2) ** (e - 23)
    tiny = round(a / quantum) * quantum < Fraction(2) ** -126  # round(): ties to even
    return (0x80000000 if exact < 0 else 0) if tiny else b


def exact_of(op, *bits):
    """The exact value of op on float32 bit patterns, or None where an operand is inf / NaN (or a divisor 0)."""
    vs = [value_of(b, F32) for b in bits]
    if not all(isinstance(v, Fraction) for v in vs) or (op == "div" and vs[1] == 0):
        return None
    return {"mul": lambda x, y: x * y, "div": lambda x, y: x / y, "fma": lambda x, y, z: x * y + z}[op](*vs)


def fmax_oracle(x: int, y: int) -> int:
    nx, ny = is_nan_bits(x, F32), is_nan_bits(y, F32)
    if nx and ny:
        return 0x7FFFFFFF
    if nx or ny:
        return y if nx else x
    vx, vy = value_of(x, F32), value_of(y, F32)
    if vx == vy:  # equal values: only +-0 differ in bits; +0 wins
        return x & y if vx == 0 else x
    return x if vx > vy else y


@st.composite
def f32_pairs(draw):
    x = draw(f32_bits())
    return x, draw(f32_bits(near=x))


@HYP
@given(st.lists(f32_pairs(), min_size=N, max_size=N))
def test_add_sub_mul_div_fmax_three_ways_and_oracle(pairs):
    xb, yb = [p[0] for p in pairs], [p[1] for p in pairs]
    out = three_ways(binary_suite, f32_array(xb), f32_array(yb))
    for j, (x, y) in enumerate(pairs):
        got = [int(ubits(o)[j]) for o in out]
        assert got[0] == add_ref(x, y) and got[1] == add_ref(x, y ^ 0x80000000)
        assert got[2] == mul_ref(x, y) and got[3] == div_ref(x, y)
        fx, fy = flush_bits(x), flush_bits(y)
        assert got[4] == flush_bits(add_ref(fx, fy)) and got[5] == flush_bits(add_ref(fx, fy ^ 0x80000000))
        assert got[6] == ftz_result(flush_bits(mul_ref(fx, fy)), exact_of("mul", fx, fy))
        assert got[7] == ftz_result(flush_bits(div_ref(fx, fy)), exact_of("div", fx, fy))
        assert got[8] == fmax_oracle(x, y), (hex(x), hex(y), hex(got[8]))


def fma_suite(generic, x, y, z, target=PLAIN):
    return (
        ieee32.fma(x, y, z, generic=generic, target=target),
        ieee32.fma(x, y, z, True, generic=generic, target=target),
    )


@st.composite
def fma_triples(draw):
    """z near -x*y (cancellation down to the last bits, ties) or anything."""
    x = draw(f32_bits())
    y = draw(f32_bits(near=x))
    with np.errstate(all="ignore"):
        p = f32_array([x]).astype(np.float64) * f32_array([y]).astype(np.float64)
        zb = int((-p).astype(np.float32).view(np.uint32)[0])
    if draw(st.booleans()) and np.isfinite(p[0]) and p[0] != 0:
        z = (zb + draw(st.integers(-2, 2))) & 0xFFFFFFFF
    else:
        z = draw(f32_bits(near=x))
    return x, y, z


@HYP
@given(st.lists(fma_triples(), min_size=N, max_size=N))
def test_fma_three_ways_and_oracle(triples):
    xb, yb, zb = ([t[i] for t in triples] for i in range(3))
    fused, fused_ftz = three_ways(fma_suite, f32_array(xb), f32_array(yb), f32_array(zb))
    for j, (x, y, z) in enumerate(triples):
        assert int(ubits(fused)[j]) == fma_ref(x, y, z), (hex(x), hex(y), hex(z))
        fx, fy, fz = flush_bits(x), flush_bits(y), flush_bits(z)
        assert int(ubits(fused_ftz)[j]) == ftz_result(flush_bits(fma_ref(fx, fy, fz)), exact_of("fma", fx, fy, fz))


# operands whose exact result lies just below 2^-126 and rounds up to it (or just not): x, y, z, and whether the
# product, quotient and fma are tiny before rounding. 2^-126 (1 - 2^-24) is tiny (24 bits hold it: the H200
# flushes it, silicon probe floating/mul_rn_ftz_sat_f32); so is (2 - 2^-23) 2^-126 / 2 = 2^-126 - 2^-150
EDGES = [
    (0x00800000, 0x3F7FFFFF, 0x00000000),  # 2^-126 * (1 - 2^-24): tiny, rounds to 2^-126
    (0xBF7FFFFF, 0x00800000, 0x80000000),  # its negative
    (0x00FFFFFF, 0x40000000, 0x00000000),  # (2 - 2^-23) 2^-126 / 2: tiny, rounds to 2^-126 (ties to even)
    (0x00800000, 0x3F800000, 0x00000000),  # 2^-126 exactly: not tiny
    (0x00800001, 0x3F7FFFFF, 0x00000000),  # 2^-126 (1 + 2^-23)(1 - 2^-24): above 2^-126, not tiny
    (0x00800000, 0x3F7FFFFF, 0x00000001),  # a subnormal addend, flushed: as the first
    (0x3F800000, 0x00800000, 0x80000001),  # 2^-126 plus a flushed -2^-149: not tiny
]


def test_ftz_flushes_results_tiny_before_rounding():
    x, y, z = (f32_array([e[i] for e in EDGES]) for i in range(3))
    out = three_ways(binary_suite, x, y)
    fused_ftz = three_ways(fma_suite, x, y, z)[1]
    for j, (a, b, c) in enumerate(EDGES):
        fa, fb, fc = flush_bits(a), flush_bits(b), flush_bits(c)
        assert int(ubits(out[6])[j]) == ftz_result(mul_ref(fa, fb), exact_of("mul", fa, fb)), (hex(a), hex(b))
        assert int(ubits(out[7])[j]) == ftz_result(div_ref(fa, fb), exact_of("div", fa, fb)), (hex(a), hex(b))
        want = ftz_result(fma_ref(fa, fb, fc), exact_of("fma", fa, fb, fc))
        assert int(ubits(fused_ftz)[j]) == want, (hex(a), hex(b), hex(c))
    assert [int(ubits(out[6])[j]) for j in (0, 1, 3)] == [0, 0x80000000, 0x00800000]  # mul: flushed twice, kept
    assert int(ubits(out[7])[2]) == 0 and int(ubits(fused_ftz)[5]) == 0  # div, fma: flushed


def ieee_suite(generic, x, y, z, target=PLAIN):
    return binary_suite(generic, x, y, target) + fma_suite(generic, x, y, z, target)


NATIVE = Target(native_conversions=True)  # the form the JAX engine traces for a GPU


@HYP
@given(st.lists(fma_triples(), min_size=N, max_size=N))
def test_native_conversion_form_equals_the_integer_form_on_numpy(triples):
    """Target.native_conversions (the form the JAX engine traces for a GPU: the backend's own f32 <-> f64
    conversions) run on numpy, which is IEEE: the same bits as the integer conversions."""
    args = [f32_array([t[i] for t in triples]) for i in range(3)]
    plain = ieee_suite(True, *args)
    native = ieee_suite(True, *args, target=NATIVE)
    for i, (a, b) in enumerate(zip(native, plain)):
        same_bits(a, b, f"ieee_suite[{i}] native vs integer conversions")


def raw_triples(rng, n):
    """n (x, y, z) float32 triples of raw bits for the GPU check: any pattern, subnormals, specials, mid-range; y
    within 30 binades of x; z half the time -x*y rounded and nudged by up to 2 ulps (cancellation, ties)."""
    kind = rng.integers(0, 4, n)
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    sub = (rng.integers(0, 2, n, dtype=np.uint32) << 31) | rng.integers(1, 1 << 23, n, dtype=np.uint32)
    x = np.where(kind == 1, sub, x)
    x = np.where(
        kind == 2, np.array(F32_SPECIALS, np.uint64).astype(np.uint32)[rng.integers(0, len(F32_SPECIALS), n)], x
    )
    mid = (
        (rng.integers(0, 2, n, dtype=np.uint32) << 31)
        | (rng.integers(100, 155, n, dtype=np.uint32) << 23)
        | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    )
    x = np.where(kind == 3, mid, x)
    field = np.clip(((x >> 23) & 0xFF).astype(np.int64) + rng.integers(-30, 31, n), 0, 254).astype(np.uint32)
    y = (rng.integers(0, 2, n, dtype=np.uint32) << 31) | (field << 23) | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    xf, yf = x.view(np.float32), y.view(np.float32)
    with np.errstate(all="ignore"):
        zc = (-(xf.astype(np.float64) * yf.astype(np.float64))).astype(np.float32).view(np.uint32)
    zc = (zc.astype(np.int64) + rng.integers(-2, 3, n)).astype(np.uint64).astype(np.uint32)
    z = np.where(rng.integers(0, 2, n) == 1, zc, rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32))
    return xf, yf, z.view(np.float32)


@pytest.mark.gpu
def test_native_conversions_on_the_gpu_equal_the_numpy_fast_path():
    """The form the JAX engine traces for a GPU (Target.native_conversions: XLA's own f32 <-> f64 conversions, which
    keep subnormals there) against the numpy fast path, jitted on the GPU, on 2^16 raw-bit triples."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"jax runs on {jax.default_backend()!r}, not a GPU: install jax[cuda]")
    x, y, z = raw_triples(np.random.default_rng(7), 1 << 16)

    def traced(*a):
        return ieee_suite(True, *a, target=NATIVE)

    with enable_x64():
        on_gpu = jax.jit(traced)(*[jnp.asarray(a) for a in (x, y, z)])
    for i, (g, f) in enumerate(zip(on_gpu, ieee_suite(False, x, y, z))):
        same_bits(np.asarray(g), f, f"ieee_suite[{i}] GPU native conversions vs numpy fast path")


def test_fma_double_rounding_case_and_signed_zeros_three_ways():
    # x*y = 2^25 + 2^14 + 2^12 + 2 lies halfway between two floats; + 2^-30 must round up (adding in float64 first
    # would lose the 2^-30 and tie to even, down); then -0 * 1 + -0 = -0 and 1 * 1 - 1 = +0
    x = np.float32([2**13 + 1, -(2**13 + 1), -0.0, 1])
    y = np.float32([2**12 + 2, 2**12 + 2, 1, 1])
    z = np.float32([2.0**-30, -(2.0**-30), -0.0, -1])
    fused, _ = three_ways(fma_suite, x, y, z)
    want = np.float32(2**25 + 2**14 + 2**12 + 4)
    assert list(ubits(fused)) == [int(ubits(want)), int(ubits(-want)), 0x80000000, 0]


def f16_suite(generic, a, b):
    return (ieee32.mul_f16(a, b, generic=generic),)


def mul16_oracle(a: int, b: int) -> int:
    va, vb = value_of(a, F16), value_of(b, F16)
    neg = bool((a ^ b) >> 15)
    if isinstance(va, float) or isinstance(vb, float):
        fa = float(va) if isinstance(va, float) else (float(va) or (-0.0 if a >> 15 else 0.0))
        fb = float(vb) if isinstance(vb, float) else (float(vb) or (-0.0 if b >> 15 else 0.0))
        p = fa * fb
        return 0x7FFF if math.isnan(p) else (0xFC00 if neg else 0x7C00)
    return round_fraction(va * vb, F16, "rne", negative_zero=neg)


@HYP
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)), min_size=N, max_size=N))
def test_mul_f16_three_ways_and_oracle(pairs):
    a = np.array([p[0] for p in pairs], np.uint16).view(np.float16)
    b = np.array([p[1] for p in pairs], np.uint16).view(np.float16)
    (r,) = three_ways(f16_suite, a, b)
    for j, (x, y) in enumerate(pairs):
        assert int(ubits(r)[j]) == mul16_oracle(x, y), (hex(x), hex(y))


def test_mul_f16_every_pattern_against_a_permutation():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h2 = np.random.default_rng(3).permutation(h)
    three_ways(f16_suite, h, h2)


def reduce_suite(generic, x):
    return (ieee32.fmax_reduce(x, -1), ieee32.fmax_reduce(x, 0))


@HYP
@given(st.lists(f32_bits(), min_size=N, max_size=N), st.integers(0, 7))
def test_fmax_reduce_three_ways_and_oracle(xb, nan_row):
    x = f32_array(xb).reshape(8, 4)
    x[nan_row] = np.nan  # an all-NaN row gives -inf
    rows, cols = three_ways(reduce_suite, x)
    bits = ubits(x)
    for r in range(8):
        want = 0xFF800000
        for b in bits[r]:
            want = fmax_oracle(want, int(b))
        assert int(ubits(rows)[r]) == (0xFF800000 if want == 0x7FFFFFFF else want)
    assert ubits(rows)[nan_row] == 0xFF800000
    empty = ieee32.fmax_reduce(np.zeros((3, 0), np.float32), -1)
    assert list(ubits(empty)) == [0xFF800000] * 3


def test_bulk_random_patterns_three_ways():
    """The ports of the old JAX-vs-numpy bulk checks: 60000 random patterns weighted toward subnormals, zeros,
    inf/NaN, near-equal pairs (cancellation) and products cancelled by z, through every suite."""
    rng = np.random.default_rng(11)

    def raw(n):
        b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        sel = rng.random(n)
        b[sel < 0.25] &= np.uint32(0x807FFFFF)  # subnormal / zero
        b[(sel > 0.25) & (sel < 0.3)] |= np.uint32(0x7F800000)  # inf / NaN
        mid = (sel > 0.3) & (sel < 0.5)
        b[mid] = (b[mid] & np.uint32(0x81FFFFFF)) | np.uint32(0x3E000000)
        b[(sel > 0.5) & (sel < 0.55)] &= np.uint32(0x80000000)  # signed zeros
        return b.view(np.float32)

    n = 60000
    x, y, z = raw(n), raw(n), raw(n)
    with np.errstate(all="ignore"):
        y[::7] = x[::7] * np.float32(1 + 2**-20)
        z[::3] = -(x[::3].astype(np.float64) * y[::3]).astype(np.float32)
    three_ways(binary_suite, x, y)
    three_ways(fma_suite, x, y, z)
    # f32 results that are subnormal: quotients, products, sums
    tiny = (rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) & np.uint32(0x83FFFFFF)).view(np.float32)
    big = (rng.integers(0, 1 << 23, n).astype(np.uint32) | np.uint32(0x4A000000)).view(np.float32)
    three_ways(binary_suite, tiny, big)
    h = rng.integers(0, 1 << 16, n).astype(np.uint16).view(np.float16)
    three_ways(widen_suite, x, h)
    three_ways(reduce_suite, x.reshape(-1, 60))
    v = rng.standard_normal(n) * 2.0 ** rng.integers(-160, 140, n)
    three_ways(rounding_f64_suite, v)


def test_validation_errors_name_the_argument_and_jit_traces():
    with pytest.raises(ValueError, match="y must be a float32 array"):
        ieee32.add(jnp.ones(2, jnp.float32), jnp.ones(2, jnp.float16))
    with pytest.raises(ValueError, match="x must be a float16"):
        ieee32.mul_f16(np.ones(2, np.float32), np.ones(2, np.float16))
    with pytest.raises(ValueError, match="v must be a float64"):
        rounding.f64_to_f32(np.ones(2, np.float32))
    if not jax.config.jax_enable_x64:  # 64-bit types are needed: a clear error, not 32-bit bits
        with pytest.raises(RuntimeError, match="enable_x64"):
            jax.jit(ieee32.add)(jnp.ones(2, jnp.float32), jnp.ones(2, jnp.float32))
    with enable_x64():  # broadcasting, 0-d operands, numpy and JAX operands mixed: a JAX result
        r = jax.jit(lambda a: ieee32.fma(a, np.float32(2), np.ones((3, 1), np.float32)))(jnp.ones(4, jnp.float32))
    assert r.shape == (3, 4) and np.all(np.asarray(r) == 3)


# ------------------------------------------------------------------------------------------------ sfu


def synthetic_model(rng, params):
    """An Ex2Model with made-up tables (the lookup is under test, not the values)."""
    base = (np.uint32(0x3F800000) + (np.arange(sfu.TABLE_SIZE, dtype=np.uint32) >> 1)).astype(np.int64)
    pos = (base + rng.integers(-2, 3, sfu.TABLE_SIZE)).astype(np.uint32)
    neg = (base - (np.arange(sfu.TABLE_SIZE) >> 1) // 2 + rng.integers(-2, 3, sfu.TABLE_SIZE)).astype(np.uint32)
    return sfu.Ex2Model(pos, neg if params.get("neg_mode") == "signmag" else None, params)


def ex2_inputs(rng, n):
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x[: n // 3] = -rng.exponential(20, n // 3).astype(np.float32)
    x[n // 3 : n // 2] = rng.uniform(-300, 300, n // 2 - n // 3).astype(np.float32)
    x[n // 2 : n // 2 + n // 10] = (
        rng.integers(0, 1 << 23, n // 10).astype(np.uint32) | (rng.integers(0, 2, n // 10).astype(np.uint32) << 31)
    ).view(np.float32)
    special = np.float32(
        [
            np.nan,
            -np.nan,
            np.inf,
            -np.inf,
            0,
            -0.0,
            255,
            -255,
            128,
            -126,
            -127,
            127.99,
            1e-45,
            -1e-45,
            2.0**-126,
            -(2.0**-30),
        ]
    )
    x[-len(special) :] = special
    return x


def jit_model(model, x, pass_tables: bool):
    """model.bits under jit: with the tables passed in as arguments, or read from the model (constants)."""
    with enable_x64():
        xb = jnp.asarray(x.view(np.uint32))
        if pass_tables:
            return np.asarray(jax.jit(lambda b, t: model.bits(b, t))(xb, model.arrays(np)))
        return np.asarray(jax.jit(model.bits)(xb))


@pytest.mark.parametrize(
    "neg_mode,rounding_,nan_mode",
    [("twos", "rz", "const"), ("twos", "rd", "quiet"), ("signmag", "ru", "const"), ("signmag", "rn", "quiet")],
)
def test_ex2_model_every_variant_jax_equals_numpy(neg_mode, rounding_, nan_mode):
    rng = np.random.default_rng(16)
    model = synthetic_model(
        rng,
        {
            "neg_mode": neg_mode,
            "rounding": rounding_,
            "nan_mode": nan_mode,
            "underflow_bits": 5,
            "overflow_bits": 0x7F7FFFFF,
            "ninf_bits": 3,
        },
    )
    x = ex2_inputs(rng, 30000)
    closure = (neg_mode, rounding_) == ("twos", "rz")  # one variant reads the model's own (constant) tables
    same_bits(jit_model(model, x, pass_tables=not closure), model.bits(x.view(np.uint32)))


@pytest.fixture(scope="module")
def synthetic_rcp():
    rng = np.random.default_rng(4)
    table = (
        np.uint32(0x3F000000)
        + (np.arange(sfu.TABLE_SIZE, dtype=np.uint32) >> 1)
        + rng.integers(0, 3, sfu.TABLE_SIZE).astype(np.uint32)
    )
    return sfu.RcpModel(table, {"nan_mode": "quiet", "underflow_pos_bits": 5, "zero_neg_bits": 6})


@settings(max_examples=15, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 0xFFFFFFFF), st.sampled_from(F32_SPECIALS)), min_size=256, max_size=256))
def test_rcp_model_jax_equals_numpy_on_raw_bits(synthetic_rcp, xb):
    x = f32_array(xb)
    same_bits(jit_model(synthetic_rcp, x, pass_tables=True), synthetic_rcp.bits(x.view(np.uint32)))


def test_public_ex2_rcp_with_the_shipped_tables_numpy_scalars_and_tables_passed_in():
    if sfu.load_tables("sm_90") is None:
        pytest.skip("no sm_90 SFU tables shipped or cached")
    rng = np.random.default_rng(17)
    x = ex2_inputs(rng, 100000).reshape(100, 1000)
    with enable_x64():
        tables = sfu.table_arrays("sm_90")

        def bound(a, t):
            return sfu.ex2(a, arch="sm_90", target=Target().with_tables("sm_90", "ex2", t))

        got = jax.jit(bound)(jnp.asarray(x), tables)
        got_rcp = jax.jit(sfu.rcp)(jnp.asarray(x))
    assert isinstance(got, jax.Array) and got.dtype == jnp.float32
    same_bits(np.asarray(got), sfu.ex2(x))
    same_bits(np.asarray(got_rcp), sfu.rcp(x))
    s = sfu.ex2(np.float32(-0.25))
    assert isinstance(s, np.float32) and ubits(np.float32(s)) == ubits(sfu.ex2(np.float32([-0.25])))[0]


@pytest.fixture
def no_tables(monkeypatch):
    monkeypatch.setattr(sfu, "load_tables", lambda arch="sm_90": None)


@pytest.mark.parametrize(
    "hard_ulps,n", [(sfu.HARD_ULPS, 40000), (1 << 27, 150), (1 << 27, 1000)], ids=["natural", "few-hard", "all-hard"]
)
def test_fallback_ex2_jax_equals_numpy(no_tables, monkeypatch, hard_ulps, n):
    """The correctly rounded fallback: float64 exp2 plus the host for the cases near a rounding midpoint (forcing
    every case 'hard' takes the compacted path (150 < HARD_SLOTS) and the whole-array path)."""
    monkeypatch.setattr(sfu, "HARD_ULPS", hard_ulps)
    rng = np.random.default_rng(18)
    x = ex2_inputs(rng, n)
    with enable_x64():
        got = jax.jit(lambda a: sfu.ex2(a, arch="sm_90"))(jnp.asarray(x))
    same_bits(np.asarray(got), sfu.ex2(x))


def test_fallback_rcp_jax_equals_numpy(no_tables):
    rng = np.random.default_rng(19)
    x = ex2_inputs(rng, 20000)
    with enable_x64():
        got = jax.jit(lambda a: sfu.rcp(a, arch="sm_90"))(jnp.asarray(x))
    same_bits(np.asarray(got), sfu.rcp(x))


def test_native_conversions_only_on_gpus_unless_switched_off(monkeypatch):
    """jax_target.native_conversions, the one decision both JAX paths (the scan's steps, the fused kernel's
    epilogue) take before tracing for a Target with native conversions: every device a GPU, and the option on
    (its default from $FLASHSIM_JAX_IEEE_CVT)."""
    from types import SimpleNamespace

    from flashsim.emulator.jax_target import native_conversions
    from flashsim.settings import EngineOptions

    gpu, cpu = SimpleNamespace(platform="gpu"), SimpleNamespace(platform="cpu")
    on, off = EngineOptions(), EngineOptions(jax_native_conversions=False)
    assert native_conversions([gpu, gpu], on) and not native_conversions([gpu, cpu], on)
    assert not native_conversions([cpu], on) and not native_conversions([gpu], off)
    monkeypatch.setenv("FLASHSIM_JAX_IEEE_CVT", "0")
    assert not native_conversions([gpu], EngineOptions.from_environment())
