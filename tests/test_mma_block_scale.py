"""sm_120a's kind::f8f6f4 and block-scaled mma.sync (flashsim.mma_block_scale, flashsim.mma(kind="f8f6f4")) held bit for
bit to MMA-Sim's RTX Blackwell models (the ``mmasim`` package, tests/mmasim_block_scale.py) on every form: random and
adversarial operands (every code of every format, scales at their extremes, NaN / inf codes and scales, cancellation,
overflow, every class of c), every single product of every code pair, and a bounded hypothesis search; then one
ValueError per kind of bad input. benchmarks/experiments/block_scale_vs_mmasim/ runs a million cases per form."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.numerics import formats

pytest.importorskip("torch", reason="mmasim needs torch (pip install 'flashsim[test]')")
pytest.importorskip("mmasim.nv_ptx.sim", reason="mmasim is not installed (pip install 'flashsim[test]')")
from mmasim_block_scale import CODES, FORMS, K_OF, STYLES, mmasim_mma, operands  # noqa: E402


def run(form, a, b, c, sa, sb):
    kind, n, sf, af, bf, _ = form
    if kind == "f8f6f4":
        return flashsim.mma(a, b, c, arch="sm_120", kind="f8f6f4", a_format=af, b_format=bf)
    return flashsim.mma_block_scale(
        a, b, c, sa, sb, kind=kind, scale_vec=f"{n}X", a_format=af, b_format=bf, scale_format=sf
    )


def assert_bits_equal(form, a, b, c, sa, sb, what=""):
    d = run(form, a, b, c, sa, sb)
    ref = mmasim_mma(form, a, b, c, sa, sb)
    u = np.uint16 if c.dtype == np.float16 else np.uint32
    bad = np.argwhere(d.view(u) != ref.view(u))
    if bad.size:
        i, m, n = bad[0]
        raise AssertionError(
            f"{form} {what}: {len(bad)} of {d.size} outputs differ from mmasim; first at mma {i} ({m}, {n}): "
            f"flashsim {d.view(u)[i, m, n]:#x}, mmasim {ref.view(u)[i, m, n]:#x}\n"
            f"a row {a[i, m].tolist()}\nb col {b[i, :, n].tolist()}\nc {c[i, m, n]!r}"
            + (f"\nscales {sa[i, m].tolist()} {sb[i, :, n].tolist()}" if sa is not None else "")
        )


def form_id(form):
    kind, n, sf, af, bf, acc = form
    return f"{kind}" + (f"-{n}X-{sf}" if n else "") + f"-{af}.{bf}-{acc}"


@pytest.mark.parametrize("form", FORMS, ids=form_id)
def test_every_form_against_mmasim(form):
    """Every style of operand (tests/mmasim_block_scale.py STYLES), 6 mmas of each, bit for bit."""
    rng = np.random.default_rng(zlib.crc32(form_id(form).encode()))
    for style in STYLES:
        assert_bits_equal(form, *operands(rng, form, 6, style), what=style)


@pytest.mark.parametrize(
    "form",
    [f for f in FORMS if f[0] in ("f8f6f4", "mxf8f6f4") and f[5] == "f32"] + [f for f in FORMS if f[0] == "mxf4"],
    ids=form_id,
)
def test_every_code_pair_alone(form):
    """One product per output: every (a code, b code) pair of the two formats, as A[m, m] B[m, n] (row m of A holds
    one code at k = m, row m of B eight codes), with c zero or random and random scales near 1: each code's value,
    sign, NaN / inf and each product's rounding."""
    kind, n, sf, af, bf, acc = form
    K = K_OF[kind]
    na, nb = CODES[af], CODES[bf]
    rows_a = np.repeat(np.arange(na), nb // 8)
    rows_b = np.tile(np.arange(nb).reshape(-1, 8), (na, 1))
    pad = (-len(rows_a)) % 16
    rows_a = np.concatenate([rows_a, np.zeros(pad, int)]).reshape(-1, 16)
    rows_b = np.concatenate([rows_b, np.zeros((pad, 8), int)]).reshape(-1, 16, 8)
    B = len(rows_a)
    a = np.zeros((B, 16, K), np.uint8)
    b = np.zeros((B, K, 8), np.uint8)
    a[:, np.arange(16), np.arange(16)] = rows_a
    b[:, :16, :] = rows_b
    rng = np.random.default_rng(7)
    sa = sb = None
    if sf is not None:
        sa = rng.integers(120, 135, (B, 16, n)).astype(np.uint8)
        sb = rng.integers(120, 135, (B, n, 8)).astype(np.uint8)
    for c in (np.zeros((B, 16, 8), np.float32), rng.standard_normal((B, 16, 8)).astype(np.float32)):
        assert_bits_equal(form, a, b, c, sa, sb, what="code pairs")


def test_every_scale_pair_alone():
    """Every pair of scale codes, ue8m0 (256 x 256) and ue4m3 (128 x 128), on rows of ones: each scale's value, the
    scales' zero, subnormals and NaN, and products of scales beyond f32. Mma i takes 16 codes of scale_A (one per row)
    against 8 codes of scale_B (one per column) in the first chunk."""
    for sf, n, kind in (("ue8m0", 2, "mxf4"), ("ue4m3", 4, "mxf4nvf4")):
        form = (kind, n, sf, "e2m1", "e2m1", "f32")
        ia, ib = np.meshgrid(np.arange(CODES[sf] // 16), np.arange(CODES[sf] // 8), indexing="ij")
        ia, ib = ia.ravel(), ib.ravel()
        B = len(ia)
        one = 0x38 if sf == "ue4m3" else 127
        sa = np.full((B, 16, n), one, np.uint8)
        sb = np.full((B, n, 8), one, np.uint8)
        sa[:, :, 0] = 16 * ia[:, None] + np.arange(16)[None, :]
        sb[:, 0, :] = 8 * ib[:, None] + np.arange(8)[None, :]
        a = np.full((B, 16, 64), 2, np.uint8)  # 1.0
        b = np.full((B, 64, 8), 3, np.uint8)  # 1.5
        for c in (np.zeros((B, 16, 8), np.float32), np.full((B, 16, 8), -(2.0**-140), np.float32)):
            assert_bits_equal(form, a, b, c, sa, sb, what="scale pairs")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(FORMS), st.integers(0, 2**32 - 1), st.sampled_from(STYLES))
def test_hypothesis(form, seed, style):
    assert_bits_equal(form, *operands(np.random.default_rng(seed), form, 2, style), what=f"{style} seed {seed}")


def test_batch_broadcast():
    """One B and its scales serve a batch of A's (leading dimensions broadcast to c's)."""
    form = ("mxf4nvf4", 4, "ue4m3", "e2m1", "e2m1", "f32")
    a, b, c, sa, sb = operands(np.random.default_rng(3), form, 5, "random")
    d = flashsim.mma_block_scale(
        a, b[:1], c, sa, sb[0], kind="mxf4nvf4", scale_vec="4X", a_format="e2m1", b_format="e2m1", scale_format="ue4m3"
    )
    full = mmasim_mma(form, a, np.broadcast_to(b[:1], b.shape), c, sa, np.broadcast_to(sb[:1], sb.shape))
    assert np.array_equal(d.view(np.uint32), full.view(np.uint32))


def test_scale_folding_is_the_isa_formula():
    """Independent of mmasim: with exact inputs the result is (A * scale_A)(B * scale_B) + C rounded toward zero,
    the scales each applied to its chunk of K / n consecutive k (PTX ISA, Block Scaling for mma.sync)."""
    rng = np.random.default_rng(11)
    v = formats.code_values("e2m1")
    s8 = formats.code_values("ue8m0")
    for kind, n in (("mxf8f6f4", 1), ("mxf4", 2), ("mxf4nvf4", 4)):
        K = K_OF[kind]
        a = rng.integers(0, 16, (3, 16, K)).astype(np.uint8)
        b = rng.integers(0, 16, (3, K, 8)).astype(np.uint8)
        sa = rng.integers(124, 131, (3, 16, n)).astype(np.uint8)
        sb = rng.integers(124, 131, (3, n, 8)).astype(np.uint8)
        chunk = np.arange(K) // (K // n)
        A = v[a] * s8[sa][:, :, chunk]
        B = v[b] * s8[sb][:, chunk, :]
        exact = A @ B  # small integers times powers of two: exact in float64, and in f32
        c = np.zeros((3, 16, 8), np.float32)
        d = flashsim.mma_block_scale(
            a, b, c, sa, sb, kind=kind, scale_vec=n, a_format="e2m1", b_format="e2m1", scale_format="ue8m0"
        )
        assert np.array_equal(d, exact.astype(np.float32))


# ---- bad input: one clear ValueError each, before anything runs ---------------------------------------------------


def _ok(kind="mxf4nvf4", n=4, sf="ue4m3", af="e2m1", bf="e2m1"):
    K = K_OF[kind]
    return dict(
        a=np.zeros((16, K), np.uint8),
        b=np.zeros((K, 8), np.uint8),
        c=np.zeros((16, 8), np.float32),
        scale_a=np.zeros((16, n), np.uint8),
        scale_b=np.zeros((n, 8), np.uint8),
        kind=kind,
        scale_vec=f"{n}X",
        a_format=af,
        b_format=bf,
        scale_format=sf,
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(scale_vec="1X", scale_format="ue4m3", kind="mxf8f6f4"), "no scale_vec 1X with scale format 'ue4m3'"),
        (dict(kind="mxf4nvf4", scale_vec="2X", scale_format="ue4m3"), "no scale_vec 2X with scale format 'ue4m3'"),
        (dict(kind="mxf4", scale_vec="4X"), "kind::mxf4 has no scale_vec 4X"),
        (dict(kind="mxf9"), "kind must be one of"),
        (dict(kind="f8f6f4"), "has no block scales"),
        (dict(scale_vec="3X"), "scale_vec must be"),
        (dict(scale_format="e4m3"), "no scale_vec 4X with scale format 'e4m3'"),
        (dict(a_format="e4m3"), "a_format 'e4m3' is not an element format of kind::mxf4nvf4"),
        (dict(a=np.full((16, 64), 16, np.uint8)), r"a holds codes outside e2m1 \(0..15\): 16 at index \(0, 0\)"),
        (dict(scale_a=np.full((16, 4), 200, np.uint8)), "scale_a holds codes outside ue4m3"),
        (dict(scale_a=np.zeros((16, 2), np.uint8)), r"scale_a must have shape \(..., 16, 4\)"),
        (dict(scale_b=np.zeros((4, 16), np.uint8)), r"scale_b must have shape \(..., 4, 8\)"),
        (dict(b=np.zeros((32, 8), np.uint8)), r"b must have shape \(..., 64, 8\)"),
        (dict(a=np.zeros((16, 64), np.int8)), "a must have dtype uint8"),
        (dict(c=np.zeros((16, 8), np.float16)), "c must be a numpy float32 array"),
        (dict(scale_a=np.zeros((3, 16, 4), np.uint8)), "scale_a's batch dimensions"),
        (dict(arch="sm_90"), "no mma.sync .kind::mxf4nvf4 on sm_90"),
    ],
)
def test_bad_input(change, match):
    kw = _ok()
    if "kind" in change and change["kind"] == "mxf8f6f4":
        kw = _ok("mxf8f6f4", 1, "ue8m0", "e4m3", "e4m3")
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        flashsim.mma_block_scale(**kw)


def test_bad_input_mxf8f6f4_codes():
    kw = _ok("mxf8f6f4", 1, "ue8m0", "e3m2", "e2m3")
    kw["b"] = np.full((32, 8), 64, np.uint8)
    with pytest.raises(ValueError, match=r"b holds codes outside e2m3 \(0..63\)"):
        flashsim.mma_block_scale(**kw)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(kind="f8f6f4", a_format="e2m1", b_format="e9m9"), "b_format must be one of"),
        (dict(kind="f8f6f4", a_format="e2m1"), "needs a_format and b_format"),
        (dict(kind="mxf4", a_format="e2m1", b_format="e2m1"), "flashsim.mma_block_scale"),
        (dict(a_format="e2m1", b_format="e2m1"), "kind='f8f6f4'"),
        (dict(kind="f8f6f4", a_format="e2m1", b_format="e2m1", arch="sm_89"), "no mma.sync .kind::f8f6f4 on sm_89"),
    ],
)
def test_bad_input_f8f6f4(kw, match):
    a, b, c = np.zeros((16, 32), np.uint8), np.zeros((32, 8), np.uint8), np.zeros((16, 8), np.float32)
    kw = {"arch": "sm_120", **kw}
    with pytest.raises(ValueError, match=match):
        flashsim.mma(a, b, c, **kw)


JAX_FORMS = [
    ("f8f6f4", None, None, "e5m2", "e2m1", "f16"),
    ("mxf8f6f4", 1, "ue8m0", "e4m3", "e3m2", "f32"),
    ("mxf4nvf4", 4, "ue4m3", "e2m1", "e2m1", "f32"),
]


@pytest.mark.parametrize("form", JAX_FORMS, ids=form_id)
def test_jax_backend_gives_the_same_bits(form):
    """backend="jax": the same routine on JAX arrays (the one description, another engine), bit for bit; one form
    per branch of the model (unscaled with f16 accumulation, k32 scaled, k64 grouped)."""
    pytest.importorskip("jax")
    kind, n, sf, af, bf, acc = form
    rng = np.random.default_rng(zlib.crc32(form_id(form).encode()) + 1)
    for style in ("random", "specials"):
        a, b, c, sa, sb = operands(rng, form, 2, style)
        if kind == "f8f6f4":
            kw = dict(arch="sm_120", kind="f8f6f4", a_format=af, b_format=bf)
            d_np, d_jax = flashsim.mma(a, b, c, **kw), flashsim.mma(a, b, c, backend="jax", **kw)
        else:
            kw = dict(kind=kind, scale_vec=n, a_format=af, b_format=bf, scale_format=sf)
            d_np = flashsim.mma_block_scale(a, b, c, sa, sb, **kw)
            d_jax = flashsim.mma_block_scale(a, b, c, sa, sb, backend="jax", **kw)
        u = np.uint16 if acc == "f16" else np.uint32
        assert isinstance(d_jax, np.ndarray) and np.array_equal(d_np.view(u), d_jax.view(u)), style


def test_f8f6f4_fp8_is_the_sm120_fp8_mma():
    """kind::f8f6f4 with e4m3 / e5m2 is the same arithmetic as sm_120's plain FP8 m16n8k32 (flashsim.mma on
    ml_dtypes float8 arrays): one model family, two spellings."""
    import ml_dtypes

    rng = np.random.default_rng(9)
    dts = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    for af, bf, acc in (("e4m3", "e5m2", np.float32), ("e5m2", "e5m2", np.float16), ("e4m3", "e4m3", np.float32)):
        form = ("f8f6f4", None, None, af, bf, "f16" if acc == np.float16 else "f32")
        a, b, c, _, _ = operands(rng, form, 20, "random")
        kind = flashsim.mma(a, b, c, arch="sm_120", kind="f8f6f4", a_format=af, b_format=bf)
        plain = flashsim.mma(a.view(dts[af]), b.view(dts[bf]), c, arch="sm_120")
        u = np.uint16 if acc == np.float16 else np.uint32
        assert np.array_equal(kind.view(u), plain.view(u))
