"""The serving calls in the emulator: against float64 within the derived bound, and bit for bit against the other
paths that run the same tiles (num_splits=1 against flashsim.attention, pages against a contiguous cache, varlen
against each sequence alone, numpy against JAX).

The bound with split-KV (flashsim.emulator.reference.split_error_bound), derived from the program: a split s ends
with O_s = (sum over its keys of p~ v) / l_s kept in f32, so it carries the single pass's error terms (P rounded to
the element type: u V; the f32 mma: ~2^-22 of the partial sums; subnormal p: n_s 2^-25 V / l_s) but not the final
rounding. The combine forms O = sum_s (w_s / W) O_s with w_s = exp(lse_s - max) through ex2: the weights sum to 1,
so the parts' errors mix into at most the largest (and the subnormal terms, weighed by l_s e^(m_s - M) / L, into
at most Nk 2^-25 V), and the combine adds (a) the error of the normalised weights, at most twice one weight's
relative error delta_w: each lse_s = m_s scale + ln(l_s) is off by l_s's relative error (E_P + n 2^-24) plus an f32
rounding of |lse_s| and log_exact_ops' few ulps, and ex2((lse_s - max) log2 e) by one rounding each of the
subtraction and the product and ex2's 2 ulps: delta_w = 2 (E_P + Nk 2^-24) + 2^-22 (|lse| + 4); (b) one f32 fma per
split, 2^-24 V each; (c) the final rounding to the element type, u |O*|, already in the single pass's bound. With
f16 or f16x2 P@V each split's f16 roundings are those of the single pass over its own keys, so their weighted mean
stays within the single-pass f16 bound.
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig
from flashsim.commands.verify_serving import ServingCase
from flashsim.emulator import engine_serving
from flashsim.emulator.reference import split_error_bound
from flashsim.masking import Window, key_range
from flashsim.problem import resolve_options
from flashsim.serving import blocks as serving_blocks
from flashsim.serving import splits
from flashsim.serving.problem import index_of, prepare_kvcache

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RNG_SEED = 7


def _inputs(b, nq, h, hk, n, d, seed=RNG_SEED, dtype=np.float16):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(dtype) for s in ((b, nq, h, d), (b, n, hk, d), (b, n, hk, d)))


def _paged(k, v, page_size, seed=0, share=False):
    """The caches (B, N, Hkv, d) as pages in a random order (+ 2 pages no row uses) and their block table; with
    ``share`` row 1's first entry is row 0's first page (row 1 then reads row 0's first keys)."""
    b, n, hk, d = k.shape
    per = -(-n // page_size)
    rng = np.random.default_rng(seed)
    pages = b * per + 2
    table = rng.permutation(pages)[: b * per].reshape(b, per).astype(np.int32)
    kp = rng.standard_normal((pages, page_size, hk, d)).astype(k.dtype)
    vp = rng.standard_normal((pages, page_size, hk, d)).astype(k.dtype)
    pad = per * page_size - n
    kk, vv = (np.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (k, v))
    for row in range(b):
        for j in range(per):
            kp[table[row, j]] = kk[row, j * page_size : (j + 1) * page_size]
            vp[table[row, j]] = vv[row, j * page_size : (j + 1) * page_size]
    if share:
        table[1, 0] = table[0, 0]
    return kp, vp, table


def _bits(x):
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _assert_bits_equal(a, b):
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(_bits(x), _bits(y)), f"{np.count_nonzero(_bits(x) != _bits(y))} elements differ"


def _check_against_reference(o, lse, o_ref, lse_ref, keys, nk, cfg, num_splits, group):
    """Per sequence: |o - o_ref| within split_error_bound, lse close, rows without keys exactly (+0, +inf)."""
    for b in range(o.shape[0]):
        if nk[b] == 0:
            assert np.all(_bits(o[b]) == 0) and np.all(_bits(lse[b]) == 0x7F800000)
            continue
        o_b, ref_b = o[b].transpose(1, 0, 2)[None].astype(np.float64), o_ref[b].transpose(1, 0, 2)[None]
        v_b = np.repeat(keys[b, : nk[b]].transpose(1, 0, 2)[None], group, axis=1)
        bound = split_error_bound(
            ref_b, v_b, lse_ref[b][None], int(nk[b]), cfg.kv_tile, cfg.pv_accum, num_splits, cfg.dtype
        )
        err = np.abs(o_b - ref_b)
        assert np.all(err <= bound), f"row {b}: max excess {np.max(err - bound)}"
        fin = np.isfinite(lse_ref[b])
        assert np.array_equal(np.isinf(lse[b]), ~fin)
        tol = 2e-6 + 2.0**-21 * (np.abs(lse_ref[b][fin]) + 4) + num_splits * 2.0**-23
        assert np.all(np.abs(lse[b][fin] - lse_ref[b][fin]) <= tol)


CASES = [  # (B, Nq, Hq, Hkv, N_cache, d, cache_seqlens, options, num_splits)
    (3, 1, 8, 2, 300, 128, (300, 1, 77), {}, None),  # decode, GQA packed, the heuristic
    (3, 1, 8, 2, 300, 128, (300, 1, 77), {}, 5),
    (2, 1, 8, 2, 200, 128, (200, 0), dict(pv_accum="f16"), 3),  # a row with no key
    (2, 6, 4, 2, 200, 64, (200, 60), dict(causal=True), 2),  # speculative decoding, aligned to each row
    (2, 4, 4, 1, 180, 64, (180, 90), dict(causal=True, window_size=(30, 0), pv_accum="f16x2"), 2),
    (2, 2, 2, 2, 160, 256, (160, 33), dict(softcap=25.0), 3),  # group 1: not packed
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"B{c[0]}Nq{c[1]}H{c[2]}/{c[3]}N{c[4]}d{c[5]}s{c[8]}")
def test_kvcache_against_the_float64_reference(case):
    b, nq, h, hk, n, d, lens, opts, ns = case
    q, k, v = _inputs(b, nq, h, hk, n, d)
    sl = np.asarray(lens, np.int32)
    o, lse = flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=ns, progress=False, **opts)
    o_ref, lse_ref = flashsim.reference_attention_with_kvcache(q, k, v, cache_seqlens=sl, **opts)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (b, h, nq) and lse.dtype == np.float32
    prob = prepare_kvcache(q, k, v, sl, None, ns, opts=resolve_options(layout="bnhd", **opts))
    assert prob.config.split == (prob.num_splits > 1) and prob.config.pack_gqa == (h > hk)
    _check_against_reference(o, lse, o_ref, lse_ref, v, sl, prob.config, prob.num_splits, h // hk)


def test_bf16_kvcache_and_a_split_with_no_key():
    """bf16 (u = 2^-8); 8 splits of a 512-key cache for rows of 20 and 3 keys: most splits hold no key for them
    (their LSE is -inf, their weight 0)."""
    import ml_dtypes

    q, k, v = _inputs(3, 1, 8, 2, 512, 128, dtype=ml_dtypes.bfloat16)
    sl = np.array([20, 512, 3], np.int32)
    o, lse = flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=8, progress=False)
    o_ref, lse_ref = flashsim.reference_attention_with_kvcache(q, k, v, cache_seqlens=sl)
    prob = prepare_kvcache(q, k, v, sl, None, 8, opts=resolve_options(layout="bnhd"))
    _check_against_reference(o, lse, o_ref, lse_ref, v.astype(np.float32), sl, prob.config, 8, 4)


def test_one_split_is_flashsim_attention_bit_for_bit():
    """num_splits=1 is the single pass: with the same tiling, a full cache gives flashsim.attention's bits, packed
    (GQA, non-causal) or not (group 1, causal); each row of a cache with lengths gives the bits of flashsim.attention
    on its own keys (its tiles start at key 0 either way), causal rows included (the packed block's extra tiles are
    wholly masked for a row: they add exact zeros)."""
    cfg = KernelConfig(head_dim=64, warps=1, m_tiles=1, kv_tile=32, stages=2, layout="bnhd")
    q, k, v = _inputs(2, 1, 8, 2, 150, 64)
    _assert_bits_equal(
        flashsim.attention_with_kvcache(q, k, v, num_splits=1, config=cfg, progress=False),
        flashsim.attention(q, k, v, layout="bnhd", config=cfg, progress=False),
    )
    q, k, v = _inputs(2, 9, 2, 2, 100, 64)
    ccfg = cfg.with_(causal=True)
    _assert_bits_equal(
        flashsim.attention_with_kvcache(q, k, v, num_splits=1, causal=True, config=ccfg, progress=False),
        flashsim.attention(q, k, v, layout="bnhd", causal=True, config=ccfg, progress=False),
    )
    q, k, v = _inputs(2, 5, 8, 2, 120, 64)
    sl = np.array([120, 41], np.int32)
    o, lse = flashsim.attention_with_kvcache(
        q, k, v, cache_seqlens=sl, num_splits=1, causal=True, config=ccfg, progress=False
    )
    for b in range(2):
        n = int(sl[b])
        od, ld = flashsim.attention(
            q[b : b + 1], k[b : b + 1, :n], v[b : b + 1, :n], layout="bnhd", causal=True, config=ccfg, progress=False
        )
        _assert_bits_equal((o[b : b + 1], lse[b : b + 1]), (od, ld))


@pytest.mark.parametrize("page_size", [16, 32, 64, 128, 256])
def test_pages_are_the_contiguous_cache_bit_for_bit(page_size):
    """Pages in a random order (the same keys, the same tiles): every bit equals the contiguous cache's, with and
    without splits, causal speculative rows included."""
    q, k, v = _inputs(3, 3, 8, 2, 300, 128)
    sl = np.array([300, 1, 129], np.int32)
    kp, vp, table = _paged(k, v, page_size, seed=page_size)
    for ns in (1, 3):
        _assert_bits_equal(
            flashsim.attention_with_kvcache(
                q, kp, vp, cache_seqlens=sl, block_table=table, num_splits=ns, causal=True, progress=False
            ),
            flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=ns, causal=True, progress=False),
        )


def test_a_page_shared_by_two_rows():
    """block_table[1, 0] = block_table[0, 0]: row 1 reads row 0's first 16 keys; the result is the contiguous cache
    with row 1's first page replaced by row 0's."""
    q, k, v = _inputs(2, 1, 8, 2, 160, 128)
    kp, vp, table = _paged(k, v, 16, seed=3, share=True)
    k2, v2 = k.copy(), v.copy()
    k2[1, :16], v2[1, :16] = k[0, :16], v[0, :16]
    _assert_bits_equal(
        flashsim.attention_with_kvcache(q, kp, vp, block_table=table, num_splits=2, progress=False),
        flashsim.attention_with_kvcache(q, k2, v2, num_splits=2, progress=False),
    )


def test_varlen_is_each_sequence_alone_bit_for_bit():
    """Each sequence of a variable-length batch (empty ones included) gives the bits of flashsim.attention on that
    sequence with the same tiling; a sequence without keys gives +0 and +inf; one without rows nothing."""
    rng = np.random.default_rng(5)
    lq, lk = [3, 0, 130, 1, 64], [50, 7, 260, 0, 64]
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    h, hk, d = 4, 2, 64
    q = rng.standard_normal((cq[-1], h, d)).astype(np.float16)
    k, v = (rng.standard_normal((ck[-1], hk, d)).astype(np.float16) for _ in range(2))
    cfg = KernelConfig.default("sm_90", head_dim=d, causal=True, layout="bnhd")
    o, lse = flashsim.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=True, config=cfg, progress=False)
    assert o.shape == q.shape and lse.shape == (h, cq[-1])
    for b in range(len(lq)):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        if lq[b] == 0:
            continue
        if lk[b] == 0:
            assert np.all(_bits(o[rows]) == 0) and np.all(_bits(lse[:, rows]) == 0x7F800000)
            continue
        od, ld = flashsim.attention(
            q[None, rows], k[None, keys], v[None, keys], layout="bnhd", causal=True, config=cfg, progress=False
        )
        _assert_bits_equal((o[rows], lse[:, rows]), (od[0], ld[0]))
    o_ref, lse_ref = flashsim.reference_attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=True)
    assert np.abs(o - o_ref).max() < 2e-3 and np.array_equal(np.isinf(lse), np.isinf(lse_ref))


def test_rows_without_keys_are_zero_and_plus_inf_with_and_without_splits():
    q, k, v = _inputs(2, 2, 4, 2, 300, 64)
    sl = np.array([0, 300], np.int32)
    for ns in (1, 2):
        o, lse = flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=ns, progress=False)
        assert np.all(_bits(o[0]) == 0) and np.all(_bits(lse[0]) == 0x7F800000)
        assert np.isfinite(o[1]).all() and np.isfinite(lse[1]).all()


@pytest.mark.needs("jax")
def test_numpy_and_jax_engines_agree_bit_for_bit():
    """The JAX backend runs the same program (jit-compiled steps, the epilogues and the combine on jax.numpy): a
    paged cache with splits and a causal window, small enough to compile once."""
    cfg = KernelConfig(head_dim=32, warps=1, m_tiles=1, kv_tile=16, stages=2, layout="bnhd", causal=True, local=True)
    q, k, v = _inputs(2, 2, 4, 2, 64, 32)
    kp, vp, table = _paged(k, v, 16, seed=1)
    kw = dict(
        cache_seqlens=np.array([64, 23], np.int32),
        block_table=table,
        num_splits=3,
        causal=True,
        window_size=(20, 0),
        config=cfg,
        progress=False,
    )
    _assert_bits_equal(
        flashsim.attention_with_kvcache(q, kp, vp, backend="jax", **kw),
        flashsim.attention_with_kvcache(q, kp, vp, **kw),
    )


def test_f16_accumulator_overflow_names_the_row():
    """pv_accum="f16" over a cache: an overflowing row raises FloatingPointError naming (b, h, row), in the emulator
    as on the GPU (the same flag rule). q = 0 makes every p 1: 1024 keys of 100 sum to 102400 > 65504 in one pass,
    while two splits sum 512 keys each (51200) and give the right 100."""
    q = np.zeros((2, 1, 4, 64), np.float16)
    k = _inputs(2, 1, 4, 2, 1024, 64)[1]
    v = np.ones((2, 1024, 2, 64), np.float16)
    v[1, :, 1] = 100.0  # row 1, K / V head 1 (query heads 2 and 3)
    with pytest.raises(FloatingPointError, match=r"\(b=1, h=2, row=0\).*65504"):
        flashsim.attention_with_kvcache(q, k, v, pv_accum="f16", num_splits=1, progress=False)
    o, _ = flashsim.attention_with_kvcache(q, k, v, pv_accum="f16", num_splits=1, check_overflow=False, progress=False)
    assert np.isinf(o[1, 0, 2:]).all() and np.all(o[0] == 1)
    o, _ = flashsim.attention_with_kvcache(q, k, v, pv_accum="f16", num_splits=2, progress=False)
    assert np.all(o[1, 0, 2:] == 100) and np.all(o[0] == 1)


# -- the grid and the splits ----------------------------------------------------------------------------------


def test_the_serving_grid_is_the_dense_one_for_dense_shapes():
    """Without packing, splits or lengths, every block's tile range is flashsim.masking.key_range's (the dense
    kernel's), causal and windowed."""
    for causal, window in ((False, None), (True, None), (True, (40, 0)), (False, (17, 9))):
        q, k, v = _inputs(1, 200, 2, 2, 333, 64)
        opts = resolve_options(causal=causal, window_size=window, layout="bnhd")
        prob = prepare_kvcache(q, k, v, None, None, 1, opts=opts)
        blocks = serving_blocks.grid_blocks(prob, index_of())
        cfg = prob.config
        win = Window.from_user(opts.window_size, 200, 333) if cfg.local else None
        first, end = key_range(np.arange(prob.q_blocks) * cfg.block_m, cfg.block_m, 200, 333, causal, win)
        t0 = first // cfg.kv_tile
        n = np.maximum(0, -(-end // cfg.kv_tile) - t0)
        assert np.array_equal(blocks.t0, np.tile(t0, 2)) and np.array_equal(blocks.tiles, np.tile(n, 2))


def test_every_visible_key_lies_in_its_blocks_tiles_and_splits_partition_them():
    """For packed rows, rows of different lengths and windows: each row's visible keys lie in its block's tiles, and
    the splits of a block's range cover it exactly once."""
    q, k, v = _inputs(3, 7, 8, 2, 260, 64)
    sl = np.array([260, 5, 131], np.int32)
    opts = resolve_options(causal=True, window_size=(50, 0), layout="bnhd")
    for ns in (1, 3):
        prob = prepare_kvcache(q, k, v, sl, None, ns, opts=opts)
        blocks = serving_blocks.grid_blocks(prob, index_of(cache_seqlens=sl))
        bc = prob.config.kv_tile
        cover = {}
        for u in range(blocks.count):
            b = blocks.batch[u]
            nk = int(sl[b])
            keys = np.arange(nk)
            for r in np.flatnonzero(blocks.valid[u]):
                pos = blocks.q_row[u, r] + nk - 7
                vis = keys[(keys <= pos) & (keys >= pos - 50)]
                if ns == 1 and vis.size:
                    assert vis.min() >= blocks.t0[u] * bc and vis.max() < (blocks.t0[u] + blocks.tiles[u]) * bc
            span = range(blocks.t0[u], blocks.t0[u] + blocks.tiles[u])
            key = (b, blocks.head[u], blocks.qblk[u])
            cover.setdefault(key, []).extend(span)
        for tiles in cover.values():
            assert len(tiles) == len(set(tiles))  # no tile twice over the splits of a block


def test_the_split_heuristic():
    """FlashAttention-2's rule on its own example (48 blocks, 108 SMs of one block each: 2 splits), a grid that
    fills the GPU (no split), and the H200 decode of the speed table: B = 8, Hkv = 8, 8192 keys, d = 128."""
    assert splits.split_heuristic(48, 108, 100) == 2
    assert splits.split_heuristic(100, 108, 100) == 1
    cfg = KernelConfig(head_dim=128, warps=1, kv_tile=64, stages=2, layout="bnhd", seqlens=True, pack_gqa=True)
    slots = 132 * splits.resident_blocks(cfg, "sm_90")
    s = splits.choose_splits(cfg, "sm_90", 64, 8192 // 64)
    waves = 64 * s / slots
    assert 2 <= s <= 16 and waves / np.ceil(waves) >= 0.85
    first, end = splits.split_tiles(10, 4, np.arange(4))
    assert list(first) == [0, 3, 6, 9] and list(end) == [3, 6, 9, 10]
    first, end = splits.split_tiles(5, 4, np.arange(4))
    assert list(end - first) == [2, 2, 1, -1]  # the last split is empty (a block there visits no tile)


def test_a_serving_case_runs_the_emulator_against_itself_through_verify():
    """verify_serving's cases regenerate the same inputs (their hash) and run; a paged case with a shared page."""
    case = ServingCase(
        "kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 170), page_size=16, pages="shared", num_splits=4
    )
    a, b = case.arrays(), case.arrays()
    from flashsim.commands.verify_serving import diff_case, inputs_sha256

    assert inputs_sha256(a) == inputs_sha256(b)
    od, ld, got, emu, prob, _ = diff_case(case, "sm_90", gpu=False)
    assert od.ok and ld.ok and prob.num_splits == 4 and prob.config.paged


def test_sequence_keys_zero_past_each_row():
    """The emulator's gather leaves zeros past a row's keys (what the kernel's zero-fill gives), whatever the cache
    holds there (inf here)."""
    q, k, v = _inputs(2, 1, 4, 2, 64, 64)
    v[1, 10:] = np.inf
    sl = np.array([64, 10], np.int32)
    prob = prepare_kvcache(q, k, v, sl, None, 1, opts=resolve_options(layout="bnhd"))
    keys = engine_serving.sequence_keys(v, prob, index_of(cache_seqlens=sl), 128)
    assert np.all(keys[1, 10:] == 0) and np.array_equal(keys[0, :64], v[0])
    o, _ = flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, progress=False)
    assert np.isfinite(o).all()


def _warp_split_config(w, kv_tile, d=64, paged=False):
    return KernelConfig(
        head_dim=d, warps=w, warp_split=w, kv_tile=kv_tile, stages=2, layout="bnhd", seqlens=True, pack_gqa=True,
        paged=paged,
    )  # fmt: skip


@pytest.mark.parametrize("w, paged", [(3, False), (4, True)])
def test_a_warp_split_is_the_split_call_bit_for_bit(w, paged):
    """KernelConfig.warp_split W: a block's W warps each take one part of its keys, merged in the block with the
    combine's arithmetic: the bits of the one-warp call with num_splits = W on the same tiles (rows with no key in
    some parts, an empty row, a row of one tile), contiguous or paged; blocks as W units each, parts s * W + w."""
    q, k, v = _inputs(4, 1, 8, 2, 192, 64)
    sl = np.array([190, 0, 16, 97], np.int32)
    table = None
    if paged:  # the cache as pages of 16 in a shuffled order
        pages = np.random.default_rng(4).permutation(4 * 12)
        table = pages.reshape(4, 12).astype(np.int32)
        kp, vp = (np.empty((48, 16, 2, 64), np.float16) for _ in range(2))
        kp[pages], vp[pages] = k.reshape(48, 16, 2, 64), v.reshape(48, 16, 2, 64)
        k, v = kp, vp
    cfg = _warp_split_config(w, 16, paged=paged)
    o, lse = flashsim.attention_with_kvcache(q, k, v, cache_seqlens=sl, block_table=table, config=cfg, progress=False)
    one = cfg.with_(warps=1, warp_split=1)
    kw = dict(cache_seqlens=sl, block_table=table, config=one, num_splits=w, progress=False)
    o1, lse1 = flashsim.attention_with_kvcache(q, k, v, **kw)
    np.testing.assert_array_equal(o.view(np.uint16), o1.view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), lse1.view(np.uint32))
    prob = prepare_kvcache(q, k, v, sl, table, None, opts=resolve_options(config=cfg, layout="bnhd"))
    units = serving_blocks.grid_blocks(prob, index_of(sl, table))
    assert prob.parts == w and prob.num_splits == 1 and units.count == 4 * 2 * w
    assert sorted(set(units.split.tolist())) == list(range(w))


def test_a_warp_split_config_is_checked():
    """warp_split needs one warp per part; with num_splits S across blocks too, the call is the (S x W)-split call
    (not fused, at most MAX_SPLITS parts); a variable-length batch and flashsim.attention refuse it, each with the
    reason."""
    with pytest.raises(ValueError, match="warps == warp_split"):
        KernelConfig(warps=2, warp_split=3, seqlens=True, layout="bnhd")
    cfg = _warp_split_config(3, 16)
    assert cfg.block_m == 16 and cfg.threads == 96 and "warp_split=3" in cfg.describe()
    assert "warp_split" not in cfg.with_(warps=1, warp_split=1).describe()
    one_ring = cfg.with_(warps=1, warp_split=1).smem_bytes - 16 * 64 * 2  # the Q tile aside
    assert cfg.smem_bytes == 16 * 64 * 2 + 3 * one_ring
    q, k, v = _inputs(2, 1, 8, 2, 64, 64)
    # with splits across blocks too: warp w of split s takes part s * W + w, flash_combine merges the S * W parts
    q2, k2, v2 = _inputs(2, 1, 8, 2, 200, 64)
    o, lse = flashsim.attention_with_kvcache(q2, k2, v2, config=cfg, num_splits=2, progress=False)
    o6, lse6 = flashsim.attention_with_kvcache(q2, k2, v2, config=cfg.with_(warps=1, warp_split=1), num_splits=6,
                                               progress=False)  # fmt: skip
    assert np.array_equal(o.view(np.uint16), o6.view(np.uint16)) and np.array_equal(
        lse.view(np.uint32), lse6.view(np.uint32)
    )
    with pytest.raises(ValueError, match="fused=False"):
        cfg.with_(split=True, fused=True)
    wide = _warp_split_config(16, 16)
    big_k = np.zeros((1, 16 * 16, 2, 64), np.float16)
    with pytest.raises(ValueError, match="makes 256 parts a row; flash_combine merges at most 128"):
        flashsim.attention_with_kvcache(q[:1], big_k, big_k, config=wide, num_splits=16, progress=False)
    cu = np.array([0, 64, 128], np.int32)
    qv, kv_, vv = (x.reshape(128, x.shape[2], 64) for x in (np.concatenate([q] * 64, 1), k, v))
    with pytest.raises(ValueError, match="KV-cache decode configuration"):
        flashsim.attention_varlen(qv, kv_, vv, cu, cu, 64, 64, config=cfg.with_(pack_gqa=False), progress=False)
    dense = cfg.with_(seqlens=False, pack_gqa=False, layout="bhnd")
    with pytest.raises(ValueError, match="KV-cache decode configuration"):
        flashsim.attention(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), config=dense)


def test_the_warp_split_decode_rule(monkeypatch):
    """flashsim.tuning.WARP_SPLIT_DECODE: where the one-warp decode's heuristic takes 2..WARP_SPLIT_MAX splits and
    one block per row group fits one wave, the default call takes one block of that many warps per row group
    instead, with the widest kv tile whose rings fit (d 128 on sm_90: 6 warps of 32-key tiles at the serving table's
    B=8 shape, the fastest candidate timed), a paged cache 8 warps of 3-stage rings where its row groups fill
    WARP_SPLIT_PAGED_MIN_FILL of the SMs (64 of 132 do, 48 do not); two waves of such blocks (B=32),
    K tiles under WARP_SPLIT_MIN_TILE elements on a contiguous cache, rings that do not fit, an explicit num_splits and
    a given config keep the split call; off, the default is the split call."""
    from flashsim import tuning

    opts = resolve_options(layout="bnhd")

    def prep(b=8, nk=8192, n=None, o=opts):
        q = np.broadcast_to(np.zeros((), np.float16), (b, 1, 32, 128))
        k = np.broadcast_to(np.zeros((), np.float16), (b, nk, 8, 128))
        return prepare_kvcache(q, k, k, None, None, n, opts=o, arch="sm_90", sm_count=132)

    assert tuning.WARP_SPLIT_DECODE
    on = prep()
    assert (on.config.warps, on.config.warp_split, on.config.kv_tile, on.num_splits, on.parts) == (6, 6, 32, 1, 6)
    assert not on.config.split and on.config.fits("sm_90")
    assert prep(n=4).config.warp_split == 1 and prep(n=4).num_splits == 4
    two_waves = prep(b=32, nk=4096)  # 3 splits: 256 blocks of 3 warps, one a SM (196 KB)
    assert (two_waves.config.warp_split, two_waves.num_splits) == (1, 3)
    narrow = prep(b=6)  # 7 splits: 7 rings fit only 16-key tiles, 2048 elements a K tile
    assert (narrow.config.warp_split, narrow.num_splits) == (1, 7)
    pages = np.broadcast_to(np.zeros((), np.float16), (8 * 512, 16, 8, 128))
    q = np.broadcast_to(np.zeros((), np.float16), (8, 1, 32, 128))
    table = np.zeros((8, 512), np.int32)
    paged = prepare_kvcache(q, pages, pages, None, table, None, opts=opts, arch="sm_90", sm_count=132)
    shape = (paged.config.warps, paged.config.warp_split, paged.config.kv_tile, paged.config.stages, paged.num_splits)
    assert shape == (8, 8, 16, 3, 1) and paged.parts == 8 and paged.config.fits("sm_90")  # the paged form
    few = prepare_kvcache(q[:6], pages, pages, None, table[:6], None, opts=opts, arch="sm_90", sm_count=132)
    assert (few.config.warp_split, few.num_splits) == (1, 7)  # 48 row groups: under WARP_SPLIT_PAGED_MIN_FILL's 59.4
    assert 48 < tuning.WARP_SPLIT_PAGED_MIN_FILL * 132 <= 64
    wide_pages = np.broadcast_to(np.zeros((), np.float16), (8 * 512, 16, 8, 256))
    q256 = np.broadcast_to(np.zeros((), np.float16), (8, 1, 32, 256))
    d256 = prepare_kvcache(q256, wide_pages, wide_pages, None, table, None, opts=opts, arch="sm_90", sm_count=132)
    assert (d256.config.warp_split, d256.num_splits) == (1, 6)  # 8 three-stage rings of d = 256 do not fit
    on_120 = prepare_kvcache(q, pages, pages, None, table, None, opts=opts, arch="sm_120", sm_count=188)
    assert on_120.config.warp_split == 1  # nor in sm_120's 100 KB
    monkeypatch.setattr(tuning, "WARP_SPLIT_DECODE", False)
    off = prep()
    assert (off.config.warps, off.config.warp_split, off.num_splits) == (1, 1, 6)
    given = resolve_options(config=off.config.with_(split=False), layout="bnhd")
    monkeypatch.setattr(tuning, "WARP_SPLIT_DECODE", True)
    assert prep(o=given).config.warp_split == 1


def test_verify_runs_a_build_without_a_fused_form_with_its_separate_check():
    """verify --serving --fused: a warp_split build with splits across blocks too has no fused form
    (KernelConfig.has_fused_form), so its case runs unfused; every other KV-cache case runs the fused build."""
    from flashsim.commands.verify_serving import diff_case, serving_cases

    cases = serving_cases()
    both = next(c for c in cases if c.warp_split > 1 and c.num_splits)
    prob = diff_case(both, "sm_90", gpu=False, sm_count=132, fused=True)[4]
    assert prob.config.split and prob.config.warp_split == 3 and prob.parts == 6 and not prob.config.fused
    plain = diff_case(cases[0], "sm_90", gpu=False, sm_count=132, fused=True)[4]
    assert plain.config.fused
