"""Host time per serving call, layer by layer and part by part, on a machine without a GPU.

The GPU is mocked as tests/test_serving_gpu_mock.py's ``fake_gpu`` mocks it (an sm_90 device with 132 SMs,
placeholder kernels, CPU tensors taking the CUDA path) with one difference: the driver is a **no-op libcuda**
(a few lines of C built here with the system's C compiler, loaded under libcuda.so.1's soname before cuda.bindings
looks for it), so that cuda.bindings' real ``cuLaunchKernelEx`` binding (and flashsim.gpu.packed's own ctypes call,
where it has one) runs end to end into a C function that returns CUDA_SUCCESS. What that leaves out: the driver's
own launch work (on an H100 host the three launches' "launch host" is 11.8 us, 2026-12-06), the CUDA caching
allocator (torch.empty here is the CPU allocator's) and torch's CUDA stream and device guards. Without a C
compiler the launches are stubbed in Python instead (said in the output).

    python benchmarks/experiments/serving_host_time/measure.py [--calls N] [--repeat R] [--parts-only]

Every number is the median over R repetitions of N back-to-back calls (timeit), in us (ns for the parts), of the
process's CPU time (``TIMER``: other jobs' load on shared cores does not count; --wall for the wall clock).

Layers (outermost first):

- ``call``: flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl), default options;
- ``op``: torch.ops.flashsim.attention_with_kvcache (torch's dispatcher, then the op's CUDA body);
- ``impl``: the op's registered CUDA function called directly (``op`` less the dispatcher);
- ``body``: serving_torch._enqueue, what the public call runs eagerly;
- ``enqueue``: flashsim.gpu.serving.enqueue with the addresses as ints (slot writes, lock, three launches);
- ``launch_serving``: the same from a dict of addresses (what benchmarks/bench_serving.py's "launch host" times);
- ``driver_launch x3``: flashsim.gpu.packed.driver_launch of the three packed launches alone.
"""

from __future__ import annotations

import argparse
import ctypes
import inspect
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import types

_FAKE_CUDA = r"""
#include <string.h>
typedef int CUresult;
static CUresult noop(void) { return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuLaunchKernelEx(const void *c, void *f, void **p, void **e) { (void)c; (void)f; (void)p; (void)e; return 0; }
CUresult cuLaunchKernelEx_ptsz(const void *c, void *f, void **p, void **e) { return cuLaunchKernelEx(c, f, p, e); }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void *s, void **p, void **e) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)s; (void)p; (void)e;
  return 0;
}
CUresult cuGetProcAddress_v2(const char *s, void **pfn, int v, unsigned long long fl, int *st) {
  (void)v; (void)fl;
  *pfn = !strcmp(s, "cuDriverGetVersion") ? (void *)cuDriverGetVersion
       : !strcmp(s, "cuLaunchKernelEx") ? (void *)cuLaunchKernelEx : (void *)noop;
  if (st) *st = 0;
  return 0;
}
CUresult cuGetProcAddress(const char *s, void **pfn, int v, unsigned long long fl) {
  return cuGetProcAddress_v2(s, pfn, v, fl, 0);
}
"""


def load_fake_libcuda() -> str | None:
    """Build and load the no-op libcuda.so.1 (module docstring); its path, or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    d = tempfile.mkdtemp(prefix="fake_libcuda_")
    src, lib = os.path.join(d, "fake.c"), os.path.join(d, "libcuda.so.1")
    with open(src, "w") as f:
        f.write(_FAKE_CUDA)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src], check=True)
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)  # dlopen("libcuda.so.1") now finds this one by its soname
    return lib


FAKE = load_fake_libcuda()  # before anything imports cuda.bindings' driver

import numpy as np  # noqa: E402
import torch  # noqa: E402

import flashsim  # noqa: E402
from flashsim.gpu import launch as gl  # noqa: E402
from flashsim.gpu import packed  # noqa: E402
from flashsim.gpu import runtime as rt  # noqa: E402
from flashsim.gpu import serving as gs  # noqa: E402
from flashsim.gpu import serving_torch as st  # noqa: E402

SHAPES = [  # name, B, Nk, d (Hq 32, Hkv 8, Nq 1, bf16: the --call rows of benchmarks/bench_serving.py)
    ("decode B=8 Nk=8192 d=128", 8, 8192, 128),
    ("decode B=8 Nk=8192 d=64", 8, 8192, 64),
    ("decode B=1 Nk=32768", 1, 32768, 128),
    ("decode B=1 Nk=2048", 1, 2048, 128),
]
STREAM = 0xABC0


def mock_gpu() -> None:
    """The mocked device (tests/test_serving_gpu_mock.py's fake_gpu); the launches go to the no-op driver (or are
    stubbed without one). ``rt.bind_thread`` stays the real one: a device is marked opened and this thread bound."""
    kern = types.SimpleNamespace(kernel=types.SimpleNamespace(handle=0x1000), handle=0x1000, name="k")
    rt._state["sticky"] = None
    rt._state["device"] = object()  # opened: require_gpu (bind_thread) takes its repeat-call path
    rt._TLS.bound = True
    rt.device_id = lambda: -1
    rt.current_arch = lambda: "sm_90"
    rt.sm_count = lambda: 132
    rt.stream_from_handle = lambda h: h
    gl.kernel_for = lambda cfg, arch: kern
    gs.combine_for = lambda cfg, arch: kern
    gs.check_for = lambda arch: kern
    record = np.zeros(8 * 8, np.uint8)
    rt.mapped_host = lambda n: (record[:n], 0xD0000)
    if FAKE is None:
        packed.driver_launch = lambda p, stream: None
    st._on_gpu = lambda q: True  # CPU tensors take the eager path
    st._raw_stream = lambda dev: STREAM
    st._capturing = lambda: False
    st._run_cpu = st._run_cuda


def per_call(fn, calls: int, repeat: int) -> float:
    """Median over ``repeat`` runs of ``calls`` back-to-back calls of ``fn``: seconds per call, of this process's CPU
    time (``TIMER``)."""
    for _ in range(min(calls, 1000)):
        fn()
    return statistics.median(timeit.repeat(fn, number=calls, repeat=repeat, timer=TIMER)) / calls


# The process's CPU time, not the wall clock: on the development machine's two cores shared with other jobs, wall
# time per call moves by tens of percent with their load (the process waits for a core), CPU time much less; with
# nothing else running the two agree (nothing here sleeps or waits). --wall for the wall clock.
TIMER = time.process_time


def setup(b, n, d):
    """The tensors, the op's arguments and the plan of one shape (its first call made)."""
    q = torch.randn((b, 1, 32, d)).to(torch.bfloat16)
    k = torch.empty((b, n, 8, d), dtype=torch.bfloat16)  # never touched: the pages are not committed
    v = torch.empty((b, n, 8, d), dtype=torch.bfloat16)
    sl = torch.full((b,), n, dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    hit = next(iter(st._KEYS.values()))
    op_args = (q, k, v, sl, None, 0, None, False, None, "f32", [], None, True, [-1, -1], 0.0, True)
    return q, k, v, sl, op_args, hit.prob, hit.plan


def layers(b, n, d):
    """The callables timed for one shape, outermost first (module docstring)."""
    q, k, v, sl, op_args, prob, plan = setup(b, n, d)
    o, lse = torch.empty_like(q), torch.empty((b, 32, 1), dtype=torch.float32)
    parts = torch.empty((max(plan.part_bytes, 1),), dtype=torch.uint8)
    ptrs = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr())
    ptrs.update(seqlens_k=sl.data_ptr(), parts=parts.data_ptr())
    addrs = (ptrs["q"], ptrs["k"], ptrs["v"], ptrs["o"], ptrs["lse"], 0, 0, 0, ptrs["seqlens_k"], 0, ptrs["parts"])
    launches = [p for p in (plan.packed_check, plan.packed_fwd, plan.packed_combine) if p is not None]
    dl = packed.driver_launch
    impl = st._kvcache_impl("cuda")  # the op's CUDA function, called without the dispatcher

    def three():
        for p in launches:
            dl(p, STREAM)

    out = {
        "call": lambda: flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl),
        "op": lambda: st.KVCACHE_OP(*op_args),
        "impl": lambda: impl(*op_args),
        "body": lambda: st._enqueue("attention_with_kvcache", *op_args),
        "enqueue": lambda: gs.enqueue(plan, STREAM, *addrs),
        "launch_serving": lambda: gs.launch_serving(plan, STREAM, ptrs),
        f"driver_launch x{len(launches)}": three,
    }
    return out, prob


def parts(calls: int, repeat: int) -> list[tuple[str, float]]:
    """ns per call of the pieces of a repeated call (the first shape), each alone."""
    _, b, n, d = SHAPES[0]
    q, k, v, sl, op_args, prob, plan = setup(b, n, d)
    i0 = sl
    fwd = plan.packed_fwd
    out = []

    def add(name, fn):
        out.append((name, per_call(fn, calls, repeat) * 1e9))

    add("empty function call (reference)", lambda: None)
    defaults = (None,) * 8 + (True,)  # causal ... quant, check_overflow
    add("serving_torch.resolved (default options)", lambda: st.resolved(*defaults))
    if len(inspect.signature(st._eager).parameters) == 2:  # before: (tensors, scalars)
        add("serving_torch._eager", lambda: st._eager((q, k, v, i0, None), (0, None)))
    else:
        add("serving_torch._eager", lambda: st._eager(q, k, v, i0, None, 0, None))
    key_args = ("attention_with_kvcache", q, k, v, i0, None, 0, None, False, None, "f32", (), None, (-1, -1), 0.0)
    if hasattr(st, "call_key"):  # the trees compare.py measures before it existed built the tuple inline
        add("_enqueue's key tuple (24 entries, 21 tensor reads)", lambda: st.call_key(*key_args))
    key = next(iter(st._KEYS))
    add("  its dict lookup (hash of the nested tuple)", lambda: st._KEYS.get(key))
    add("  q.shape", lambda: q.shape)
    add("  q.dtype", lambda: q.dtype)
    add("  q.device", lambda: q.device)
    add("  q.get_device()", lambda: q.get_device())
    add("  q.is_contiguous()", lambda: q.is_contiguous())
    add("  q.stride()", lambda: q.stride())
    add("  q.data_ptr()", lambda: q.data_ptr())
    add("torch.empty_like(q)", lambda: torch.empty_like(q))
    add("q.new_empty(lse_shape, dtype=float32)", lambda: q.new_empty((b, 32, 1), dtype=torch.float32))
    add("torch.empty(o_shape, dtype=, device=)", lambda: torch.empty((b, 1, 32, d), dtype=q.dtype, device=q.device))
    template = torch.empty((b, 32, 1), dtype=torch.float32)
    add("torch.empty_like(lse-shaped float32 template)", lambda: torch.empty_like(template))
    nbytes_o = q.numel() * q.element_size()

    def one_allocation():  # o and lse cut by views out of one uint8 allocation (not done: they would share storage)
        buf = torch.empty((nbytes_o + template.numel() * 4,), dtype=torch.uint8)
        return buf[:nbytes_o].view(q.dtype).view(q.shape), buf[nbytes_o:].view(torch.float32).view(template.shape)

    add("one allocation cut into o and lse by four views", one_allocation)
    if hasattr(st, "_scratch"):
        add("serving_torch._scratch (kept buffer)", lambda: st._scratch(q, -1, STREAM, plan.part_bytes, False))
    add("rt.bind_thread (repeat call)", rt.bind_thread)
    gs.record()
    add("serving.raise_pending (no error)", gs.raise_pending)
    add("rt.sticky_error", rt.sticky_error)
    lock = threading.Lock()

    def locked():
        with lock:
            pass

    add("with plan.lock", locked)
    s = fwd.slots

    def slot_writes():
        gs._pack_six(s, 0, 1, 2, 3, 4, 5, 6)
        s[25], s[26], s[27], s[30] = 7, 8, 9, 10
        s[35], s[36] = 11, 12

    add("flash_fwd's slot writes (pack_into + 6 items)", slot_writes)
    if FAKE is not None:
        from cuda.bindings import driver

        add("packed.driver_launch (flash_fwd, no-op driver)", lambda: packed.driver_launch(fwd, STREAM))
        native = fwd.native()
        if isinstance(native, tuple):  # before: cuda.bindings' configuration and function
            config, function = native
        else:
            config = packed.native_config(fwd.config)
            function = driver.CUfunction(0x1000)
        L = driver.cuLaunchKernelEx
        pa = fwd.params_addr
        add("  cuda.bindings cuLaunchKernelEx (no-op driver)", lambda: L(config, function, pa, 0))

        def set_stream():
            config.hStream = STREAM

        add("  cuda.bindings CUlaunchConfig.hStream = int", set_stream)
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernelEx
        fn.argtypes, fn.restype = [ctypes.c_void_p] * 4, ctypes.c_int
        add("  ctypes cuLaunchKernelEx (no-op driver, void* ints)", lambda: fn(0x10, 0x1000, pa, None))
        if hasattr(packed, "LaunchConfig"):
            c = packed.LaunchConfig()

            def set_c_stream():
                c.hStream = STREAM

            add("  ctypes LaunchConfig.hStream = int", set_c_stream)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--parts-only", action="store_true")
    p.add_argument("--layers-only", action="store_true")
    p.add_argument("--shapes", type=int, default=len(SHAPES), help="the first N shapes")
    p.add_argument("--wall", action="store_true", help="time by the wall clock rather than the process's CPU time")
    args = p.parse_args()
    global TIMER
    if args.wall:
        TIMER = time.perf_counter
    mock_gpu()
    torch.set_grad_enabled(False)
    where = f"no-op libcuda ({FAKE})" if FAKE else "launches stubbed in Python (no C compiler)"
    print(f"{platform.node()} python {sys.version.split()[0]} torch {torch.__version__}; driver: {where}")
    clock = "wall clock" if args.wall else "process CPU time"
    print(f"medians of {args.repeat} x {args.calls} back-to-back calls ({clock}); CPU tensors for CUDA ones")
    gl.clear_caches()
    if not args.layers_only:
        for name, ns in parts(args.calls, args.repeat):
            print(f"  {name:52s} {ns:8.0f} ns")
    if args.parts_only:
        return
    for name, b, n, d in SHAPES[: args.shapes]:
        gl.clear_caches()
        fns, prob = layers(b, n, d)
        times = {k: per_call(fn, args.calls, args.repeat) * 1e6 for k, fn in fns.items()}
        print(f"{name:26s} splits {prob.num_splits:2d}  " + "  ".join(f"{k} {t:5.2f}" for k, t in times.items()))


if __name__ == "__main__":
    main()
