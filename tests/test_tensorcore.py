"""flashsim.mma against the Fraction oracle (numerics.reference.mma_ref), hand-made cases with known answers,
and the public contract (shapes, dtypes, batching, errors)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.numerics import tensorcore as tc
from flashsim.numerics.formats import BF16, F16, F32
from flashsim.numerics.reference import mma_ref, mma_ref_element

bf16 = ml_dtypes.bfloat16
TYPES = [(np.float16, np.float32), (np.float16, np.float16), (bf16, np.float32)]
TYPE_IDS = ["f32.f16.f16.f32", "f16.f16.f16.f16", "f32.bf16.bf16.f32"]


def bits(x):
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint16)


def random_bits(rng, shape, dtype):
    if np.dtype(dtype) == np.float32:
        return rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16).view(dtype)


def spread(rng, shape, dtype, lo, hi):
    return (rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi, shape))).astype(dtype)


# ------------------------------------------------------------------------------------- against the oracle


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("types", TYPES, ids=TYPE_IDS)
def test_full_mmas_match_oracle(types, arch):
    """Whole 16x16x16 mmas in one batch (every lane position, several chunks) vs the oracle."""
    adt, cdt = types
    rng = np.random.default_rng(hash((str(adt), str(cdt), arch)) & 0xFFFF)
    lo = -60 if adt is bf16 else -12
    a = np.stack([random_bits(rng, (16, 16), adt), spread(rng, (16, 16), adt, lo, 4)])
    b = np.stack([random_bits(rng, (16, 8), adt), spread(rng, (16, 8), adt, lo, 4)])
    c = np.stack([random_bits(rng, (16, 8), cdt), spread(rng, (16, 8), cdt, -20, 2)])
    d = flashsim.mma(a, b, c, arch=arch)
    for t in range(len(a)):
        np.testing.assert_array_equal(bits(d[t]), bits(mma_ref(a[t], b[t], c[t], arch)))


@st.composite
def operand_bits(draw, fmt, n):
    """n raw bit patterns of fmt: fully random, clustered around one exponent, or special values."""
    kind = draw(st.sampled_from(["random", "cluster", "cluster", "tiny"]))
    if kind == "random":
        return draw(st.lists(st.integers(0, (1 << fmt.bits) - 1), min_size=n, max_size=n))
    if kind == "tiny":  # subnormals and the smallest normals
        top = fmt.exp_field_max
        lo_field, hi_field = 0, min(3, top - 1)
    else:
        center = draw(st.integers(1, fmt.exp_field_max - 1))
        width = draw(st.integers(0, 6))
        lo_field, hi_field = max(0, center - width), min(fmt.exp_field_max - 1, center + width)
    specials = [0, fmt.sign_mask, fmt.inf_bits, fmt.inf_bits | fmt.sign_mask, fmt.canonical_nan, 1, fmt.max_finite_bits]
    band = st.builds(
        lambda s, e, m: (s << (fmt.bits - 1)) | (e << fmt.frac_bits) | m,
        st.integers(0, 1),
        st.integers(lo_field, hi_field),
        st.integers(0, (1 << fmt.frac_bits) - 1),
    )
    zero = st.sampled_from([0, fmt.sign_mask])
    special = st.sampled_from(specials)
    # mostly the band, some zeros, a few specials
    elem = st.one_of(band, band, band, band, band, zero, special)
    return draw(st.lists(elem, min_size=n, max_size=n))


def _check_elements(adt, cdt, arch, triples):
    """Put up to 8 (row, column, c) triples on the diagonal of one mma and compare d[t, t] with the oracle."""
    fin = BF16 if adt is bf16 else F16
    fc = F32 if cdt is np.float32 else F16
    a = np.zeros((16, 16), np.uint16)
    b = np.zeros((16, 8), np.uint16)
    c = np.zeros((16, 8), fc.uint)
    for t, (row, col, cb) in enumerate(triples):
        a[2 * t] = row  # rows 0, 2, ..., 14: both row groups of the fragment layout
        b[:, t] = col
        c[2 * t, t] = cb
    d = bits(flashsim.mma(a.view(fin.dtype), b.view(fin.dtype), c.view(fc.dtype), arch=arch))
    for t, (row, col, cb) in enumerate(triples):
        want = mma_ref_element(row, col, cb, fin, fc, arch)
        assert int(d[2 * t, t]) == want, (t, hex(int(d[2 * t, t])), hex(want))


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fmts(types):
    adt, cdt = types
    return (BF16 if adt is bf16 else F16), (F32 if cdt is np.float32 else F16)


def numpy_operand_bits(rng, fmt, shape, kind, center, width, p_zero, p_special):
    """Raw bits of fmt (int64): 'random' patterns, a 'cluster' of exponent fields around center, or 'tiny' numbers
    (subnormals and the smallest normals); then zeros of either sign and special values sprinkled in. Shared with
    test_tensorcore_engines.py."""
    if kind == "random":
        out = rng.integers(0, 1 << fmt.bits, shape, dtype=np.int64)
    else:
        lo, hi = (0, 3) if kind == "tiny" else (max(0, center - width), min(fmt.exp_field_max - 1, center + width))
        field = rng.integers(lo, hi + 1, shape)
        out = (
            (rng.integers(0, 2, shape) << (fmt.bits - 1))
            | (field << fmt.frac_bits)
            | rng.integers(0, 1 << fmt.frac_bits, shape)
        )
    specials = np.array(
        [
            fmt.inf_bits,
            fmt.inf_bits | fmt.sign_mask,
            fmt.canonical_nan,
            1,
            fmt.max_finite_bits,
            fmt.max_finite_bits | fmt.sign_mask,
        ]
    )
    u = rng.random(shape)
    out = np.where(u < p_zero, rng.integers(0, 2, shape) << (fmt.bits - 1), out)
    out = np.where(u > 1 - p_special, specials[rng.integers(0, len(specials), shape)], out)
    return out.astype(np.int64)


@st.composite
def element_batches(draw, fin, fc):
    """8 (row, column, c) triples generated by numpy from hypothesis-drawn parameters (fast to draw)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "cluster", "cluster", "tiny", "zero_exponent"]))
    center = draw(st.integers(1, fin.exp_field_max - 1))
    if kind == "zero_exponent":  # products whose exponents straddle the zero exponent (f32: -133, f16: -21)
        e_zero = -133 if fc is F32 else -21
        center = max(1, e_zero // 2 + fin.bias + draw(st.integers(-3, 3)))
        kind = "cluster"
    width = draw(st.integers(0, 8))
    p_zero = draw(st.sampled_from([0.0, 0.1, 0.5]))
    p_special = draw(st.sampled_from([0.0, 0.0, 0.02, 0.2]))
    rows = numpy_operand_bits(rng, fin, (8, 16), kind, center, width, p_zero, p_special)
    cols = numpy_operand_bits(rng, fin, (8, 16), kind, center, width, p_zero, p_special)
    c_kind = draw(st.sampled_from(["random", "cluster", "zero", "zero"]))
    c_center = draw(st.integers(1, fc.exp_field_max - 1))
    cs = numpy_operand_bits(
        rng,
        fc,
        (8,),
        "random" if c_kind == "random" else "cluster",
        c_center,
        4,
        1.0 if c_kind == "zero" else p_zero,
        p_special,
    )
    return [(rows[t], cols[t], int(cs[t])) for t in range(8)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("types", TYPES, ids=TYPE_IDS)
@SETTINGS
@given(data=st.data())
def test_elements_match_oracle_on_raw_bits(types, arch, data):
    fin, fc = _fmts(types)
    _check_elements(*types, arch, data.draw(element_batches(fin, fc)))


@pytest.mark.parametrize("types", TYPES, ids=TYPE_IDS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_element_drawn_bit_by_bit(types, data):
    """Every bit pattern drawn by hypothesis itself, so that a failure shrinks to a minimal case."""
    fin, fc = _fmts(types)
    c_bits = st.one_of(st.integers(0, (1 << fc.bits) - 1), operand_bits(fc, 1).map(lambda x: x[0]))
    triple = data.draw(st.tuples(operand_bits(fin, 16), operand_bits(fin, 16), c_bits))
    _check_elements(*types, "sm_90", [triple])


@st.composite
def cancelling(draw, fin, fc):
    """Exact cancellation (x, -x pairs), a lone product, or two products, with any c."""
    batch = draw(element_batches(fin, fc))
    mode = draw(st.sampled_from(["cancel", "one", "two"]))
    out = []
    for row, col, cb in batch:
        row, col = row.copy(), col.copy()
        if mode == "cancel":
            row[1::2], col[1::2] = row[0::2] ^ fin.sign_mask, col[0::2]
        else:
            row[1 if mode == "one" else 2 :] = 0
        out.append((row, col, cb))
    return out


@pytest.mark.parametrize("types", TYPES, ids=TYPE_IDS)
@SETTINGS
@given(data=st.data())
def test_cancellation_and_one_or_two_products(types, data):
    fin, fc = _fmts(types)
    _check_elements(*types, "sm_90", data.draw(cancelling(fin, fc)))


# ------------------------------------------------------------------------------ hand-made known answers


def one_mma(avals, bvals, c, adt=np.float16, cdt=np.float32, arch="sm_90"):
    """d[0, 0] of an mma whose row 0 of A and column 0 of B hold the given values (rest zero)."""
    a = np.zeros((16, 16), adt)
    b = np.zeros((16, 8), adt)
    a[0, : len(avals)] = np.array(avals, dtype=np.float64).astype(adt)
    b[: len(bvals), 0] = np.array(bvals, dtype=np.float64).astype(adt)
    cc = np.zeros((16, 8), cdt)
    cc[0, 0] = c
    return flashsim.mma(a, b, cc, arch=arch)[0, 0]


def test_exact_cancellation_drops_small_c():
    # 1 - 1 + 2^-30: E = 0, c is truncated at 2^-25 -> 0 (the exact answer would be 2^-30)
    assert bits(one_mma([1, 1], [1, -1], 2.0**-30)) == 0


def test_truncation_of_small_terms():
    # 1 + 8 * (1.5 * 2^-25): each product truncates to 2^-25 (F = 25) -> 1 + 2^-22, exact would be 1 + 1.5*2^-22
    d = one_mma([1.5 * 2**-12] * 8, [2**-13] * 8, 1.0)
    assert d == np.float32(1 + 2**-22)
    # sm_80: F = 24, each term truncates to 0 -> exactly 1
    assert one_mma([1.5 * 2**-12] * 8, [2**-13] * 8, 1.0, arch="sm_80") == np.float32(1.0)


def test_f32_rounds_toward_zero():
    assert bits(one_mma([1, 2**-14], [1, 2**-10], 0.0)) == 0x3F800000  # 1 + 2^-24 -> 1
    assert bits(one_mma([1, -(2**-14)], [1, 2**-11], 0.0)) == 0x3F7FFFFF  # 1 - 2^-25 -> 1 - 2^-24
    assert bits(one_mma([-1, -(2**-14)], [1, 2**-10], 0.0)) == 0xBF800000  # toward zero for negatives


def test_f16_rounds_to_nearest_even():
    h = lambda av, bv: int(bits(one_mma(av, bv, 0.0, cdt=np.float16)))
    assert h([1, 2**-11], [1, 1]) == 0x3C00  # tie -> even
    assert h([1, 2**-11, 2**-12], [1, 1, 2**-8]) == 0x3C01  # just above the tie -> up
    assert h([1, 3 * 2**-11], [1, 1]) == 0x3C02  # 1 + 3*2^-11: tie -> even (up)


def test_zero_exponent_sets_the_truncation_grid():
    # f16 accumulation, c = 0: E = e_zero (-21 on sm_90), grid 2^-46.  Eight products 2^-28 sum to 2^-25, exactly
    # half the smallest f16 subnormal; a ninth product 2^-48 would lift it above the tie, but it truncates to 0.
    av = [2.0**-14] * 8 + [2.0**-24]
    bv = [2.0**-14] * 8 + [2.0**-24]
    assert bits(one_mma(av, bv, 0.0, cdt=np.float16)) == 0x0000
    # with c = +min subnormal the grid is 2^-39 relative to E = -14 and 2^-48 still truncates: 2^-24 + 2^-25 -> tie
    # -> even = 2^-23
    assert bits(one_mma(av, bv, 2.0**-24, cdt=np.float16)) == 0x0002


def test_negative_zero_results_become_positive_zero():
    assert bits(one_mma([-0.0, 0.0], [1, -1], -0.0)) == 0
    assert bits(one_mma([1, 1], [2, -2], -0.0)) == 0
    assert bits(one_mma([-0.0], [1], -0.0, cdt=np.float16)) == 0
    assert bits(one_mma([2**-14], [-(2**-14)], 0.0)) == 0xB1800000  # -2^-28 stays negative


def test_infinities_and_nans():
    inf, nan = np.inf, np.nan
    assert bits(one_mma([inf, 1], [1, 1], 0.0)) == 0x7F800000
    assert bits(one_mma([inf, 1], [-1, 1], 5.0)) == 0xFF800000
    assert bits(one_mma([inf, inf], [1, -1], 0.0)) == 0x7FFFFFFF  # inf - inf
    assert bits(one_mma([inf], [0.0], 0.0)) == 0x7FFFFFFF  # inf * 0
    assert bits(one_mma([1], [1], nan)) == 0x7FFFFFFF
    assert bits(one_mma([1], [1], -np.inf)) == 0xFF800000
    assert bits(one_mma([inf], [1], -np.inf)) == 0x7FFFFFFF
    assert bits(one_mma([nan], [1], 0.0, cdt=np.float16)) == 0x7FFF
    assert bits(one_mma([inf], [1], 0.0, cdt=np.float16)) == 0x7C00
    # chained blocks on sm_80: an inf in block 2 meets block 1's finite result
    assert bits(one_mma([1] * 8 + [inf], [1] * 9, 0.0, arch="sm_80")) == 0x7F800000


def test_overflow():
    # f32: |sum| >= 2^128 -> inf (H200 behaviour); just below, round toward zero gives FLT_MAX
    big = float(np.finfo(np.float32).max)
    assert bits(one_mma([2.0**100], [2.0**4], big, adt=bf16)) == 0x7F800000  # FLT_MAX + 2^104 = 2^128
    assert bits(one_mma([2.0**100], [2.0**3], big, adt=bf16)) == 0x7F7FFFFF  # 2^128 - 2^103 -> FLT_MAX
    assert bits(one_mma([1.5 * 2.0**127], [3.0], 0.0, adt=bf16)) == 0x7F800000  # a product past the range
    assert bits(one_mma([-1.5 * 2.0**127], [3.0], 0.0, adt=bf16)) == 0xFF800000
    # f16: round to nearest: 65504 + 16 = 65520 -> inf, 65504 + 8 -> 65504
    assert bits(one_mma([65504, 16], [1, 1], 0.0, cdt=np.float16)) == 0x7C00
    assert bits(one_mma([65504, 8], [1, 1], 0.0, cdt=np.float16)) == 0x7BFF


def test_subnormal_inputs_keep_their_value():
    # f16 min subnormal * 1 + 0 -> 2^-24 exactly in f32
    assert one_mma([2.0**-24], [1.0], 0.0) == np.float32(2.0**-24)
    # bf16 subnormal * 2^100: exact 2^-133 * 2^100
    assert one_mma([2.0**-133], [2.0**100], 0.0, adt=bf16) == np.float32(2.0**-33)
    # bf16 products below the f32 range: RZ to an f32 subnormal or to +0
    assert bits(one_mma([2.0**-74], [2.0**-74], 0.0, adt=bf16)) == 0x00000002
    assert bits(one_mma([2.0**-80], [-(2.0**-80)], 0.0, adt=bf16)) == 0


# ----------------------------------------------------------------------------------------------- contract


def test_batch_dimensions_and_broadcast():
    rng = np.random.default_rng(7)
    a = spread(rng, (2, 3, 16, 16), np.float16, -4, 4)
    b = spread(rng, (16, 8), np.float16, -4, 4)
    c = spread(rng, (2, 3, 16, 8), np.float32, -4, 4)
    d = flashsim.mma(a, b, c)
    assert d.shape == c.shape and d.dtype == np.float32
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(bits(d[i, j]), bits(flashsim.mma(a[i, j], b, c[i, j])))
    # a single mma without batch dims; non-contiguous inputs
    at = np.ascontiguousarray(a[0, 0].T).T
    assert not at.flags.c_contiguous
    np.testing.assert_array_equal(bits(flashsim.mma(at, b, c[0, 0])), bits(d[0, 0]))
    # empty batch
    assert flashsim.mma(a[:0], b, c[:0]).shape == (0, 3, 16, 8)


def test_threads_with_specials_and_wide_bf16_match_single_calls(monkeypatch):
    """A batch split over two threads (at any size), one mma with an inf, one with bf16 exponents far apart."""
    monkeypatch.setattr(tc.fast, "_THREAD_MIN", 1)
    rng = np.random.default_rng(3)
    n = 65
    for adt, cdt in TYPES:
        a = spread(rng, (n, 16, 16), adt, -3, 3)
        b = spread(rng, (n, 16, 8), adt, -3, 3)
        c = spread(rng, (n, 16, 8), cdt, -3, 3)
        a[21, 2, 3] = np.inf
        if adt is bf16:
            a[42, 4, 4] = bf16(2.0**-120)
            b[43, 4, 4] = bf16(2.0**120)
        d = flashsim.mma(a, b, c, threads=2)
        for t in (0, 21, 42, 43, n - 1):
            np.testing.assert_array_equal(bits(d[t]), bits(mma_ref(a[t], b[t], c[t])))
        np.testing.assert_array_equal(bits(d), bits(tc.mma_chain_generic(a, b, c)))


def test_every_arch_preset_runs():
    rng = np.random.default_rng(1)
    a = spread(rng, (16, 16), np.float16, -3, 3)
    b = spread(rng, (16, 8), np.float16, -3, 3)
    c = spread(rng, (16, 8), np.float32, -3, 3)
    for arch in flashsim.ARCHS:
        np.testing.assert_array_equal(bits(flashsim.mma(a, b, c, arch=arch)), bits(mma_ref(a, b, c, arch)))


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(a=np.zeros((16, 16), np.float32)), "a must have dtype"),
        (dict(b=np.zeros((16, 8), bf16)), "b must have dtype float16"),
        (dict(c=np.zeros((16, 8), np.float64)), "c must have dtype"),
        (dict(a=np.zeros((16, 8), np.float16)), r"a must have shape \(\.\.\., 16, 16\)"),
        (dict(b=np.zeros((8, 16), np.float16)), r"b must have shape"),
        (dict(c=np.zeros((16,), np.float32)), r"c must have shape"),
        (dict(a=np.zeros((3, 16, 16), np.float16), c=np.zeros((2, 16, 8), np.float32)), "a's batch dimensions"),
        (dict(b=np.zeros((2, 16, 8), np.float16)), "b's batch dimensions"),
        (dict(a=[[0.0] * 16] * 16), "a must be a numpy array"),
        (dict(arch="sm_75"), "unknown arch"),
    ],
)
def test_bad_input(bad, match):
    args = dict(
        a=np.zeros((16, 16), np.float16), b=np.zeros((16, 8), np.float16), c=np.zeros((16, 8), np.float32), arch="sm_90"
    )
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        flashsim.mma(args["a"], args["b"], args["c"], arch=args["arch"])


def test_bf16_with_f16_accumulator_is_rejected():
    with pytest.raises(ValueError, match="no mma.sync m16n8k16 for inputs bfloat16 with accumulator float16"):
        flashsim.mma(np.zeros((16, 16), bf16), np.zeros((16, 8), bf16), np.zeros((16, 8), np.float16))


def test_mma_type_names():
    assert tc.mma_type(np.float16, np.float32) == "f32.f16.f16.f32"
    assert tc.mma_type(bf16, np.float32) == "f32.bf16.bf16.f32"
    assert math.isfinite(float(one_mma([1], [1], 0.0)))
