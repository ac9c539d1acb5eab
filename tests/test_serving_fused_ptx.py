"""flash_fwd's fused serving builds (KernelConfig.fused: the index check inside flash_fwd) run by flashsim.ptx on
the CPU. The paged, split, GQA-packed decode build, followed by flash_combine as on the GPU, gives the emulator's O
and LSE bit for bit under racecheck, and leaves its state zeroed, so a second launch on the same state gives the
same bits; a varlen build with empty sequences (blocks that return at once) gives them too. The index check inside it
writes what flashsim.serving.indices.index_flag computes (code and value) on random good and bad index arrays, as
kernel/serving_check.cu does, reading nothing outside the arrays (memcheck)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from test_serving_indices import _kvcache_case, _varlen_case
from test_serving_ptx import PAGED_CASES
from test_serving_ptx import _case as _paged_case

import flashsim.ptx as P
from flashsim import provenance
from flashsim.constants import COMBINE_WARPS, FUSED_HEADER
from flashsim.emulator import serving as emulated
from flashsim.gpu import serving as gs
from flashsim.gpu.build import kernel_dir
from flashsim.serving import indices
from flashsim.serving.problem import check_indices, index_of, prepare_kvcache, prepare_varlen, serving_options

pytestmark = [pytest.mark.nvrtc, pytest.mark.sass]

OPTS = serving_options(None, None, None, None, None, None, None, None)
TAG = 7


@functools.lru_cache(maxsize=8)
def _module(config):
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    return P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", config))


def _launch(prob, q, k, v, arrays: dict, *, state=None, record=None, check="racecheck"):
    """The fused flash_fwd of ``prob`` on numpy arrays through flashsim.ptx, then with splits flash_combine (the
    launches flashsim.gpu.serving makes): (o, lse, state, record). ``arrays``: cu_q, cu_k, seqlens_k, block_table
    (int32 or None); ``record`` None: an unchecked call (a null record)."""
    prob = gs.fused(prob)
    cfg = prob.config
    o = np.zeros(prob.o_shape, q.dtype)
    lse = np.zeros(prob.lse_shape, np.float32)
    d, rows = prob.head_dim, prob.part_rows
    o_part = np.zeros((prob.num_splits, rows, d), np.float32) if cfg.split else np.uint64(0)
    lse_part = np.zeros((prob.num_splits, rows), np.float32) if cfg.split else np.uint64(0)
    if state is None:
        state = np.zeros(gs.state_bytes(prob) // 4, np.uint32)
    assert state.nbytes == gs.state_bytes(prob) and state.size >= FUSED_HEADER
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    null = np.uint64(0)
    get = lambda name: null if arrays.get(name) is None else arrays[name]  # noqa: E731
    args = [q, k, v, o, lse, null, *head, get("cu_q"), get("cu_k"), get("seqlens_k"), *totals, get("block_table")]
    args += [*pages, o_part, lse_part, *lse_strides]
    args += gs.fused_tail(prob, 0, 0 if record is None else P.address(record), TAG)
    args[-4] = state  # the state as an array the simulator tracks (its address would be a raw pointer)
    module = _module(cfg)
    P.launch(module.kernel("flash_fwd"), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes, check=check)
    if cfg.split:
        combine = module.kernel("flash_combine")
        args = [o_part, lse_part, o, lse, *gs.combine_scalars(prob)]
        P.launch(combine, -(-rows // COMBINE_WARPS), 32 * COMBINE_WARPS, args, check=check)
    return o, lse, state, record


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint16 if x.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("page_size, seqlens, splits", PAGED_CASES)
def test_fused_paged_split_decode_equals_the_emulator_and_leaves_its_state_zeroed(page_size, seqlens, splits):
    q, kp, vp, sl, table, splits = _paged_case(page_size, seqlens, splits)
    prob = prepare_kvcache(q, kp, vp, sl, table, splits, opts=OPTS, arch="sm_90", sm_count=132)
    assert prob.config.split and prob.config.paged and prob.config.pack_gqa
    arrays = dict(seqlens_k=sl, block_table=table)
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    o, lse, state, record = _launch(prob, q, kp, vp, arrays, record=record)
    o_ref, lse_ref = emulated.attention_with_kvcache(
        q, kp, vp, cache_seqlens=sl, block_table=table, num_splits=splits, arch="sm_90"
    )
    np.testing.assert_array_equal(_bits(o), _bits(o_ref))
    np.testing.assert_array_equal(_bits(lse), _bits(np.asarray(lse_ref, np.float32)))
    assert not state.any()  # every ticket back to 0, the code slot empty
    assert record.tolist() == [indices.NONE, 0, 0, 0]  # valid indices: nothing written
    o2, lse2, state, _ = _launch(prob, q, kp, vp, arrays, state=state, record=record, check=None)
    np.testing.assert_array_equal(_bits(o2), _bits(o))
    np.testing.assert_array_equal(_bits(lse2), _bits(lse))
    assert not state.any()


def test_fused_speculative_rows_with_a_window_equal_the_emulator():
    """Three query rows a sequence, causal with a sliding window, pages of 16 in a shuffled table, 3 splits: blocks
    whose window skips a split's first pages still check them (the check covers every page a row reads) and the
    combine merges splits of which some saw no key."""
    q, kp, vp, sl, table, splits = _paged_case(16, [300, 41], 3)
    q = np.concatenate([q] * 3, axis=1)  # (B, 3, h, d)
    opts = serving_options(True, None, None, None, (40, 0), None, None, None)
    prob = prepare_kvcache(q, kp, vp, sl, table, splits, opts=opts, arch="sm_90", sm_count=132)
    assert prob.config.split and prob.config.local and prob.config.causal
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    o, lse, state, record = _launch(prob, q, kp, vp, dict(seqlens_k=sl, block_table=table), record=record)
    o_ref, lse_ref = emulated.attention_with_kvcache(
        q,
        kp,
        vp,
        cache_seqlens=sl,
        block_table=table,
        num_splits=splits,
        causal=True,
        window_size=(40, 0),
        arch="sm_90",
    )
    np.testing.assert_array_equal(_bits(o), _bits(o_ref))
    np.testing.assert_array_equal(_bits(lse), _bits(np.asarray(lse_ref, np.float32)))
    assert not state.any() and record.tolist() == [indices.NONE, 0, 0, 0]
    bad = table.copy()
    bad[0, 2] = -1  # a page row 0 reads but its window never reaches: still a violation, as serving_check says
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    _, _, state, record = _launch(prob, q, kp, vp, dict(seqlens_k=sl, block_table=bad), record=record, check=None)
    code, value = indices.index_flag(prob, index_of(cache_seqlens=sl, block_table=bad))
    assert code == indices.code("table", 2) and record.tolist() == [code, value, TAG, 0] and not state.any()


def test_fused_varlen_with_empty_sequences_equals_the_emulator():
    rng = np.random.default_rng(5)
    lens_q, lens_k = [3, 0, 5], [40, 0, 17]  # an empty sequence: its blocks return before any work
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), 4, 64)).astype(np.float16)
    k = rng.standard_normal((int(cu_k[-1]), 2, 64)).astype(np.float16)
    v = rng.standard_normal((int(cu_k[-1]), 2, 64)).astype(np.float16)
    prob = prepare_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), opts=OPTS, arch="sm_90")
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    o, lse, state, record = _launch(prob, q, k, v, dict(cu_q=cu_q, cu_k=cu_k), record=record)
    o_ref, lse_ref = emulated.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), arch="sm_90")
    np.testing.assert_array_equal(_bits(o), _bits(o_ref))
    np.testing.assert_array_equal(_bits(lse), _bits(np.asarray(lse_ref, np.float32)))
    assert not state.any() and record.tolist() == [indices.NONE, 0, 0, 0]


@pytest.mark.parametrize("make", [_kvcache_case, _varlen_case], ids=["kvcache", "varlen"])
def test_the_fused_check_writes_the_emulated_flag_bit_for_bit(make):
    rng = np.random.default_rng(11)
    bad = good = 0
    for _ in range(12):
        prob, index, arrays = make(rng)
        if min(prob.grid) == 0:  # nothing to launch: the separate check kernel runs instead (flashsim.gpu.serving)
            continue
        code, value = indices.index_flag(prob, index)
        q = np.zeros(prob.o_shape, np.float16)
        cache_shape = (
            (prob.num_pages, prob.page_size)
            if prob.page_size
            else ((prob.batch, prob.nk_cap) if prob.kind == "kvcache" else (max(prob.k_total, 1),))
        )
        kv = np.zeros((*cache_shape, prob.heads_kv, prob.head_dim), np.float16)
        record = np.array([indices.NONE, 0, 0, 0], np.uint64)
        _, _, state, record = _launch(prob, q, kv, kv, arrays, record=record, check="memcheck")
        assert not state.any()
        if code == indices.NONE:
            good += 1
            assert record.tolist() == [indices.NONE, 0, 0, 0]
            check_indices(prob, index)
            continue
        bad += 1
        assert record.tolist() == [code, value, TAG, 0]
    assert bad >= 4 and good >= 2  # both paths exercised


def test_fused_warp_split_decode_equals_the_emulator_and_flags_a_bad_page():
    """A fused warp_split build (the block's warps splitting its keys, merged in the block): the emulator's bits,
    its state zeroed after the launch, and a bad page anywhere in a row's range flagged as serving_check flags it
    (the checking block covers every warp's pages)."""
    from flashsim import KernelConfig

    q, kp, vp, sl, table, _ = _paged_case(16, [300, 37, 1], 1)
    cfg = KernelConfig(
        head_dim=64, warps=3, warp_split=3, kv_tile=16, stages=2, layout="bnhd", seqlens=True, pack_gqa=True,
        paged=True,
    )  # fmt: skip
    opts = serving_options(None, None, cfg, None, None, None, None, None)
    prob = prepare_kvcache(q, kp, vp, sl, table, None, opts=opts, arch="sm_90", sm_count=132)
    assert prob.parts == 3 and not prob.config.split
    arrays = dict(seqlens_k=sl, block_table=table)
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    o, lse, state, record = _launch(prob, q, kp, vp, arrays, record=record)
    o_ref, lse_ref = emulated.attention_with_kvcache(q, kp, vp, cache_seqlens=sl, block_table=table, config=cfg)
    np.testing.assert_array_equal(_bits(o), _bits(o_ref))
    np.testing.assert_array_equal(_bits(lse), _bits(np.asarray(lse_ref, np.float32)))
    assert not state.any() and record.tolist() == [indices.NONE, 0, 0, 0]
    bad = table.copy()
    bad[0, 17] = -1  # row 0's page 17: in the last warp's part
    record = np.array([indices.NONE, 0, 0, 0], np.uint64)
    _, _, state, record = _launch(prob, q, kp, vp, dict(seqlens_k=sl, block_table=bad), record=record, check=None)
    code, value = indices.index_flag(prob, index_of(cache_seqlens=sl, block_table=bad))
    assert code == indices.code("table", 17) and record.tolist() == [code, value, TAG, 0] and not state.any()
