"""The attention variants (bf16, MQA / GQA, head dims 32-256, sliding windows, softcap, (B, N, H, d)) on the CPU:
their numerics on raw bit patterns, the mask against its definition, the emulator's invariances (bit for bit) and
its error against float64. The H200's own bits for every variant are in tests/data/attn_sm90_variants.npz
(tests/test_emulator_silicon.py replays them)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.commands.verify import make_case_inputs, variant_cases
from flashsim.emulator.kernel_math import softcap_tanh
from flashsim.emulator.reference import error_bound
from flashsim.masking import Window, key_range, key_visible
from flashsim.numerics import rounding
from flashsim.problem import prepare

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
BF16 = np.dtype(ml_dtypes.bfloat16)


# -- bf16 rounding: the numpy fast path, the generic core and ml_dtypes agree on raw bit patterns ------------------

SPECIAL_F32 = np.array(
    [
        0,
        0x80000000,
        1,
        0x807FFFFF,
        0x007FFFFF,
        0x00800000,
        0x7F7FFFFF,
        0xFF7FFFFF,
        0x7F7F8000,
        0x7F7F7FFF,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFF800001,
        0x3F808000,
        0x3F818000,
        0x3F807FFF,
        0x3F80C000,
        0x00008000,
        0x00018000,
    ],
    np.uint32,
)


def _bf16_expected(b: np.ndarray) -> np.ndarray:
    x = b.view(np.float32)
    with np.errstate(invalid="ignore"):
        out = x.astype(BF16).view(np.uint16).copy()  # ml_dtypes: round to nearest even, IEEE overflow
    out[np.isnan(x)] = 0x7FFF  # the canonical NaN NVIDIA GPUs produce
    return out


def test_bf16_rounding_on_special_and_random_bit_patterns():
    rng = np.random.default_rng(7)
    b = np.concatenate([SPECIAL_F32, rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)])
    x = b.view(np.float32)
    fast = rounding.f32_to_bf16(x).view(np.uint16)
    generic = rounding.f32_to_bf16(x, generic=True).view(np.uint16)
    assert np.array_equal(fast, generic)
    assert np.array_equal(fast, _bf16_expected(b))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bf16_rounding_property(bits):
    b = np.array([bits], np.uint32)
    assert rounding.f32_to_bf16(b.view(np.float32)).view(np.uint16)[0] == _bf16_expected(b)[0]


# -- the soft-capping tanh -----------------------------------------------------------------------------------------


def _tanh_inputs():
    rng = np.random.default_rng(3)
    mags = 2.0 ** rng.uniform(-30, 6, 100_000)
    x = (mags * rng.choice([-1.0, 1.0], mags.size)).astype(np.float32)
    return np.concatenate([x, np.float32([0.0, -0.0, 1e-45, -1e-45, 0.5, 0.55, 9.0, 20.0, 88.0, 1e30])])


def test_softcap_tanh_is_within_2_to_the_minus_21_of_tanh():
    """Absolute error bound: ex2 and rcp are within 2^-22 relative (flashsim.sfu models them), 1 - e is exact
    near 1 (Sterbenz) and rounded once elsewhere, two more roundings of 2^-24: |t - tanh| < 2^-21 is ample."""
    x = _tanh_inputs()
    t = softcap_tanh(x, "sm_90").astype(np.float64)
    err = np.abs(t - np.tanh(x.astype(np.float64)))
    assert err.max() < 2.0**-21, err.max()
    assert np.all(np.abs(t) <= 1.0)


def test_softcap_tanh_specials_and_odd_symmetry_bit_for_bit():
    x = _tanh_inputs()
    pos = softcap_tanh(np.abs(x), "sm_90").view(np.uint32)
    neg = softcap_tanh(-np.abs(x), "sm_90").view(np.uint32)
    assert np.array_equal(neg, pos | np.uint32(0x80000000))  # tanh(-y) = -tanh(y), sign bit only
    sp = softcap_tanh(np.float32([0.0, -0.0, np.inf, -np.inf, np.nan]), "sm_90")
    assert sp.view(np.uint32)[:2].tolist() == [0, 0x80000000]
    assert sp[2:4].tolist() == [1.0, -1.0] and np.isnan(sp[4])


def test_softcap_tanh_runs_the_same_on_jax():
    jnp = pytest.importorskip("jax.numpy")
    from flashsim.numerics.xp import enable_x64

    x = _tanh_inputs()[:4096]
    with enable_x64():
        j = np.asarray(softcap_tanh(jnp.asarray(x), "sm_90"))
    assert np.array_equal(j.view(np.uint32), softcap_tanh(x, "sm_90").view(np.uint32))


# -- the mask: key_visible against its definition, key_range covers it ----------------------------------------------


def _definition(i, j, nq, nk, causal, left, right):
    pos = i + nk - nq
    ok = (j < nk) & (i >= 0)
    if causal:
        ok = ok & (j <= pos)
    if left >= 0:
        ok = ok & (j >= pos - left)
    if right >= 0:
        ok = ok & (j <= pos + right)
    return ok


@settings(max_examples=200, deadline=None)
@given(
    nq=st.integers(1, 70),
    nk=st.integers(1, 70),
    causal=st.booleans(),
    left=st.integers(-1, 80),
    right=st.integers(-1, 80),
    bm=st.sampled_from([16, 32, 64]),
)
def test_mask_and_tile_range_match_the_definition(nq, nk, causal, left, right, bm):
    if causal:
        right = min(right, 0)
    window = Window.from_user((left, right), nq, nk) if (left >= 0 or (right >= 0 and not causal)) else None
    rows = np.arange(-(-nq // bm) * bm)  # the padding rows of the last block run the predicate too
    cols = np.arange(nk + 5)
    got = np.broadcast_to(key_visible(rows[:, None], cols[None, :], nq, nk, causal, window), (rows.size, cols.size))
    want = _definition(rows[:, None], cols[None, :], nq, nk, causal, left, right)
    # the query rows: exactly the definition (the padding rows past Nq, whose outputs are dropped, may differ where
    # a bound is unbounded: the kernel's Nq + Nk stands in for infinity, which only rows < Nq never reach)
    assert np.array_equal(got[:nq], want[:nq])
    first, end = key_range(np.arange(0, rows.size, bm), bm, nq, nk, causal, window)
    for blk, (f, e) in enumerate(zip(first, end)):
        keys = np.nonzero(got[blk * bm : (blk + 1) * bm].any(axis=0))[0]  # what the block's rows (all) see
        if keys.size:
            assert f <= keys.min() and keys.max() < e  # every visible key is visited
            assert f == keys.min() and e == keys.max() + 1  # and the range is tight
        else:
            assert e <= f or not got[blk * bm : (blk + 1) * bm, f:e].any()


# -- the emulator's invariances, bit for bit -------------------------------------------------------------------------


def _bits(x):
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gqa_is_mha_with_the_kv_heads_repeated(dtype):
    q, k, v = make_case_inputs("normal", 1, 8, 70, 90, 64, 1, heads_kv=2, dtype=dtype)
    kw = dict(causal=True, window_size=(30, -1), softcap=10.0)
    o1, l1 = flashsim.attention(q, k, v, **kw)
    o2, l2 = flashsim.attention(q, np.repeat(k, 4, axis=1), np.repeat(v, 4, axis=1), **kw)
    assert np.array_equal(_bits(o1), _bits(o2)) and np.array_equal(_bits(l1), _bits(l2))


def test_bnhd_is_bhnd_transposed():
    q, k, v = make_case_inputs("adversarial", 2, 4, 50, 77, 96, 2, heads_kv=2)
    t = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    o1, l1 = flashsim.attention(q, k, v, window_size=(9, 4), pv_accum="f16", check_overflow=False)
    o2, l2 = flashsim.attention(
        t(q), t(k), t(v), layout="bnhd", window_size=(9, 4), pv_accum="f16", check_overflow=False
    )
    assert o2.shape == (2, 50, 4, 96) and l2.shape == (2, 4, 50)
    assert np.array_equal(_bits(t(o2)), _bits(o1)) and np.array_equal(_bits(l2), _bits(l1))


@pytest.mark.needs("jax")
@pytest.mark.parametrize(
    "kw",
    [
        dict(dtype="bf16", causal=True, window_size=(20, 0), softcap=5.0),
        dict(dtype="f16", window_size=(3, 7), pv_accum="f16x2"),
    ],
)
def test_jax_engine_equals_numpy_on_variants(kw):
    kw = dict(kw)
    q, k, v = make_case_inputs("normal", 1, 4, 45, 70, 32, 4, heads_kv=1, dtype=kw.pop("dtype"))
    a = flashsim.attention(q, k, v, **kw)
    b = flashsim.attention(q, k, v, backend="jax", **kw)
    assert all(np.array_equal(_bits(x), _bits(y)) for x, y in zip(a, b))


def test_a_window_that_holds_no_key_gives_zero_and_plus_inf():
    q, k, v = make_case_inputs("normal", 1, 1, 100, 20, 64, 0)
    o, lse = flashsim.attention(q, k, v, window_size=(2, 2))
    pos = np.arange(100) + 20 - 100
    empty = pos + 2 < 0  # no key within 2 of the row's position
    assert empty.sum() == 78
    assert np.all(o[0, 0, empty] == 0) and np.all(np.isposinf(lse[0, 0, empty]))
    assert np.all(np.isfinite(lse[0, 0, ~empty]))


# -- against float64 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "d, dtype, acc, kw",
    [
        (32, "f16", "f32", dict(window_size=(12, 12))),
        (96, "bf16", "f32", dict(causal=True, softcap=30.0)),
        (160, "f16", "f16", dict(window_size=(-1, 40), softcap=8.0)),
        (224, "f16", "f16x2", dict(causal=True, window_size=(64, 0))),
        (256, "bf16", "f32", dict(window_size=(50, 50), layout="bnhd")),
    ],
)
def test_variants_are_within_the_derived_bound_of_float64(d, dtype, acc, kw):
    layout = kw.get("layout", "bhnd")
    q, k, v = make_case_inputs("normal", 1, 4, 90, 130, d, 5, heads_kv=2, dtype=dtype, layout=layout)
    o, lse = flashsim.attention(q, k, v, pv_accum=acc, **kw)
    o_ref, lse_ref = flashsim.reference_attention(q, k, v, **kw)
    prob = prepare(q, k, v, pv_accum=acc, **kw)
    t = (lambda x: x) if layout == "bhnd" else (lambda x: x.transpose(0, 2, 1, 3))
    v_h = np.repeat(t(v), prob.group, axis=1)
    bound = error_bound(t(o_ref), v_h, prob.nk, prob.config.kv_tile, acc, dtype)
    err = np.abs(t(o).astype(np.float64) - t(o_ref))
    assert np.all(err <= bound), float((err - bound).max())
    fin = np.isfinite(lse_ref)
    assert np.array_equal(np.isinf(lse), ~fin) and np.abs(lse[fin] - lse_ref[fin]).max() < 1e-4


# -- verify's variant set covers what the kernel must be checked on ----------------------------------------------------


def test_the_variant_cases_cover_every_option():
    cases = variant_cases("sm_90")
    shapes = [c.shape for c in cases]
    assert {s[5] for s in shapes} == set(range(32, 257, 32))  # every head dim
    assert {s[1] // s[2] for s in shapes} >= {1, 2, 8} and any(s[2] == 1 for s in shapes)  # groups; MQA
    cfgs = [c.config for c in cases]
    assert any(c.dtype == "bf16" and c.causal and c.local and s[1] != s[2] for c, s in zip(cfgs, shapes))
    assert any(c.softcap and c.pv_accum == "f16" for c in cfgs)
    assert {c.pv_accum for c in cfgs} == {"f32", "f16", "f16x2"} and any(c.layout == "bnhd" for c in cfgs)
    assert {c.kind for c in cases} >= {"normal", "adversarial", "wide"}

    # some case has rows whose window holds no key
    def has_empty_rows(c):
        b, h, hk, nq, nk, d = c.shape
        if not c.config.local:
            return False
        w = Window.from_user(c.window, nq, nk)
        vis = key_visible(np.arange(nq)[:, None], np.arange(nk)[None, :], nq, nk, c.config.causal, w)
        return not vis.any(axis=1).all()

    assert any(has_empty_rows(c) for c in cases)


def test_kernel_scalars_carry_the_group_the_strides_and_the_window():
    from flashsim.gpu.launch import kernel_scalars, output_shape

    z = lambda *s: np.zeros(s, np.float16)
    p = prepare(z(2, 50, 8, 64), z(2, 70, 2, 64), z(2, 70, 2, 64), layout="bnhd", window_size=(5, -1), softcap=4.0)
    s = kernel_scalars(p)
    assert [int(x) for x in s[:9]] == [50, 70, 4, 50 * 8 * 64, 64, 8 * 64, 70 * 2 * 64, 64, 2 * 64]
    assert float(s[9]) == 4.0 and float(s[11]) == np.float32(0.125 / 4.0)  # lse_scale = softcap; cap_scale
    assert [int(x) for x in s[12:]] == [5, 120]  # unbounded right: nq + nk
    assert output_shape(p) == (2, 50, 8, 64)


def test_verify_runs_shape_cases_with_the_variant_options(monkeypatch, tmp_path, capsys):
    """`flashsim verify --shape ... --dtype bf16 --kv-heads 2 --window ... --softcap ... --layout bnhd` on a mocked GPU
    (the emulator plays the kernel): the cases carry every option, and --save-cases writes them so that the
    silicon replay (tests/test_emulator_silicon.py) can read them back."""
    import argparse
    import json

    from flashsim.commands import verify
    from flashsim.gpu import runtime as rt

    monkeypatch.setattr(rt, "require_gpu", lambda: None)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(
        verify, "gpu_outputs", lambda q, k, v, config, **kw: verify.emulator_outputs(q, k, v, config, "sm_90", **kw)
    )
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    out = tmp_path / "cases.npz"
    argv = [
        "--shape",
        "1,4,40,70,64,causal",
        "--only",
        "--dtype",
        "bf16",
        "--kv-heads",
        "2",
        "--window=20,-1",
        "--softcap",
        "12",
        "--layout",
        "bnhd",
        "--kinds",
        "normal",
        "--save-cases",
        str(out),
    ]
    assert verify.run(parser.parse_args(argv)) == 0
    assert "1x4x40x70x64 kv2 bf16 causal win[20, 0] cap12 bnhd f32 normal s0" in capsys.readouterr().out
    with np.load(out) as z:
        meta = json.loads(str(z["c0_meta"]))
    case = verify.case_of_meta(meta)
    assert case.shape == (1, 4, 2, 40, 70, 64) and case.window == (20, 0) and case.softcap == 12.0
    assert case.config.dtype == "bf16" and case.config.local and case.config.layout == "bnhd"


def test_verify_variant_options_need_shape_cases():
    import argparse

    from flashsim.commands import verify

    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    with pytest.raises(ValueError, match="apply to --shape cases"):
        verify.check_arguments(parser.parse_args(["--dtype", "bf16"]))
    with pytest.raises(ValueError, match="window_size values must be >= -1"):
        verify.check_arguments(parser.parse_args(["--shape", "1,1,8,8,64", "--window=-3,1"]))
