"""flashsim.gpu.runtime on a real GPU (marked gpu: skipped with the reason elsewhere).

Data round trips bit for bit, kernels with scalar arguments of every width, an mma.sync kernel against exact
integer arithmetic, dynamic shared memory beyond 48 KB up to the device's opt-in maximum, DLPack with torch and
cupy in both directions, launches on a caller's stream (torch's, as a handle, as a cuda.core Stream) and from a
new thread, and errors: bad arguments, launch failures, a sticky fault in a child process.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap
import threading

import ml_dtypes
import numpy as np
import pytest
from cuda_kernels import HEAVY_SOURCE, MISC_SOURCE, MMA_NAMES, MMA_SOURCE  # tests/cuda_kernels.py

from flashsim.errors import GPUError, UnsupportedConfig
from flashsim.gpu import runtime as rt

pytestmark = pytest.mark.gpu
REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def misc(gpu, cuda_compile):
    build = cuda_compile(MISC_SOURCE, arch=rt.current_arch(), name="misc.cu")
    return {name: rt.load(build, name) for name in ("axpb", "smem_mirror", "poke")}


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def test_current_arch_matches_the_device(gpu):
    arch = rt.current_arch()
    major, minor = gpu.compute_capability
    assert re.fullmatch(r"sm_\d+", arch) and arch == f"sm_{major}{minor}"
    assert rt.gpu_available()[0] is True


@pytest.mark.parametrize(
    "dtype",
    [
        np.float16,
        ml_dtypes.bfloat16,
        np.float32,
        np.float64,
        np.int8,
        np.uint8,
        np.int32,
        np.int64,
        np.uint64,
        np.bool_,
    ],
)
@pytest.mark.parametrize("shape", [(1,), (3, 5, 7), (1000,), (0,), (2, 0, 3)])
def test_round_trip_is_bit_exact(gpu, dtype, shape):
    rng = np.random.default_rng(1)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        host = rng.integers(0, 2, size=shape).astype(np.bool_)
    else:  # random bit patterns, NaN payloads included
        raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
        host = raw.view(dtype).reshape(shape)
    dev = rt.to_device(host)
    assert dev.shape == host.shape and dev.dtype == host.dtype and dev.nbytes == host.nbytes
    back = dev.to_numpy()
    assert back.dtype == host.dtype and back.shape == host.shape and _bits(back) == _bits(host)
    assert rt.to_device(dev) is dev


def test_non_contiguous_numpy_is_copied_contiguous(gpu):
    host = np.arange(60, dtype=np.float32).reshape(6, 10)[:, ::3]
    assert np.array_equal(rt.to_device(host).to_numpy(), host)


def test_empty_zero_and_copy_from(gpu):
    d = rt.empty((4, 33), np.uint16).zero_()
    assert not d.to_numpy().any()
    src = np.arange(132, dtype=np.uint16).reshape(4, 33)
    d.copy_from(src)
    assert np.array_equal(d.to_numpy(), src)
    with pytest.raises(ValueError, match="shape"):
        d.copy_from(src[:3])
    with pytest.raises(ValueError, match="shape"):
        rt.empty((-1,), np.float32)


@pytest.mark.parametrize("variant", MMA_NAMES)
def test_mma_kernel_is_exact_on_small_integers(gpu, cuda_compile, variant):
    """Small-integer inputs make every product and sum exact: D must equal A @ B + C to the bit."""
    kernel = rt.load(cuda_compile(MMA_SOURCE, arch=rt.current_arch(), name_expressions=MMA_NAMES), variant)
    in_type = ml_dtypes.bfloat16 if "true" in variant else np.float16
    rng = np.random.default_rng(2)
    a = rng.integers(-8, 9, size=(16, 16)).astype(in_type)
    b = rng.integers(-8, 9, size=(16, 8)).astype(in_type)
    c = rng.integers(-64, 65, size=(16, 8)).astype(np.float32)
    d = rt.empty((16, 8), np.float32)
    rt.launch(kernel, (1,), (32,), rt.to_device(a.view(np.uint16)), rt.to_device(b.view(np.uint16)), rt.to_device(c), d)
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    assert np.array_equal(d.to_numpy().view(np.uint32), want.view(np.uint32))


def test_scalar_arguments_of_every_width(misc):
    rng = np.random.default_rng(3)
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    out, tag_out = rt.empty((n,), np.float32), rt.empty((1,), np.int64)
    a, b, tag = np.float32(1.75), np.float64(0.3), np.uint64(0x0123456789ABCDEF)
    rt.launch(misc["axpb"], ((n + 255) // 256,), (256,), out, rt.to_device(x), a, np.int32(n), b, tag, tag_out)
    want = a * x + np.float32(b)  # float32 ops, each rounded once: the kernel's __fmul_rn then __fadd_rn
    assert np.array_equal(out.to_numpy().view(np.uint32), want.view(np.uint32))
    assert tag_out.to_numpy()[0] == np.int64(np.uint64(tag ^ np.uint64(0x5A5A5A5A5A5A5A5A)).view(np.int64))


def test_bad_arguments_are_value_errors(misc):
    k = misc["axpb"]
    out, x, tag_out = rt.empty((4,), np.float32), rt.empty((4,), np.float32), rt.empty((1,), np.int64)
    good = (out, x, np.float32(1), np.int32(4), np.float64(0), np.uint64(0), tag_out)
    with pytest.raises(ValueError, match="argument 2 of axpb"):
        rt.launch(k, (1,), (32,), out, x, 1.0, *good[3:])  # a Python float: width unknown
    with pytest.raises(ValueError, match="argument 1 of axpb"):
        rt.launch(k, (1,), (32,), out, np.zeros(4, np.float32), *good[2:])  # a host array
    with pytest.raises(ValueError, match="grid"):
        rt.launch(k, (0,), (32,), *good)
    with pytest.raises(ValueError, match="block"):
        rt.launch(k, (1,), (1, 1, 1, 1), *good)
    rt.launch(k, (1,), (32,), *good)  # and the good call still works


def _mirror_expected(blocks: int, words: int) -> np.ndarray:
    w = np.arange(words, dtype=np.uint64)[::-1]
    blk = np.arange(blocks, dtype=np.uint64)[:, None]
    return ((w * np.uint64(2654435761) + blk) & np.uint64(0xFFFFFFFF)).astype(np.uint32).reshape(-1)


@pytest.mark.parametrize("kbytes", [16, 48, 100, "max"])
def test_dynamic_shared_memory_beyond_48k(gpu, misc, kbytes):
    optin = int(gpu.properties.max_shared_memory_per_block_optin)
    smem = optin if kbytes == "max" else kbytes * 1024
    words, blocks = smem // 4, 3
    out = rt.empty((blocks * words,), np.uint32)
    rt.launch(misc["smem_mirror"], (blocks,), (256,), out, np.int32(words), smem_bytes=smem)
    assert np.array_equal(out.to_numpy(), _mirror_expected(blocks, words))


def test_shared_memory_above_the_optin_limit_is_refused(gpu, misc):
    optin = int(gpu.properties.max_shared_memory_per_block_optin)
    out = rt.empty((1,), np.uint32)
    with pytest.raises(UnsupportedConfig, match=f"at most {optin} B"):
        rt.launch(misc["smem_mirror"], (1,), (256,), out, np.int32(1), smem_bytes=optin + 16)


def test_launch_errors_surface_as_gpu_error_naming_the_kernel(gpu, misc, cuda_compile):
    build = cuda_compile(HEAVY_SOURCE, arch=rt.current_arch())
    heavy = rt.load(build, "heavy")
    regs = build.entry("heavy").registers
    out, x = rt.empty((1024,), np.float32), rt.to_device(np.ones(64 * 1024, np.float32))
    if regs * 1024 > int(gpu.properties.max_registers_per_block):
        with pytest.raises(GPUError, match="kernel heavy") as info:
            rt.launch(heavy, (1,), (1024,), out, x, np.int32(1024))
        assert "unusable" not in str(info.value)
    with pytest.raises(GPUError, match="kernel smem_mirror"):
        rt.launch(misc["smem_mirror"], (1,), (4096,), rt.empty((4,), np.uint32), np.int32(4))
    # the context is still usable: a fresh launch overwrites a NaN-poisoned output (heavy's x*y+1 chain on
    # all-ones input grows past the f32 range, so +inf is the right value there, seen on the H200)
    out = rt.to_device(np.full(1024, np.nan, np.float32))
    rt.launch(heavy, (1,), (128,), out, x, np.int32(1024))
    assert not np.isnan(out.to_numpy()[:128]).any()


def test_a_sticky_fault_is_reported_and_blocks_later_calls():
    """An illegal address kills the context: run it in a child process and read what it says."""
    script = textwrap.dedent("""
        import numpy as np
        from flashsim.gpu import runtime as rt
        from flashsim.gpu.build import compile_cuda
        from cuda_kernels import MISC_SOURCE
        from flashsim.errors import GPUError
        k = rt.load(compile_cuda(MISC_SOURCE, arch=rt.current_arch()), "poke")
        buf = rt.empty((4,), np.float32)
        try:
            rt.launch(k, (1,), (1,), buf, np.int64(1 << 40))
            print("FIRST: no error")
        except GPUError as e:
            print("FIRST:", " | ".join(str(e).splitlines()))
        try:
            rt.require_gpu()
            print("SECOND: no error")
        except GPUError as e:
            print("SECOND:", " | ".join(str(e).splitlines()))
        print("AVAILABLE:", rt.gpu_available(), flush=True)
        import os
        os._exit(0)  # skip interpreter teardown on a dead context
    """)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines() if ":" in line)
    assert "kernel poke" in lines["FIRST"] and "unusable" in lines["FIRST"], proc.stdout
    assert "unusable" in lines["SECOND"], proc.stdout
    assert "False" in lines["AVAILABLE"], proc.stdout


def test_load_errors(gpu, cuda_compile):
    here = rt.current_arch()
    build = cuda_compile(MISC_SOURCE, arch=here)
    with pytest.raises(ValueError, match="not in this build"):
        rt.load(build, "no_such_kernel")
    other = next(a for a in ("sm_120", "sm_90", "sm_80") if not rt.cubin_runs_on(a, here))
    with pytest.raises(UnsupportedConfig, match=f"build is for {other}"):
        rt.load(cuda_compile(MISC_SOURCE, arch=other), "axpb")


def test_timed_returns_a_median_in_milliseconds(misc):
    words = 8192
    out = rt.empty((4 * words,), np.uint32)
    ms = rt.timed(
        lambda: rt.launch(misc["smem_mirror"], (4,), (256,), out, np.int32(words), smem_bytes=4 * words, sync=False),
        warmup=2,
        reps=5,
    )
    assert isinstance(ms, float) and 0 < ms < 1000
    with pytest.raises(ValueError, match="reps"):
        rt.timed(lambda: None, reps=0)


# -- DLPack ------------------------------------------------------------------------------------------


def test_torch_takes_our_arrays_zero_copy(gpu):
    torch = pytest.importorskip("torch")
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = rt.to_device(host)
    t = torch.from_dlpack(d)
    assert t.is_cuda and t.data_ptr() == d.ptr and tuple(t.shape) == (2, 3, 4) and t.dtype == torch.float32
    assert np.array_equal(t.cpu().numpy(), host)
    t.mul_(2)
    torch.cuda.synchronize()
    assert np.array_equal(d.to_numpy(), host * 2)
    bf = rt.to_device(np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16))
    tb = torch.from_dlpack(bf)
    assert tb.dtype == torch.bfloat16 and tb.float().cpu().tolist() == list(range(8))


def test_we_take_torch_tensors_zero_copy_and_refuse_strided_ones(gpu, misc):
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 64, device="cuda", dtype=torch.float16)
    d = rt.to_device(x)
    assert d.ptr == x.data_ptr() and d.shape == (4, 64) and d.dtype == np.float16
    assert _bits(d.to_numpy()) == _bits(x.cpu().numpy())
    # a kernel writes into torch-owned memory
    n = 256
    src = torch.linspace(-3, 3, n, device="cuda", dtype=torch.float32)
    dst = torch.zeros(n, device="cuda", dtype=torch.float32)
    tag = torch.zeros(1, device="cuda", dtype=torch.int64)
    rt.launch(
        misc["axpb"],
        (1,),
        (256,),
        rt.to_device(dst),
        rt.to_device(src),
        np.float32(2),
        np.int32(n),
        np.float64(1),
        np.uint64(0),
        rt.to_device(tag),
    )
    want = np.float32(2) * src.cpu().numpy() + np.float32(1)
    assert np.array_equal(dst.cpu().numpy().view(np.uint32), want.view(np.uint32))
    for strided in (x.t(), x[:, ::2], x[::2]):
        with pytest.raises(ValueError, match="C-contiguous"):
            rt.to_device(strided)
    cpu = torch.arange(5, dtype=torch.int32)
    assert np.array_equal(rt.to_device(cpu).to_numpy(), np.arange(5, dtype=np.int32))  # host tensors are copied


def test_cupy_both_directions(gpu):
    cp = pytest.importorskip("cupy")
    d = rt.to_device(np.arange(10, dtype=np.int32))
    c = cp.from_dlpack(d)
    assert int(c.data.ptr) == d.ptr and c.get().tolist() == list(range(10))
    y = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    dy = rt.to_device(y)
    assert dy.ptr == int(y.data.ptr) and np.array_equal(dy.to_numpy(), y.get())
    with pytest.raises(ValueError, match="C-contiguous"):
        rt.to_device(y.T)


# -- streams and threads ------------------------------------------------------------------------------------


def _axpb_args(n):
    src = np.linspace(-3, 3, n, dtype=np.float32)
    out, x, tag = rt.empty((n,), np.float32).zero_(), rt.to_device(src), rt.empty((1,), np.int64)
    rt.synchronize()
    want = np.float32(2) * src + np.float32(1)
    return (out, x, np.float32(2), np.int32(n), np.float64(1), np.uint64(0), tag), out, want


@pytest.mark.parametrize("form", ["torch", "handle", "cuda.core"])
def test_a_launch_goes_on_the_callers_stream_without_waiting(misc, form):
    """Behind a long sleep on a torch stream: the launch must be queued there (the stream still busy right after,
    the result right once it is drained)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    args, out, want = _axpb_args(256)
    s = torch.cuda.Stream()
    stream = {"torch": s, "handle": s.cuda_stream, "cuda.core": rt.as_stream(s)}[form]
    assert rt.stream_handle(stream) == s.cuda_stream
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)
    rt.launch(misc["axpb"], (1,), (256,), *args, stream=stream, sync=False)
    assert not s.query(), "the launch waited for the stream"
    s.synchronize()
    assert np.array_equal(out.to_numpy().view(np.uint32), want.view(np.uint32))


def test_a_launch_from_a_new_thread(misc):
    """A thread that never touched CUDA has no current context; the runtime makes the device's current there."""
    args, out, want = _axpb_args(128)
    errors = []

    def work():
        try:
            rt.launch(misc["axpb"], (1,), (128,), *args)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert not errors, errors
    assert np.array_equal(out.to_numpy().view(np.uint32), want.view(np.uint32))
