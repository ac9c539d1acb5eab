"""formats (decode / encode / ulp_distance) and rounding (round_float64 / round_scaled), bit-exact against
exhaustive tables and the Fraction oracle."""

from __future__ import annotations

import functools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.numerics import formats as fm
from flashsim.numerics.reference import round_fraction, value_of
from flashsim.numerics.rounding import round_float64, round_scaled

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


@pytest.mark.parametrize("fmt", [fm.F16, fm.BF16])
def test_decode_every_16_bit_pattern(fmt):
    x = ALL16.view(fmt.dtype)
    d = fm.decode(x)
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
    finite = np.isfinite(v)
    rebuilt = np.where(d.sign == 1, -1.0, 1.0) * d.significand * np.exp2(d.exponent - fmt.frac_bits)
    np.testing.assert_array_equal(rebuilt[finite], v[finite])
    assert ((d.cls == fm.NAN) == np.isnan(v)).all()
    assert ((d.cls == fm.INF) == np.isinf(v)).all()
    assert ((d.cls == fm.ZERO) == (v == 0)).all()
    assert ((d.cls == fm.SUBNORMAL) == ((v != 0) & (np.abs(v) < 2.0**fmt.emin))).all()
    assert (d.sign == (ALL16 >> 15)).all()
    # the same from raw bits
    d2 = fm.decode(ALL16, fmt)
    for a, b in zip(d, d2):
        np.testing.assert_array_equal(a, b)
    # encode inverts decode
    frac = d.significand & ((1 << fmt.frac_bits) - 1)
    frac = np.where(d.cls >= fm.INF, ALL16 & ((1 << fmt.frac_bits) - 1), frac)
    back = fm.encode(d.sign, d.exponent_field, frac, fmt)
    np.testing.assert_array_equal(back.view(np.uint16), ALL16)


def test_decode_f32():
    rng = np.random.default_rng(0)
    bits = np.concatenate(
        [
            rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32),
            np.array(
                [0, 0x80000000, 1, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00800000, 0x007FFFFF], np.uint32
            ),
        ]
    )
    x = bits.view(np.float32)
    d = fm.decode(x)
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
    finite = np.isfinite(v)
    rebuilt = np.where(d.sign == 1, -1.0, 1.0) * d.significand * np.exp2(d.exponent - 23.0)
    np.testing.assert_array_equal(rebuilt[finite], v[finite])
    assert ((d.cls == fm.NAN) == np.isnan(v)).all()
    assert fm.F32.canonical_nan == 0x7FFFFFFF and fm.F16.canonical_nan == 0x7FFF


def test_format_lookup_and_errors():
    assert fm.get_format("bf16") is fm.BF16
    assert fm.get_format(np.float32) is fm.F32
    assert fm.get_format(ml_dtypes.bfloat16) is fm.BF16
    with pytest.raises(ValueError, match="format must be one of"):
        fm.get_format("f64")
    with pytest.raises(ValueError, match="x must be a numpy array"):
        fm.decode([1.0])
    with pytest.raises(ValueError, match="exponent_field must lie in"):
        fm.encode(0, 32, 0, "f16")
    with pytest.raises(ValueError, match="fraction must lie in"):
        fm.encode(0, 1, 1 << 10, "f16")
    with pytest.raises(ValueError, match="same dtype"):
        fm.ulp_distance(np.zeros(1, np.float16), np.zeros(1, np.float32))


@functools.cache
def _ordered_table(fmt):
    """Every non-NaN value of a 16-bit format, sorted, with -0 merged into +0: the index is the ulp count."""
    with np.errstate(invalid="ignore"):
        x = ALL16.view(fmt.dtype).astype(np.float64)
    return np.unique(x[~np.isnan(x)])


@pytest.mark.parametrize("fmt", [fm.F16, fm.BF16])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_ulp_distance_counts_representable_values(fmt, data):
    table = _ordered_table(fmt)
    xb = data.draw(st.integers(0, 0xFFFF))
    yb = data.draw(st.integers(0, 0xFFFF))
    x = np.array([xb], np.uint16).view(fmt.dtype)
    y = np.array([yb], np.uint16).view(fmt.dtype)
    got = int(fm.ulp_distance(x, y)[0])
    xv, yv = float(x.astype(np.float64)[0]), float(y.astype(np.float64)[0])
    if np.isnan(xv) or np.isnan(yv):
        assert got == (0 if np.isnan(xv) and np.isnan(yv) else int(fm.NAN_DISTANCE))
    else:
        assert got == abs(int(np.searchsorted(table, xv)) - int(np.searchsorted(table, yv)))
    assert got == int(fm.ulp_distance(y, x)[0])


def test_ulp_distance_f32_neighbours():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000).astype(np.float32) * np.float32(1e-30)
    up = np.nextafter(x, np.float32(np.inf))
    assert (fm.ulp_distance(x, up) == 1).all()
    assert fm.ulp_distance(np.float32([0.0]), np.float32([-0.0]))[0] == 0
    tiny = np.float32([1e-45])
    assert fm.ulp_distance(tiny, -tiny)[0] == 2
    big = np.float32([np.finfo(np.float32).max])
    assert fm.ulp_distance(big, np.float32([np.inf]))[0] == 1


# ------------------------------------------------------------------------------------------------ rounding

FORMATS = [fm.F32, fm.F16, fm.BF16]


def _expected(q: Fraction, fmt, mode, neg_zero=False):
    return round_fraction(q, fmt, mode, negative_zero=neg_zero)


def _near_grid_float64(data, fmt):
    """A float64 at or next to a rounding boundary of fmt: a value of fmt plus 0, 1/2, 1/4 .. of its ulp, +-
    a tiny nudge, in any binade (subnormals and the overflow edge included)."""
    bits = data.draw(
        st.integers(0, (1 << fmt.bits) - 1).filter(
            lambda b: (b >> fmt.frac_bits) & fmt.exp_field_max != fmt.exp_field_max
        )
    )
    v = value_of(bits, fmt)
    field = (bits >> fmt.frac_bits) & fmt.exp_field_max
    ulp = Fraction(2) ** (max(field, 1) - fmt.bias - fmt.frac_bits)
    part = data.draw(st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)]))
    nudge = data.draw(st.sampled_from([0, 1, -1])) * ulp * Fraction(1, 1 << 20)
    sign = -1 if v < 0 else 1
    q = v + sign * (part * ulp + nudge)
    return q


@pytest.mark.parametrize("mode", ["rne", "rz"])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_round_float64_matches_oracle(fmt, mode, data):
    kind = data.draw(st.sampled_from(["raw", "grid"]))
    if kind == "raw":
        v = np.array([data.draw(st.integers(0, (1 << 64) - 1))], np.uint64).view(np.float64)
    else:
        q = _near_grid_float64(data, fmt)
        v = np.array([float(q)])
        assert Fraction(float(q)) == q  # the nudge keeps every value exact in float64
    got = int(round_float64(v, fmt, mode).view(fmt.uint)[0])
    x = float(v[0])
    if np.isnan(x):
        assert got == fmt.canonical_nan
    elif np.isinf(x):
        assert got == fmt.inf_bits | (fmt.sign_mask if x < 0 else 0)
    else:
        assert got == _expected(Fraction(x), fmt, mode, neg_zero=bool(np.signbit(x))), hex(got)


@pytest.mark.parametrize("mode", ["rne", "rz"])
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(max_examples=120, deadline=None)
@given(m=st.integers(-(1 << 62) + 1, (1 << 62) - 1), e=st.integers(-260, 140))
def test_round_scaled_matches_oracle(fmt, mode, m, e):
    got = int(round_scaled(np.array([m]), np.array([e]), fmt, mode).view(fmt.uint)[0])
    assert got == _expected(Fraction(m) * Fraction(2) ** e, fmt, mode), hex(got)


def test_rounding_known_values():
    v = np.array(
        [1 + 2**-24, 1 + 3 * 2**-24, -(1 + 2**-24), 2.0**-150, 2.0**-149 * 1.5, 2.0**128, -(2.0**128), 0.0, -0.0]
    )
    rne = round_float64(v, "f32", "rne").view(np.uint32)
    rz = round_float64(v, "f32", "rz").view(np.uint32)
    assert list(rne) == [
        0x3F800000,
        0x3F800002,
        0xBF800000,
        0x00000000,
        0x00000002,
        0x7F800000,
        0xFF800000,
        0,
        0x80000000,
    ]
    assert list(rz) == [
        0x3F800000,
        0x3F800001,
        0xBF800000,
        0x00000000,
        0x00000001,
        0x7F7FFFFF,
        0xFF7FFFFF,
        0,
        0x80000000,
    ]
    assert round_float64(np.array([np.nan]), "bf16").view(np.uint16)[0] == 0x7FFF
    with pytest.raises(ValueError, match="mode must be one of"):
        round_float64(v, "f32", "rn")
    with pytest.raises(ValueError, match="float64"):
        round_float64(np.zeros(2, np.float32), "f32")
    with pytest.raises(ValueError, match=r"\|m\| < 2\*\*62"):
        round_scaled(np.array([1 << 62]), np.array([0]), "f32")


def test_round_float64_agrees_with_numpy_rne_in_bulk():
    rng = np.random.default_rng(2)
    v = rng.integers(0, 1 << 64, 200_000, dtype=np.uint64).view(np.float64)
    v = v[np.isfinite(v)]
    with np.errstate(over="ignore"):
        want32 = v.astype(np.float32).view(np.uint32)
        small = v[np.abs(v) < 1e6]
        want16 = small.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(round_float64(v, "f32").view(np.uint32), want32)
    np.testing.assert_array_equal(round_float64(small, "f16").view(np.uint16), want16)
    want_bf = small.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(round_float64(small, "bf16").view(np.uint16), want_bf)


@pytest.mark.parametrize("dt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_fp8_to_f16_is_exact_on_every_bit_pattern(dt):
    """Every e4m3 / e5m2 value widened to f16 keeps its value and sign (NaN stays NaN), from the bit patterns
    (decoded here by hand, not through ml_dtypes), on numpy and under jax.jit alike."""
    bits = np.arange(256, dtype=np.uint8)
    ebits, mbits = (4, 3) if np.dtype(dt) == np.dtype(ml_dtypes.float8_e4m3fn) else (5, 2)
    u = bits.astype(np.int64)
    bias, field, m = (1 << (ebits - 1)) - 1, (u >> mbits) & ((1 << ebits) - 1), u & ((1 << mbits) - 1)
    want = np.where(field == 0, m, m + (1 << mbits)) * np.exp2(np.maximum(field, 1) - bias - mbits)
    want = np.where(bits >= 0x80, -want, want)
    top = field == (1 << ebits) - 1
    nan = top & (m == (1 << mbits) - 1) if ebits == 4 else top & (m != 0)
    inf = top & (m == 0) if ebits == 5 else np.zeros(256, bool)
    want = np.where(inf, np.where(bits >= 0x80, -np.inf, np.inf), want)
    got = fm.fp8_to_f16(bits.view(dt).reshape(16, 16))
    assert got.dtype == np.float16 and got.shape == (16, 16)
    got = got.ravel().astype(np.float64)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], want[~nan]) and np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))
    jax = pytest.importorskip("jax")
    jitted = jax.jit(fm.fp8_to_f16)(jax.numpy.asarray(bits.view(dt)))
    assert np.array_equal(np.asarray(jitted).view(np.uint16), fm.fp8_to_f16(bits.view(dt)).view(np.uint16))
