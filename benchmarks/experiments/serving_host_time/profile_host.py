"""Host time per call of the serving calls' Python path, on a machine without a GPU.

The GPU is mocked as in tests/test_serving_gpu_mock.py (an sm_90 device with 132 SMs; the kernels are placeholders)
and every driver launch is a no-op, so what is timed is the Python side alone: the public call, the torch op through
the dispatcher, the op's implementation without the dispatcher, and the launches' argument handling. CPU tensors
stand in for CUDA ones (the op's CPU kernel is routed to its CUDA implementation), so torch.empty here is the CPU
allocator's, not the CUDA caching allocator's: a few hundred ns apart.

    python benchmarks/experiments/serving_host_time/profile_host.py [--profile] [--calls N]

Prints us per call for each level (best of 5 runs of N back-to-back calls) and, with --profile, cProfile's top
functions of the public call.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import types

import torch

import flashsim
from flashsim.gpu import launch as gl
from flashsim.gpu import runtime as rt
from flashsim.gpu import serving as gs
from flashsim.gpu import serving_torch as st

SHAPES = [  # name, B, Nk, d (Hq 32, Hkv 8, Nq 1, bf16: the --call rows of benchmarks/bench_serving.py)
    ("decode B=8 Nk=8192 d=128", 8, 8192, 128),
    ("decode B=8 Nk=8192 d=64", 8, 8192, 64),
    ("decode B=1 Nk=32768", 1, 32768, 128),
    ("decode B=1 Nk=2048", 1, 2048, 128),
]


def mock_gpu():
    """The mocked device (tests/test_serving_gpu_mock.py's fake_gpu, launches dropped)."""
    kern = types.SimpleNamespace(kernel=object(), handle=0, name="k")
    rt._state["sticky"] = None
    rt.require_gpu = lambda: object()
    rt.device_id = lambda: -1
    rt.current_arch = lambda: "sm_90"
    rt.sm_count = lambda: 132
    rt.bind_thread = lambda: None
    rt.stream_from_handle = lambda h: h
    gl.kernel_for = lambda cfg, arch: kern
    gs.combine_for = lambda cfg, arch: kern
    gs.check_for = lambda arch: kern
    record = bytearray(8 * 8)
    import numpy as np

    buf = np.frombuffer(record, np.uint8)
    rt.mapped_host = lambda n: (buf[:n], 0xD0000)
    gl._core_launch = lambda *a: None  # cuda.core's launch (the serving launches before flashsim.gpu.packed)
    try:
        from flashsim.gpu import packed

        packed.driver_launch = lambda p, stream: None  # the packed launches' cuLaunchKernelEx
    except ImportError:  # before flashsim.gpu.packed
        pass
    st._on_gpu = lambda q: True  # CPU tensors take the eager path (where there is one)
    st._raw_stream = lambda dev: 0xABC0
    st._capturing = lambda: False
    st._run_cpu = st._run_cuda


def per_call(fn, n: int) -> float:
    """Best of 5 runs of ``n`` calls: us per call."""
    for _ in range(50):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def levels(b, n, d):
    """The callables timed for one shape: the public call, the op through the dispatcher, the op's implementation
    without it, and the bare launches."""
    q = torch.randn((b, 1, 32, d)).to(torch.bfloat16)
    k = torch.empty((b, n, 8, d), dtype=torch.bfloat16)  # never touched: the pages are not committed
    v = torch.empty((b, n, 8, d), dtype=torch.bfloat16)
    sl = torch.full((b,), n, dtype=torch.int32)
    flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    hit = next(iter(st._KEYS.values()))
    prob, plan = (hit.prob, hit.plan) if hasattr(hit, "plan") else hit
    op_args = (q, k, v, sl, None, 0, None, False, None, "f32", [], None, True, [-1, -1], 0.0, True)
    o, lse = torch.empty_like(q), torch.empty((b, 32, 1), dtype=torch.float32)
    parts = torch.empty((max(plan.part_bytes, 1),), dtype=torch.uint8)
    ptrs = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr())
    ptrs.update(seqlens_k=sl.data_ptr(), parts=parts.data_ptr())
    out = {
        "call": lambda: flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl),
        "op": lambda: st.KVCACHE_OP(*op_args),
        "impl": lambda: st._kvcache_impl("cuda")(*op_args),
        "launch": lambda: gs.launch_serving(plan, 0xABC0, ptrs),
    }
    if hasattr(st, "_enqueue"):  # the op's body without the dispatcher (what the public call runs eagerly)
        out["body"] = lambda: st._enqueue("attention_with_kvcache", *op_args)
    return out, prob


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--profile", action="store_true", help="cProfile the public call (first shape)")
    args = p.parse_args()
    mock_gpu()
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}; us per call, best of 5 x {args.calls} calls, launches stubbed")
    for name, b, n, d in SHAPES:
        gl.clear_caches()
        fns, prob = levels(b, n, d)
        times = {k: per_call(fn, args.calls) for k, fn in fns.items()}
        print(f"{name:28s} splits {prob.num_splits:2d}  " + "  ".join(f"{k} {t:5.2f}" for k, t in times.items()))
    if args.profile:
        gl.clear_caches()
        fns, _ = levels(*SHAPES[0][1:])
        call = fns["call"]
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.calls):
            call()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
