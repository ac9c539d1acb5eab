"""The serving front-ends with the launch mocked (no GPU): the torch ops' launches and their arguments, the cache,
the index check on the device (the mocked GPU runs serving_check's own PTX in flashsim.ptx) and its lazy ValueError,
no host copy or read of any tensor on the call's path, the fake implementations under torch.compile, and `flashsim
verify --serving` with the emulator standing in for the kernel (its captures replay and carry the drift guard's
records).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import sys
import types
import weakref

import numpy as np
import pytest

import flashsim
from flashsim import ptx
from flashsim.constants import COMBINE_WARPS, FUSED_HEADER
from flashsim.errors import GPUError
from flashsim.gpu import launch as gl
from flashsim.gpu import packed
from flashsim.gpu import runtime as rt
from flashsim.gpu import serving as gs
from flashsim.gpu.build import kernel_path
from flashsim.serving import indices

torch = pytest.importorskip("torch")
serving_torch = pytest.importorskip("flashsim.gpu.serving_torch")


@functools.lru_cache(maxsize=1)
def _check_ptx():
    mod = ptx.compile(kernel_path(gs.CHECK_FILE).read_text(), arch="sm_90", defines=indices.defines())
    return mod.kernel(gs.CHECK_NAME)


def _host_ints(ptr: int, n: int) -> np.ndarray:
    """A copy of ``n`` int32 at host address ``ptr`` (the mocked GPU's memory is the host's), or None at 0."""
    return np.ctypeslib.as_array((ctypes.c_int32 * n).from_address(ptr)).copy() if ptr else None


class _Recorder:
    """The mocked GPU's launches: recorded; serving_check's run as its PTX in flashsim.ptx on the index arrays its
    arguments point at (CPU tensors here), its record written to the mocked mapped memory (``self.record``)."""

    def __init__(self):
        self.calls = []
        self.record = np.zeros(indices.RECORD_WORDS * 8, np.uint8)

    def __call__(self, stream, config, kernel, *args):
        self.calls.append((stream, config, kernel, args))
        if kernel is self.check.kernel:
            self.run_check(config, args)

    def packed(self, p, stream):
        """flashsim.gpu.packed.driver_launch: the launch with its parameters as the driver would read them back
        from the packed slots, by their types."""
        self(stream, p.config, p.kernel, *p.values())

    def run_check(self, config, args):
        seq, table, cu_q, cu_k, batch, *_ = (int(a) for a in args)
        max_pages = int(args[7])
        arrays = [
            _host_ints(seq, batch),
            _host_ints(table, batch * max_pages),
            _host_ints(cu_q, batch + 1),
            _host_ints(cu_k, batch + 1),
        ]
        rec = self.record.view(np.uint64).copy()
        ptrs = [ptx.address(a) if a is not None else 0 for a in arrays]
        sim = (*(np.uint64(p) for p in ptrs), *args[4:13], np.uint64(ptx.address(rec)), args[14])
        ptx.launch(_check_ptx(), tuple(config.grid), tuple(config.block), list(sim))
        self.record.view(np.uint64)[:] = rec


@pytest.fixture
def fake_gpu(monkeypatch):
    """A mocked sm_90 device (132 SMs) whose launches are recorded (serving_check runs in flashsim.ptx); CPU tensors
    take the CUDA path. The separate launches (flashsim.gpu.serving.FUSED off) whatever the default, so that these
    tests keep describing them; the one-launch tests switch FUSED on themselves."""
    monkeypatch.setattr(gs, "FUSED", False)
    gl.clear_caches()
    gs._RECORD.clear()
    rec = _Recorder()
    rec.fwd = types.SimpleNamespace(kernel=object(), name="flash_fwd")
    rec.combine = types.SimpleNamespace(kernel=object(), name="flash_combine")
    rec.check = types.SimpleNamespace(kernel=object(), name="serving_check")
    monkeypatch.setitem(rt._state, "sticky", None)
    monkeypatch.setattr(rt, "require_gpu", lambda: object())
    monkeypatch.setattr(rt, "device_id", lambda: -1)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "sm_count", lambda: 132)
    monkeypatch.setattr(rt, "bind_thread", lambda: None)
    monkeypatch.setattr(rt, "stream_from_handle", lambda h: ("stream", h))
    monkeypatch.setattr(gl, "kernel_for", lambda cfg, arch: rec.fwd)
    monkeypatch.setattr(gs, "combine_for", lambda cfg, arch: rec.combine)
    monkeypatch.setattr(gs, "check_for", lambda arch: rec.check)
    monkeypatch.setattr(rt, "mapped_host", lambda n: (rec.record[:n], 0xD0000))
    monkeypatch.setattr(gl, "_core_launch", rec)
    monkeypatch.setattr(packed, "driver_launch", rec.packed)
    monkeypatch.setattr(serving_torch, "_on_gpu", lambda q: True)  # CPU tensors take the eager path too
    monkeypatch.setattr(serving_torch, "_raw_stream", lambda dev: 0xABC0)
    monkeypatch.setattr(serving_torch, "_capturing", lambda: False)
    monkeypatch.setattr(serving_torch, "_run_cpu", serving_torch._run_cuda)
    yield rec
    gl.clear_caches()
    gs._RECORD.clear()


def _kv(b=3, nq=1, h=8, hk=2, n=256, d=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((b, nq, h, d), generator=g).to(torch.float16)
    k = torch.randn((b, n, hk, d), generator=g).to(torch.float16)
    return q, k, k.clone()


def test_the_ops_are_registered_with_their_schemas():
    for name in ("attention_with_kvcache", "attention_varlen"):
        schema = str(getattr(torch.ops.flashsim, name).default._schema)
        assert schema.endswith("-> (Tensor o, Tensor lse, Tensor overflow)") and "bool check_indices=True" in schema
    assert "Tensor? block_table=None, int num_splits=0, int? max_seqlen_k=None" in str(serving_torch.KVCACHE_OP._schema)


def test_a_split_call_launches_flash_fwd_then_the_combine_on_one_stream(fake_gpu):
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (3, 8, 1) and lse.dtype == torch.float32
    (s0, c0, k0, a0), (s1, c1, k1, a1), (s2, c2, k2, a2) = fake_gpu.calls
    assert s0 == s1 == s2 == 0xABC0 and k1 is fake_gpu.fwd.kernel and k2 is fake_gpu.combine.kernel
    assert (
        k0 is fake_gpu.check.kernel and tuple(c0.grid) == (1, 1, 1) and tuple(c0.block) == (indices.CHECK_THREADS, 1, 1)
    )
    # the index check first: seqlens, no table, no offsets; B, limit, capacity, ..., the record and the plan's tag
    assert [int(x) for x in a0[:13]] == [sl.data_ptr(), 0, 0, 0, 3, 256, 256, 0, 0, 0, 3, 3 * 256, 1]
    assert int(a0[13]) == 0xD0000 and gs._TAGGED[int(a0[14])].kind == "kvcache"
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
    (_, _, check, cargs), (_, _, kern, args) = fake_gpu.calls
    assert check is fake_gpu.check.kernel and [int(x) for x in cargs[:10]] == [
        0,
        table.data_ptr(),
        0,
        0,
        2,
        64,
        64,
        4,
        4,
        9,
    ]
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
    (_, _, check, cargs), (_, config, _, args) = fake_gpu.calls
    assert check is fake_gpu.check.kernel and [int(x) for x in cargs[:13]] == [
        0,
        0,
        cq.data_ptr(),
        ck.data_ptr(),
        3,
        5,
        5,
        0,
        0,
        0,
        10,
        9,
        7,
    ]
    assert [int(x) for x in args[6:9]] == [7, 5, 2] and int(args[9]) == 0 and int(args[12]) == 0
    assert [int(x) for x in args[25:30]] == [cq.data_ptr(), ck.data_ptr(), 0, 10, 9]
    assert [int(x) for x in args[37:]] == [0, 10]  # lse (Hq, total_q)
    assert tuple(config.grid)[1:] == (4, 3)
    fake_gpu.calls.clear()
    e = torch.empty((0, 4, 64), dtype=torch.float16)
    z = torch.zeros(3, dtype=torch.int32)
    o, lse = flashsim.gpu.attention_varlen(e, k, k, z, torch.tensor([0, 5, 9], dtype=torch.int32), 0, 5)
    assert o.shape == (0, 4, 64) and lse.shape == (4, 0)
    assert [c[2] for c in fake_gpu.calls] == [fake_gpu.check.kernel]  # no query row: the offsets are still checked


def test_a_bad_index_is_found_on_the_device_and_raised_lazily_by_the_next_call(fake_gpu, monkeypatch):
    """Shapes hit the cache, values change every decode step: each call launches the check before flash_fwd, which
    records a bad value in mapped memory; the call itself does not wait, and the next serving call (or
    check_index_errors) raises the ValueError naming the argument. check_indices=False leaves the check out."""
    calls = []
    real = serving_torch._problem
    monkeypatch.setattr(serving_torch, "_problem", lambda *a, **k: calls.append(1) or real(*a, **k))
    q, k, v = _kv()
    good = torch.tensor([256, 1, 77], dtype=torch.int32)
    for _ in range(3):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=good, num_splits=2)
    assert len(calls) == 1 and len(fake_gpu.calls) == 9  # check, flash_fwd, combine each time; one plan
    bad = torch.tensor([257, 1, 77], dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=bad, num_splits=2)  # launched: the check records
    assert len(fake_gpu.calls) == 12
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 257 is past the keys row 0 holds .*checked on the GPU"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=good, num_splits=2)
    assert len(fake_gpu.calls) == 12  # raised before its launches
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=good, num_splits=2)  # the record was cleared
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=bad, num_splits=2)
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 257"):
        flashsim.gpu.check_index_errors()
    flashsim.gpu.check_index_errors()  # nothing pending
    fake_gpu.calls.clear()
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=bad, num_splits=2, check_indices=False)
    assert [c[2] for c in fake_gpu.calls] == [fake_gpu.fwd.kernel, fake_gpu.combine.kernel] and len(calls) == 1
    flashsim.gpu.check_index_errors()


def test_max_seqlen_k_chooses_the_splits_and_a_longer_row_is_flagged(fake_gpu):
    """num_splits=None is chosen over the key tiles of the stated max_seqlen_k (the emulator's choice from the same
    arguments), never from the lengths; a row past it is the lazily raised ValueError naming cache_seqlens."""
    q, k, v = _kv(b=1, n=32768)
    sl = torch.tensor([2000], dtype=torch.int32)
    opts = flashsim.problem.resolve_options(layout="bnhd")
    for stated in (None, 2048):
        fake_gpu.calls.clear()
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, max_seqlen_k=stated)
        fwd = next(c for c in fake_gpu.calls if c[2] is fake_gpu.fwd.kernel)
        emu = flashsim.serving.prepare_kvcache(q, k, v, sl, None, None, opts=opts, sm_count=132, max_seqlen_k=stated)
        assert int(fwd[3][34]) == emu.num_splits
        assert fwd[1].grid[2] == emu.num_splits
    assert emu.num_splits < flashsim.serving.prepare_kvcache(q, k, v, sl, None, None, opts=opts).num_splits
    flashsim.gpu.attention_with_kvcache(
        q, k, v, cache_seqlens=torch.tensor([2049], dtype=torch.int32), max_seqlen_k=2048
    )
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 2049 is more than max_seqlen_k=2048"):
        flashsim.gpu.check_index_errors()
    with pytest.raises(ValueError, match=r"max_seqlen_k must be None or an int in 0..32768"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, max_seqlen_k=40000)
    with pytest.raises(ValueError, match=r"max_seqlen_k must be None or an int, got 2048.0"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, max_seqlen_k=2048.0)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, max_seqlen_k=np.int64(2048))


def test_flash_fwd_overlaps_the_check_only_when_asked_and_checked(fake_gpu, monkeypatch):
    """OVERLAP_CHECK launches flash_fwd as the check's programmatic dependent (the check writes nothing it reads);
    without it, or without a check, flash_fwd's plain configuration. OVERLAP_COMBINE, independently, launches the
    combine as flash_fwd's (the combine waits for flash_fwd's writes in the kernel: griddepcontrol.wait)."""
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    cases = ((False, True, False, True), (True, True, True, False), (True, False, False, True))
    for overlap, check, pdl, combine_pdl in cases:
        monkeypatch.setattr(gs, "OVERLAP_CHECK", overlap)
        monkeypatch.setattr(gs, "OVERLAP_COMBINE", combine_pdl)
        fake_gpu.calls.clear()
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=2, check_indices=check)
        fwd = next(c for c in fake_gpu.calls if c[2] is fake_gpu.fwd.kernel)
        comb = next(c for c in fake_gpu.calls if c[2] is fake_gpu.combine.kernel)
        assert fwd[1].programmatic_stream_serialization is pdl
        assert comb[1].programmatic_stream_serialization is combine_pdl
        assert tuple(fwd[1].grid) == (1, 2, 6) and fwd[1].shmem_size > 0
        assert tuple(comb[1].grid) == (-(-3 * 8 // COMBINE_WARPS), 1, 1)  # B * Nq * Hq rows


class _FakeCupyArray:
    """A cupy array stand-in over host memory (the mocked GPU's memory is the host's): shape, dtype, data.ptr."""

    def __init__(self, a):
        self.a = np.ascontiguousarray(a)
        self.shape, self.dtype = self.a.shape, self.a.dtype
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.device = _FakeDevice()

    def get(self):
        raise AssertionError("cupy .get() on the call's path: a device-to-host copy")


class _FakeDevice:
    id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cupy_arrays_take_the_device_check_without_a_copy(fake_gpu, monkeypatch):
    cupy = types.SimpleNamespace(
        ndarray=_FakeCupyArray,
        empty=lambda shape, dtype: _FakeCupyArray(np.empty(shape, dtype)),
        full=lambda shape, value, dtype: _FakeCupyArray(np.full(shape, value, dtype)),
        float32=np.float32,
        uint64=np.uint64,
        uint8=np.uint8,
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0xCAFE0)),
    )
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    rng = np.random.default_rng(0)
    q = _FakeCupyArray(rng.standard_normal((2, 1, 8, 128)).astype(np.float16))
    pages = _FakeCupyArray(rng.standard_normal((20, 16, 2, 128)).astype(np.float16))
    table = _FakeCupyArray(np.arange(16, dtype=np.int32).reshape(2, 8))
    good, bad = (_FakeCupyArray(np.array(x, np.int32)) for x in ([128, 3], [128, 129]))
    o, lse = flashsim.gpu.attention_with_kvcache(q, pages, pages, cache_seqlens=good, block_table=table, num_splits=2)
    assert isinstance(o, _FakeCupyArray) and o.shape == (2, 1, 8, 128) and lse.shape == (2, 8, 1)
    kernels = [c[2] for c in fake_gpu.calls]
    assert kernels == [fake_gpu.check.kernel, fake_gpu.fwd.kernel, fake_gpu.combine.kernel]
    assert [int(x) for x in fake_gpu.calls[0][3][:2]] == [good.data.ptr, table.data.ptr]
    assert fake_gpu.calls[1][0] == 0xCAFE0
    flashsim.gpu.attention_with_kvcache(q, pages, pages, cache_seqlens=bad, block_table=table, num_splits=2)
    with pytest.raises(ValueError, match=r"cache_seqlens\[1\] = 129 is past the keys row 1 holds"):
        flashsim.gpu.attention_with_kvcache(q, pages, pages, cache_seqlens=good, block_table=table, num_splits=2)


@pytest.fixture
def no_host_reads(monkeypatch):
    """Every way a torch tensor's values reach the host raises (the call must neither copy nor wait)."""

    def refuse(name):
        def method(self, *args, **kwargs):
            raise AssertionError(f"Tensor.{name} on the call's path: a device-to-host copy / synchronisation")

        return method

    for name in ("cpu", "item", "tolist", "numpy", "__array__", "__int__", "__float__", "__bool__", "__index__"):
        monkeypatch.setattr(torch.Tensor, name, refuse(name))
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("device")
        if str(target).startswith("cpu"):
            raise AssertionError("Tensor.to('cpu') on the call's path")
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)


def test_no_tensor_is_copied_to_or_read_by_the_host_on_a_call(fake_gpu, no_host_reads):
    """Paged decode with lengths, split-KV and varlen, first calls (plans built) and repeated ones, a bad index
    among them: no tensor value is read by the host (its values reach the host only through the check's record)."""
    q, _, _ = _kv(b=2)
    pages = torch.randn((20, 16, 2, 128)).to(torch.float16)
    table = torch.arange(16, dtype=torch.int32).reshape(2, 8)
    cq = torch.tensor([0, 3, 3, 10], dtype=torch.int32)
    ck = torch.tensor([0, 5, 9, 9], dtype=torch.int32)
    qv, kv = torch.randn((10, 4, 64)).to(torch.float16), torch.randn((9, 2, 64)).to(torch.float16)
    for sl in ([128, 17], [100, 3]):
        seqlens = torch.tensor(sl, dtype=torch.int32)
        for splits in (1, 2, None):
            flashsim.gpu.attention_with_kvcache(
                q, pages, pages, cache_seqlens=seqlens, block_table=table, num_splits=splits, check_overflow=True
            )
        flashsim.gpu.attention_varlen(qv, kv, kv, cq, ck, 7, 5, causal=True)
    bad = torch.tensor([129, 3], dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, pages, pages, cache_seqlens=bad, block_table=table, num_splits=2)
    with pytest.raises(ValueError, match=r"cache_seqlens\[0\] = 129 is past the keys row 0 holds"):
        flashsim.gpu.attention_varlen(qv, kv, kv, cq, ck, 7, 5)
    with pytest.raises(AssertionError, match="Tensor.item"):  # the fixture is in force
        seqlens.item()


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
        o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, max_seqlen_k=256)
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
    # --fused: the GPU's problem (and so the capture's configuration and provenance) is the fused-check build's
    seen = []
    monkeypatch.setattr(
        verify_serving,
        "gpu_outputs",
        lambda case, arrays, prob: (
            seen.append(prob.config.fused)
            or verify_serving.emulator_outputs(
                case, arrays, prob, verify_serving.problem_of(case, arrays, prob.arch)[1]
            )
        ),
    )
    fused = tmp_path / "attn_sm90_serving_fused.npz"
    ok, _ = verify_serving.run_serving(cases[:2], "sm_90", save_path=str(fused), out=lambda *a: None, fused=True)
    assert ok and seen == [True, True] and verify_serving.is_fused_capture(fused)
    assert not verify_serving.is_fused_capture(out)
    verify_serving.check_capture(fused, "c1")
    records = stamp.records(fused)
    assert all(r.config.fused for r in records)
    assert records[0].provenance == provenance.fingerprint("flash_fwd", records[0].config)
    with pytest.raises(ValueError, match="--fused runs the serving calls with their index check inside flash_fwd"):
        verify.run(p.parse_args(["--fused", "--shape", "1,1,4,4,64"]))


# -- the host path's shortcuts: packed launches, the eager path, the scratch -------------------------------------


def _params(addr: int, types) -> list:
    """What the driver reads through ``kernelParams`` (a void** at ``addr``): each parameter's bytes at its pointer,
    as its type."""
    pointers = (ctypes.c_void_p * len(types)).from_address(addr)
    return [
        np.ctypeslib.as_array((ctypes.c_uint8 * t.itemsize).from_address(p)).view(t)[0] for p, t in zip(pointers, types)
    ]


_CONFIG_FIELDS = ("gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes")


def _seen_config(c) -> dict:
    """A driver launch configuration's fields (cuda.bindings' CUlaunchConfig or flashsim.gpu.packed's C structure),
    read when the launch is made (the stream field is rewritten by the next one)."""
    attrs = [(int(c.attrs[i].id), c.attrs[i].value.programmaticStreamSerializationAllowed) for i in range(c.numAttrs)]
    return dict({n: getattr(c, n) for n in _CONFIG_FIELDS}, hStream=int(c.hStream or 0), attrs=attrs)


@pytest.mark.parametrize("path", ["ctypes", "bindings"])
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "programmatic"])
def test_a_packed_launch_hands_the_driver_its_configuration_and_parameters(monkeypatch, overlap, path):
    """flashsim.gpu.packed.driver_launch with cuLaunchKernelEx recorded (no GPU), through libcuda by ctypes and through
    cuda.bindings (the fallback): the driver's launch configuration is cuda.core's own for the same LaunchConfig, the
    stream is the handle given, the function the kernel's handle, and the parameter array points at each argument's
    value of its type, the addresses written after packing included."""
    from cuda.bindings import driver

    seen = []
    if path == "ctypes":  # the ctypes function's arguments: four integers, the configuration by its address

        def launch(config, f, params, extra):
            seen.append((_seen_config(packed.LaunchConfig.from_address(config)), f, params, extra))
            return 0

        monkeypatch.setattr(packed, "_LAUNCHER", [launch])
    else:
        monkeypatch.setattr(packed, "_LAUNCHER", [None])
        monkeypatch.setattr(
            driver,
            "cuLaunchKernelEx",
            lambda config, f, params, extra: (
                seen.append((_seen_config(config), int(f), params, extra)) or (driver.CUresult.CUDA_SUCCESS,)
            ),
        )
    config = rt.launch_config((3, 2, 5), (128, 1, 1), 70_000, overlap_previous=overlap)
    args = (0, np.int32(-7), np.float32(0.125), np.int64(-(2**40)), np.uint64(2**63 + 5), 0x7F00_0000_1000, np.int32(9))
    kernel = types.SimpleNamespace(handle=0x1234)
    p = packed.PackedLaunch(kernel, config, args, "kernel test")
    p.slots[0] = 0x7F00_0000_2000  # a call's address, written into its slot
    packed.driver_launch(p, 0xABC0)
    packed.driver_launch(p.with_config(config), 0xDEF0)  # shares the slots
    (c, f, params, extra), (c2, _, params2, _) = seen
    assert f == 0x1234 and not extra and params == params2 == p.params_addr
    want = (0x7F00_0000_2000, *args[1:])
    assert [x.item() for x in _params(params, p.types)] == [int(a) if isinstance(a, int) else a.item() for a in want]
    assert [t.itemsize for t in p.types] == [8, 4, 4, 8, 8, 8, 4]
    assert c["hStream"] == 0xABC0 and c2["hStream"] == 0xDEF0
    assert [c[n] for n in _CONFIG_FIELDS] == [3, 2, 5, 128, 1, 1, 70_000]
    lc = pytest.importorskip("cuda.core._launch_config")
    ref = _seen_config(lc._to_native_launch_config(config))  # cuda.core's own, where this version has it
    assert [c[n] for n in (*_CONFIG_FIELDS, "attrs")] == [ref[n] for n in (*_CONFIG_FIELDS, "attrs")]
    assert c["attrs"] == ([(6, 1)] if overlap else [])
    monkeypatch.setattr(driver, "cuGetErrorString", lambda err: (driver.CUresult.CUDA_SUCCESS, b"invalid argument"))
    with pytest.raises(GPUError, match="launching kernel test failed: CUDA_ERROR_INVALID_VALUE: invalid argument"):
        if path == "ctypes":
            monkeypatch.setattr(packed, "_LAUNCHER", [lambda *a: 1])
        else:
            monkeypatch.setattr(driver, "cuLaunchKernelEx", lambda *a: (driver.CUresult(1),))
        packed.driver_launch(packed.PackedLaunch(kernel, config, args, "kernel test"), 0)
    if path == "ctypes":  # a code this cuda.bindings does not know: named by its number
        monkeypatch.setattr(packed, "_LAUNCHER", [lambda *a: 123_456])
        with pytest.raises(GPUError, match="launching kernel test failed: 123456: invalid argument"):
            packed.driver_launch(packed.PackedLaunch(kernel, config, args, "kernel test"), 0)


def _launches(rec, o, lse):
    """The recorded launches with the call's own outputs' addresses named (they differ from call to call): o, lse
    and flash_fwd's overflow flag (a fresh tensor per call where the flag is read)."""
    names = {o.data_ptr(): "o", lse.data_ptr(): "lse"}
    out = []
    for s, c, k, args in rec.calls:
        args = [names.get(int(a), int(a)) for a in args]
        if k is rec.fwd.kernel and args[5]:
            args[5] = "flag"
        out.append((s, tuple(c.grid), tuple(c.block), c.shmem_size, c.programmatic_stream_serialization, k, args))
    return out


def test_the_eager_path_and_the_op_launch_the_same_kernels_with_the_same_arguments(fake_gpu, monkeypatch):
    """The public call runs the op's CUDA body without torch's dispatcher (nothing there needs to see the op); through
    the op (torch.ops.flashsim.*) the same launches come out, argument for argument: the same bits by construction."""
    through_op = []
    for name in ("KVCACHE_OP", "VARLEN_OP"):
        real = getattr(serving_torch, name)
        monkeypatch.setattr(serving_torch, name, lambda *a, _real=real: through_op.append(1) or _real(*a))
    q, _, _ = _kv(b=2)
    pages = torch.randn((20, 16, 2, 128)).to(torch.float16)
    table = torch.arange(16, dtype=torch.int32).reshape(2, 8)
    seqlens = torch.tensor([128, 17], dtype=torch.int32)
    cq = torch.tensor([0, 3, 3, 10], dtype=torch.int32)
    ck = torch.tensor([0, 5, 9, 9], dtype=torch.int32)
    qv, kv = torch.randn((10, 4, 64)).to(torch.float16), torch.randn((9, 2, 64)).to(torch.float16)
    calls = [
        lambda: flashsim.gpu.attention_with_kvcache(
            q, pages, pages, cache_seqlens=seqlens, block_table=table, num_splits=2
        ),
        lambda: flashsim.gpu.attention_with_kvcache(q, pages, pages, block_table=table, pv_accum="f16", causal=True),
        lambda: flashsim.gpu.attention_varlen(qv, kv, kv, cq, ck, 7, 5, causal=True, softcap=30.0),
    ]
    for fn in calls:
        for eager in (True, False):
            monkeypatch.setattr(serving_torch, "_on_gpu", lambda q, _e=eager: _e)
            fake_gpu.calls.clear()
            through_op.clear()
            o, lse = fn()
            assert bool(through_op) is not eager
            got = _launches(fake_gpu, o, lse)
            if eager:
                want = got
        assert got == want and len(got) >= 2


def test_the_op_is_used_wherever_something_watches_it(fake_gpu, monkeypatch):
    """A dispatch mode, the profiler, grad mode with an input requiring grad: the call goes through the op (the
    mode sees it; the profiler names it; the ValueError about grad is raised)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    with Seen() as mode:
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    assert any("attention_with_kvcache" in op for op in mode.ops)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    assert any("flashsim::attention_with_kvcache" in e.name for e in prof.events())
    with torch.enable_grad(), pytest.raises(ValueError, match="q requires grad"):
        flashsim.gpu.attention_with_kvcache(q.clone().requires_grad_(), k, v, cache_seqlens=sl)


def test_the_split_parts_scratch_is_kept_per_stream_outside_a_capture(fake_gpu, monkeypatch):
    """Eager calls on one stream reuse one scratch buffer (stream order separates them); a call being captured into
    a CUDA graph gets its own from the allocator (the capture's pool), never the eager calls' buffer."""
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)

    def o_part():
        fake_gpu.calls.clear()
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=3)
        return next(int(c[3][35]) for c in fake_gpu.calls if c[2] is fake_gpu.fwd.kernel)

    first = o_part()
    assert o_part() == first
    monkeypatch.setattr(serving_torch, "_raw_stream", lambda dev: 0xBBB0)
    other = o_part()
    assert other != first and o_part() == other
    monkeypatch.setattr(serving_torch, "_capturing", lambda: True)
    assert o_part() not in (first, other)


def test_a_repeated_call_gives_fresh_outputs_and_sees_every_change_of_its_tensors(fake_gpu):
    """The fast key's repeat path: o and lse new tensors of the promised shapes and dtypes on every call (lse made
    like a kept template, never the template itself); a tensor that changes its contiguity, dtype or shape between
    two calls is checked again (its ValueError), whatever the first call cached."""
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    o1, lse1 = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    o2, lse2 = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    (hit,) = serving_torch._KEYS.values()
    ptrs = {x.data_ptr() for x in (o1, lse1, o2, lse2, hit.lse_like)}
    assert len(ptrs) == 5
    for o, lse in ((o1, lse1), (o2, lse2)):
        assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous() and o._base is None
        assert lse.shape == (3, 8, 1) and lse.dtype == torch.float32 and lse.is_contiguous() and lse._base is None
    strided = torch.empty((3, 2, 8, 128), dtype=torch.float16)[:, :1]  # q's shape, dtype and device: not contiguous
    assert strided.shape == q.shape
    with pytest.raises(ValueError, match="q must be contiguous"):
        flashsim.gpu.attention_with_kvcache(strided, k, v, cache_seqlens=sl)
    with pytest.raises(ValueError, match="cache_seqlens must be contiguous"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=torch.zeros(6, dtype=torch.int32)[::2])
    with pytest.raises(ValueError, match="must have one dtype, got q float16, k_cache bfloat16"):
        flashsim.gpu.attention_with_kvcache(q, k.to(torch.bfloat16), v, cache_seqlens=sl)
    sl.resize_(2)  # in place: the same tensor object, another shape
    with pytest.raises(ValueError, match="cache_seqlens"):
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)


def test_subclasses_and_non_int_scalars_take_the_op_with_the_same_launches(fake_gpu, monkeypatch):
    """The eager shortcut is only for plain tensors and int scalars: a torch.Tensor subclass, or a numpy int for
    num_splits, goes through the op (torch's dispatcher), which launches the same kernels with the same arguments;
    the op's overflow output is an empty int64 tensor where nobody reads the flag."""
    through_op = []
    real = serving_torch.KVCACHE_OP
    monkeypatch.setattr(serving_torch, "KVCACHE_OP", lambda *a: through_op.append(1) or real(*a))

    class Sub(torch.Tensor):
        pass

    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=2)
    want = _launches(fake_gpu, o, lse)
    assert not through_op and len(want) == 3
    for args in ((q.as_subclass(Sub), 2), (q, np.int64(2))):
        fake_gpu.calls.clear()
        o, lse = flashsim.gpu.attention_with_kvcache(args[0], k, v, cache_seqlens=sl, num_splits=args[1])
        assert through_op.pop() and _launches(fake_gpu, o, lse) == want
    o, lse, flag = real(q, k, v, sl, None, 2)
    assert flag.shape == (0,) and flag.dtype == torch.int64
    o, lse, flag = real(q, k, v, sl, None, 2, pv_accum="f16")
    assert flag.shape == (1,) and flag.dtype == torch.int64


def test_a_fused_call_is_one_launch_fewer_with_its_state_and_the_record(fake_gpu, monkeypatch):
    """flashsim.gpu.serving.FUSED: flash_fwd's fused build without serving_check (then flash_combine, with splits, as
    the separate launches have it: the same arguments), passed a zeroed state of FUSED_HEADER words, kept per stream
    and fresh inside a capture, then the record and the tag where the call is checked; a call with no query row
    still runs the separate check (nothing else to check its offsets)."""
    monkeypatch.setattr(gs, "FUSED", True)
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    states = []
    real_state = serving_torch._state
    monkeypatch.setattr(serving_torch, "_state", lambda *a: states.append(real_state(*a)) or states[-1])
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    ((stream, config, kern, args), (_, _, comb, comb_args)) = fake_gpu.calls
    assert comb is fake_gpu.combine.kernel and [int(x) for x in comb_args[4:]] == [4, 3 * 8, 1, 8]
    assert stream == 0xABC0 and kern is fake_gpu.fwd.kernel and tuple(config.grid) == (1, 2, 12)
    assert len(args) == 43 and [int(x) for x in args[30:35]] == [0, 0, 0, 0, 4]
    state, record, tag, limit = (int(x) for x in args[39:])
    assert state == states[0][1] and record == 0xD0000 and limit == 256
    prob = gs._TAGGED[tag]
    assert prob.config.fused and prob.config.split and gs.state_bytes(prob) == 4 * FUSED_HEADER
    buf = next(b for b, p in serving_torch._STATE.values() if p == state)
    assert buf.numel() == gs.state_bytes(prob) and not buf.any()
    fake_gpu.calls.clear()
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4, check_indices=False)
    ((_, _, _, args), _) = fake_gpu.calls
    assert int(args[39]) == state and int(args[40]) == 0  # the same state on this stream; unchecked: no record
    monkeypatch.setattr(serving_torch, "_capturing", lambda: True)
    fake_gpu.calls.clear()
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert int(fake_gpu.calls[0][3][39]) != state  # a capture's own state
    monkeypatch.setattr(serving_torch, "_capturing", lambda: False)
    fake_gpu.calls.clear()
    e = torch.empty((0, 4, 64), dtype=torch.float16)
    kk = torch.randn((9, 2, 64)).to(torch.float16)
    flashsim.gpu.attention_varlen(e, kk, kk, torch.zeros(3, dtype=torch.int32), torch.tensor([0, 5, 9]).int(), 0, 5)
    assert [c[2] for c in fake_gpu.calls] == [fake_gpu.check.kernel]


@pytest.mark.parametrize("fused", [False, True], ids=["check_launched", "check_fused"])
def test_a_captured_call_keeps_its_buffers_until_its_launches_are_enqueued(fake_gpu, monkeypatch, fused):
    """Inside a CUDA graph capture the split parts' scratch and a fused call's state come from the capture's pool;
    each must live until the launches that use it are enqueued, or torch hands its block to the next allocation of
    the capture (the state took the scratch's block: on the H100 every graph of a fused call was wrong). At each
    launch every buffer made for the call is alive, and o, lse, the scratch and the state are disjoint."""
    monkeypatch.setattr(gs, "FUSED", fused)
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)  # warm: planned outside
    made = []
    real = serving_torch._per_stream

    def tracked(cache, dev, stream, nbytes, make, capturing):
        def tracked_make(n):
            buf = make(n)
            made.append((weakref.ref(buf), buf.data_ptr(), n))
            return buf

        return real(cache, dev, stream, nbytes, tracked_make, capturing)

    alive_at_launch = []
    real_enqueue = gs.enqueue

    def enqueue(*args, **kw):
        alive_at_launch.append([ref() is not None for ref, _, _ in made])
        return real_enqueue(*args, **kw)

    monkeypatch.setattr(serving_torch, "_per_stream", tracked)
    monkeypatch.setattr(gs, "enqueue", enqueue)
    monkeypatch.setattr(serving_torch, "_capturing", lambda: True)
    fake_gpu.calls.clear()
    o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert len(made) == 1 and alive_at_launch == [[True]]  # the scratch; a fused call's state is a slab's slot
    spans = [(o.data_ptr(), o.numel() * o.element_size()), (lse.data_ptr(), lse.numel() * 4)]
    spans += [(ptr, n) for _, ptr, n in made]
    if fused:
        ((_, _, _, args), _) = fake_gpu.calls
        slab = serving_torch._SLABS[q.get_device()]
        spans.append((int(args[39]), gs.state_bytes(gs._TAGGED[int(args[41])])))
        assert slab.base <= int(args[39]) < slab.base + slab.buf.numel()
    spans.sort()
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:])), spans


def test_captured_fused_calls_take_zeroed_slab_slots_without_a_memset(fake_gpu, monkeypatch):
    """A fused call captured into a CUDA graph takes its state from the device's slab, zeroed before the capture, a
    slot no other call or graph gets (so the graph holds no memset node); a new slab is made outside a capture once
    half of the old one is given out, the old one kept (its slots belong to graphs); with no slot left, a captured
    call makes a zeroed buffer inside the capture."""
    monkeypatch.setattr(gs, "FUSED", True)
    monkeypatch.setattr(serving_torch._StateSlab, "SLAB_SLOTS", 4)
    monkeypatch.setattr(serving_torch, "_SLABS", {})
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)

    def state_of_call():
        fake_gpu.calls.clear()
        flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
        return int(fake_gpu.calls[0][3][39])

    eager = state_of_call()
    slab = serving_torch._SLABS[q.get_device()]
    zeros = []
    real_zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *a, **kw: zeros.append(a) or real_zeros(*a, **kw))
    monkeypatch.setattr(serving_torch, "_capturing", lambda: True)
    captured = [state_of_call() for _ in range(2)]
    assert not zeros and captured == [slab.base, slab.base + slab.SLOT_BYTES] and eager not in captured
    assert not slab.buf.any()
    monkeypatch.setattr(serving_torch, "_capturing", lambda: False)
    state_of_call()  # half given out: a new slab, the old one kept by it
    new = serving_torch._SLABS[q.get_device()]
    assert new is not slab and new.previous is slab
    zeros.clear()  # the new slab's own zeros, outside the capture
    monkeypatch.setattr(serving_torch, "_capturing", lambda: True)
    assert [state_of_call() for _ in range(4)] == [new.base + i * new.SLOT_BYTES for i in range(4)] and not zeros
    outside = state_of_call()  # no slot left: a zeroed buffer made inside the capture
    assert zeros and not new.base <= outside < new.base + new.buf.numel()


def test_switching_fused_on_after_a_call_drops_the_check_launch(fake_gpu, monkeypatch):
    """FUSED read on every plan lookup, not only when a problem is first planned: a call made with the separate
    launches leaves its plan cached, and the same call once FUSED is on runs the fused build and flash_combine, no
    check launch (the way a benchmark or a user switches it at run time)."""
    q, k, v = _kv()
    sl = torch.tensor([256, 1, 77], dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert [c[2] for c in fake_gpu.calls] == [fake_gpu.check.kernel, fake_gpu.fwd.kernel, fake_gpu.combine.kernel]
    monkeypatch.setattr(gs, "FUSED", True)
    fake_gpu.calls.clear()
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    ((_, _, kern, args), (_, _, comb, _)) = fake_gpu.calls
    assert kern is fake_gpu.fwd.kernel and len(args) == 43 and gs._TAGGED[int(args[41])].config.fused
    assert comb is fake_gpu.combine.kernel
    monkeypatch.setattr(gs, "FUSED", False)
    fake_gpu.calls.clear()
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, num_splits=4)
    assert len(fake_gpu.calls) == 3
