"""INT8 attention (quant="int8"): the s8 Q K^T chain, the quantization pass against independent float64 oracles,
numpy and JAX running the same program, the attention's accuracy and invariances, and the bad inputs.

The bit-for-bit check against the GPU is tests/test_emulator_silicon.py on tests/data/attn_sm90_quant.npz (54 H200
cases of `flashsim verify --quant`); the GPU tests (marked gpu) run the torch op in tests/test_gpu_torch.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim import KernelConfig
from flashsim.emulator import quantize as Q
from flashsim.numerics.tensorcore import mma_chain_s8, mma_k32
from flashsim.numerics.xp import enable_x64

RNG = np.random.default_rng(12)


# ---- the s8 chain -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [32, 128, 256])
def test_the_s8_chain_is_mma_k32_step_by_step(k):
    """mma_chain_s8 (one exact sum) equals the kernel's loop of m16n8k32 s8 mma's (flashsim.mma's model, which
    reproduces all 90,112 H200 outputs), chained k32 step by k32 step, extremes -128 / 127 included."""
    a = RNG.integers(-128, 128, (3, 16, k), dtype=np.int64).astype(np.int8)
    b = RNG.integers(-128, 128, (3, k, 8), dtype=np.int64).astype(np.int8)
    a[0] = -128
    b[0] = -128
    c = RNG.integers(-(2**31), 2**31, (3, 16, 8), dtype=np.int64).astype(np.int32)
    d = c
    for s in range(0, k, 32):
        d = mma_k32(a[..., s : s + 32], b[..., s : s + 32, :], d)
    assert mma_chain_s8(a, b, c).tobytes() == d.tobytes()
    # and both against integer arithmetic written here (mma_k32's s8 step is the chain's one-step case)
    exact = a.astype(np.int64) @ b.astype(np.int64) + c.astype(np.int64)
    assert d.tobytes() == ((exact + 2**31) % 2**32 - 2**31).astype(np.int32).tobytes()


def test_the_s8_chain_refuses_other_types():
    a = np.zeros((16, 32), np.int8)
    with pytest.raises(ValueError, match="b must be int8"):
        mma_chain_s8(a, np.zeros((32, 8), np.int16), np.zeros((16, 8), np.int32))
    with pytest.raises(ValueError, match="K % 32"):
        mma_chain_s8(np.zeros((16, 48), np.int8), np.zeros((48, 8), np.int8), np.zeros((16, 8), np.int32))


# ---- the quantization pass against float64 oracles ------------------------------------------------------------


def _f32(x):
    return np.float32(x)


def _oracle_block(x: np.ndarray):
    """One block's (int8 values, scale) computed in float64 and rounded to float32 where the kernel rounds (a
    correctly rounded f32 op of f32 inputs equals the f64 result rounded once to f32): not flashsim.numerics."""
    mags = np.abs(x[~np.isnan(x)]).astype(np.float64)
    amax = float(mags.max()) if mags.size else 0.0
    scale = _f32(amax / 127.0) if np.isfinite(amax) else _f32(np.inf)
    inv = _f32(127.0 / amax) if amax > 0 else _f32(0.0)
    with np.errstate(invalid="ignore"):
        y = (x.astype(np.float64) * np.float64(inv)).astype(np.float32)
    q = np.where(np.isnan(y), 0, np.clip(np.round(y.astype(np.float64)), -127, 127)).astype(np.int8)
    return q, scale


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=16 * 32, max_size=16 * 32), st.integers(-30, 30))
def test_a_block_quantizes_as_the_float64_oracle_on_raw_bit_patterns(bits, shift):
    """quantize_blocks on raw float32 bit patterns (NaN, inf, subnormals, -0 included), exponents clustered by
    ``shift`` so that ordinary magnitudes dominate too, against the float64 oracle."""
    x = np.array(bits, np.uint32).view(np.float32).reshape(16, 32)
    keep = np.isfinite(x) & (np.abs(x) > 0)
    with np.errstate(invalid="ignore"):  # the NaN / inf lanes, which np.where then leaves as they were
        x = np.where(
            keep, np.ldexp(np.frexp(x)[0], np.clip(np.frexp(x)[1] % 8 + shift, -149, 127)).astype(np.float32), x
        )
    q, s = Q.quantize_blocks(x)
    q_o, s_o = _oracle_block(x)
    assert s.shape == (1,) and s.view(np.uint32)[0] == s_o.view(np.uint32)
    assert q.dtype == np.int8 and q.tobytes() == q_o.tobytes()


def test_blocks_split_every_16_rows_and_pad_with_zeros():
    x = RNG.standard_normal((2, 37, 64)).astype(np.float32)
    x[1, 32:] *= 1000.0  # the last, partial block has its own scale
    q, s = Q.quantize_blocks(x)
    assert q.shape == x.shape and s.shape == (2, 3)
    for h in range(2):
        for b in range(3):
            q_o, s_o = _oracle_block(x[h, 16 * b : 16 * b + 16])
            assert s[h, b] == s_o and q[h, 16 * b : 16 * b + 16].tobytes() == q_o.tobytes()
    assert Q.quantize_blocks(np.zeros((1, 16, 32), np.float32))[1].tolist() == [[0.0]]


@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000])
def test_the_mean_is_the_slices_in_order_and_close_to_the_exact_mean(n):
    """k_mean equals its definition written as a plain loop over tokens (slice j % 16, in order, then the slices in
    order, then / n), in float32 numpy scalars, and is within n ulps of the float64 mean."""
    k = (RNG.standard_normal((n, 32)) * 3 + 5).astype(np.float32)
    got = Q.k_mean(k[None])[0]
    acc = np.zeros((16, 32), np.float32)
    for j in range(n):
        acc[j % 16] = acc[j % 16] + k[j]
    tot = acc[0].copy()
    for s in range(1, 16):
        tot = tot + acc[s]
    assert got.tobytes() == (tot / np.float32(n)).astype(np.float32).tobytes()
    exact = k.astype(np.float64).mean(axis=0)
    assert np.all(np.abs(got - exact) <= n * np.spacing(np.abs(exact).astype(np.float32)) + 1e-12)


def test_the_correction_is_the_fma_chain_over_channels():
    q = RNG.standard_normal((3, 64)).astype(np.float32)
    mean = RNG.standard_normal(64).astype(np.float32)
    got = Q.row_corrections(q[None], mean[None])[0]
    want = []
    for r in range(3):
        acc = 0.0
        for c in range(64):
            acc = float(np.float32(np.float64(q[r, c]) * np.float64(mean[c]) + acc))  # exact product, one rounding
        want.append(acc)
    assert got.tolist() == want


def test_the_pass_runs_the_same_on_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import ml_dtypes

    names = ("q8", "q_scale", "k8", "k_scale", "k_mean", "corr")
    for dt in (ml_dtypes.bfloat16,):  # f16's widening on JAX: tests/test_numerics_engines.py
        q = (RNG.standard_normal((1, 4, 40, 32)) * 2).astype(dt)
        k = (RNG.standard_normal((1, 2, 50, 32)) + 3).astype(dt)
        want = Q.quantize(q, k, group=2)
        with enable_x64():  # jitted: 15 s on 2 cores against 27 s eagerly (2026-12-01)
            got = jax.jit(lambda a, b: tuple(getattr(Q.quantize(a, b, 2), n) for n in names))(
                jnp.asarray(q), jnp.asarray(k)
            )
        for name, x in zip(names, got):
            assert np.asarray(x).tobytes() == getattr(want, name).tobytes(), name


# ---- the attention ---------------------------------------------------------------------------------------------


def _inputs(b=1, h=4, hk=2, nq=150, nk=170, d=64, offset=0.0, dtype=np.float16, seed=3):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, nq, d))
    k = rng.standard_normal((b, hk, nk, d)) + offset * rng.standard_normal((b, hk, 1, d))
    v = rng.standard_normal((b, hk, nk, d))
    return tuple(x.astype(dtype) for x in (q, k, v))


@pytest.mark.parametrize("offset", [0.0, 6.0])
def test_int8_attention_is_close_to_float64_and_the_lse_is_the_unsmoothed_one(offset):
    """Against float64 attention: O within a few hundredths (INT8 per-16 blocks), LSE within 0.02 although K was
    smoothed by a mean up to 6x its spread (the correction q . mean(k) restores the true LSE)."""
    q, k, v = _inputs(offset=offset)
    o, lse = flashsim.attention(q, k, v, quant="int8")
    o_ref, lse_ref = flashsim.reference_attention(q, k, v)
    err = np.abs(o.astype(np.float64) - o_ref)
    assert err.max() < 0.05 and err.mean() < 5e-3
    assert np.abs(lse - lse_ref).max() < 0.02


def test_gqa_int8_equals_mha_int8_with_repeated_heads():
    q, k, v = _inputs(h=4, hk=1)
    o1, l1 = flashsim.attention(q, k, v, quant="int8", causal=True)
    o2, l2 = flashsim.attention(q, *(np.repeat(x, 4, axis=1) for x in (k, v)), quant="int8", causal=True)
    assert o1.tobytes() == o2.tobytes() and l1.tobytes() == l2.tobytes()


@pytest.mark.needs("jax")
def test_numpy_and_jax_engines_agree_on_int8():
    q, k, v = _inputs(nq=70, nk=90, d=96)
    for kw in (
        dict(quant="int8", causal=True, pv_accum="f16"),
        dict(quant="int8", window_size=(20, 5), pv_accum="f16x2"),
        dict(quant="int8-fp8", causal=True),
        dict(quant="int8-fp8", pv_accum="f16x2", window_size=(30, 10)),
    ):
        o1, l1 = flashsim.attention(q, k, v, **kw)
        o2, l2 = flashsim.attention(q, k, v, backend="jax", **kw)
        assert o1.tobytes() == o2.tobytes() and l1.tobytes() == l2.tobytes()


def test_fp8_pv_with_f16_accumulation_is_as_accurate_as_f32_accumulation():
    """Two-level f16 accumulation (groups of FP8_F16_KEYS keys, V in [-2.25, 2.25]) against f32 accumulation (V in
    [-448, 448]) on the same inputs: both within the e4m3 quantization's few percent of float64, and their errors
    within 10% of each other (the f16 sums of at most 64 products add ~2^-11 relative, far below e4m3's 2^-4
    spacing, whose relative size is the same in both ranges)."""
    q, k, v = _inputs(nq=120, nk=300, d=64)
    ref = flashsim.reference_attention(q, k, v)[0]
    rel = {}
    for acc in ("f32", "f16x2"):
        o = flashsim.attention(q, k, v, quant="int8-fp8", pv_accum=acc)[0].astype(np.float64)
        rel[acc] = np.linalg.norm(o - ref) / np.linalg.norm(ref)
    assert rel["f32"] < 0.06 and rel["f16x2"] < 0.06
    assert abs(rel["f16x2"] - rel["f32"]) < 0.1 * rel["f32"], rel


@pytest.mark.parametrize("kv_tile", [32, 64, 128])
def test_fp8_f16_accumulation_reaches_its_bound_and_stays_finite(kv_tile):
    """The proved worst case (proofs/prove_fp8_f16_range.py) through the whole program: q = 0 (every p = 1) and equal
    rows of v (each channel at its max): every f16 group sum is 64 * 448 * 2.25 = 64512 (or half that in 32-key
    groups), and O is v again, finite. v of 60000 with 4096 keys, which overflows the unquantized f16x2 kernel's f16
    tile sums, is fine: V is rescaled into the proved range, so the overflow check has nothing to check."""
    from flashsim.constants import FP8_V_RANGE

    rng = np.random.default_rng(4)
    nk = 512
    q = np.zeros((1, 1, 20, 64), np.float16)
    k = rng.standard_normal((1, 1, nk, 64)).astype(np.float16)
    row = (rng.standard_normal(64) * 100).astype(np.float16)
    v = np.broadcast_to(row, (1, 1, nk, 64)).copy()
    cfg = KernelConfig.default("sm_90", head_dim=64, quant="int8-fp8", pv_accum="f16x2").with_(
        warps=4, m_tiles=1, kv_tile=kv_tile
    )
    o, _ = flashsim.attention(q, k, v, config=cfg)
    assert np.isfinite(o.astype(np.float32)).all()
    np.testing.assert_allclose(o[0, 0].astype(np.float64), np.broadcast_to(row, (20, 64)), rtol=2e-3)
    assert FP8_V_RANGE["f16x2"] == 2.25
    big = np.full((1, 1, 4096, 64), 60000.0, np.float16)
    qb, kb = np.zeros((1, 1, 16, 64), np.float16), np.zeros((1, 1, 4096, 64), np.float16)
    with pytest.raises(FloatingPointError, match="overflowed"):
        flashsim.attention(qb, kb, big, pv_accum="f16x2")
    o8, _ = flashsim.attention(qb, kb, big, quant="int8-fp8", pv_accum="f16x2")
    assert (o8.astype(np.float32) == 60000.0).all()


def test_int8_shrinks_the_q_and_k_buffers():
    f16 = KernelConfig.default("sm_90", head_dim=128)
    i8 = f16.with_(quant="int8")
    barriers = 2 * 8 * f16.stages  # the f16 build's mbarrier ring; the INT8 build keeps the block barrier
    assert f16.smem_bytes - i8.smem_bytes == (f16.block_m + f16.stages * f16.kv_tile) * 128 + barriers
    assert i8.qk_ksteps == 4 and f16.qk_ksteps == 8
    assert i8.defines()["FS_QUANT_INT8"] == 1 and f16.defines()["FS_QUANT_INT8"] == 0


# ---- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(quant="int4"), "quant must be one of"),
        (dict(quant="int8-fp8", pv_accum="f16"), r"quant='int8-fp8' runs P@V in FP8 .* \('f32', 'f16x2'\)"),
        (dict(quant=8), "quant must be one of"),
        (dict(quant="int8", softcap=10.0), "quant='int8' does not combine with softcap"),
        (dict(quant="int8", config=KernelConfig.default("sm_90", head_dim=64)), "contradicts config.quant"),
    ],
)
def test_bad_quant_options_are_value_errors_naming_the_argument(kw, match):
    q, k, v = _inputs(nq=20, nk=20)
    with pytest.raises(ValueError, match=match):
        flashsim.attention(q, k, v, **kw)


def test_a_config_refuses_fp8_pv_on_kv_tiles_that_are_not_multiples_of_32():
    with pytest.raises(ValueError, match="kv_tile that is a multiple of 32"):
        KernelConfig(quant="int8-fp8", kv_tile=48)


def test_a_config_refuses_int8_with_softcap():
    with pytest.raises(ValueError, match="does not combine with softcap"):
        KernelConfig(quant="int8", softcap=True)


def test_int8_fp8_refuses_bf16():
    import ml_dtypes

    q, k, v = _inputs(nq=20, nk=20, dtype=ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="float16 inputs"):
        flashsim.attention(q, k, v, quant="int8-fp8")


def test_e4m3_conversion_is_round_to_nearest_even_with_saturation_on_raw_bit_patterns():
    """to_e4m3 (cvt.rn.satfinite.e4m3x2.f32) against a brute-force oracle over e4m3's 256 codes: the nearest finite
    value (ties to the even code), +-448 past the range, NaN -> 0x7F; random float32 bit patterns and the midpoints."""
    import ml_dtypes

    codes = np.arange(256, dtype=np.uint8)
    vals = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    finite = np.isfinite(vals)
    fv, fc = vals[finite], codes[finite]
    rng = np.random.default_rng(8)
    x = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):  # NaN patterns times 1e-30
        x = np.where(np.abs(x) < 1e6, x, x * 1e-30).astype(np.float32)  # mostly in range
    mids = ((np.sort(fv)[1:] + np.sort(fv)[:-1]) / 2).astype(np.float32)
    x = np.concatenate([x, mids, -mids, np.float32([500.0, -1e9, np.nan, -np.nan, 0.0, -0.0])])
    got = Q.to_e4m3(x).view(np.uint8)
    for xi, gi in zip(x.astype(np.float64), got):
        if np.isnan(xi):
            assert gi == 0x7F
            continue
        y = min(max(xi, -448.0), 448.0)
        dist = np.abs(fv - y)
        best = fc[dist == dist.min()]
        if len(best) > 1:  # a tie: the even code (or +-0's sign)
            best = best[(best & 1) == 0] if y != 0 else best[(best >> 7) == (np.signbit(y))]
        assert gi in best, (xi, hex(gi), [hex(b) for b in best])


@pytest.mark.parametrize("special", [np.nan, np.inf])
def test_a_nan_or_inf_in_v_makes_its_column_nan_with_fp8_pv(special):
    """FP8 P@V: a NaN in v stays NaN in e4m3 and reaches every row whose tiles hold the key (even where p = 0:
    0 * NaN is NaN); an inf makes its channel's factor inf and itself NaN. Only that column of O."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 1, 40, 32)).astype(np.float16)
    k, v = (rng.standard_normal((1, 1, 70, 32)).astype(np.float16) for _ in range(2))
    v[0, 0, 5, 3] = special
    o, _ = flashsim.attention(q, k, v, quant="int8-fp8", causal=True)
    o = o.astype(np.float32)[0, 0]
    assert np.isnan(o[:, 3]).all()
    assert np.isfinite(np.delete(o, 3, axis=1)).all()


def test_verify_quant_selects_the_quantized_cases():
    """`flashsim verify --quant` runs the quantized set (INT8 and FP8 P@V); `--quant int8-fp8 --shape ...` quantizes
    the shape's cases with FP8 P@V (f32 and two-level f16 accumulation, two kinds each); a bare `--quant --shape`
    means int8."""
    import argparse

    from flashsim.commands import verify

    p = argparse.ArgumentParser()
    verify.add_arguments(p)
    cases = verify._cases(p.parse_args(["--quant"]), "sm_90")
    assert {c.config.quant for c in cases} == {"int8", "int8-fp8"} and len(cases) == len(verify.quant_cases("sm_90"))
    fp8 = verify._cases(p.parse_args(["--quant", "int8-fp8", "--shape", "1,2,50,60,64", "--only"]), "sm_90")
    assert [(c.config.quant, c.config.pv_accum) for c in fp8] == [("int8-fp8", "f32")] * 2 + [("int8-fp8", "f16x2")] * 2
    bare = verify._cases(p.parse_args(["--shape", "1,2,50,60,64", "--only", "--quant"]), "sm_90")
    assert {c.config.quant for c in bare} == {"int8"}


def test_fp8_slot_order_is_what_the_registers_give():
    """slot_keys (the order kernel/quantize.cu stores V^T's keys in) from the fragment maps flashsim.layout checks on
    the H200: flash_fwd packs byte u of A register 2h + r of k32 slice j from S tile 4j + 2h + (u >> 1), accumulator
    element 2r + (u & 1); that element's column (c_coord) is the key, and a8_coord says which k slot the byte is."""
    from flashsim.layout.fragments import a8_coord, c_coord

    want = np.empty(32, int)
    for g in range(8):
        for t in range(4):
            for i in range(16):
                reg, u = i // 4, i % 4
                h, r = reg >> 1, reg & 1
                row_a, slot = a8_coord(g, t, i)
                row_c, col = c_coord(g, t, 2 * r + (u & 1))
                assert row_a == row_c  # the byte comes from the row it is used for
                want[slot] = 8 * (2 * h + (u >> 1)) + col
    assert np.array_equal(Q.slot_keys(32), want)
    assert np.array_equal(Q.slot_keys(96), np.concatenate([want, want + 32, want + 64]))


def test_fabs_and_the_widenings_on_raw_bit_patterns():
    """ieee32.fabs clears the sign bit of any float32 (NaN payloads kept); cvt_to_f32 widens f16 through cvt.f32.f16
    and bf16 by its bits, exactly (every bf16 pattern; NaN keeps its payload, as the kernel's shift does)."""
    import ml_dtypes

    from flashsim.numerics import ieee32

    x = np.arange(0, 2**32, 65537, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(ieee32.fabs(x.view(np.float32)).view(np.uint32), x & np.uint32(0x7FFFFFFF))
    b = np.arange(2**16, dtype=np.uint16)
    w = ieee32.cvt_to_f32(b.view(ml_dtypes.bfloat16)).view(np.uint32)
    assert np.array_equal(w, b.astype(np.uint32) << 16)
    h = np.arange(2**16, dtype=np.uint16).view(np.float16)
    assert ieee32.cvt_to_f32(h).tobytes() == ieee32.cvt_f16_to_f32(h).tobytes()
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        ieee32.cvt_to_f32(np.zeros(2, np.float32))
