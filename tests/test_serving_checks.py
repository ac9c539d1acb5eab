"""Bad input to the serving calls: a ValueError naming the argument, before anything runs, in the emulator and in
the GPU runner alike (the GPU mocked: its checks run before any copy or launch).

Each case is a call that must fail and the words its message must hold: a block_table entry outside
[0, num_pages), cache_seqlens past the pages a row holds, cu_seqlens not starting at 0 / decreasing / not ending at
the total / longer than max_seqlen, index arrays that are not int32, num_splits < 1 or above the key tiles (or not
an int), page sizes the kernel does not take, quant and the (B, H, N, d) layout, and shapes that do not fit.
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim.gpu import runtime as rt

rng = np.random.default_rng(0)
B, NQ, H, HK, D, N = 2, 1, 4, 2, 64, 300


def _kv_args(**over):
    q = rng.standard_normal((B, NQ, H, D)).astype(np.float16)
    k = rng.standard_normal((B, N, HK, D)).astype(np.float16)
    args = dict(q=q, k_cache=k, v_cache=k.copy(), cache_seqlens=np.array([300, 10], np.int32))
    args.update(over)
    return args


def _paged_args(**over):
    q = rng.standard_normal((B, NQ, H, D)).astype(np.float16)
    pages = rng.standard_normal((7, 16, HK, D)).astype(np.float16)
    table = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    args = dict(q=q, k_cache=pages, v_cache=pages.copy(), block_table=table, cache_seqlens=np.array([48, 20], np.int32))
    args.update(over)
    return args


def _varlen_args(**over):
    lq, lk = [3, 0, 5], [4, 6, 0]
    args = dict(
        q=rng.standard_normal((8, H, D)).astype(np.float16),
        k=rng.standard_normal((10, HK, D)).astype(np.float16),
        v=rng.standard_normal((10, HK, D)).astype(np.float16),
        cu_seqlens_q=np.concatenate([[0], np.cumsum(lq)]).astype(np.int32),
        cu_seqlens_k=np.concatenate([[0], np.cumsum(lk)]).astype(np.int32),
        max_seqlen_q=5,
        max_seqlen_k=6,
    )
    args.update(over)
    return args


KVCACHE_BAD = [
    (
        _paged_args(block_table=np.array([[0, 1, 7], [3, 4, 5]], np.int32)),
        r"block_table\[0, 2\] = 7 is outside \[0, 7\)",
    ),
    (_paged_args(block_table=np.array([[0, 1, 2], [-1, 4, 5]], np.int32)), r"block_table\[1, 0\] = -1"),
    (_paged_args(cache_seqlens=np.array([49, 20], np.int32)), r"cache_seqlens\[0\] = 49 is past the keys row 0 holds"),
    (_kv_args(cache_seqlens=np.array([301, 2], np.int32)), r"cache_seqlens\[0\] = 301 .*\(N_cache = 300"),
    (_kv_args(cache_seqlens=np.array([3, -1], np.int32)), r"cache_seqlens\[1\] = -1"),
    (_kv_args(cache_seqlens=np.array([3, 1], np.int64)), "cache_seqlens must be int32, got int64"),
    (_kv_args(cache_seqlens=np.array([3, 1, 1], np.int32)), r"cache_seqlens must have shape \(2,\)"),
    (_paged_args(block_table=np.zeros((2, 3), np.int64)), "block_table must be int32"),
    (_paged_args(block_table=np.zeros((3, 3), np.int32)), r"block_table must be \(B, max_pages\)"),
    (_kv_args(num_splits=0), "num_splits=0 must be in 1..3"),
    (_kv_args(num_splits=4), "num_splits=4 must be in 1..3: .* the 3 KV tiles"),
    (_kv_args(num_splits=True), "num_splits must be an int"),
    (_kv_args(num_splits=2.0), "num_splits must be an int"),
    (
        _paged_args(k_cache=np.zeros((7, 24, HK, D), np.float16), v_cache=np.zeros((7, 24, HK, D), np.float16)),
        "page_size=24 .* must be one of",
    ),
    (_kv_args(quant="int8"), "quant='int8' does not combine with a KV cache"),
    (_kv_args(layout="bhnd"), "layout='bhnd'"),
    (
        _kv_args(k_cache=np.zeros((3, N, HK, D), np.float16), v_cache=np.zeros((3, N, HK, D), np.float16)),
        r"k_cache must be \(B, N_cache, Hkv, d\) with q's B=2",
    ),
    (_kv_args(v_cache=np.zeros((B, N - 1, HK, D), np.float16)), "k_cache and v_cache must have the same shape"),
    (_kv_args(q=np.zeros((B, NQ, 3, D), np.float16)), "Hq=3 must be a multiple of the key/value heads Hkv=2"),
    (_kv_args(q=np.zeros((B, NQ, H, D), np.float32)), "q must be float16 or bfloat16"),
    (_kv_args(q=np.zeros((B, H, D), np.float16)), "q must have 4 dimensions"),
    (_kv_args(pv_accum="f16x4"), "pv_accum must be one of"),
]

VARLEN_BAD = [
    (
        _varlen_args(cu_seqlens_q=np.array([1, 3, 3, 8], np.int32)),
        r"cu_seqlens_q must start at 0, got cu_seqlens_q\[0\] = 1",
    ),
    (
        _varlen_args(cu_seqlens_q=np.array([0, 3, 2, 8], np.int32)),
        r"cu_seqlens_q must not decrease, got cu_seqlens_q\[1\] = 3 > cu_seqlens_q\[2\] = 2",
    ),
    (_varlen_args(cu_seqlens_k=np.array([0, 4, 10, 9], np.int32)), "cu_seqlens_k must not decrease"),
    (_varlen_args(cu_seqlens_q=np.array([0, 3, 3, 7], np.int32)), "cu_seqlens_q must end at the total 8"),
    (_varlen_args(max_seqlen_k=5), "cu_seqlens_k: sequence 1 has 6 rows, more than max_seqlen_k=5"),
    (_varlen_args(cu_seqlens_q=np.array([0, 3, 3, 8], np.int64)), "cu_seqlens_q must be int32, got int64"),
    (_varlen_args(cu_seqlens_k=np.array([0, 4, 10], np.int32)), r"cu_seqlens_k must have shape \(4,\)"),
    (_varlen_args(max_seqlen_q=-1), "max_seqlen_q must be an int >= 0"),
    (_varlen_args(max_seqlen_q=9), "exceed the rows of q"),
    (_varlen_args(q=np.zeros((8, H, 48), np.float16)), "head dim d=48 is not supported"),
    (_varlen_args(quant="int8-fp8"), "quant='int8-fp8' does not combine"),
]


@pytest.mark.parametrize("args, match", KVCACHE_BAD, ids=[m[:40] for _, m in KVCACHE_BAD])
def test_bad_kvcache_input_is_named_by_the_emulator(args, match):
    args = dict(args)
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    with pytest.raises(ValueError, match=match):
        flashsim.attention_with_kvcache(q, k, v, progress=False, **args)


@pytest.mark.parametrize("args, match", VARLEN_BAD, ids=[m[:40] for _, m in VARLEN_BAD])
def test_bad_varlen_input_is_named_by_the_emulator(args, match):
    args = dict(args)
    pos = [args.pop(n) for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")]
    with pytest.raises(ValueError, match=match):
        flashsim.attention_varlen(*pos, progress=False, **args)


@pytest.fixture
def mocked_gpu(monkeypatch):
    """A mocked sm_90 device with 132 SMs on which nothing may be copied or launched."""

    def refuse(*a, **k):
        raise AssertionError("a bad call reached the GPU")

    monkeypatch.setitem(rt._state, "sticky", None)
    monkeypatch.setattr(rt, "require_gpu", lambda: object())
    monkeypatch.setattr(rt, "gpu_available", lambda: (True, "mocked"))
    monkeypatch.setattr(rt, "device_id", lambda: 0)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "sm_count", lambda: 132)
    monkeypatch.setattr(rt, "to_device", refuse)
    monkeypatch.setattr(rt, "empty", refuse)


@pytest.mark.parametrize("args, match", KVCACHE_BAD, ids=[m[:40] for _, m in KVCACHE_BAD])
def test_bad_kvcache_input_is_named_by_the_gpu_runner_before_any_copy(mocked_gpu, args, match):
    args = dict(args)
    q, k, v = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    with pytest.raises(ValueError, match=match):
        flashsim.gpu.attention_with_kvcache(q, k, v, **args)


@pytest.mark.parametrize("args, match", VARLEN_BAD, ids=[m[:40] for _, m in VARLEN_BAD])
def test_bad_varlen_input_is_named_by_the_gpu_runner_before_any_copy(mocked_gpu, args, match):
    args = dict(args)
    pos = [args.pop(n) for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")]
    with pytest.raises(ValueError, match=match):
        flashsim.gpu.attention_varlen(*pos, **args)


def test_the_gpu_runner_names_the_arch_it_is_not(mocked_gpu):
    args = _kv_args()
    with pytest.raises(ValueError, match="arch='sm_120' but the current GPU"):
        flashsim.gpu.attention_with_kvcache(
            args.pop("q"), args.pop("k_cache"), args.pop("v_cache"), arch="sm_120", **args
        )


def test_good_input_passes_the_checks():
    """The good calls behind every bad one above run (so the bad ones fail for the reason named)."""
    for make in (_kv_args, _paged_args):
        a = make()
        flashsim.attention_with_kvcache(a.pop("q"), a.pop("k_cache"), a.pop("v_cache"), progress=False, **a)
    a = _varlen_args()
    o, lse = flashsim.attention_varlen(
        *(a[n] for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")), 5, 6, progress=False
    )
    assert o.shape == (8, H, D) and lse.shape == (H, 8)
