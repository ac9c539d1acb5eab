"""The serving index rules on the device: kernel/serving_check.cu's own PTX, run by flashsim.ptx, writes the record
flashsim.serving.indices.index_flag computes (code and value, bit for bit) on random good and bad index arrays, writes
nothing when every index is valid, keeps an earlier record, and reads nothing outside the arrays (memcheck); the
messages are the host check's; max_seqlen_k chooses the emulator's splits as the GPU's.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import flashsim
from flashsim import ptx
from flashsim.gpu import serving as gs
from flashsim.gpu.build import kernel_path
from flashsim.serving import indices
from flashsim.serving.problem import check_indices, index_of, prepare_kvcache, prepare_varlen, serving_options

OPTS = serving_options(None, None, None, None, None, None, None, None)


@functools.lru_cache(maxsize=1)
def _kernel():
    return ptx.compile(kernel_path(gs.CHECK_FILE).read_text(), arch="sm_90", defines=indices.defines()).kernel(
        gs.CHECK_NAME
    )


def _run(prob, arrays: dict, record=None, check=None) -> np.ndarray:
    """serving_check on ``arrays`` (name -> int32 numpy, check_args' names) through flashsim.ptx: the record."""
    rec = np.array([indices.NONE, 0, 0, 0], np.uint64) if record is None else record.copy()
    ptrs = {name: ptx.address(a) for name, a in arrays.items() if a is not None}
    args = gs.check_args(prob, ptrs, ptx.address(rec), 5)
    ptx.launch(_kernel(), 1, indices.CHECK_THREADS, list(args), check=check)
    return rec


def _kvcache_case(rng):
    b, hk = int(rng.integers(1, 6)), 2
    q = np.zeros((b, 1, 4, 64), np.float16)
    seqlens = None
    if rng.random() < 0.5:
        page = int(rng.choice([16, 32]))
        max_pages, num_pages = int(rng.integers(1, 6)), int(rng.integers(1, 12))
        cache = np.zeros((num_pages, page, hk, 64), np.float16)
        table = rng.integers(0, num_pages, (b, max_pages)).astype(np.int32)
        cap = max_pages * page
        if rng.random() < 0.6:  # a few entries out of range, some of them in pages no row reads
            bad = rng.random(table.shape) < 0.15
            table[bad] = rng.choice([-1, num_pages, num_pages + 7, -(2**31)], bad.sum())
    else:
        table, cap = None, int(rng.integers(1, 300))
        cache = np.zeros((b, cap, hk, 64), np.float16)
    if rng.random() < 0.8:
        seqlens = rng.integers(0, cap + 1, b).astype(np.int32)
        if rng.random() < 0.3:
            seqlens[rng.integers(0, b)] = rng.choice([-1, cap + 1, 2**31 - 1])
    stated = int(rng.integers(0, cap + 1)) if rng.random() < 0.3 else None
    prob = prepare_kvcache(q, cache, cache, seqlens, table, None, opts=OPTS, max_seqlen_k=stated)
    return prob, index_of(cache_seqlens=seqlens, block_table=table), dict(seqlens_k=seqlens, block_table=table)


def _varlen_case(rng):
    b = int(rng.integers(1, 6))
    cus = []
    for _ in range(2):
        lens = rng.integers(0, 9, b)
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        cus.append(cu)
    total_q, total_k = int(cus[0][-1]), int(cus[1][-1])
    caps = [max(1, int(np.diff(c).max(initial=0))) for c in cus]
    for cu in cus:
        if rng.random() < 0.4:  # a broken offset: a start, a step back, an end, a long run, or extremes
            i = int(rng.integers(0, b + 1))
            cu[i] = rng.choice([cu[i] + 1, cu[i] - 3, -(2**31), 2**31 - 1, 0])
    q = np.zeros((max(total_q, 1), 4, 64), np.float16)
    k = np.zeros((max(total_k, 1), 2, 64), np.float16)
    prob = prepare_varlen(
        q, k, k, cus[0], cus[1], min(caps[0], q.shape[0]), min(caps[1], k.shape[0]), opts=OPTS, arch="sm_90"
    )
    return prob, index_of(cu_seqlens_q=cus[0], cu_seqlens_k=cus[1]), dict(cu_q=cus[0], cu_k=cus[1])


@pytest.mark.nvrtc
@pytest.mark.sass
@pytest.mark.parametrize("make", [_kvcache_case, _varlen_case], ids=["kvcache", "varlen"])
def test_the_check_kernel_writes_the_emulated_flag_bit_for_bit(make):
    rng = np.random.default_rng(7)
    bad = good = 0
    for _ in range(24):
        prob, index, arrays = make(rng)
        code, value = indices.index_flag(prob, index)
        rec = _run(prob, arrays)
        if code == indices.NONE:
            good += 1
            assert rec.tolist() == [indices.NONE, 0, 0, 0]  # nothing written on the good path
            check_indices(prob, index)
            continue
        bad += 1
        assert rec.tolist() == [code, value, 5, 0]
        with pytest.raises(ValueError) as host:
            check_indices(prob, index)
        assert str(indices.index_error(prob, int(rec[0]), int(rec[1]))) == str(host.value)
    assert bad >= 5 and good >= 5  # both paths exercised


@pytest.mark.nvrtc
@pytest.mark.sass
def test_the_first_error_sticks_and_the_reads_stay_inside_the_arrays():
    q = np.zeros((3, 1, 4, 64), np.float16)
    pages = np.zeros((10, 16, 2, 64), np.float16)
    table = np.array([[0, 1, 2, 99], [4, 5, -1, 7], [8, 9, 12, 0]], np.int32)
    seqlens = np.array([48, 40, 33], np.int32)  # row 0 reads 3 pages: its 99 is never read
    prob = prepare_kvcache(q, pages, pages, seqlens, table, None, opts=OPTS)
    arrays = dict(seqlens_k=seqlens, block_table=table)
    rec = _run(prob, arrays, check="memcheck")
    assert indices.index_error(prob, int(rec[0]), int(rec[1])).args[0].startswith("block_table[1, 2] = -1 is outside")
    assert rec[0] == indices.code("table", 1 * 4 + 2)
    earlier = np.array([indices.code("seqlens", 2), 77, 9, 0], np.uint64)
    assert _run(prob, arrays, record=earlier).tolist() == earlier.tolist()  # not overwritten
    _run(prob, arrays, check="racecheck")


def test_max_seqlen_k_chooses_the_emulators_splits_and_bounds_the_rows():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 1, 8, 64)).astype(np.float16)
    k = rng.standard_normal((1, 4096, 2, 64)).astype(np.float16)
    sl = np.array([300], np.int32)
    stated = prepare_kvcache(q, k, k, sl, None, None, opts=OPTS, max_seqlen_k=320)
    whole = prepare_kvcache(q, k, k, sl, None, None, opts=OPTS)
    assert stated.parts < whole.parts  # chosen over 320 keys, not the 4096 the cache holds
    o, lse = flashsim.attention_with_kvcache(q, k, k, cache_seqlens=sl, max_seqlen_k=320, progress=False)
    # the one-warp call of the same tiles with as many splits as the chosen parts (its warps' parts, where the decode
    # rule took the warp_split form)
    one = stated.config.with_(warps=1, warp_split=1)
    o2, lse2 = flashsim.attention_with_kvcache(
        q, k, k, cache_seqlens=sl, num_splits=stated.parts, config=one, progress=False
    )
    assert np.array_equal(o.view(np.uint16), o2.view(np.uint16)) and np.array_equal(
        lse.view(np.uint32), lse2.view(np.uint32)
    )
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 300 is more than max_seqlen_k=299"):
        flashsim.attention_with_kvcache(q, k, k, cache_seqlens=sl, max_seqlen_k=299, progress=False)
    with pytest.raises(ValueError, match="max_seqlen_k must be None or an int in 0..4096"):
        flashsim.attention_with_kvcache(q, k, k, cache_seqlens=sl, max_seqlen_k=4097, progress=False)
