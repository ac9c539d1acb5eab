"""ieee32: add, sub, mul, div, fma (.rn, optional .ftz), cvt f32<->f16 against the exact Fraction oracle on raw
bit patterns (subnormals, infinities, NaNs included)."""

from __future__ import annotations

from fractions import Fraction

import float_oracle as O
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.numerics import ieee32
from flashsim.numerics.formats import F16, F32
from flashsim.numerics.reference import add_ref, div_ref, fma_ref, mul_ref, round_fraction, value_of

SPECIALS = [
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
]


@st.composite
def f32_bits(draw, near=None):
    """Raw float32 bits: anything, a special, a subnormal, or a number whose exponent is near ``near``'s."""
    kind = draw(
        st.sampled_from(
            ["any", "special", "subnormal", "near", "near", "near"]
            if near is not None
            else ["any", "any", "special", "subnormal", "mid"]
        )
    )
    if kind == "any":
        return draw(st.integers(0, 0xFFFFFFFF))
    if kind == "special":
        return draw(st.sampled_from(SPECIALS))
    if kind == "subnormal":
        return draw(st.integers(0, 1)) << 31 | draw(st.integers(1, 0x7FFFFF))
    if kind == "mid":
        field = draw(st.integers(100, 154))
    else:
        field = min(254, max(0, ((near >> 23) & 0xFF) + draw(st.integers(-30, 30))))
    frac = draw(st.one_of(st.integers(0, 0x7FFFFF), st.sampled_from([0, 1, 0x400000, 0x7FFFFF, 0x3FFFFF])))
    return draw(st.integers(0, 1)) << 31 | field << 23 | frac


def f32(*bits):
    return [np.array([b], np.uint32).view(np.float32) for b in bits]


def out_bits(r) -> int:
    return int(np.asarray(r).view(np.uint32).reshape(-1)[0])


def flush_bits(b: int) -> int:
    return b & 0x80000000 if (b & 0x7F800000) == 0 else b


SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(data=st.data())
def test_add_sub_mul_div(data):
    x = data.draw(f32_bits())
    y = data.draw(f32_bits(near=x))
    xa, ya = f32(x, y)
    assert out_bits(ieee32.add(xa, ya)) == add_ref(x, y)
    assert out_bits(ieee32.sub(xa, ya)) == add_ref(x, y ^ 0x80000000)
    assert out_bits(ieee32.mul(xa, ya)) == mul_ref(x, y)
    assert out_bits(ieee32.div(xa, ya)) == div_ref(x, y)


@SETTINGS
@given(data=st.data())
def test_fma_single_rounding(data):
    x = data.draw(f32_bits())
    y = data.draw(f32_bits(near=x))
    # z near the product, so that cancellation and ties happen
    xv, yv = value_of(x, F32), value_of(y, F32)
    if isinstance(xv, Fraction) and isinstance(yv, Fraction) and xv * yv != 0:
        near = round_fraction(-xv * yv, F32, "rne")
    else:
        near = x
    z = data.draw(f32_bits(near=near))
    xa, ya, za = f32(x, y, z)
    assert out_bits(ieee32.fma(xa, ya, za)) == fma_ref(x, y, z), (hex(x), hex(y), hex(z))


def test_ftz_flushes_an_fma_tiny_before_rounding():
    # 2^-126 - 2^-151 (1 + 2^-23): to nearest it rounds up to 2^-126 (the old flush after rounding kept that), but
    # with no bound on the exponent it rounds below 2^-126, so .ftz flushes it to +0, as the H200 does
    x, y, z = f32(0xB3000001, 0x00800000, 0x00800000)
    assert out_bits(ieee32.fma(x, y, z)) == 0x00800000
    assert out_bits(ieee32.fma(x, y, z, ftz=True)) == 0


@SETTINGS
@given(data=st.data())
def test_ftz_variants(data):
    x = data.draw(f32_bits())
    y = data.draw(f32_bits(near=x))
    z = data.draw(f32_bits(near=x))
    xa, ya, za = f32(x, y, z)
    fx, fy, fz = flush_bits(x), flush_bits(y), flush_bits(z)
    vx, vy, vz = (value_of(b, F32) for b in (fx, fy, fz))
    assert out_bits(ieee32.add(xa, ya, ftz=True)) == flushed(add_ref(fx, fy), lambda: vx + vy)
    assert out_bits(ieee32.mul(xa, ya, ftz=True)) == flushed(mul_ref(fx, fy), lambda: vx * vy)
    assert out_bits(ieee32.div(xa, ya, ftz=True)) == flushed(div_ref(fx, fy), lambda: vx / vy)
    assert out_bits(ieee32.fma(xa, ya, za, ftz=True)) == flushed(fma_ref(fx, fy, fz), lambda: vx * vy + vz)


def flushed(ref: int, exact) -> int:
    """The .ftz result from the IEEE one: zero of its sign where the exact value (``exact()``, called only for a
    finite result) is tiny before rounding, as the H200 flushes (tests/data/ptx_isa: flashsim.numerics.rounding's
    round_magnitude), else the rounded result with a subnormal flushed."""
    if (ref & 0x7F800000) == 0x7F800000:
        return ref
    try:
        v = exact()
    except (TypeError, ZeroDivisionError):  # an inf / nan operand, or x / 0
        return flush_bits(ref)
    if isinstance(v, Fraction) and v != 0 and O.tiny_before_rounding(v, "f32", "rne"):
        return ref & 0x80000000
    return flush_bits(ref)


def test_fma_beats_double_rounding():
    # x*y = 2^25 + 2^14 + 2^12 + 2 sits exactly halfway between two floats; + 2^-30 must round up. Adding in
    # float64 first loses the 2^-30 and then ties to even (down): the naive way is wrong here.
    x, y, z = np.float32([2**13 + 1]), np.float32([2**12 + 2]), np.float32([2.0**-30])
    want = np.float32(2**25 + 2**14 + 2**12 + 4)
    assert ieee32.fma(x, y, z)[0] == want
    naive = (x.astype(np.float64) * y + z).astype(np.float32)[0]
    assert naive != want
    # and the mirrored negative case, and the exact-zero sign rules
    assert ieee32.fma(-x, y, -z)[0] == -want
    assert out_bits(ieee32.fma(*f32(0x80000000, 0x3F800000, 0x80000000))) == 0x80000000  # -0*1 + -0 = -0
    assert out_bits(ieee32.fma(*f32(0x3F800000, 0x3F800000, 0xBF800000))) == 0  # 1*1 - 1 = +0


def test_nan_results_are_canonical_and_shapes_broadcast():
    x = np.float32([np.inf, 1.0, np.nan])
    r = ieee32.fma(x, np.float32([0.0]), np.float32([1.0]))
    assert list(r.view(np.uint32)) == [0x7FFFFFFF, 0x3F800000, 0x7FFFFFFF]
    assert ieee32.add(np.ones((3, 1), np.float32), np.ones(4, np.float32)).shape == (3, 4)
    assert ieee32.fma(np.ones((2, 1), np.float32), np.ones(3, np.float32), np.float32(1)).shape == (2, 3)
    big = np.arange(100_000, dtype=np.float32)
    exact = big.astype(np.float64) ** 2 - big  # exact in float64, then rounded once
    np.testing.assert_array_equal(ieee32.fma(big, big, -big), exact.astype(np.float32))  # spans many chunks


def test_bad_input():
    with pytest.raises(ValueError, match="x must be a float32 numpy array"):
        ieee32.add(np.ones(2), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="z must be a float32"):
        ieee32.fma(np.ones(2, np.float32), np.ones(2, np.float32), [1.0, 2.0])
    with pytest.raises(ValueError, match="h must be a float16"):
        ieee32.cvt_f16_to_f32(np.ones(2, np.float32))


def test_cvt_f16_to_f32_exhaustive():
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    r = ieee32.cvt_f16_to_f32(h).view(np.uint32)
    for b in range(0, 1 << 16, 1):
        v = value_of(b, F16)
        if isinstance(v, float) and np.isnan(v):
            assert r[b] == 0x7FFFFFFF
        elif b in (0x8000,):
            assert r[b] == 0x80000000
        else:
            assert (
                r[b] == round_fraction(v, F32, "rne")
                if not isinstance(v, float)
                else r[b] == (0x7F800000 | (0x80000000 if v < 0 else 0))
            )


@settings(max_examples=500, deadline=None)
@given(data=st.data())
def test_cvt_f32_to_f16_rounds_once_to_nearest(data):
    kind = data.draw(st.sampled_from(["any", "range", "tie"]))
    if kind == "any":
        x = data.draw(f32_bits())
    else:  # f16 range, including the subnormal range and the overflow edge, ties made on purpose
        field = data.draw(st.integers(127 - 26, 127 + 16))
        frac = data.draw(st.integers(0, 0x7FFFFF))
        if kind == "tie":
            frac = (frac & ~0x1FFF) | 0x1000
        x = data.draw(st.integers(0, 1)) << 31 | field << 23 | frac
    r = int(ieee32.cvt_f32_to_f16(*f32(x)).view(np.uint16)[0])
    v = value_of(x, F32)
    if isinstance(v, float):
        want = 0x7FFF if np.isnan(v) else (0x7C00 | (0x8000 if v < 0 else 0))
    else:
        want = round_fraction(v, F16, "rne", negative_zero=bool(x >> 31))
    assert r == want, (hex(x), hex(r), hex(want))


def test_fmax_rules_and_row_max():
    """fmaxf: a NaN operand is ignored, two NaNs give the canonical NaN, -0 < +0 in either order; the row max
    ignores NaNs and gives -inf for an all-NaN or empty row."""
    x = f32(0x7FC00000, 0xFFC00001, 0x80000000, 0x00000000, 0x80000000, 0xFF800000, 0x3F800000)
    y = f32(0x3F800000, 0x7F800001, 0x00000000, 0x80000000, 0x80000000, 0x7FC00000, 0x00000001)
    got = [out_bits(ieee32.fmax(a, b)) for a, b in zip(x, y)]
    assert got == [0x3F800000, 0x7FFFFFFF, 0, 0, 0x80000000, 0xFF800000, 0x3F800000]
    rows = np.array([[np.nan, -1.0, 2.0], [np.nan] * 3, [-0.0, 0.0, -0.0], [-0.0, -0.0, -np.inf]], np.float32)
    assert list(ieee32.fmax_reduce(rows, axis=-1).view(np.uint32)) == [0x40000000, 0xFF800000, 0, 0x80000000]
    assert list(ieee32.fmax_reduce(rows, axis=0).view(np.uint32)) == [0x80000000, 0, 0x40000000]
    assert ieee32.fmax_reduce(np.zeros((2, 0), np.float32)).view(np.uint32).tolist() == [0xFF800000] * 2


@pytest.mark.parametrize("n", [1, 3, 37])
def test_fmax_ignores_a_signalling_nan_at_any_length(n):
    """A signalling NaN operand is ignored like a quiet one, in arrays of any length (numpy's fmax turns it into a
    NaN in its scalar loop, as C's fmaxf does, and not in its vector loop: the fast path must not depend on it)."""
    x = np.full(n, 0xBFB61274, np.uint32).view(np.float32)
    for nan in (0xFFA9E94D, 0x7F800001, 0xFFC00001):
        y = np.full(n, nan, np.uint32).view(np.float32)
        assert (ieee32.fmax(x, y).view(np.uint32) == 0xBFB61274).all()
        assert (ieee32.fmax(y, x).view(np.uint32) == 0xBFB61274).all()


def _steps(op, x):
    y, out = x[0], []
    for i in range(1, x.shape[0]):
        y = op(y, x[i])
        out.append(y)
    return np.array(out).view(np.uint32)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(f32_bits(), min_size=3, max_size=3), min_size=2, max_size=14), st.booleans())
def test_add_and_fmax_chains_are_their_steps(rows, ftz):
    """add_chain / fmax_chain (a dependent chain of add.rn / max .f32 at once) give each step's bits: every input
    class, partial sums that are subnormal (with .ftz: the step-by-step route), NaNs made canonical."""
    x = np.array(rows, np.uint32).view(np.float32)
    got = ieee32.add_chain(x, ftz).view(np.uint32)
    assert np.array_equal(got, _steps(lambda a, b: ieee32.add(a, b, ftz), x))
    flushed = np.array([ieee32.flush_subnormals(r) for r in x]) if ftz else x
    assert np.array_equal(ieee32.fmax_chain(x, ftz).view(np.uint32), _steps(ieee32.fmax, flushed))


def test_an_add_chain_through_a_subnormal_partial_sum():
    """2^-125 - 1.25 * 2^-125 is subnormal: .ftz flushes it before the next add, without .ftz it is kept."""
    x = np.array([[0x01000000], [0x81200000], [0x00C00000], [0x3F800000]], np.uint32).view(np.float32)
    for ftz in (False, True):
        want = _steps(lambda a, b, ftz=ftz: ieee32.add(a, b, ftz), x)
        assert np.array_equal(ieee32.add_chain(x, ftz).view(np.uint32), want)
    assert ieee32.add_chain(x, True).view(np.uint32)[0, 0] == 0x80000000


def test_mul_f16_rounds_once_and_canonicalises_nan():
    h = np.array([0x3C01, 0x7C00, 0x0001, 0x7BFF, 0x7E01], np.uint16).view(np.float16)  # 1+2^-10, inf, tiny, max
    k = np.array([0x3C01, 0x0000, 0x3800, 0x4000, 0x3C00], np.uint16).view(np.float16)  # 1+2^-10, 0, 0.5, 2, 1
    got = ieee32.mul_f16(h, k).view(np.uint16).tolist()
    # (1+2^-10)^2 = 1 + 2^-9 + 2^-20 -> 1 + 2^-9; inf * 0 -> NaN; 2^-24 / 2 is a tie -> 0 (even); overflow -> inf
    assert got == [0x3C02, 0x7FFF, 0x0000, 0x7C00, 0x7FFF]
    with pytest.raises(ValueError, match="y must be a float16"):
        ieee32.mul_f16(h, k.astype(np.float32))
