"""The serving front-ends with the launch mocked (no GPU): the torch ops' launches and their arguments, the cache,
the index checks on a cache hit, the fake implementations under torch.compile, and `flashsim verify --serving` with
the emulator standing in for the kernel (its captures replay and carry the drift guard's records).
"""

from __future__ import annotations

import argparse
import types

import numpy as np
import pytest

import flashsim
from flashsim.constants import COMBINE_WARPS
from flashsim.gpu import launch as gl
from flashsim.gpu import runtime as rt
from flashsim.gpu import serving as gs

torch = pytest.importorskip("torch")
serving_torch = pytest.importorskip("flashsim.gpu.serving_torch")


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, stream, config, kernel, *args):
        self.calls.append((stream, config, kernel, args))


@pytest.fixture
def fake_gpu(monkeypatch):
    """A mocked sm_90 device (132 SMs) whose launches are recorded; CPU tensors take the CUDA path."""
    gl.clear_caches()
    rec = _Recorder()
    rec.fwd = types.SimpleNamespace(kernel=object(), name="flash_fwd")
    rec.combine = types.SimpleNamespace(kernel=object(), name="flash_combine")
    monkeypatch.setitem(rt._state, "sticky", None)
    monkeypatch.setattr(rt, "require_gpu", lambda: object())
    monkeypatch.setattr(rt, "device_id", lambda: -1)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "sm_count", lambda: 132)
    monkeypatch.setattr(rt, "bind_thread", lambda: None)
    monkeypatch.setattr(rt, "stream_from_handle", lambda h: ("stream", h))
    monkeypatch.setattr(gl, "kernel_for", lambda cfg, arch: rec.fwd)
    monkeypatch.setattr(gs, "combine_for", lambda cfg, arch: rec.combine)
    monkeypatch.setattr(gl, "_core_launch", rec)
    monkeypatch.setattr(serving_torch, "_raw_stream", lambda dev: 0xABC0)
    monkeypatch.setattr(serving_torch, "_capturing", lambda: False)
    monkeypatch.setattr(serving_torch, "_run_cpu", serving_torch._run_cuda)
    yield rec
    gl.clear_caches()


def _kv(b=3, nq=1, h=8, hk=2, n=256, d=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((b, nq, h, d), generator=g).to(torch.float16)
    k = torch.randn((b, n, hk, d), generator=g).to(torch.float16)
    return q, k, k.clone()


def test_the_ops_are_registered_with_their_schemas():
    for name in ("attention_with_kvcache", "attention_varlen"):
        schema = str(getattr(torch.ops.flashsim, name).default._schema)
        assert schema.endswith("-> (Tensor o, Tensor lse, Tensor overflow)") and "bool check_indices=True" in schema
    assert "Tensor? block_table=None, int num_splits=0" in str(serving_torch.KVCACHE_OP._schema)


def test_a_split_call_launches_flash_fwd_then_the_combine_on_one_stream(fake_gpu):
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (3, 8, 1) and lse.dtype == torch.float32
    (s1, c1, k1, a1), (s2, c2, k2, a2) = fake_gpu.calls
    assert s1 == s2 == ("stream", 0xABC0) and k1 is fake_gpu.fwd.kernel and k2 is fake_gpu.combine.kernel
    prob = flashsim.serving.prepare_kvcache(q, k, v, sl, None, 4, opts=flashsim.problem.resolve_options(layout="bnhd"))
    cfg = prob.config
    assert cfg.split and cfg.pack_gqa and not cfg.paged and prob.grid == (1, 2, 12)
    assert tuple(c1.grid) == (1, 2, 12) and tuple(c1.block) == (cfg.threads, 1, 1) and c1.shmem_size == cfg.smem_bytes
    assert [int(x) for x in a1[:5]] == [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr()]
    assert int(a1[5]) == 0  # f32 P@V: no overflow flag
    # nq_cap, nk_cap, group; q's strides (batch, head, row); the cache's; lse_scale, scale_log2, cap_scale; window
    assert [int(x) for x in a1[6:15]] == [1, 256, 4, 8 * 128, 128, 8 * 128, 256 * 2 * 128, 128, 2 * 128]
    assert [int(x) for x in a1[20:25]] == [0] * 5  # no quantization
    cu_q, cu_k, seqlens = (int(x) for x in a1[25:28])
    assert (cu_q, cu_k, seqlens) == (0, 0, sl.data_ptr())
    assert [int(x) for x in a1[28:30]] == [3, 3 * 256]  # q_total, k_total
    assert [int(x) for x in a1[30:35]] == [0, 0, 0, 0, 4]  # block_table, bt_stride, page_shift, num_pages, splits
    o_part, lse_part = int(a1[35]), int(a1[36])
    assert o_part and lse_part - o_part == gs.part_layout(prob)[1]
    assert [int(x) for x in a1[37:]] == [8 * 1, 1]  # lse (B, Hq, Nq): batch and head strides
    rows = 3 * 1 * 8
    assert [int(x) for x in a2] == [o_part, lse_part, o.data_ptr(), lse.data_ptr(), 4, rows, 1, 8]
    assert tuple(c2.grid) == (-(-rows // COMBINE_WARPS), 1, 1) and tuple(c2.block) == (32 * COMBINE_WARPS, 1, 1)


def test_one_split_is_one_launch_and_pages_pass_their_table(fake_gpu):
    q, _, _ = _kv(b=2)
    pages = torch.randn((9, 16, 2, 128)).to(torch.float16)
    table = torch.arange(8, dtype=torch.int32).reshape(2, 4)
    flashsim.gpu.attention_with_kvcache(q, pages, pages, block_table=table, num_splits=1)
    ((_, _, kern, args),) = fake_gpu.calls
    assert kern is fake_gpu.fwd.kernel
    assert int(args[7]) == 64  # nk_cap = max_pages * page_size
    assert [int(x) for x in args[30:35]] == [table.data_ptr(), 4, 4, 9, 1]
    assert int(args[12]) == 0 and int(args[14]) == 2 * 128  # pages: no batch stride; rows Hkv * d apart


def test_varlen_passes_its_offsets_and_an_empty_batch_launches_nothing(fake_gpu):
    cq = torch.tensor([0, 3, 3, 10], dtype=torch.int32)
    ck = torch.tensor([0, 5, 9, 9], dtype=torch.int32)
    q = torch.randn((10, 4, 64)).to(torch.float16)
    k = torch.randn((9, 2, 64)).to(torch.float16)
    o, lse = flashsim.gpu.attention_varlen(q, k, k, cq, ck, 7, 5, causal=True)
    assert o.shape == q.shape and lse.shape == (4, 10)
    ((_, config, _, args),) = fake_gpu.calls
    assert [int(x) for x in args[6:9]] == [7, 5, 2] and int(args[9]) == 0 and int(args[12]) == 0
    assert [int(x) for x in args[25:30]] == [cq.data_ptr(), ck.data_ptr(), 0, 10, 9]
    assert [int(x) for x in args[37:]] == [0, 10]  # lse (Hq, total_q)
    assert tuple(config.grid)[1:] == (4, 3)
    fake_gpu.calls.clear()
    e = torch.empty((0, 4, 64), dtype=torch.float16)
    z = torch.zeros(3, dtype=torch.int32)
    o, lse = flashsim.gpu.attention_varlen(e, k, k, z, torch.tensor([0, 5, 9], dtype=torch.int32), 0, 5)
    assert o.shape == (0, 4, 64) and lse.shape == (4, 0) and not fake_gpu.calls


def test_a_cache_hit_still_checks_the_index_values_unless_told_not_to(fake_gpu, monkeypatch):
    """Shapes hit the cache, values change every decode step: a bad value on a hit is refused before the launch;
    check_indices=False leaves the check (and its host copy) out and launches (the kernel clamps)."""
    calls = []
    real = serving_torch._problem
    monkeypatch.setattr(serving_torch, "_problem", lambda *a, **k: calls.append(1) or real(*a, **k))
    q, k, v = _kv()
    good = torch.tensor([256, 1, 77], dtype=torch.int32)
    for _ in range(3):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=good, num_splits=2)
    assert len(calls) == 1 and len(fake_gpu.calls) == 6
    bad = torch.tensor([257, 1, 77], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 257"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=bad, num_splits=2)
    assert len(fake_gpu.calls) == 6
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=bad, num_splits=2, check_indices=False)
    assert len(fake_gpu.calls) == 8 and len(calls) == 1  # the same key: launched without the check


def test_index_tensors_on_another_device_or_of_another_dtype_are_refused(fake_gpu):
    q, k, v = _kv()
    meta = torch.empty(3, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match="cache_seqlens is on meta but q is on cpu"):
        serving_torch.KVCACHE_OP(q, k, v, meta)
    with pytest.raises(ValueError, match="cache_seqlens must be int32, got int64"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="cache_seqlens must be a torch tensor"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=np.array([1, 2, 3], np.int32))
    assert not fake_gpu.calls


def test_the_fake_implementations_trace_under_torch_compile(fake_gpu):
    def f(q, k, v, sl, cq, ck, qv, kv):
        o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=2)
        o2, lse2 = flashsim.gpu.attention_varlen(qv, kv, kv, cq, ck, 7, 5)
        return o.float() + 1, lse * 2, o2, lse2

    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    cq = torch.tensor([0, 3, 10], dtype=torch.int32)
    ck = torch.tensor([0, 5, 9], dtype=torch.int32)
    qv, kv = torch.randn((10, 4, 64)).half(), torch.randn((9, 2, 64)).half()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    try:
        o, lse, o2, lse2 = torch.compile(f, fullgraph=True, backend=backend)(q, k, v, sl, cq, ck, qv, kv)
        assert any("attention_with_kvcache" in s for s in seen) and any("attention_varlen" in s for s in seen)
        assert o.shape == q.shape and lse.shape == (3, 8, 1) and o2.shape == qv.shape and lse2.shape == (4, 10)
    finally:
        torch._dynamo.reset()
    with torch._subclasses.FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(x) for x in (q, k, v))
        o, lse, flag = serving_torch._fake_kvcache(fq, fk, fv, pv_accum="f16")
        assert o.shape == q.shape and lse.shape == (3, 8, 1) and flag.shape == (1,)


# -- flashsim verify --serving with the emulator as the kernel ----------------------------------------------


def test_verify_serving_saves_captures_that_replay_and_carry_provenance(tmp_path, monkeypatch):
    """run_serving over a few cases with the emulator standing in for the GPU: every bit agrees, the capture file's
    cases replay on the emulator (verify_serving.check_capture), and tools/stamp_captures.py reads its records as
    attention captures of flash_fwd with their serving configurations (what tests/test_drift.py checks)."""
    from tool_modules import load_tool

    from flashsim import provenance
    from flashsim.commands import verify, verify_serving

    monkeypatch.setattr(
        verify_serving,
        "gpu_outputs",
        lambda case, arrays, prob: verify_serving.emulator_outputs(
            case, arrays, prob, verify_serving.problem_of(case, arrays, prob.arch)[1]
        ),
    )
    cases = [c for c in verify_serving.serving_cases() if c.kind == "normal"][:4]
    out = tmp_path / "attn_sm90_serving.npz"
    ok, results = verify_serving.run_serving(cases, "sm_90", save_path=str(out), out=lambda *a: None)
    assert ok and len(results) == 4
    assert verify_serving.is_serving_capture(out)
    for i in range(4):
        verify_serving.check_capture(out, f"c{i}")
    stamp = load_tool("stamp_captures")
    records = stamp.records(out)
    assert [r.kernel for r in records] == ["flash_fwd"] * 4 and all(r.config.seqlens for r in records)
    assert records[0].provenance == provenance.fingerprint("flash_fwd", records[0].config)
    # the verify command's argument path: --replay of a serving capture runs serving cases alone
    monkeypatch.setattr(rt, "require_gpu", lambda: None)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "sm_count", lambda: 132)
    p = argparse.ArgumentParser()
    verify.add_arguments(p)
    assert verify.run(p.parse_args(["--replay", str(out)])) == 0
    with pytest.raises(ValueError, match="runs the serving cases alone"):
        verify.run(p.parse_args(["--serving", "--shape", "1,1,4,4,64"]))
