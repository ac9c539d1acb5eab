"""flashsim.gpu.attention with torch (and cupy) arrays: the custom op, its cache, streams, graphs, and its checks.

Two halves. The first runs anywhere torch is installed (CPU build included): the GPU is mocked (flashsim.gpu.runtime's
device queries and cuda.core's launch are replaced by recorders), CPU tensors are routed through the CUDA path, and
the tests check the cache key logic, the argument checks (raised before any launch), the launch arguments, the
op's fake implementation under torch.compile(fullgraph=True), and measure the Python cost of a repeated call. The
second half is marked ``gpu`` (skipped with the reason elsewhere) and runs the real kernel through torch: types,
bits against the numpy path, streams, no host synchronisation, torch.compile, CUDA graph capture and replay, and
bad tensors that must be refused before they reach the kernel.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig
from flashsim.errors import GPUError
from flashsim.gpu import launch as gl
from flashsim.gpu import runtime as rt

torch = pytest.importorskip("torch")
torch_op = pytest.importorskip("flashsim.gpu.torch_op")


# ==== without a GPU: mocked device, CPU tensors through the CUDA path ======================================


class _Recorder:
    """Stands in for cuda.core.launch: records (stream, config, kernel, args); packs the arguments like cuda.core
    does (ParamHolder) so that the measured overhead includes that step."""

    def __init__(self):
        self.calls = []
        try:
            from cuda.core._kernel_arg_handler import ParamHolder
        except Exception:  # noqa: BLE001 - cuda.core missing: record only
            ParamHolder = None
        self._pack = ParamHolder

    def __call__(self, stream, config, kernel, *args):
        if self._pack is not None:
            self._pack(args)
        self.calls.append((stream, config, kernel, args))


@pytest.fixture
def fake_gpu(monkeypatch):
    """A mocked sm_90 device 'number -1' (what CPU tensors report); the launch is a recorder."""
    gl.clear_caches()
    rec = _Recorder()
    kernel = types.SimpleNamespace(kernel=object(), name="flash_fwd")
    monkeypatch.setitem(rt._state, "sticky", None)
    monkeypatch.setattr(rt, "require_gpu", lambda: object())
    monkeypatch.setattr(rt, "device_id", lambda: -1)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "bind_thread", lambda: None)
    monkeypatch.setattr(rt, "stream_from_handle", lambda h: ("stream", h))
    monkeypatch.setattr(gl, "kernel_for", lambda cfg, arch: kernel)
    monkeypatch.setattr(gl, "_core_launch", rec)
    monkeypatch.setattr(torch_op, "_raw_stream", lambda dev: 0xABC0)
    monkeypatch.setattr(torch_op, "_current_device", lambda: -1)
    monkeypatch.setattr(torch_op, "_capturing", lambda: False)
    monkeypatch.setattr(torch_op, "_impl_cpu", torch_op._impl_cuda)  # CPU tensors take the CUDA path
    monkeypatch.setattr(torch_op, "_on_host", lambda t: False)
    rec.kernel = kernel
    yield rec
    gl.clear_caches()  # no mocked plan may outlive the test


def _qkv(b=1, h=2, nq=40, nk=56, d=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn((b, h, n, d), generator=g).to(torch.float16) for n in (nq, nk, nk))


def test_import_flashsim_gpu_stays_free_of_torch_and_cuda():
    code = (
        "import sys, flashsim.gpu; print(sorted({m.partition('.')[0] for m in sys.modules} "
        "& {'torch', 'cuda', 'cupy'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_op_is_registered_with_its_schema():
    op = torch.ops.flashsim.attention.default
    assert op is torch_op.OP
    schema = str(op._schema)
    assert "Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None" in schema
    assert schema.endswith("-> (Tensor o, Tensor lse, Tensor overflow)")


def test_a_call_launches_once_with_the_right_arguments(fake_gpu):
    q, k, v = _qkv()
    o, lse = flashsim.gpu.attention(q, k, v, causal=True, softmax_scale=0.3)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float16 and o.shape == q.shape and o.is_contiguous()
    assert isinstance(lse, torch.Tensor) and lse.dtype == torch.float32 and lse.shape == q.shape[:3]
    assert len(fake_gpu.calls) == 1
    stream, config, kernel, args = fake_gpu.calls[0]
    assert stream == ("stream", 0xABC0) and kernel is fake_gpu.kernel.kernel
    assert args[:5] == (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr())
    prob = flashsim.problem.prepare(q, k, v, causal=True, softmax_scale=0.3, arch="sm_90")
    cfg = prob.config
    assert type(args[5]) is np.uint64 and args[5] == 0  # f32 P@V: no overflow flag
    # nq, nk, group; q's strides (batch, head, row); k / v's; lse_scale, scale_log2, cap_scale; the window (none)
    # then the INT8 pointers (q_scale, k_scale, q_corr), FP8's v_deq and nkp: null / 0 without quant
    assert [type(a) for a in args[6:]] == [np.int32] * 3 + [np.int64] * 6 + [np.float32] * 3 + [np.int32] * 2 + [
        np.uint64
    ] * 4 + [np.int32]
    assert args[6:15] == (40, 56, 1, 2 * 40 * 64, 40 * 64, 64, 2 * 56 * 64, 56 * 64, 64)
    assert np.float32(args[15]).tobytes() == prob.softmax_scale.tobytes() == prob.lse_scale.tobytes()
    assert np.float32(args[16]).tobytes() == prob.scale_log2.tobytes()
    assert args[17:] == (0.0, 0, 0, 0, 0, 0, 0, 0)
    assert tuple(config.grid) == (-(-40 // cfg.block_m), 2, 1)
    assert tuple(config.block) == (cfg.threads, 1, 1) and config.shmem_size == cfg.smem_bytes


def test_an_int8_call_launches_the_quantization_pass_then_the_kernel_on_its_scratch(fake_gpu, monkeypatch):
    """quant="int8": k_mean, quantize_k, quantize_q, then flash_fwd, all on the call's stream; flash_fwd reads the
    s8 q and k and the scales from the scratch (torch's allocator, aligned offsets of launch.scratch_layout)."""
    quant_kernels = tuple(
        types.SimpleNamespace(kernel=object(), name=n)
        for n in ("k_mean", "quantize_k", "quantize_q", "v_absmax", "quantize_v")
    )
    monkeypatch.setattr(gl, "_quant_kernels_for", lambda cfg, arch: quant_kernels)
    q, k, v = _qkv(h=4, nq=40, nk=56)
    k = k[:, :2].contiguous()
    v = v[:, :2].contiguous()
    flashsim.gpu.attention(q, k, v, quant="int8")
    assert [c[2] for c in fake_gpu.calls] == [x.kernel for x in quant_kernels[:3]] + [fake_gpu.kernel.kernel]
    assert all(c[0] == ("stream", 0xABC0) for c in fake_gpu.calls)
    prob = flashsim.problem.prepare(q, k, v, quant="int8", arch="sm_90")
    lay = gl.scratch_layout(prob)
    assert [lay[n][1] for n in ("q8", "k8", "q_scale", "k_scale", "mean", "corr")] == [
        (1, 4, 40, 64),
        (1, 2, 56, 64),
        (1, 4, 3),
        (1, 2, 4),
        (1, 2, 64),
        (1, 4, 40),
    ]
    offs = sorted(off for off, _, _ in lay.values())
    assert all(o % gl.SCRATCH_ALIGN == 0 for o in offs)
    ends = sorted((off, off + int(np.prod(sh)) * dt.itemsize) for off, sh, dt in lay.values())
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])) and ends[-1][1] == gl.scratch_bytes(prob)
    base = int(fake_gpu.calls[0][3][1]) - lay["mean"][0]  # k_mean(k, mean, ...)
    main = fake_gpu.calls[3][3]
    assert (int(main[0]), int(main[1])) == (base + lay["q8"][0], base + lay["k8"][0])
    assert [int(x) for x in main[-5:-2]] == [base + lay[n][0] for n in ("q_scale", "k_scale", "corr")]
    assert int(main[-2]) == 0 and int(main[-1]) == 0  # no FP8 P@V
    assert main[2] == v.data_ptr()


def test_the_overflow_flag_is_passed_and_read_only_where_the_kernel_writes_it(fake_gpu, monkeypatch):
    """config.overflow_flag_live is the one rule: f16 / f16x2 P@V on f16 P and V get a flag (and the call reads it),
    FP8 P@V with f16x2 accumulation does not (V's range keeps every f16 sum finite), so the torch path neither
    allocates a flag the kernel never writes nor waits on one; the op's fake agrees for torch.compile."""
    quant_kernels = tuple(types.SimpleNamespace(kernel=object(), name=str(i)) for i in range(5))
    monkeypatch.setattr(gl, "_quant_kernels_for", lambda cfg, arch: quant_kernels)
    q, k, v = _qkv(nq=64, nk=64, d=64)
    reads = []
    real_item = torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append(t.shape) or real_item(t))
    for pv_accum, quant, live in (
        ("f16x2", "none", True),
        ("f16", "none", True),
        ("f16x2", "int8-fp8", False),
        ("f32", "int8-fp8", False),
        ("f32", "none", False),
    ):
        reads.clear()
        flashsim.gpu.attention(q, k, v, pv_accum=pv_accum, quant=quant)
        args = fake_gpu.calls[-1][3]
        assert (int(args[5]) != 0) == live, (pv_accum, quant)  # the flag pointer of flash_fwd
        assert bool(reads) == live, (pv_accum, quant)  # the host reads the flag only where it is written
        _, _, flag = torch_op.OP(q, k, v, False, None, pv_accum, [], None, True, [-1, -1], 0.0, "bhnd", quant)
        assert flag.numel() == int(live)
        with torch._subclasses.FakeTensorMode() as mode:
            fq, fk, fv = (mode.from_tensor(x) for x in (q, k, v))
            assert torch_op._fake(fq, fk, fv, pv_accum=pv_accum, quant=quant)[2].shape == (int(live),)


def test_repeated_calls_hit_the_cache_and_new_keys_miss(fake_gpu, monkeypatch):
    calls = []
    real_prepare = torch_op.prepare
    monkeypatch.setattr(torch_op, "prepare", lambda *a, **kw: calls.append(1) or real_prepare(*a, **kw))
    q, k, v = _qkv()
    for _ in range(5):
        flashsim.gpu.attention(q, k, v)
    assert len(calls) == 1 and len(fake_gpu.calls) == 5
    q2, k2, v2 = _qkv(seed=1)  # same shapes, other tensors: still a hit
    flashsim.gpu.attention(q2, k2, v2)
    assert len(calls) == 1
    flashsim.gpu.attention(q, k, v, causal=True)  # other options, other shapes: misses
    flashsim.gpu.attention(q, k, v, softmax_scale=0.5)
    flashsim.gpu.attention(q, k, v, pv_accum="f16")
    flashsim.gpu.attention(*_qkv(nq=41))
    assert len(calls) == 5
    cfg = KernelConfig.default("sm_90", head_dim=64, warps=8, m_tiles=1)
    flashsim.gpu.attention(q, k, v, config=cfg)
    flashsim.gpu.attention(q, k, v, config=cfg)
    assert len(calls) == 6
    plans = {id(c[1]) for c in fake_gpu.calls}
    assert len(plans) == 6  # one LaunchConfig per Problem, reused on hits


def test_bad_tensors_raise_value_errors_before_any_launch(fake_gpu):
    q, k, v = _qkv()
    flashsim.gpu.attention(q, k, v)  # warm: the bad variants must not ride on the cached key
    n0 = len(fake_gpu.calls)
    flat = torch.empty(q.numel() + 1, dtype=torch.float16)
    q_mis = flat[1:].view(q.shape)
    assert q_mis.is_contiguous() and q_mis.data_ptr() % 16 == 2
    with pytest.raises(ValueError, match="q's data pointer .* not 16-byte aligned"):
        flashsim.gpu.attention(q_mis, k, v)
    v_mis = torch.empty(v.numel() + 4, dtype=torch.float16)[4:].view(v.shape)
    with pytest.raises(ValueError, match="v's data pointer .* not 16-byte aligned"):
        flashsim.gpu.attention(q, k, v_mis)
    k_t = torch.empty(k.shape[0], k.shape[1], k.shape[3], k.shape[2], dtype=torch.float16).transpose(2, 3)
    with pytest.raises(ValueError, match="k must be contiguous"):
        flashsim.gpu.attention(q, k_t, v)
    with pytest.raises(ValueError, match="q must be contiguous"):
        flashsim.gpu.attention(torch.empty(1, 2, 80, 64, dtype=torch.float16)[:, :, ::2], k, v)
    with pytest.raises(ValueError, match="q must be float16 or bfloat16"):
        flashsim.gpu.attention(q.float(), k, v)
    with pytest.raises(ValueError, match="q, k and v must have one dtype, got q float16, k bfloat16"):
        flashsim.gpu.attention(q, k.to(torch.bfloat16), v)
    with pytest.raises(ValueError, match="4 dimensions"):
        flashsim.gpu.attention(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        flashsim.gpu.attention(q, k, v[:, :, :-1])
    with pytest.raises(ValueError, match="k is on meta but q is on cpu"):
        torch_op._impl_cuda(q, torch.empty(k.shape, dtype=torch.float16, device="meta"), v)
    with pytest.raises(ValueError, match="v must be a torch tensor"):
        flashsim.gpu.attention(q, k, v.numpy())
    assert len(fake_gpu.calls) == n0
    flashsim.gpu.attention(q, k, v)  # and a good call still launches
    assert len(fake_gpu.calls) == n0 + 1


def test_options_that_contradict_the_config_raise(fake_gpu):
    q, k, v = _qkv()
    causal_cfg = KernelConfig.default("sm_90", head_dim=64, causal=True)
    with pytest.raises(ValueError, match="causal=False contradicts config.causal=True"):
        flashsim.gpu.attention(q, k, v, causal=False, config=causal_cfg)
    f16_cfg = KernelConfig.default("sm_90", head_dim=64, pv_accum="f16")
    with pytest.raises(ValueError, match="pv_accum='f32' contradicts config.pv_accum='f16'"):
        flashsim.gpu.attention(q, k, v, pv_accum="f32", config=f16_cfg)
    with pytest.raises(ValueError, match="config.head_dim=128 does not match"):
        flashsim.gpu.attention(q, k, v, config=KernelConfig.default("sm_90", head_dim=128))
    with pytest.raises(ValueError, match="pv_accum must be one of"):
        flashsim.gpu.attention(q, k, v, pv_accum="bf16")
    with pytest.raises(ValueError, match="softmax_scale must be a positive finite number"):
        flashsim.gpu.attention(q, k, v, softmax_scale=float("nan"))
    with pytest.raises(ValueError, match="config must be a flashsim.KernelConfig"):
        flashsim.gpu.attention(q, k, v, config={"warps": 4})
    with pytest.raises(ValueError, match="arch='sm_80' but the current GPU"):
        flashsim.gpu.attention(q, k, v, arch="sm_80")
    assert not fake_gpu.calls
    o, _ = flashsim.gpu.attention(q, k, v, causal=True, config=causal_cfg)  # agreeing values are fine
    flashsim.gpu.attention(q, k, v, arch="sm_90a", config=f16_cfg, pv_accum="f16")
    assert len(fake_gpu.calls) == 2


def test_the_numpy_path_checks_contradictions_too(monkeypatch):
    monkeypatch.setattr(rt, "require_gpu", lambda: object())
    monkeypatch.setattr(rt, "device_id", lambda: 0)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    q = np.zeros((1, 1, 16, 64), np.float16)
    with pytest.raises(ValueError, match="causal=False contradicts"):
        flashsim.gpu.attention(q, q, q, causal=False, config=KernelConfig.default("sm_90", head_dim=64, causal=True))
    with pytest.raises(ValueError, match="current GPU"):
        flashsim.gpu.attention(q, q, q, arch="sm_120")


def test_inputs_that_require_grad_are_refused(fake_gpu):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="k requires grad"):
        flashsim.gpu.attention(q, k.clone().requires_grad_(), v)
    with torch.no_grad():
        flashsim.gpu.attention(q, k.clone().requires_grad_(), v)
    assert len(fake_gpu.calls) == 1


def test_the_fake_implementation_traces_under_torch_compile(fake_gpu):
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def f(q, k, v):
        o, lse = flashsim.gpu.attention(q * 2, k, v, causal=True)
        return o.float() + 1, lse * 2

    q, k, v = _qkv()
    torch._dynamo.reset()
    try:
        o, lse = torch.compile(f, fullgraph=True, backend=backend)(q, k, v)
        assert any("flashsim.attention" in s for s in seen), seen
        assert o.shape == q.shape and o.dtype == torch.float32 and lse.shape == q.shape[:3]
        assert len(fake_gpu.calls) == 1
        o2, lse2 = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
        assert o2.shape == q.shape and lse2.dtype == torch.float32 and len(fake_gpu.calls) == 2
    finally:
        torch._dynamo.reset()
    fq = torch.empty(1, 2, 40, 64, dtype=torch.float16, device="meta")
    o, lse, flag = torch_op.OP(fq, fq, fq)
    assert o.device.type == "meta" and o.shape == fq.shape and lse.shape == (1, 2, 40) and lse.dtype == torch.float32
    with pytest.raises(ValueError, match="q must be float16 or bfloat16"):
        torch_op.OP(fq.float(), fq, fq)


def test_prepared_launch_with_torch_tensors(fake_gpu, monkeypatch):
    monkeypatch.setattr(torch_op, "_torch_stream", lambda stream, q: None)  # torch.cuda.stream(None): no change
    q, k, v = _qkv()
    go, (o, lse), prob = flashsim.gpu.prepared_launch(q, k, v, pv_accum="f16", stream=0x5550)
    assert prob.config.pv_accum == "f16" and o.shape == q.shape and lse.shape == q.shape[:3]
    assert not fake_gpu.calls
    go(sync=False)
    go(sync=False)
    assert len(fake_gpu.calls) == 2
    stream, _, _, args = fake_gpu.calls[0]
    assert stream == ("stream", 0x5550) and args[3:5] == (o.data_ptr(), lse.data_ptr())


def test_repeated_call_overhead_is_small(fake_gpu, capsys):
    """Python time of a repeated flashsim.gpu.attention call with torch tensors, the device mocked: wrapper, op
    dispatch, key lookup, alignment test, two allocations (CPU here), stream lookup, argument packing. Printed;
    asserted loosely (shared CI machines are noisy); the target on a quiet machine is well under 20 us."""
    q, k, v = _qkv(b=1, h=2, nq=64, nk=64, d=64)  # small: CPU allocation stands in for torch's CUDA cache
    attention = flashsim.gpu.attention
    for _ in range(200):
        attention(q, k, v)
    rounds = []
    for _ in range(7):
        n = 500
        t0 = time.perf_counter()
        for _ in range(n):
            attention(q, k, v)
        rounds.append((time.perf_counter() - t0) / n * 1e6)
    op_rounds = []
    for _ in range(7):
        n = 500
        t0 = time.perf_counter()
        for _ in range(n):
            torch_op.OP(q, k, v)
        op_rounds.append((time.perf_counter() - t0) / n * 1e6)
    best, med, op_best = min(rounds), statistics.median(rounds), min(op_rounds)
    with capsys.disabled():
        print(
            f"\n[overhead] flashsim.gpu.attention(torch) repeated call, launch mocked: best {best:.1f} us, "
            f"median {med:.1f} us; torch.ops.flashsim.attention directly: best {op_best:.1f} us"
        )
    assert best < 100


def test_stream_forms(monkeypatch):
    assert rt.stream_handle(0) == 0 and rt.stream_handle(np.uint64(77)) == 77
    assert rt.stream_handle(types.SimpleNamespace(__cuda_stream__=lambda: (0, 1234))) == 1234
    assert rt.stream_handle(types.SimpleNamespace(cuda_stream=99)) == 99  # torch.cuda.Stream
    assert rt.stream_handle(types.SimpleNamespace(ptr=98)) == 98  # cupy.cuda.Stream
    for bad in ("0x10", 1.5, True, -1, None):
        with pytest.raises(ValueError, match="stream"):
            rt.stream_handle(bad)
    cuda_core = pytest.importorskip("cuda.core")
    assert rt.stream_from_handle(0) is cuda_core.LEGACY_DEFAULT_STREAM
    assert rt.stream_from_handle(2) is cuda_core.PER_THREAD_DEFAULT_STREAM
    s = rt.stream_from_handle(0x7000)
    assert isinstance(s, cuda_core.Stream) and rt.stream_from_handle(0x7000) is s
    assert s.__cuda_stream__()[1] == 0x7000 and rt.as_stream(s) is s and rt.as_stream(0x7000) is s
    rt._STREAMS.pop(0x7000)


# a cupy stand-in: enough of cupy's surface for flashsim.gpu.launch's cupy path
class _FakeDevice:
    def __init__(self, i):
        self.id = i

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _FakeCupyArray:
    _next = [0x10000]

    def __init__(self, shape, dtype, ptr=None, contiguous=True, device=-1):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        if ptr is None:
            ptr = self._next[0]
            self._next[0] += 1 << 20
        self.data = types.SimpleNamespace(ptr=ptr)
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        self.strides = (0,) * len(self.shape)
        self.device = _FakeDevice(device)


@pytest.fixture
def fake_cupy(fake_gpu, monkeypatch):
    mod = types.SimpleNamespace(
        ndarray=_FakeCupyArray,
        float16=np.float16,
        float32=np.float32,
        empty=lambda shape, dtype: _FakeCupyArray(shape, dtype),
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0xC0)),
    )
    monkeypatch.setitem(sys.modules, "cupy", mod)
    return mod


def test_cupy_path_with_a_stand_in(fake_gpu, fake_cupy):
    q = _FakeCupyArray((1, 2, 40, 64), np.float16)
    k, v = (_FakeCupyArray((1, 2, 56, 64), np.float16) for _ in range(2))
    o, lse = flashsim.gpu.attention(q, k, v, causal=True)
    assert isinstance(o, _FakeCupyArray) and o.shape == q.shape and o.dtype == np.float16
    assert lse.shape == (1, 2, 40) and lse.dtype == np.float32
    stream, _, _, args = fake_gpu.calls[-1]
    assert stream == ("stream", 0xC0) and args[:5] == (q.data.ptr, k.data.ptr, v.data.ptr, o.data.ptr, lse.data.ptr)
    flashsim.gpu.attention(q, k, v, causal=True, stream=types.SimpleNamespace(ptr=0xC8))
    assert fake_gpu.calls[-1][0] == ("stream", 0xC8) and len(fake_gpu.calls) == 2
    with pytest.raises(ValueError, match="q's data pointer"):
        flashsim.gpu.attention(_FakeCupyArray(q.shape, np.float16, ptr=0x10008), k, v)
    with pytest.raises(ValueError, match="k must be C-contiguous"):
        flashsim.gpu.attention(q, _FakeCupyArray(k.shape, np.float16, contiguous=False), v)
    with pytest.raises(ValueError, match="v is on device 3"):
        flashsim.gpu.attention(q, k, _FakeCupyArray(v.shape, np.float16, device=3))
    with pytest.raises(ValueError, match="q must be float16 or bfloat16"):
        flashsim.gpu.attention(_FakeCupyArray(q.shape, np.float32), k, v)
    assert len(fake_gpu.calls) == 2


# ==== on a GPU: the real kernel through torch ===============================================================


def _cuda_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device (CPU build or no GPU)")


@pytest.fixture(scope="module")
def tgpu(gpu):
    _cuda_or_skip()
    gl.clear_caches()
    return gpu


def _inputs(b, h, nq, nk, d, seed=0):
    from flashsim.commands.emulate import make_inputs

    return make_inputs(b, h, nq, nk, d, seed=seed)


def _bits_equal(a, b) -> bool:
    a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().cpu().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _cuda(*xs):
    return tuple(torch.from_numpy(x).cuda() for x in xs)


@pytest.mark.gpu
@pytest.mark.parametrize("acc", ["f32", "f16"])
@pytest.mark.parametrize(
    "shape, causal", [((2, 3, 130, 257, 64), False), ((1, 2, 200, 77, 128), True), ((1, 1, 1, 1, 64), False)]
)
def test_torch_types_and_bits_equal_the_numpy_path(tgpu, shape, causal, acc):
    b, h, nq, nk, d = shape
    q, k, v = _inputs(b, h, nq, nk, d, seed=nq + nk)
    o_np, lse_np = flashsim.gpu.attention(q, k, v, causal=causal, pv_accum=acc)
    tq, tk, tv = _cuda(q, k, v)
    o, lse = flashsim.gpu.attention(tq, tk, tv, causal=causal, pv_accum=acc)
    assert isinstance(o, torch.Tensor) and isinstance(lse, torch.Tensor)
    assert o.device == tq.device and lse.device == tq.device
    assert o.dtype == torch.float16 and o.shape == tq.shape and o.is_contiguous()
    assert lse.dtype == torch.float32 and lse.shape == (b, h, nq) and lse.is_contiguous()
    torch.cuda.synchronize()
    assert _bits_equal(o.view(torch.int16), o_np.view(np.int16))
    assert _bits_equal(lse.view(torch.int32), lse_np.view(np.int32))
    o2, lse2 = flashsim.gpu.attention(tq, tk, tv, causal=causal, pv_accum=acc)  # the cached path
    assert _bits_equal(o2.view(torch.int16), o_np.view(np.int16))
    assert _bits_equal(lse2.view(torch.int32), lse_np.view(np.int32))
    oc, lc = flashsim.gpu.attention(*(torch.from_numpy(x) for x in (q, k, v)), causal=causal, pv_accum=acc)
    assert oc.device.type == "cpu" and lc.device.type == "cpu"  # CPU in, CPU out
    assert _bits_equal(oc, o_np) and _bits_equal(lc, lse_np)
    go, (po, pl), _ = flashsim.gpu.prepared_launch(tq, tk, tv, causal=causal, pv_accum=acc)
    go()
    assert _bits_equal(po, o_np) and _bits_equal(pl, lse_np)


@pytest.mark.gpu
def test_ordered_on_a_non_default_stream(tgpu):
    """Inputs written on stream s behind a long sleep; the call under torch.cuda.stream(s) (and with stream=s or its
    handle from outside, and a prepared launch for s) must run after the writes: on any other stream it would read
    the zeros first."""
    q, k, v = _inputs(2, 4, 300, 300, 128, seed=3)
    want_o, want_l = flashsim.gpu.attention(q, k, v, causal=True)
    src = _cuda(q, k, v)
    for mode in ("context", "argument", "handle", "prepared"):
        dst = tuple(torch.zeros_like(x) for x in src)
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        if mode == "prepared":
            go, (o, lse), _ = flashsim.gpu.prepared_launch(*dst, causal=True, stream=s)
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
            for d_, s_ in zip(dst, src):
                d_.copy_(s_)
            if mode == "context":
                o, lse = flashsim.gpu.attention(*dst, causal=True)
        if mode in ("argument", "handle"):
            o, lse = flashsim.gpu.attention(*dst, causal=True, stream=s if mode == "argument" else s.cuda_stream)
        if mode == "prepared":
            go(sync=False)
        with torch.cuda.stream(s):
            o_c, l_c = o.clone(), lse.clone()
        s.synchronize()
        assert _bits_equal(o_c, want_o) and _bits_equal(l_c, want_l), mode


@pytest.mark.gpu
def test_the_call_does_not_wait_for_the_gpu(tgpu):
    q, k, v = _cuda(*_inputs(2, 8, 512, 512, 64, seed=4))
    o_ref, l_ref = flashsim.gpu.attention(q, k, v)  # warm: compiled, loaded, cached
    go, (po, pl), _ = flashsim.gpu.prepared_launch(q, k, v)
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream()
    torch.cuda._sleep(400_000_000)  # a few hundred ms of GPU time ahead of us
    t0 = time.perf_counter()
    o, lse = flashsim.gpu.attention(q, k, v)
    go(sync=False)
    elapsed = time.perf_counter() - t0
    busy = not stream.query()
    torch.cuda.synchronize()
    assert busy, "the stream was idle right after the call: the call waited for the GPU"
    assert elapsed < 0.05, f"the call took {elapsed * 1e3:.1f} ms"
    assert _bits_equal(o, o_ref) and _bits_equal(lse, l_ref) and _bits_equal(po, o_ref) and _bits_equal(pl, l_ref)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_torch_compile_fullgraph(tgpu, backend):
    q, k, v = _cuda(*_inputs(2, 4, 256, 192, 64, seed=5))

    def f(q, k, v):
        o, lse = flashsim.gpu.attention(q, k, v, causal=True)
        return o.float() * 2, lse + 1

    want = f(q, k, v)
    torch._dynamo.reset()
    try:
        cf = torch.compile(f, fullgraph=True, backend=backend)
        for seed in (5, 6):
            q2, k2, v2 = _cuda(*_inputs(2, 4, 256, 192, 64, seed=seed))
            got, want = cf(q2, k2, v2), f(q2, k2, v2)
            torch.cuda.synchronize()
            assert _bits_equal(got[0], want[0]) and _bits_equal(got[1], want[1])
    finally:
        torch._dynamo.reset()


@pytest.mark.gpu
def test_torch_compile_reduce_overhead_cuda_graphs(tgpu):
    """torch's own CUDA-graph trees around the op (mode="reduce-overhead"): warm-up runs, then recorded replays."""

    def f(q, k, v):
        o, lse = flashsim.gpu.attention(q, k, v)
        return o * 1, lse * 1

    torch._dynamo.reset()
    try:
        cf = torch.compile(f, fullgraph=True, mode="reduce-overhead")
        for seed in range(4):
            x = _inputs(1, 4, 128, 128, 128, seed=10 + seed)
            want_o, want_l = flashsim.gpu.attention(*x)
            got_o, got_l = (t.clone() for t in cf(*_cuda(*x)))
            torch.cuda.synchronize()
            assert _bits_equal(got_o, want_o) and _bits_equal(got_l, want_l), seed
    finally:
        torch._dynamo.reset()


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay(tgpu):
    shape = (2, 4, 192, 160, 128)
    q, k, v = _cuda(*_inputs(*shape, seed=7))
    flashsim.gpu.attention(q, k, v, causal=True, pv_accum="f16")  # warm-up: the kernel is loaded
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # no host synchronisation inside a capture: the overflow check stays out
        o, lse = flashsim.gpu.attention(q, k, v, causal=True, pv_accum="f16", check_overflow=False)
    for seed in (8, 9):
        x = _inputs(*shape, seed=seed)
        for dst, src in zip((q, k, v), _cuda(*x)):
            dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        want_o, want_l = flashsim.gpu.attention(*x, causal=True, pv_accum="f16")
        assert _bits_equal(o, want_o) and _bits_equal(lse, want_l), seed


@pytest.mark.gpu
def test_a_first_call_inside_capture_is_refused_and_harmless(tgpu):
    q, k, v = _cuda(*_inputs(1, 1, 77, 93, 64, seed=11))  # a Problem no other test builds
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(GPUError, match="before capturing"):
        with torch.cuda.graph(graph):
            flashsim.gpu.attention(q, k, v, softmax_scale=0.0625)
    torch.cuda.synchronize()
    want_o, want_l = flashsim.gpu.attention(*_inputs(1, 1, 77, 93, 64, seed=11), softmax_scale=0.0625)
    o, lse = flashsim.gpu.attention(q, k, v, softmax_scale=0.0625)
    assert _bits_equal(o, want_o) and _bits_equal(lse, want_l)


@pytest.mark.gpu
def test_bad_tensors_are_refused_before_launch_and_the_context_survives(tgpu):
    shape = (1, 2, 128, 128, 64)
    x = _inputs(*shape, seed=12)
    q, k, v = _cuda(*x)
    flashsim.gpu.attention(q, k, v)  # the key is warm: the checks must still hold
    for name in ("q", "k", "v"):
        args = {"q": q, "k": k, "v": v}
        base = args[name]
        bad = torch.empty(base.numel() + 1, dtype=torch.float16, device="cuda")[1:].view(base.shape)
        bad.copy_(base)
        args[name] = bad
        with pytest.raises(ValueError, match=f"{name}'s data pointer .* not 16-byte aligned"):
            flashsim.gpu.attention(args["q"], args["k"], args["v"])
        with pytest.raises(ValueError, match=f"{name}'s data pointer"):
            flashsim.gpu.prepared_launch(args["q"], args["k"], args["v"])
    q_t = q.transpose(2, 3).contiguous().transpose(2, 3)  # same values, column-major
    with pytest.raises(ValueError, match="q must be contiguous"):
        flashsim.gpu.attention(q_t, k, v)
    with pytest.raises(ValueError, match="k must be contiguous"):
        flashsim.gpu.attention(q, torch.cat([k, k], dim=-1)[..., :64], v)
    with pytest.raises(ValueError, match="v is on cpu"):
        flashsim.gpu.attention(q, k, v.cpu())
    with pytest.raises(ValueError, match="q, k and v must have one dtype, got q bfloat16, k float16"):
        flashsim.gpu.attention(q.to(torch.bfloat16), k, v)
    other = next(a for a in ("sm_80", "sm_90", "sm_120") if a != rt.current_arch())
    with pytest.raises(ValueError, match="but the current GPU"):
        flashsim.gpu.attention(q, k, v, arch=other)
    with pytest.raises(ValueError, match="contradicts config.causal"):
        flashsim.gpu.attention(
            q, k, v, causal=False, config=KernelConfig.default(rt.current_arch(), head_dim=64, causal=True)
        )
    with pytest.raises(ValueError, match="requires grad"):
        flashsim.gpu.attention(q.clone().requires_grad_(), k, v)
    torch.cuda.synchronize()
    assert rt.sticky_error() is None
    want_o, want_l = flashsim.gpu.attention(*x)
    o, lse = flashsim.gpu.attention(q, k, v)
    assert _bits_equal(o, want_o) and _bits_equal(lse, want_l)


@pytest.mark.gpu
def test_cupy_int8_equals_the_emulator_bit_for_bit(tgpu):
    """quant="int8" through the cupy path (scratch from cupy's pool, cupy's stream): the emulator's bits."""
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    from flashsim.commands.verify import make_case_inputs

    q, k, v = make_case_inputs("offset", 1, 4, 130, 170, 64, 5, heads_kv=2)
    o_e, lse_e = flashsim.attention(q, k, v, quant="int8", pv_accum="f16", causal=True, arch="sm_90")
    o, lse = flashsim.gpu.attention(*(cp.asarray(x) for x in (q, k, v)), quant="int8", pv_accum="f16", causal=True)
    assert isinstance(o, cp.ndarray)
    assert o.get().tobytes() == o_e.tobytes() and lse.get().tobytes() == lse_e.tobytes()


@pytest.mark.gpu
def test_cupy_in_cupy_out(tgpu):
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    x = _inputs(2, 2, 150, 211, 128, seed=13)
    want_o, want_l = flashsim.gpu.attention(*x, causal=True)
    src = tuple(cp.asarray(a) for a in x)
    o, lse = flashsim.gpu.attention(*src, causal=True)
    assert isinstance(o, cp.ndarray) and isinstance(lse, cp.ndarray)
    assert o.dtype == cp.float16 and o.shape == src[0].shape and lse.dtype == cp.float32 and lse.shape == (2, 2, 150)
    assert o.get().tobytes() == want_o.tobytes() and lse.get().tobytes() == want_l.tobytes()
    # on cupy's current stream, ordered behind work on it (a torch sleep on the same stream, when torch has CUDA)
    s = cp.cuda.Stream(non_blocking=True)
    dst = tuple(cp.zeros_like(a) for a in src)
    cp.cuda.Device().synchronize()
    with s:
        with torch.cuda.stream(torch.cuda.ExternalStream(s.ptr)):
            torch.cuda._sleep(50_000_000)
        for d_, s_ in zip(dst, src):
            d_[...] = s_
        o, lse = flashsim.gpu.attention(*dst, causal=True)
        busy = not s.done
        o_c, l_c = o.copy(), lse.copy()
    s.synchronize()
    assert busy, "the stream was idle right after the call: the call waited for the GPU"
    assert o_c.get().tobytes() == want_o.tobytes() and l_c.get().tobytes() == want_l.tobytes()
    with pytest.raises(ValueError, match="q's data pointer"):
        flashsim.gpu.attention(cp.empty(src[0].size + 1, cp.float16)[1:].reshape(src[0].shape), *src[1:])


def _torch_of(x: np.ndarray):
    """A numpy f16 / bf16 array as a CUDA tensor (bf16 through its bits)."""
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16).cuda()
    return torch.from_numpy(x.copy()).cuda()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kw",
    [
        dict(dtype="bf16", heads_kv=2, causal=True, window_size=(40, 0), softcap=15.0, layout="bnhd"),
        dict(dtype="f16", heads_kv=1, window_size=(17, 9), pv_accum="f16x2", layout="bhnd", d=96),
        dict(dtype="f16", heads_kv=4, softcap=5.0, pv_accum="f16", layout="bnhd", d=256),
        dict(dtype="f16", heads_kv=2, quant="int8", causal=True, pv_accum="f16", d=128),
        dict(dtype="bf16", heads_kv=1, quant="int8", window_size=(30, 5), layout="bnhd", d=96),
        dict(dtype="f16", heads_kv=2, quant="int8-fp8", causal=True, d=128),
    ],
)
def test_torch_variants_equal_the_emulator_bit_for_bit(tgpu, kw):
    """The attention variants through the torch op (bf16, GQA, windows, softcap, (B, N, H, d), other head dims):
    torch tensors in, the kernel's outputs bit for bit the emulator's."""
    from flashsim.commands.verify import make_case_inputs

    kw = dict(kw)
    dtype, hk, layout, d = kw.pop("dtype"), kw.pop("heads_kv"), kw.get("layout", "bhnd"), kw.pop("d", 64)
    q, k, v = make_case_inputs("normal", 2, 4, 111, 150, d, 7, heads_kv=hk, dtype=dtype, layout=layout)
    o_e, lse_e = flashsim.attention(q, k, v, arch="sm_90", check_overflow=False, **kw)
    o, lse = flashsim.gpu.attention(*(_torch_of(x) for x in (q, k, v)), check_overflow=False, **kw)
    torch.cuda.synchronize()
    assert tuple(o.shape) == q.shape and tuple(lse.shape) == lse_e.shape
    assert o.view(torch.int16).cpu().numpy().tobytes() == o_e.view(np.int16).tobytes()
    assert lse.cpu().numpy().tobytes() == lse_e.tobytes()


@pytest.mark.parametrize(
    "config",
    [
        KernelConfig(head_dim=128, warps=4, m_tiles=2, kv_tile=32, stages=3, layout="bnhd"),
        KernelConfig(head_dim=64, dtype="bf16", warps=3, warp_split=3, kv_tile=16, layout="bnhd"),
    ],
    ids=["tiling", "warp_split"],
)
def test_the_ops_tiles_carry_every_field_a_config_sets_beyond_the_options(config):
    """The ops take a config as ``tiles`` and rebuild it from them and their own option arguments (q's dtype among
    them): every field comes back, warp_split included (a field the tiles dropped would run another kernel)."""
    q = torch.zeros((1, 1, 4, config.head_dim), dtype=torch.bfloat16 if config.dtype == "bf16" else torch.float16)
    opts = torch_op._options(q, False, None, config.pv_accum, torch_op.tiles_of(config), (-1, -1), 0.0, "bnhd")
    assert opts.config == config
