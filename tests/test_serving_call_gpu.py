"""The public serving calls with torch tensors and their index tensors on the GPU (marked gpu: skipped, with the
reason, where there is none): no host synchronisation (torch's sync debug mode set to "error" around the calls), a
CUDA graph of the default call (index check included) replaying bit-equal to eager as the lengths change in place,
torch.compile(fullgraph=True) bit-equal to eager, a bad index raising its ValueError lazily (next call, graph replay,
check_index_errors) with the context intact, max_seqlen_k choosing the emulator's splits, and the public call's
eager path (the op's body without torch's dispatcher) bit-equal to the op and to a graph of itself.

    python3 -m pytest -q -m gpu tests/test_serving_call_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _bits(x):
    return x.detach().cpu().contiguous().view(torch.int16 if x.element_size() == 2 else torch.int32).numpy()


def _equal(a, b) -> bool:
    return all(np.array_equal(_bits(x), _bits(y)) for x, y in zip(a, b))


def _decode(b=4, n=1024, hk=4, h=16, d=128, page=None, seed=0, dtype=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn((b, 1, h, d), generator=g, device="cuda").to(dtype)
    k = torch.randn((b, n, hk, d), generator=g, device="cuda").to(dtype)
    v = torch.randn((b, n, hk, d), generator=g, device="cuda").to(dtype)
    sl = torch.tensor([n, 1, n // 2 + 3, 77][:b], dtype=torch.int32, device="cuda")
    if page is None:
        return q, k, v, dict(cache_seqlens=sl)
    per = n // page
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(b * per).astype(np.int32)).cuda()
    table = perm.reshape(b, per).contiguous()
    kp = torch.empty((b * per, page, hk, d), dtype=k.dtype, device="cuda")
    vp = torch.empty_like(kp)
    kp[perm.long()] = k.reshape(b * per, page, hk, d)
    vp[perm.long()] = v.reshape(b * per, page, hk, d)
    return q, kp, vp, dict(cache_seqlens=sl, block_table=table)


def _varlen(seed=0):
    rng = np.random.default_rng(seed)
    lq, lk = rng.integers(0, 70, 5), rng.integers(1, 300, 5)
    cq = torch.tensor(np.concatenate([[0], np.cumsum(lq)]).astype(np.int32), device="cuda")
    ck = torch.tensor(np.concatenate([[0], np.cumsum(lk)]).astype(np.int32), device="cuda")
    q = torch.randn((int(lq.sum()), 8, 64), device="cuda").half()
    k, v = (torch.randn((int(lk.sum()), 2, 64), device="cuda").half() for _ in range(2))
    return (q, k, v, cq, ck, int(lq.max()), int(lk.max())), dict(causal=True)


@pytest.fixture(autouse=True)
def _clean_record():
    flashsim.gpu.check_index_errors()  # nothing pending from an earlier test
    yield
    torch.cuda.synchronize()


def test_the_calls_never_synchronise_with_the_host():
    """Default arguments (the index check on), first and repeated calls, contiguous, paged, split and varlen: torch's
    sync debug mode raises on any synchronising torch call (.item(), .cpu(), a device-to-host copy)."""
    q, k, v, kw = _decode()
    qp, kp, vp, kwp = _decode(page=16, seed=1)
    vargs, vkw = _varlen()
    calls = [
        lambda: flashsim.gpu.attention_with_kvcache(q, k, v, **kw),
        lambda: flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, max_seqlen_k=1024, **kw),
        lambda: flashsim.gpu.attention_with_kvcache(qp, kp, vp, **kwp),
        lambda: flashsim.gpu.attention_varlen(*vargs, **vkw),
    ]
    for fn in calls:  # first calls compile and plan outside the debug mode's watch: no sync either, but slow
        fn()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            for fn in calls:
                fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    flashsim.gpu.check_index_errors()


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged16"])
def test_a_cuda_graph_of_the_default_call_replays_bit_equal_to_eager(paged):
    q, k, v, kw = _decode(page=16 if paged else None, seed=2)
    sl = kw["cache_seqlens"]
    eager = flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=4, **kw)  # warm: the plan exists
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=4, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        out = flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=4, **kw)
    graph.replay()
    torch.cuda.synchronize()
    assert _equal(out, eager)
    for new in ([1024, 2, 999, 78], [0, 1024, 1, 512]):  # a decode step: lengths change in place, the graph stays
        sl.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        assert _equal(out, flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=4, **kw))
    flashsim.gpu.check_index_errors()


def test_flash_fwd_overlapping_the_check_gives_the_same_bits(monkeypatch):
    """flashsim.gpu.serving.OVERLAP_CHECK (programmatic dependent launch of flash_fwd after the check): eager and a
    CUDA graph of it equal the plain launch bit for bit, and a bad index is still found."""
    from flashsim.gpu import serving as gs

    q, k, v, kw = _decode(page=16, seed=6)
    plain = flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, **kw)
    monkeypatch.setattr(gs, "OVERLAP_CHECK", True)
    assert _equal(flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, **kw), plain)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, **kw)
    graph.replay()
    torch.cuda.synchronize()
    assert _equal(out, plain)
    kw["cache_seqlens"][0] = -1
    graph.replay()
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = -1"):
        flashsim.gpu.check_index_errors()


def test_torch_compile_fullgraph_equals_eager():
    q, k, v, kw = _decode(seed=3)
    vargs, vkw = _varlen(seed=3)

    def f(q, k, v, sl, *va):
        o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=2)
        o2, lse2 = flashsim.gpu.attention_varlen(*va, causal=True)
        return o, lse, o2, lse2

    eager = f(q, k, v, kw["cache_seqlens"], *vargs)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(f, fullgraph=True)(q, k, v, kw["cache_seqlens"], *vargs)
    finally:
        torch._dynamo.reset()
    assert _equal(compiled, eager)


def test_a_bad_index_raises_lazily_and_the_context_survives():
    """Eager: the bad call returns, the next serving call raises naming the entry. In a graph: every replay checks;
    check_index_errors() raises after the replay. The kernel clamped the indices: later calls are exact."""
    q, k, v, kw = _decode(page=16, seed=4)
    table, sl = kw["block_table"], kw["cache_seqlens"]
    good = flashsim.gpu.attention_with_kvcache(q, k, v, **kw)
    saved = table[0, 3].item()
    table[0, 3] = 10_000  # row 0 reads all its 64 pages
    flashsim.gpu.attention_with_kvcache(q, k, v, **kw)  # returns without waiting
    torch.cuda.synchronize()
    with pytest.raises(ValueError, match=r"block_table\[0, 3\] = 10000 is outside \[0, 256\)"):
        flashsim.gpu.attention_with_kvcache(q, k, v, **kw)
    table[0, 3] = saved
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flashsim.gpu.attention_with_kvcache(q, k, v, **kw)
    graph.replay()
    flashsim.gpu.check_index_errors()  # good indices: nothing
    sl[2] = 5000
    graph.replay()
    with pytest.raises(ValueError, match=r"cache_seqlens\[2\] = 5000 is past the keys row 2 holds"):
        flashsim.gpu.check_index_errors()
    sl[2] = 1024 // 2 + 3
    graph.replay()
    torch.cuda.synchronize()
    assert _equal(out, good)
    with pytest.raises(ValueError, match=r"cu_seqlens_k must not decrease"):
        vargs, vkw = _varlen(seed=4)
        ck = vargs[4].clone()
        ck[2] = ck[3] + 1
        flashsim.gpu.attention_varlen(*vargs[:4], ck, *vargs[5:], check_overflow="deferred", **vkw)[2]()
    assert _equal(flashsim.gpu.attention_with_kvcache(q, k, v, **kw), good)


def test_max_seqlen_k_chooses_the_emulators_splits_and_bits():
    from flashsim.gpu import runtime as rt
    from flashsim.gpu.torch_op import _numpy_of
    from flashsim.problem import resolve_options
    from flashsim.serving import prepare_kvcache

    q, k, v, kw = _decode(b=2, n=8192, seed=5)
    kw["cache_seqlens"].copy_(torch.tensor([2000, 1500], dtype=torch.int32))
    opts = resolve_options(layout="bnhd")
    sl = kw["cache_seqlens"]
    stated = prepare_kvcache(q, k, v, sl, None, None, opts=opts, arch=rt.current_arch(), max_seqlen_k=2048)
    whole = prepare_kvcache(q, k, v, sl, None, None, opts=opts, arch=rt.current_arch())
    assert stated.num_splits != whole.num_splits
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, max_seqlen_k=2048, **kw)
    emu = flashsim.attention_with_kvcache(
        *(_numpy_of(x.cpu()) for x in (q, k, v)),
        cache_seqlens=sl.cpu().numpy(),
        num_splits=prepare_kvcache(
            q, k, v, sl, None, None, opts=opts, arch=rt.current_arch(), sm_count=rt.sm_count(), max_seqlen_k=2048
        ).num_splits,
        progress=False,
    )
    assert np.array_equal(_bits(o), emu[0].view(np.int16)) and np.array_equal(_bits(lse), emu[1].view(np.int32))


def test_the_eager_path_the_op_and_a_graph_give_the_same_bits():
    """The public call runs the op's CUDA body without torch's dispatcher; torch.ops.flashsim.* (the dispatcher's
    way, what torch.compile calls) and a CUDA graph of the public call give the same bits: split, paged, f16 P@V
    with its flag read (eager), varlen; eager calls on a second stream (their own split scratch) too. The first
    public call of each case plans it, so the captures below compile nothing."""
    from flashsim.gpu import serving_torch

    q, k, v, kw = _decode(seed=7)
    qp, kp, vp, kwp = _decode(page=16, seed=8, dtype=torch.float16)  # f16 P@V takes float16 inputs only
    vargs, vkw = _varlen(seed=9)
    calls = [
        (
            lambda **c: flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, **kw, **c),
            lambda: serving_torch.KVCACHE_OP(q, k, v, kw["cache_seqlens"], None, 3)[:2],
        ),
        (
            lambda **c: flashsim.gpu.attention_with_kvcache(qp, kp, vp, pv_accum="f16", **kwp, **c),
            lambda: serving_torch.KVCACHE_OP(qp, kp, vp, kwp["cache_seqlens"], kwp["block_table"], pv_accum="f16")[:2],
        ),
        (
            lambda **c: flashsim.gpu.attention_varlen(*vargs, **vkw, **c),
            lambda: serving_torch.VARLEN_OP(*vargs, causal=True)[:2],
        ),
    ]
    side = torch.cuda.Stream()
    for public, op in calls:
        eager = public()
        assert _equal(op(), eager)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            on_side = public()
        torch.cuda.current_stream().wait_stream(side)
        assert _equal(on_side, eager)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = public(check_overflow=False)  # reading f16's flag would wait: not inside a capture
        graph.replay()
        torch.cuda.synchronize()
        assert _equal(out, eager) and _equal(public(), eager)
    flashsim.gpu.check_index_errors()


def test_the_fused_call_gives_the_separate_launches_bits_and_checks_its_indices(monkeypatch):
    """flashsim.gpu.serving.FUSED (the index check inside flash_fwd): eager and a CUDA graph of it equal the separate
    launches bit for bit on split, paged, unsplit and varlen calls, its state stays zeroed, and a bad index raises
    its ValueError lazily as before (eager and replayed)."""
    from flashsim.gpu import serving as gs
    from flashsim.gpu import serving_torch

    q, k, v, kw = _decode(page=16, seed=7)
    qc, kc, vc, kwc = _decode(seed=8)
    vargs, vkw = _varlen(seed=9)
    calls = [
        lambda: flashsim.gpu.attention_with_kvcache(q, k, v, num_splits=3, **kw),
        lambda: flashsim.gpu.attention_with_kvcache(qc, kc, vc, num_splits=5, **kwc),
        lambda: flashsim.gpu.attention_with_kvcache(qc, kc, vc, num_splits=1, **kwc),
        lambda: flashsim.gpu.attention_varlen(*vargs, **vkw),
    ]
    plain = [fn() for fn in calls]
    monkeypatch.setattr(gs, "FUSED", True)
    for fn, ref in zip(calls, plain):
        assert _equal(fn(), ref)
        assert _equal(fn(), ref)  # the state left zeroed: the second launch counts from 0 again
    torch.cuda.synchronize()
    assert serving_torch._STATE and not any(buf.any() for buf, _ in serving_torch._STATE.values())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = calls[0]()
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        assert _equal(out, plain[0])
    flashsim.gpu.check_index_errors()
    kw["block_table"][1, 5] = -3  # row 1 reads one page: slot 5 is never read, so this is no error
    graph.replay()
    flashsim.gpu.check_index_errors()
    kw["cache_seqlens"][1] = 200  # now row 1 reads 13 pages
    graph.replay()
    with pytest.raises(ValueError, match=r"block_table\[1, 5\] = -3 is outside \[0, 256\)"):
        flashsim.gpu.check_index_errors()
    calls[0]()
    torch.cuda.synchronize()
    with pytest.raises(ValueError, match=r"block_table\[1, 5\] = -3"):
        calls[0]()
