"""flashsim.attention (the emulated kernel) against the float64 reference, edge inputs, and the contract.

The error bound, derived from the kernel's program (kernel/flash_fwd.cu) under the tensor-core model:
with u = 2^-11 (half an f16 ulp, relative), V = max_j |v_j| per column, O* the float64 result:
  * scores: f32 (RZ, 25-bit aligned truncation) => relative error ~2^-22 of sum|q k|; through the FFMA and ex2
    (<= 2.05 ulp) each p carries a relative error e_p < 1e-5 for the inputs used here (|scores*scale| < 100);
  * P is rounded to f16 before P@V: |p~ - p| <= u p for normal f16 and <= 2^-25 absolute below 2^-14;
  * P@V with f32 accumulation: per mma the truncation/rounding error is ~2^-22 of the partial sum: negligible;
  * l sums the unrounded f32 p: relative error ~ n 2^-24 + e_p;
  * the final O * (1/l) rounded to f16: u |O*|.
  So |O - O*| <= (u + e_p) V + Nk 2^-25 V / l + u |O*| (+ the l error times |O*|), and we test the looser
  f32 bound  2u V + u |O*| + Nk 2^-25 V.
  With f16 accumulation every k16 step rounds the unnormalised O (magnitude <= l V) to f16, and every tile
  rounds alpha to f16 and the rescaled O: (Nk/16 + 2 tiles) roundings of u l V each, divided by l:
  bound_f16 = (Nk/16 + 2 n_tiles + 2) u V + u |O*|.
  With f16x2 (each tile's P V by the f16 mma from zero, added to an f32 O) only a tile's partial sums are rounded
  to f16, kv_tile/16 times: bound_f32 + (kv_tile/16) u V + n_tiles 2^-23 V.
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig
from flashsim.commands.emulate import make_inputs
from flashsim.emulator.reference import error_bound

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


CASES = [  # B, H, Nq, Nk, d, causal
    (1, 2, 64, 64, 64, False),
    (2, 1, 33, 130, 128, False),
    (1, 1, 130, 77, 64, True),  # Nq > Nk: the first rows see no key at all
    (1, 2, 77, 200, 128, True),  # Nq < Nk
    (1, 1, 1, 1, 128, False),
    (1, 1, 1, 300, 64, True),
]


@pytest.mark.parametrize("acc", ["f32", "f16", "f16x2"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:5])) + ("c" if c[5] else ""))
def test_against_float64_reference(case, acc):
    b, h, nq, nk, d, causal = case
    q, k, v = make_inputs(b, h, nq, nk, d, seed=nq + nk)
    o, lse = flashsim.attention(q, k, v, causal=causal, pv_accum=acc, progress=False)
    o_ref, lse_ref = flashsim.reference_attention(q, k, v, causal=causal)
    assert o.dtype == np.float16 and o.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == q.shape[:3]
    cfg = KernelConfig.default("sm_90", head_dim=d, causal=causal, pv_accum=acc)
    err = np.abs(o.astype(np.float64) - o_ref)
    bound = error_bound(o_ref, v, nk, cfg.kv_tile, acc)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"
    empty = np.isinf(lse_ref)
    assert np.array_equal(np.isinf(lse), empty)
    assert np.all(lse[empty] > 0)
    # LSE: scores carry ~2^-22 relative error, ln(l) a few f32 ulps
    assert np.allclose(lse[~empty], lse_ref[~empty], rtol=1e-6, atol=2e-6)


def test_rows_without_visible_keys_are_zero_and_lse_is_plus_inf():
    q, k, v = make_inputs(1, 1, 40, 8, 64, seed=3)
    o, lse = flashsim.attention(q, k, v, causal=True, progress=False)
    # bottom-right alignment: query i sees key j iff j <= i + 8 - 40, so rows 0..31 see nothing
    assert np.all(o[0, 0, :32].view(np.uint16) == 0)  # +0.0 bits exactly
    assert np.all(lse[0, 0, :32].view(np.uint32) == 0x7F800000)  # +inf bits exactly
    assert np.all(np.isfinite(o[0, 0, 32:])) and np.all(np.isfinite(lse[0, 0, 32:]))


def test_large_scores_do_not_overflow():
    # scores of several hundred: exp would overflow in f32 without the running-max shift
    q, k, v = make_inputs(1, 1, 48, 96, 64, seed=5, scale=12.0)
    o, lse = flashsim.attention(q, k, v, progress=False)
    o_ref, lse_ref = flashsim.reference_attention(q, k, v)
    assert np.isfinite(o).all() and np.isfinite(lse).all()
    assert np.abs(lse_ref).min() > 100  # exp(100) alone is past the f32 range (~3.4e38)
    assert np.all(np.abs(o.astype(np.float64) - o_ref) <= error_bound(o_ref, v, 96, 64, "f32"))


def test_nan_and_inf_inputs_stay_local():
    q, k, v = make_inputs(1, 1, 32, 64, 64, seed=7)
    q[0, 0, 5, 3] = np.nan  # row 5's scores are all NaN
    v[0, 0, 10, 7] = np.inf  # column 7 meets inf
    o, lse = flashsim.attention(q, k, v, progress=False)
    assert np.isnan(o[0, 0, 5]).all() and np.isinf(lse[0, 0, 5])  # l is NaN -> lse = +inf, O NaN
    other = np.delete(np.arange(32), 5)
    col7 = o[0, 0, other, 7]
    assert not np.isfinite(col7).any()
    assert np.isfinite(np.delete(o[0, 0, other], 7, axis=-1)).all()


def test_bits_do_not_depend_on_pipeline_depth_or_block_rows():
    """The ring depth only changes when tiles arrive, and (non-causal) the rows per block and per warp (m16 tiles
    1 to 4, blocks of 32 to 512 rows over 100 rows) only group rows:
    the arithmetic of every element is the same, so the bits must be identical."""
    q, k, v = make_inputs(1, 2, 100, 150, 64, seed=11)
    base = flashsim.attention(q, k, v, config=KernelConfig(head_dim=64, stages=2, warps=8), progress=False)
    for cfg in (
        KernelConfig(head_dim=64, stages=3, warps=8),
        KernelConfig(head_dim=64, stages=2, warps=2),
        KernelConfig(head_dim=64, stages=2, warps=2, m_tiles=3),
        KernelConfig(head_dim=64, stages=3, m_tiles=4),
    ):
        o, lse = flashsim.attention(q, k, v, config=cfg, progress=False)
        assert np.array_equal(o.view(np.uint16), base[0].view(np.uint16))
        assert np.array_equal(lse.view(np.uint32), base[1].view(np.uint32))


def test_kv_tile_changes_the_order_of_operations():
    """Changing the KV tile changes the rescale and summation order, which must be visible in the bits
    (otherwise the emulator would not be following the kernel's tiling)."""
    q, k, v = make_inputs(1, 1, 64, 256, 64, seed=12)
    a = flashsim.attention(q, k, v, config=KernelConfig(head_dim=64, kv_tile=32), progress=False)
    b = flashsim.attention(q, k, v, config=KernelConfig(head_dim=64, kv_tile=64), progress=False)
    assert not np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(q=np.zeros((1, 1, 4, 64), np.float32)), "q must be float16"),
        (dict(q=np.zeros((1, 4, 64), np.float16)), "q must have 4 dimensions"),
        (dict(k=np.zeros((1, 1, 5, 64), np.float16)), "k and v must have the same shape"),
        (
            dict(
                q=np.zeros((1, 1, 4, 48), np.float16),
                k=np.zeros((1, 1, 4, 48), np.float16),
                v=np.zeros((1, 1, 4, 48), np.float16),
            ),
            "head dim d=48 is not supported",
        ),
        (dict(q=np.zeros((1, 1, 0, 64), np.float16)), "sequence lengths must be >= 1"),
        (dict(arch="sm_75"), "unknown arch"),
        (dict(softmax_scale=-1.0), "softmax_scale must be a positive"),
        (dict(pv_accum="bf16"), "pv_accum must be one of"),
    ],
)
def test_bad_input_is_a_clear_error(bad, match):
    args = dict(
        q=np.zeros((1, 1, 4, 64), np.float16),
        k=np.zeros((1, 1, 4, 64), np.float16),
        v=np.zeros((1, 1, 4, 64), np.float16),
    )
    args.update(bad)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    with pytest.raises(ValueError, match=match):
        flashsim.attention(q, k, v, **args)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("jax", marks=pytest.mark.needs("jax"))])
@pytest.mark.parametrize("acc", ["f16", "f16x2"])
def test_an_overflowing_f16_accumulator_raises_naming_the_row(acc, backend):
    """q = 0, Nk = 1024, v = 100: every p is 1, the answer is 100, but the unnormalised O reaches 102400 > 65504
    with pv_accum="f16" (f16x2 only needs kv_tile * 100 = 6400 per tile: it answers 100). v = 3000 overflows a
    tile too (64 * 3000). The error names (b, h, row) and the bound; check_overflow=False gives the kernel's inf."""
    q = np.zeros((1, 2, 20, 64), np.float16)
    k = make_inputs(1, 2, 20, 1024, 64, seed=1)[1]
    big = 100.0 if acc == "f16" else 3000.0
    v = np.full((1, 2, 1024, 64), big, np.float16)
    v[0, 0] = 1.0  # head 0 is harmless: the first flagged row is in head 1
    with pytest.raises(FloatingPointError, match=r"\(b=0, h=1, row=0\).*65504"):
        flashsim.attention(q, k, v, pv_accum=acc, backend=backend, progress=False)
    o, _ = flashsim.attention(q, k, v, pv_accum=acc, backend=backend, progress=False, check_overflow=False)
    assert np.isinf(o[0, 1]).all() and np.all(o[0, 0] == 1)
    o, _ = flashsim.attention(q, k, v, pv_accum="f32", progress=False)
    assert np.all(o[0, 1] == big)


def test_a_deferred_check_raises_only_when_called():
    q = np.zeros((1, 1, 16, 64), np.float16)
    k = make_inputs(1, 1, 16, 1024, 64, seed=2)[1]
    v = np.full((1, 1, 1024, 64), 100.0, np.float16)
    o, lse, check = flashsim.attention(q, k, v, pv_accum="f16", check_overflow="deferred", progress=False)
    assert np.isinf(o).all()
    with pytest.raises(FloatingPointError, match=r"\(b=0, h=0, row=0\)"):
        check()
    o, lse, check = flashsim.attention(q, k, v, pv_accum="f16x2", check_overflow="deferred", progress=False)
    check()  # nothing overflowed: returns quietly
    with pytest.raises(ValueError, match="check_overflow"):
        flashsim.attention(q, k, v, check_overflow="later")


def test_f16x2_answers_where_f16_overflows():
    q = np.zeros((1, 1, 16, 64), np.float16)
    k = make_inputs(1, 1, 16, 1024, 64, seed=2)[1]
    v = np.full((1, 1, 1024, 64), 100.0, np.float16)
    o, _ = flashsim.attention(q, k, v, pv_accum="f16x2", progress=False)
    assert np.all(o == 100)
