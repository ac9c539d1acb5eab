"""The serving kernels on the GPU (marked gpu: skipped, with the reason, where there is none): bit for bit against
the emulator through every front-end (numpy, torch op, cupy), within the float64 bound, CUDA graph capture and
replay with check_indices=False, and unchecked bad indices that stay in bounds (the kernel clamps them).
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim.commands.verify_serving import ServingCase, diff_case
from flashsim.emulator.reference import split_error_bound

pytestmark = pytest.mark.gpu

CASES = [
    ServingCase("kvcache", 8, 2, 128, nq=1, n_cache=256, seqlens=(200, 1, 77), num_splits=None),
    ServingCase(
        "kvcache",
        8,
        2,
        128,
        nq=5,
        n_cache=300,
        seqlens=(300, 5, 130),
        num_splits=3,
        options=dict(causal=True),
        kind="adversarial",
    ),
    ServingCase(
        "kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 170), page_size=16, num_splits=4, pages="shared"
    ),
    ServingCase("kvcache", 4, 1, 64, nq=8, n_cache=200, seqlens=(200, 64), options=dict(causal=True, dtype="bf16")),
    ServingCase(
        "kvcache",
        4,
        2,
        256,
        nq=2,
        n_cache=150,
        seqlens=(150, 99),
        num_splits=2,
        options=dict(window_size=(50, 10), softcap=20.0),
    ),
    ServingCase(
        "kvcache",
        8,
        2,
        128,
        nq=4,
        n_cache=256,
        seqlens=(256, 100),
        page_size=64,
        options=dict(pv_accum="f16x2", causal=True),
    ),
    ServingCase("varlen", 4, 2, 128, q_lens=(3, 0, 130, 1, 64), k_lens=(50, 7, 260, 0, 64), kind="wide"),
    ServingCase("varlen", 8, 1, 64, q_lens=(77, 150), k_lens=(200, 150), options=dict(window_size=(30, 10))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name())
def test_the_kernel_equals_the_emulator_bit_for_bit(case):
    from flashsim.gpu import runtime as rt

    od, ld, got, emu, prob, _ = diff_case(case, rt.current_arch(), gpu=True, sm_count=rt.sm_count())
    assert od.ok and ld.ok, (od, ld)
    assert got[2] == emu[2]


def _decode_inputs(seed=0, b=4, n=512, dtype=np.float16):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, 1, 16, 128)).astype(dtype)
    k = rng.standard_normal((b, n, 4, 128)).astype(dtype)
    v = rng.standard_normal((b, n, 4, 128)).astype(dtype)
    return q, k, v, np.array([n, 1, 300, 77][:b], np.int32)


def test_within_the_float64_bound_on_the_gpu():
    q, k, v, sl = _decode_inputs()
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    o_ref, lse_ref = flashsim.reference_attention_with_kvcache(q, k, v, cache_seqlens=sl)
    for b in range(4):
        n = int(sl[b])
        v_b = np.repeat(v[b, :n].transpose(1, 0, 2)[None], 4, axis=1)
        bound = split_error_bound(o_ref[b].transpose(1, 0, 2)[None], v_b, lse_ref[b][None], n, 64, "f32", 4)
        assert np.all(
            np.abs(o[b].transpose(1, 0, 2)[None].astype(np.float64) - o_ref[b].transpose(1, 0, 2)[None]) <= bound
        )


def test_the_torch_ops_equal_the_numpy_path_and_replay_in_a_cuda_graph():
    torch = pytest.importorskip("torch")
    q, k, v, sl = _decode_inputs(seed=1)
    o_np, lse_np = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=3)
    tq, tk, tv, tsl = (torch.from_numpy(x).cuda() for x in (q, k, v, sl))
    o, lse = flashsim.gpu.attention_with_kvcache(tq, tk, tv, cache_seqlens=tsl, num_splits=3)
    assert np.array_equal(o.cpu().numpy().view(np.uint16), o_np.view(np.uint16))
    assert np.array_equal(lse.cpu().numpy().view(np.uint32), lse_np.view(np.uint32))
    kw = dict(cache_seqlens=tsl, num_splits=3, check_indices=False, check_overflow=False)
    flashsim.gpu.attention_with_kvcache(tq, tk, tv, **kw)  # warm: the plan exists before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        go, gl = flashsim.gpu.attention_with_kvcache(tq, tk, tv, **kw)
    tsl.copy_(torch.tensor([512, 2, 299, 78], dtype=torch.int32))  # new lengths, same graph
    graph.replay()
    torch.cuda.synchronize()
    o2, lse2 = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=tsl.cpu().numpy(), num_splits=3)
    assert np.array_equal(go.cpu().numpy().view(np.uint16), o2.view(np.uint16))
    assert np.array_equal(gl.cpu().numpy().view(np.uint32), lse2.view(np.uint32))


def test_varlen_through_torch_equals_the_emulator():
    torch = pytest.importorskip("torch")
    case = CASES[6]
    a = case.arrays()
    o_emu, lse_emu = flashsim.attention_varlen(
        a["q"],
        a["k"],
        a["v"],
        a["cu_seqlens_q"],
        a["cu_seqlens_k"],
        a["max_seqlen_q"],
        a["max_seqlen_k"],
        progress=False,
        check_overflow=False,
    )
    t = {n: torch.from_numpy(a[n]).cuda() for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")}
    o, lse = flashsim.gpu.attention_varlen(
        t["q"],
        t["k"],
        t["v"],
        t["cu_seqlens_q"],
        t["cu_seqlens_k"],
        a["max_seqlen_q"],
        a["max_seqlen_k"],
        check_overflow=False,
    )
    assert np.array_equal(o.cpu().numpy().view(np.uint16), o_emu.view(np.uint16))
    assert np.array_equal(lse.cpu().numpy().view(np.uint32), lse_emu.view(np.uint32))


def test_cupy_in_cupy_out():
    cupy = pytest.importorskip("cupy")
    q, k, v, sl = _decode_inputs(seed=2)
    o_np, lse_np = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=2)
    o, lse = flashsim.gpu.attention_with_kvcache(
        *(cupy.asarray(x) for x in (q, k, v)), cache_seqlens=cupy.asarray(sl), num_splits=2
    )
    assert isinstance(o, cupy.ndarray)
    assert np.array_equal(o.get().view(np.uint16), o_np.view(np.uint16))
    assert np.array_equal(lse.get().view(np.uint32), lse_np.view(np.uint32))


def test_unchecked_bad_indices_stay_in_bounds_and_the_context_survives():
    """check_indices=False with a block table pointing past the pages and lengths past the cache: the kernel clamps
    them (wrong rows, no fault); a checked call afterwards still runs and is refused before the launch."""
    q, k, v, _ = _decode_inputs(seed=3, b=2, n=64)
    pages = np.concatenate([k, v]).reshape(-1, 16, 4, 128)[:6]
    table = np.array([[0, 1, 99, -5], [2, 3, 4, 5]], np.int32)
    sl = np.array([1000, 64], np.int32)
    o, lse = flashsim.gpu.attention_with_kvcache(
        q, pages, pages, cache_seqlens=sl, block_table=table, check_indices=False, check_overflow=False
    )
    assert o.shape == q.shape
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashsim.gpu.attention_with_kvcache(q, pages, pages, cache_seqlens=sl, block_table=table)
    good = np.array([64, 64], np.int32)
    o, lse = flashsim.gpu.attention_with_kvcache(
        q, pages, pages, cache_seqlens=good, block_table=np.array([[0, 1, 2, 3], [2, 3, 4, 5]], np.int32)
    )
    assert np.isfinite(lse).all()
