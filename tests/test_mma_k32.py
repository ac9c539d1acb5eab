"""flashsim.mma for mma.sync.m16n8k32 with 8-bit inputs: s8 exact and wrapped (the H200's own bits in
tests/test_mma_k32_silicon.py), FP8 on the archs with a native FP8 block (sm_89 and sm_120, MMA-Sim's parameters)
against the ``mmasim`` oracle on raw bit patterns, sm_90's lowering onto the f16 mma against the two-block model
first fitted to the H200, the same bits from the JAX engine, and clear refusals where no model exists."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.numerics.target import PLAIN
from flashsim.numerics.tensorcore import k32_type, mma_k32

E4, E5 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
NAMES = {E4: "e4m3", E5: "e5m2", np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}
SIM_ARCH = {"sm_89": "Ada Lovelace", "sm_120": "RTX Blackwell"}
COMBOS = [(E4, E4, np.float32), (E5, E5, np.float32), (E4, E5, np.float32), (E5, E4, np.float16), (E4, E4, np.float16)]


def _oracle(arch, a, b, c):
    torch = pytest.importorskip("torch")
    sim = pytest.importorskip("mmasim.nv_ptx.sim")
    td = {E4: torch.float8_e4m3fn, E5: torch.float8_e5m2}
    cd = np.dtype(c.dtype)
    op = sim.MMA(SIM_ARCH[arch], f"m16n8k32.{NAMES[cd]}.{NAMES[a.dtype]}.{NAMES[b.dtype]}.{NAMES[cd]}")
    t = lambda x: torch.from_numpy(x.view(np.uint8).copy()).view(td[x.dtype])
    return op(t(a), t(b), torch.from_numpy(c.copy())).numpy()


def _same(x, y):
    u = np.uint16 if x.dtype == np.float16 else np.uint32
    both_nan = np.isnan(x) & np.isnan(y)
    return np.array_equal(np.where(both_nan, 0, x.view(u)), np.where(both_nan, 0, y.view(u)))


def _inputs(rng, adt, bdt, cdt, kind):
    if kind == "raw":
        a = rng.integers(0, 256, (16, 32), dtype=np.uint8).view(adt)
        b = rng.integers(0, 256, (32, 8), dtype=np.uint8).view(bdt)
    else:
        a = (rng.standard_normal((16, 32)) * 2.0 ** rng.integers(-6, 5, (16, 32))).astype(adt)
        b = (rng.standard_normal((32, 8)) * 2.0 ** rng.integers(-6, 5, (32, 8))).astype(bdt)
    c = (rng.standard_normal((16, 8)) * 2.0 ** rng.integers(-10, 10, (16, 8))).astype(cdt)
    if kind == "zero_c":
        c[:] = 0
    return a, b, c


@pytest.mark.parametrize("arch", ["sm_89", "sm_120"])
@pytest.mark.parametrize("adt, bdt, cdt", COMBOS, ids=lambda x: NAMES.get(np.dtype(x), str(x)))
def test_fp8_matches_mmasim(arch, adt, bdt, cdt):
    rng = np.random.default_rng(11)
    for kind in ("values", "raw", "zero_c") * 8:
        a, b, c = _inputs(rng, adt, bdt, cdt, kind)
        assert _same(flashsim.mma(a, b, c, arch=arch), _oracle(arch, a, b, c)), kind


@settings(max_examples=40, deadline=None)
@given(
    st.binary(min_size=16 * 32 + 32 * 8, max_size=16 * 32 + 32 * 8),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["sm_89", "sm_120"]),
    st.sampled_from(COMBOS),
)
def test_fp8_matches_mmasim_on_raw_bits(raw, cbits, arch, combo):
    adt, bdt, cdt = combo
    buf = np.frombuffer(raw, np.uint8)
    a, b = buf[:512].reshape(16, 32).view(adt), buf[512:].reshape(32, 8).view(bdt)
    c = np.full((16, 8), cbits, np.uint32).view(np.float32)
    with np.errstate(over="ignore"):  # f32 patterns past f16's range become inf, a case the oracle covers too
        c = np.where(np.isfinite(c), c, 1.0).astype(cdt)
    assert _same(flashsim.mma(a, b, c, arch=arch), _oracle(arch, a, b, c))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.large_base_example])
@given(
    st.binary(min_size=16 * 32 + 32 * 8 + 16 * 8 * 4, max_size=16 * 32 + 32 * 8 + 16 * 8 * 4),
    st.sampled_from(["sm_89", "sm_120"]),
    st.sampled_from(COMBOS),
)
def test_the_compiled_fp8_kernel_equals_the_generic_routine_on_raw_bits(raw, arch, combo):
    """numpy's fast path of a native FP8 block (tensorcore.fast.chain_k32_fast, the numba kernel with FP8 decoding)
    against the generic routine the JAX engine runs, one mma of raw bit patterns (NaN, inf, subnormals, every c, inf
    and NaN c too): bit for bit, or None where the kernel does not apply (Ada's shortened f32 results). sm_90 runs
    the f16 m16n8k16 model, whose kernel tests/test_tensorcore_engines.py checks the same way."""
    from flashsim.arch import get_arch
    from flashsim.numerics import tensorcore as T

    adt, bdt, cdt = combo
    buf = np.frombuffer(raw, np.uint8)
    a = buf[:512].reshape(16, 32).view(adt)
    b = buf[512:768].reshape(32, 8).view(bdt)
    c32 = buf[768:].copy().view(np.uint32).reshape(16, 8)
    c = c32.view(np.float32) if cdt == np.float32 else (c32 & 0xFFFF).astype(np.uint16).view(np.float16)
    spec = get_arch(arch)
    fast = T.fast.chain_k32_fast(a, b, c, spec)
    if fast is None:
        assert arch == "sm_89" and cdt == np.float32
        return
    with np.errstate(all="ignore"):
        want = T.k32._k32_fp8_generic(np, a, b, c, spec, PLAIN)
    u = np.uint16 if cdt == np.float16 else np.uint32
    assert np.array_equal(fast.view(u), want.view(u))


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_the_compiled_fp8_chain_equals_the_generic_chain(arch):
    """mma_chain_k32 on numpy over K = 128 (sm_120: one kernel call; sm_90: the lowering on whole matrices, c added
    after each k32 step) against the chain of single mmas over the same (m16, n8) tiles (sm_120: the generic
    routine; sm_90: mma_k32), e4m3 x e4m3 as FP8 P@V has it, f32 and f16 c."""
    from flashsim.arch import get_arch
    from flashsim.numerics import tensorcore as T

    rng = np.random.default_rng(5)
    spec = get_arch(arch)

    def single(a, b, c, spec):
        return T.mma_k32(a, b, c, spec) if spec.mma8_on_f16_mma else T.k32._k32_fp8_generic(np, a, b, c, spec, PLAIN)

    for cdt in (np.float32, np.float16):
        a = rng.integers(0, 256, (2, 32, 128), dtype=np.uint8).view(E4)
        b = rng.integers(0, 256, (2, 128, 16), dtype=np.uint8).view(E4)
        c = (rng.standard_normal((2, 32, 16)) * 100).astype(cdt)
        got = T.mma_chain_k32(a, b, c, arch)
        d = c
        with np.errstate(all="ignore"):
            for s in range(0, 128, 32):
                at = np.broadcast_to(a[..., s : s + 32].reshape(2, 2, 1, 16, 32), (2, 2, 2, 16, 32))
                bt = np.broadcast_to(b[..., s : s + 32, :].reshape(2, 1, 32, 2, 8).swapaxes(-3, -2), (2, 2, 2, 32, 8))
                dt = single(at, bt, d.reshape(2, 2, 16, 2, 8).swapaxes(-3, -2), spec)
                d = dt.swapaxes(-3, -2).reshape(2, 32, 16)
        u = np.uint16 if cdt == np.float16 else np.uint32
        assert np.array_equal(got.view(u), d.view(u))


def test_ada_keeps_13_fraction_bits_of_f32_results():
    rng = np.random.default_rng(2)
    a, b, c = _inputs(rng, E4, E4, np.float32, "values")
    d = flashsim.mma(a, b, c, arch="sm_89")
    fin = np.isfinite(d)
    assert np.all(d.view(np.uint32)[fin] & 0x3FF == 0)
    assert np.any(flashsim.mma(a, b, c, arch="sm_120").view(np.uint32) & 0x3FF)


def test_s8_wraps_and_batches():
    a = np.full((3, 16, 32), -128, np.int8)
    b = np.full((1, 32, 8), -128, np.int8)
    c = np.full((3, 16, 8), 2**31 - 1, np.int32)
    d = flashsim.mma(a, b, c)
    assert d.dtype == np.int32 and d.shape == (3, 16, 8)
    assert np.all(d == np.int64(32 * 128 * 128 + 2**31 - 1) - 2**32)


@pytest.mark.needs("jax")
def test_the_jax_engine_gives_the_same_bits():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (8, 16, 32), dtype=np.uint8).view(E5)
    b = rng.integers(0, 256, (8, 32, 8), dtype=np.uint8).view(E4)
    c = rng.standard_normal((8, 16, 8)).astype(np.float16)
    for arch in ("sm_89", "sm_90", "sm_120"):
        assert _same(flashsim.mma(a, b, c, arch=arch, backend="jax"), flashsim.mma(a, b, c, arch=arch))
    s8 = rng.integers(-128, 128, (4, 16, 32)).astype(np.int8), rng.integers(-128, 128, (4, 32, 8)).astype(np.int8)
    ci = rng.integers(-(2**31), 2**31, (4, 16, 8)).astype(np.int32)
    assert np.array_equal(flashsim.mma(*s8, ci, backend="jax"), flashsim.mma(*s8, ci))


@pytest.mark.parametrize("arch, match", [("sm_80", "exists from sm_89 on"), ("sm_100", "tcgen05")])
def test_archs_without_an_fp8_model_say_why(arch, match):
    a = np.zeros((16, 32), E4)
    b = np.zeros((32, 8), E4)
    with pytest.raises(ValueError, match=match):
        flashsim.mma(a, b, np.zeros((16, 8), np.float32), arch=arch)


@pytest.mark.parametrize(
    "a, b, c, match",
    [
        (
            np.zeros((16, 32), np.int8),
            np.zeros((32, 8), np.int8),
            np.zeros((16, 8), np.float32),
            "c must have dtype|no mma",
        ),
        (np.zeros((16, 32), np.int8), np.zeros((32, 8), E4), np.zeros((16, 8), np.int32), "no mma.sync m16n8k32"),
        (np.zeros((16, 16), E4), np.zeros((16, 8), E4), np.zeros((16, 8), np.float32), r"shape \(\.\.\., 16, 32\)"),
    ],
)
def test_bad_operands_are_value_errors(a, b, c, match):
    with pytest.raises(ValueError, match=match):
        flashsim.mma(a, b, c, arch="sm_120")


# sm_90's k order, the low halves of the 8-bit registers first, as the model first fitted to the H200 had it
LO = [k for k in range(32) if k % 4 < 2]
HI = [k for k in range(32) if k % 4 >= 2]


def _fitted_sm90(a, b, c, order):
    """The two-block FP8 model first fitted to the H200's captures, on the native-block routine of another arch record
    (sm_120's, with blocks of 16 and F = 25): the 32 products in ``order`` as two fused blocks from +0, then + c with
    one rounding to nearest (f32: IEEE add; f16: the exact float64 sum rounded once)."""
    import dataclasses

    from flashsim.arch import get_arch
    from flashsim.numerics import ieee32, rounding

    blocks = dataclasses.replace(get_arch("sm_120"), mma8_block_k=16, mma8_fraction_bits=25)
    with np.errstate(all="ignore"):
        d = mma_k32(a[..., order], b[..., order, :], np.zeros(c.shape, c.dtype), blocks)
        if c.dtype == np.float16:
            return rounding.f64_to_f16(d.astype(np.float64) + c.astype(np.float64))
        return ieee32.add(d, c)


def _normal_fp8(codes, dt):
    """FP8 codes with every subnormal (exponent field 0, fraction not 0) moved to the normal binade above it (the
    exponent field's lowest bit set): the fitted model and the lowering part at subnormal inputs (below)."""
    shift = 3 if np.dtype(dt) == E4 else 2
    sub = ((codes >> shift) & (0x7F >> shift) == 0) & (codes & ((1 << shift) - 1) != 0)
    return np.where(sub, codes | np.uint8(1 << shift), codes).astype(np.uint8)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.large_base_example])
@given(
    st.binary(min_size=16 * 32 + 32 * 8 + 16 * 8 * 4, max_size=16 * 32 + 32 * 8 + 16 * 8 * 4),
    st.sampled_from(COMBOS),
    st.booleans(),
)
def test_sm90_fp8_lowering_equals_the_fitted_two_block_model(raw, combo, small):
    """flashsim.mma(arch="sm_90") is ptxas's lowering onto the f16 m16n8k16 model (tensorcore.k32._k32_on_f16_mma: two
    HMMA.16816, low register halves then high, then c; SASS in tests/test_sass.py). Independently of that code, the
    FP8 block routine with the parameters first fitted to the H200 (blocks of 16 in that k order, F = 25, from +0,
    then c rounded to nearest) gives the same bits on raw bit patterns (NaN, inf, subnormals, every c) and on small
    finite values, subnormal FP8 inputs apart (the next test): the lowering is the fitted model, which reproduced
    every FP8 output of the captures."""
    adt, bdt, cdt = combo
    buf = np.frombuffer(raw, np.uint8).copy()
    if small:  # finite values of every magnitude: the sums the attention kernel makes
        buf = buf & np.uint8(0x77)
    a = _normal_fp8(buf[:512].reshape(16, 32), adt).view(adt)
    b = _normal_fp8(buf[512:768].reshape(32, 8), bdt).view(bdt)
    c32 = buf[768:].copy().view(np.uint32).reshape(16, 8)
    c = c32.view(np.float32) if cdt == np.float32 else (c32 & 0xFFFF).astype(np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        got = flashsim.mma(a, b, c, arch="sm_90")
    u = np.uint16 if cdt == np.float16 else np.uint32
    assert np.array_equal(got.view(u), _fitted_sm90(a, b, c, LO + HI).view(u))


def test_a_subnormal_fp8_input_is_exact_in_the_lowering_where_the_native_block_drops_bits():
    """Where the two models part (hypothesis found it): row 2 holds the e4m3 subnormal 2^-9 twice, times the e5m2
    2^14 and 1.25 * 2^-7, both in the second HMMA (k % 4 = 2). The native FP8 block aligns a subnormal at the
    format's minimum exponent (2^-6), so it takes the largest product's exponent as 2^8 and truncates 25 bits below
    it, dropping the 2^-18 of the small product; ptxas's lowering converts the inputs to f16 first, exactly (2^-9 is
    an f16 normal), and the f16 model keeps it. sm_90 runs the lowering (SASS: tests/test_sass.py), so flashsim.mma
    gives the exact sum 32 + 5 * 2^-18 (an f32: the independent oracle here) and the first-fitted block model, which
    the captures never put in this corner, does not."""
    a = np.zeros((16, 32), np.uint8)
    b = np.zeros((32, 8), np.uint8)
    a[2, 14] = a[2, 18] = 0x01  # e4m3 2^-9 (subnormal)
    b[14, 5], b[18, 5] = 0x74, 0x21  # e5m2 2^14 and 1.25 * 2^-7
    a, b = a.view(E4), b.view(E5)
    c = np.zeros((16, 8), np.float32)
    exact = np.float32(32 + 5 * 2.0**-18)
    assert float(exact) == 32 + 5 * 2.0**-18
    got = flashsim.mma(a, b, c, arch="sm_90")
    assert got[2, 5] == exact and np.count_nonzero(got) == 1
    assert _fitted_sm90(a, b, c, LO + HI)[2, 5] == np.float32(32 + 2.0**-16)


@pytest.mark.parametrize("adt, bdt, cdt", COMBOS, ids=lambda x: NAMES.get(np.dtype(x), str(x)))
def test_the_order_of_the_halves_matters(adt, bdt, cdt):
    """The negative check: the same two blocks with the halves swapped (k % 4 in {2, 3} first) differ from sm_90's
    model on random finite inputs, so the equality above pins the order down."""
    rng = np.random.default_rng(90)
    a = (rng.integers(0, 256, (64, 16, 32), dtype=np.uint8) & 0x77).view(adt)
    b = (rng.integers(0, 256, (64, 32, 8), dtype=np.uint8) & 0x77).view(bdt)
    c = (rng.standard_normal((64, 16, 8)) * 4).astype(cdt)
    u = np.uint16 if cdt == np.float16 else np.uint32
    got = flashsim.mma(a, b, c, arch="sm_90").view(u)
    assert np.array_equal(got, _fitted_sm90(a, b, c, LO + HI).view(u))
    assert not np.array_equal(got, _fitted_sm90(a, b, c, HI + LO).view(u))


def test_type_strings():
    assert k32_type(np.int8, np.int8, np.int32) == "s32.s8.s8.s32"
    assert k32_type(E4, E5, np.float16) == "f16.e4m3.e5m2.f16"
    with pytest.raises(ValueError):
        mma_k32(np.zeros((16, 32), np.float16), np.zeros((32, 8), np.float16), np.zeros((16, 8), np.float32))
