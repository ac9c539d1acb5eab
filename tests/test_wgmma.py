"""flashsim.wgmma (Hopper's wgmma.mma_async at matrix level) against independent oracles: MMA-Sim's Hopper WGMMA model
(PyPI ``mmasim``, an independent implementation of the published model) on random and adversarial bit patterns of
every floating-point form, exact integer arithmetic for the s8 / u8 forms, and flashsim.mma's m16n8k16 model on every
m16n8 sub-tile for the f16 / bf16 forms; its options, its fast route against the generic one, and its bad-input
errors. The silicon is tests/test_wgmma_silicon.py's."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import flashsim
from flashsim.numerics.tensorcore import WGMMA_TYPES, wgmma_unchecked
from flashsim.numerics.tensorcore.warpgroup import N_FLOAT, N_INT, wgmma_generic

F16, F32, I32 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.int32)
BF16, E4M3, E5M2 = (np.dtype(t) for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2))
S8, U8 = np.dtype(np.int8), np.dtype(np.uint8)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
FLOAT_FORMS = [key for key in WGMMA_TYPES if key[2] != I32]
INT_FORMS = [key for key in WGMMA_TYPES if key[2] == I32]


def bits(x):
    return x.view(UINT[x.itemsize])


def raw(rng, shape, dt):
    """Uniformly random bit patterns of dtype ``dt`` (every NaN, inf, subnormal and zero included)."""
    dt = np.dtype(dt)
    return rng.integers(0, 1 << (8 * dt.itemsize), shape, dtype=np.uint64).astype(UINT[dt.itemsize]).view(dt)


def _lowest_exponent(dt) -> int:
    return {F16: -14, BF16: -126, F32: -126, E4M3: -6, E5M2: -14}[np.dtype(dt)]


def inputs(rng, adt, bdt, cdt, n: int, kind: str):
    """(a (64, K), b (K, n), c (64, n)) of a floating-point form, ``kind``: "bits" (raw patterns), "normal",
    "spread" (exponents over the formats' ranges), "cancel" (pairs of products that cancel, a small c), "tiny"
    (subnormal inputs, c zero or tiny), "big_c" (c far above the products: how much of them survives)."""
    K = WGMMA_TYPES[(adt, bdt, cdt)][1]
    if kind == "bits":
        return raw(rng, (64, K), adt), raw(rng, (K, n), bdt), raw(rng, (64, n), cdt)

    def vals(shape, dt, lo, hi):
        v = rng.uniform(1, 2, shape) * np.exp2(rng.integers(lo, hi + 1, shape)) * rng.choice([-1.0, 1.0], shape)
        with np.errstate(over="ignore"):
            return v.astype(np.float32).astype(dt)

    ea, eb = _lowest_exponent(adt), _lowest_exponent(bdt)
    if kind == "normal":
        return vals((64, K), adt, -3, 3), vals((K, n), bdt, -3, 3), vals((64, n), cdt, -4, 4)
    if kind == "spread":
        return vals((64, K), adt, ea, 6), vals((K, n), bdt, eb, 6), vals((64, n), cdt, -14, 10)
    if kind == "cancel":
        a, b = vals((64, K), adt, -2, 2), vals((K, n), bdt, -2, 2)
        a[:, 1::2] = -a[:, 0::2].astype(np.float32)
        b[1::2] = b[0::2]
        return a, b, vals((64, n), cdt, -24, -12)
    if kind == "tiny":
        a = vals((64, K), adt, ea - 3, ea + 1)  # below the smallest normal: subnormals
        b = vals((K, n), bdt, eb - 3, eb + 2)
        c = np.where(rng.random((64, n)) < 0.5, 0, vals((64, n), cdt, -14, -10)).astype(cdt)
        return a, b, c
    assert kind == "big_c"
    return vals((64, K), adt, -3, 0), vals((K, n), bdt, -3, 0), vals((64, n), cdt, 8, 12)


# ------------------------------------------------------------------------------------------------ MMA-Sim


needs_mmasim = pytest.mark.needs("torch", "mmasim")  # pip install 'flashsim[test]'
_OPS: dict = {}


def to_torch(x: np.ndarray):
    import torch

    dtypes = {F16: torch.float16, BF16: torch.bfloat16, F32: torch.float32, E4M3: torch.float8_e4m3fn}
    dtypes[E5M2] = torch.float8_e5m2
    u = np.ascontiguousarray(x).view({1: np.uint8, 2: np.int16, 4: np.int32}[x.itemsize]).copy()
    return torch.from_numpy(u).view(dtypes[x.dtype])


def mmasim_wgmma(a, b, c):
    """MMA-Sim's ``WGMMA("Hopper", "m64n{N}k{K}.{d}.{a}.{b}")`` on one tile (tf32: float32 inputs, as it takes them)."""
    import torch
    from mmasim.nv_ptx import sim

    torch.set_num_threads(1)  # 64 x N tiles only lose time to thread hand-offs
    name, K = WGMMA_TYPES[(a.dtype, b.dtype, c.dtype)]
    key = f"m64n{b.shape[-1]}k{K}.{name}"
    if key not in _OPS:
        _OPS[key] = sim.WGMMA("Hopper", key)
    d = _OPS[key](to_torch(a), to_torch(b), to_torch(c))
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[c.itemsize]
    return d.contiguous().view(as_int).numpy().view(c.dtype)


def _form_id(key):
    return WGMMA_TYPES[key][0]


@needs_mmasim
@pytest.mark.parametrize("form", FLOAT_FORMS, ids=_form_id)
def test_agrees_with_mmasim_bit_for_bit(form):
    """Every floating-point form, N = 8 on every kind of input, N = 256 and 72 on raw bits and spread exponents."""
    adt, bdt, cdt = form
    rng = np.random.default_rng(list(WGMMA_TYPES).index(form))
    cases = [(8, k) for k in ("bits", "normal", "spread", "cancel", "tiny", "big_c")] + [(256, "bits"), (72, "spread")]
    for n, kind in cases:
        a, b, c = inputs(rng, adt, bdt, cdt, n, kind)
        want = mmasim_wgmma(a, b, c)
        got = flashsim.wgmma(a, b, c)
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{_form_id(form)} n={n} {kind}")


@needs_mmasim
@pytest.mark.parametrize("form", [(F16, F16, F32), (BF16, BF16, F32), (F32, F32, F32), (E4M3, E5M2, F16)], ids=_form_id)
def test_scale_a_b_negate_the_inputs(form):
    """imm-scale-a / imm-scale-b = -1: MMA-Sim on numpy's negated operands (it has no such option)."""
    adt, bdt, cdt = form
    rng = np.random.default_rng(7)
    a, b, c = inputs(rng, adt, bdt, cdt, 16, "bits")
    for sa, sb in ((-1, 1), (1, -1), (-1, -1)):
        want = mmasim_wgmma(-a if sa < 0 else a, -b if sb < 0 else b, c)
        got = flashsim.wgmma(a, b, c, scale_a=sa, scale_b=sb)
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"scale_a={sa} scale_b={sb}")


def test_fp8_accumulation_width_is_13_bits():
    """The FP8 forms keep F = 13 fraction bits below the largest term and truncate f32 results to 13 fraction bits
    (E8M13, the accumulation width DeepSeek-V3's report describes): 1 + 31 products of 2^-14 gives 1 (each term is
    below the grid), 1 + 31 products of 2^-12 gives 1 + 31 * 2^-12 truncated to 13 bits; the f16 forms keep F = 25."""
    one, small = np.float32(1.0), np.float32(2.0**-7)
    a = np.zeros((64, 32), np.float32)
    a[:, 0] = one
    a[:, 1:] = small
    b = np.zeros((32, 8), np.float32)
    b[0] = one
    b[1:] = np.float32(2.0**-7)  # 2^-14 per small product
    c = np.zeros((64, 8), np.float32)
    d = flashsim.wgmma(a.astype(E4M3), b.astype(E4M3), c)
    assert (d == 1.0).all()
    b[1:] = np.float32(2.0**-5)  # 2^-12 per product: 31 of them = 0b11111 * 2^-12
    d = flashsim.wgmma(a.astype(E4M3), b.astype(E4M3), c)
    assert (d == np.float32(1 + 31 * 2.0**-12)).all()
    b[1:] = np.float32(2.0**-8)  # products 2^-15, 31 of them: F = 13 drops each (F = 25 would keep ~2^-10)
    assert (flashsim.wgmma(a.astype(E4M3), b.astype(E4M3), c) == 1.0).all()
    a16 = a.astype(np.float16)[:, :16]
    b16 = np.full((16, 8), 2.0**-8, np.float16)
    b16[0] = 1
    assert (flashsim.wgmma(a16, b16, c) == np.float32(1 + 15 * 2.0**-15)).all()


def test_tf32_ignores_the_low_13_bits():
    """tf32: the PTX ISA's "truncate lower 13 bits of the 32-bit input data": any low bits give the bits of the
    operand with them cleared (so a value is never rounded up to tf32)."""
    rng = np.random.default_rng(32)
    a, b, c = inputs(rng, F32, F32, F32, 24, "normal")
    low_a = rng.integers(0, 1 << 13, a.shape, dtype=np.uint32)
    low_b = rng.integers(0, 1 << 13, b.shape, dtype=np.uint32)
    cleared = flashsim.wgmma((bits(a) & ~np.uint32(0x1FFF)).view(F32), (bits(b) & ~np.uint32(0x1FFF)).view(F32), c)
    with_low = flashsim.wgmma((bits(a) | low_a).view(F32), (bits(b) | low_b).view(F32), c)
    np.testing.assert_array_equal(bits(with_low), bits(cleared))
    # 1 + (2^-10 - 2^-23): rounded to tf32 the small term would be 2^-10; truncated it is 2^-10 - 2^-21
    a1 = np.zeros((64, 8), np.float32)
    a1[:, 0] = 1
    a1[:, 1] = np.float32(2.0**-10 - 2.0**-23)
    b1 = np.zeros((8, 8), np.float32)
    b1[:2] = 1
    d = flashsim.wgmma(a1, b1, np.zeros((64, 8), np.float32))
    assert (d == np.float32(1 + 2.0**-10 - 2.0**-21)).all()


# ------------------------------------------------------------------------------------ integer forms


@pytest.mark.parametrize("form", INT_FORMS, ids=_form_id)
def test_integer_forms_are_exact_wrapped_or_clamped(form):
    adt, bdt, _ = form
    rng = np.random.default_rng(8)
    for n in (8, 48, 256):
        a, b = raw(rng, (3, 64, 32), adt), raw(rng, (3, 32, n), bdt)
        c = raw(rng, (3, 64, n), I32)
        c[0] = np.int32(2**31 - 1) - rng.integers(0, 1 << 20, (64, n)).astype(np.int32)  # overflows upward
        c[1] = np.int32(-(2**31)) + rng.integers(0, 1 << 20, (64, n)).astype(np.int32)  # and downward
        exact = np.einsum("wik,wkj->wij", a.astype(object), b.astype(object)) + c.astype(object)
        wrapped = np.vectorize(lambda v: (v + 2**31) % 2**32 - 2**31, otypes=[object])(exact).astype(np.int64)
        clamped = np.vectorize(lambda v: min(max(v, -(2**31)), 2**31 - 1), otypes=[object])(exact).astype(np.int64)
        np.testing.assert_array_equal(flashsim.wgmma(a, b, c).astype(np.int64), wrapped)
        np.testing.assert_array_equal(flashsim.wgmma(a, b, c, satfinite=True).astype(np.int64), clamped)
        assert (clamped != wrapped).any()  # the limits were crossed
        d0 = flashsim.wgmma(a, b, c, scale_d=False)
        np.testing.assert_array_equal(d0.astype(np.int64), np.einsum("wik,wkj->wij", a.astype(np.int64), b))


# ------------------------------------------------------------- one model family with mma.sync (sm_90)


@pytest.mark.parametrize("form", [(F16, F16, F32), (F16, F16, F16), (BF16, BF16, F32)], ids=_form_id)
def test_f16_forms_equal_mma_sync_on_every_m16n8_sub_tile(form):
    """On sm_90, wgmma's f16 / bf16 forms and mma.sync.m16n8k16 share the model (one block of 16 products, F = 25,
    the same zero exponents and roundings): each m16n8 sub-tile of a wgmma is flashsim.mma of that sub-tile, and that
    through the generic route as well as the compiled one."""
    adt, bdt, cdt = form
    rng = np.random.default_rng(16)
    for kind in ("bits", "spread", "tiny"):
        a, b, c = inputs(rng, adt, bdt, cdt, 64, kind)
        d = bits(flashsim.wgmma(a, b, c))
        tiles_a = a.reshape(4, 1, 16, 16)
        tiles_b = b.reshape(1, 16, 8, 8).transpose(0, 2, 1, 3)  # (1, 8 col tiles, 16, 8)
        tiles_c = c.reshape(4, 16, 8, 8).transpose(0, 2, 1, 3)
        want = bits(flashsim.mma(tiles_a, tiles_b, tiles_c, arch="sm_90")).transpose(0, 2, 1, 3).reshape(64, 64)
        np.testing.assert_array_equal(d, want, err_msg=kind)
        np.testing.assert_array_equal(bits(wgmma_generic(a, b, c)), want, err_msg=kind)


@pytest.mark.parametrize(
    "form",
    [
        (F16, F16, F32),
        (F16, F16, F16),
        (BF16, BF16, F32),
        (F32, F32, F32),
        (E4M3, E5M2, F32),
        (E5M2, E5M2, F16),
        (E4M3, E4M3, F32),
    ],
    ids=_form_id,
)
def test_fast_route_equals_the_generic_routine(form):
    """On numpy every floating-point form runs the numpy engine's compiled kernel with the wgmma block's parameters
    (then E8M13 for FP8's f32 results): bit for bit the generic block routine, options included."""
    adt, bdt, cdt = form
    rng = np.random.default_rng(17)
    a, b, c = (np.stack(x) for x in zip(*(inputs(rng, adt, bdt, cdt, 40, k) for k in ("bits", "cancel", "tiny"))))
    mask = np.array([True, False, True])
    for sa, sb in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
        for sd in (True, False, mask):
            got = wgmma_unchecked(a, b, c, "sm_90", sd, sa, sb)
            want = wgmma_generic(a, b, c, "sm_90", sd, sa, sb)
            np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{sa} {sb} {sd}")


# ------------------------------------------------------------------------------------------ options, batches


@pytest.mark.parametrize(
    "form", [(BF16, BF16, F32), (F32, F32, F32), (E5M2, E4M3, F32), (E4M3, E4M3, F16)], ids=_form_id
)
def test_scale_d_false_is_a_zero_accumulator_and_ignores_c(form):
    """scale-d false: D = A * B: c is not read (NaN and inf in c change nothing) and the result is that of c = +0;
    a bool array chooses per warpgroup (the PTX simulator's predicate)."""
    adt, bdt, cdt = form
    rng = np.random.default_rng(9)
    a, b, c = (np.stack(x) for x in zip(*(inputs(rng, adt, bdt, cdt, 16, k) for k in ("bits", "tiny", "normal"))))
    zero = np.zeros_like(c)
    c_special = c.copy()
    bits(c_special)[..., ::3] = bits(np.array([np.nan], cdt))[0]
    np.testing.assert_array_equal(
        bits(flashsim.wgmma(a, b, c_special, scale_d=False)), bits(flashsim.wgmma(a, b, zero))
    )
    mask = np.array([False, True, False])
    d = flashsim.wgmma(a, b, c, scale_d=mask)
    for w in range(3):
        want = flashsim.wgmma(a[w], b[w], c[w] if mask[w] else zero[w])
        np.testing.assert_array_equal(bits(d[w]), bits(want))
    np.testing.assert_array_equal(bits(wgmma_unchecked(a, b, c, "sm_90", mask)), bits(d))


def test_leading_dimensions_broadcast_as_mma():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((2, 3, 64, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)  # one B for every tile
    c = rng.standard_normal((2, 3, 64, 32)).astype(np.float32)
    d = flashsim.wgmma(a, b, c)
    assert d.shape == c.shape and d.dtype == c.dtype
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(bits(d[i, j]), bits(flashsim.wgmma(a[i, j], b, c[i, j])))


@needs_mmasim
def test_n_of_every_shape_the_isa_lists():
    rng = np.random.default_rng(11)
    assert N_FLOAT == tuple(range(8, 257, 8)) and 40 not in N_INT and 240 in N_INT and 256 in N_INT
    for n in (8, 24, 136, 256):
        a, b, c = inputs(rng, BF16, BF16, F32, n, "normal")
        np.testing.assert_array_equal(bits(flashsim.wgmma(a, b, c)), bits(mmasim_wgmma(a, b, c)))


@pytest.mark.needs("jax")
def test_jax_arrays_run_the_same_routine():
    import jax.numpy as jnp

    from flashsim.numerics import xp as X

    rng = np.random.default_rng(12)
    for form in [(F32, F32, F32), (E4M3, E5M2, F16), (S8, U8, I32)]:
        a, b, c = (
            inputs(rng, *form, 16, "bits")
            if form[2] != I32
            else (
                raw(rng, (64, 32), form[0]),
                raw(rng, (32, 16), form[1]),
                raw(rng, (64, 16), I32),
            )
        )
        with X.enable_x64():
            got = np.asarray(wgmma_unchecked(*(jnp.asarray(x) for x in (a[None], b[None], c[None])), "sm_90"))
        np.testing.assert_array_equal(bits(got[0]), bits(flashsim.wgmma(a, b, c)), err_msg=str(form))


def test_wgmma_unchecked_keeps_its_contract():
    """The PTX simulator's wgmma.mma_async calls this name with these arguments in this order."""
    params = list(inspect.signature(wgmma_unchecked).parameters)
    assert params == ["a", "b", "c", "arch", "scale_d", "scale_a", "scale_b", "satfinite"]
    rng = np.random.default_rng(13)
    a, b, c = (np.stack(x) for x in zip(*(inputs(rng, F16, F16, F32, 8, "normal") for _ in range(5))))
    d = wgmma_unchecked(a, b, c, "sm_90a", np.ones(5, bool), 1, -1, False)
    assert d.shape == (5, 64, 8)
    np.testing.assert_array_equal(bits(d), bits(flashsim.wgmma(a, b, c, scale_b=-1)))


# --------------------------------------------------------------------------------------------- bad input


def _ok():
    return np.zeros((64, 16), np.float16), np.zeros((16, 8), np.float16), np.zeros((64, 8), np.float32)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda a, b, c: (a.astype(np.float64), b, c), "^a must have dtype"),
        (lambda a, b, c: (a, b.astype(ml_dtypes.bfloat16), c), "^a, b, c: no wgmma.mma_async"),
        (lambda a, b, c: (a, b, c.astype(np.float64)), "^c must have dtype"),
        (
            lambda a, b, c: (a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16), c.astype(np.float16)),
            "^a, b, c",
        ),
        (lambda a, b, c: (a[:32], b, c), r"^a must have shape \(\.\.\., 64, 16\)"),
        (lambda a, b, c: (a.astype(np.float32), b.astype(np.float32), c), r"^a must have shape \(\.\.\., 64, 8\)"),
        (lambda a, b, c: (a, np.zeros((16, 12), np.float16), np.zeros((64, 12), np.float32)), "^b must have shape"),
        (lambda a, b, c: (a, np.zeros((16, 264), np.float16), np.zeros((64, 264), np.float32)), "^b must have shape"),
        (lambda a, b, c: (a, b, c[:, :4]), r"^c must have shape \(\.\.\., 64, 8\)"),
        (lambda a, b, c: (np.zeros((2, 64, 16), np.float16), b, c), "^a's batch dimensions"),
        (lambda a, b, c: (list(a), b, c), "^a must be a numpy array"),
    ],
)
def test_bad_operands_name_the_argument(change, match):
    with pytest.raises(ValueError, match=match):
        flashsim.wgmma(*change(*_ok()))


def test_bad_options_and_arch_name_the_argument():
    a, b, c = _ok()
    for kwargs, match in [
        (dict(arch="sm_80"), "^arch: no wgmma.mma_async on sm_80: .*sm_90a"),
        (dict(arch="sm_120"), "^arch: no wgmma"),
        (dict(arch="sm_91"), "unknown arch"),
        (dict(scale_a=2), "^scale_a must be 1 or -1"),
        (dict(scale_b=0), "^scale_b must be 1 or -1"),
        (dict(scale_d=1), "^scale_d must be a bool"),
        (dict(scale_d=np.ones(3, bool)), "^scale_d's shape"),
        (dict(satfinite=True), "^satfinite: only the integer"),
    ]:
        with pytest.raises(ValueError, match=match):
            flashsim.wgmma(a, b, c, **kwargs)
    ai, bi, ci = np.zeros((64, 32), np.int8), np.zeros((32, 40), np.uint8), np.zeros((64, 40), np.int32)
    with pytest.raises(ValueError, match="^b must have shape .*steps of 16"):
        flashsim.wgmma(ai, bi, ci)
    with pytest.raises(ValueError, match="^scale_a: the integer wgmma forms have no imm-scale"):
        flashsim.wgmma(ai, bi[:, :32], ci[:, :32], scale_a=-1)
    assert flashsim.wgmma(a, b, c, arch="sm_90a").shape == (64, 8)
