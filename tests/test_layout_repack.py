"""The S -> P repack and its f32 -> f16 / bf16 conversion, bit for bit."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.layout import fragments as F
from flashsim.layout import repack as P

SETTINGS = settings(max_examples=60, deadline=None)


def reference_rn(x32: np.ndarray, dtype) -> np.ndarray:
    """Round f32 values to the 16-bit format by search in the sorted table of all its finite values:
    nearest, ties to the even bit pattern, past the largest finite by half an ulp or more -> inf,
    NaN -> 0x7FFF. Independent of numpy's and ml_dtypes' conversion code."""
    pats = np.arange(0x7C00 if dtype == np.float16 else 0x7F80, dtype=np.uint16)  # +0 .. max finite
    vals = pats.view(dtype).astype(np.float64)
    big = vals[-1] + (vals[-1] - vals[-2]) / 2  # overflow threshold
    with np.errstate(invalid="ignore"):
        x = x32.astype(np.float64)
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(vals, mag), 1, len(vals) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - vals[lo], vals[hi] - mag
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(pats[lo] % 2 == 0, lo, hi)))
    pick = np.where(mag <= vals[0], 0, pick)
    out = pats[pick].astype(np.uint16)
    out = np.where(mag >= big, np.uint16(0x7C00 if dtype == np.float16 else 0x7F80), out)
    out = out | np.where(np.signbit(x), np.uint16(0x8000), np.uint16(0))
    return np.where(np.isnan(x), np.uint16(0x7FFF), out).astype(np.uint16)


def interesting_f32(rng, n):
    """Random bit patterns plus values on and around the rounding midpoints of f16 and bf16."""
    raw = rng.integers(0, 1 << 32, size=n, dtype=np.uint32)
    mids = []
    for dt in (np.float16, ml_dtypes.bfloat16):
        v = rng.integers(0, 0x7C00 if dt == np.float16 else 0x7F80, size=n // 4, dtype=np.uint16).view(dt)
        a = v.astype(np.float64)
        with np.errstate(over="ignore"):  # the largest finite value's successor is inf (its midpoint: below)
            b = np.nextafter(v, np.array(np.inf, dt)).astype(np.float64)
        m = ((a + b) / 2).astype(np.float32)  # exact midpoints (representable in f32)
        mids += [m, np.nextafter(m, np.float32(0)), np.nextafter(m, np.float32(np.inf))]
    tiny = np.array(
        [
            65504,
            65519.996,
            65520,
            65536,
            5.96e-8,
            2.98e-8,
            2.9802322e-8,
            1e-9,
            0,
            np.inf,
            np.nan,
            3.3895314e38,
            3.4028235e38,
        ],
        np.float32,
    )
    x = np.concatenate([raw.view(np.float32), *mids, tiny])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_cvt_rn_is_correctly_rounded(dtype):
    x = interesting_f32(np.random.default_rng(11), 200_000)
    assert np.array_equal(P.cvt_rn(x, dtype), reference_rn(x, dtype))


@SETTINGS
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_cvt_rn_on_raw_patterns(words):
    x = np.array(words, np.uint32)
    for dt in (np.float16, ml_dtypes.bfloat16):
        assert np.array_equal(P.cvt_rn(x, dt), reference_rn(x.view(np.float32), dt))


def test_cvt_rn_x2_packs_lo_in_the_low_half():
    w = P.cvt_rn_x2(np.float32([1.0]), np.float32([-2.0]))
    assert w.tolist() == [0x3C00 | (0xC000 << 16)]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([2, 4, 8, 16, 32]), st.booleans())
def test_repack_equals_a_fragment_of_rounded_s(seed, ntiles, bf16):
    """A fragment of P = round(S), built from S's C fragments register for register, on raw bit patterns."""
    dt = ml_dtypes.bfloat16 if bf16 else np.float16
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 1 << 32, size=(2, 16, 8 * ntiles), dtype=np.uint32).view(np.float32)
    s[0] = rng.standard_normal((16, 8 * ntiles)).astype(np.float32) * 40  # one warp of ordinary scores
    p_tile = P.cvt_rn(s, dt).view(dt)
    p_regs = P.repack_s_to_p(F.c_fragment(s), dt)
    assert p_regs.shape == (2, 32, 2 * ntiles)
    assert np.array_equal(p_regs, F.a_fragment(p_tile))


def test_repack_sources_table_matches_the_fragment_maps():
    """P reg r of a slice = pack(c_lo, c_hi) of tile (r >> 1) of the pair: check with the maps' tables."""
    for r, (tile, c_lo, c_hi) in enumerate(P.repack_sources()):
        for half, ci in ((0, c_lo), (1, c_hi)):
            a_row, a_col = F.A.row[:, 2 * r + half], F.A.col[:, 2 * r + half]
            assert np.array_equal(a_row, F.C_F32.row[:, ci])
            assert np.array_equal(a_col, F.C_F32.col[:, ci] + 8 * tile)


def test_bad_input():
    with pytest.raises(ValueError, match="n even"):
        P.repack_s_to_p(np.zeros((32, 4), np.float32))
    with pytest.raises(ValueError, match="float32 values or uint32"):
        P.repack_s_to_p(np.zeros((32, 8), np.float64))
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        P.cvt_rn(np.zeros(3, np.float32), np.float32)
