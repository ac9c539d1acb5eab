"""Benchmarks: the kernel beside torch SDPA on this GPU (`kernel`), or the emulator against numpy (`emulator`).

kernel:   TFLOP/s (4*B*H*Nq*Nk*d, halved for causal) of kernel/flash_fwd.cu for both P@V accumulators beside
          torch's FLASH (FlashAttention-2) and cuDNN SDPA backends, median of CUDA-event timings, on the shapes
          of benchmarks/RESULTS.md (or --shape). Needs a GPU; torch only for the comparison columns.
emulator: seconds of flashsim.attention against a plain float64 numpy attention on the same CPU (one head).
"""
from __future__ import annotations

import time

import numpy as np

from ..config import KernelConfig

DEFAULT_SHAPES = [  # (B, H, N, d, causal): the shapes of benchmarks/RESULTS.md
    (4, 16, 4096, 128, False),
    (4, 16, 4096, 128, True),
    (4, 16, 4096, 64, False),
    (1, 16, 16384, 128, False),
    (16, 16, 1024, 128, False),
    (8, 32, 2048, 64, True),
]


def add_arguments(p):
    p.add_argument("what", choices=("kernel", "emulator"), help="what to benchmark")
    p.add_argument("--shape", action="append", default=[], metavar="B,H,N,D[,causal]")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warps", type=int, default=None)
    p.add_argument("--m-tiles", type=int, default=None, help="m16 tiles per warp (1 or 2)")
    p.add_argument("--kv-tile", type=int, default=None)
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--n", type=int, action="append", default=[], help="emulator: sequence lengths (default 1024)")
    p.add_argument("--backend", choices=("numpy", "jax"), default="numpy", help="emulator backend")


def _flops(b, h, n, d, causal):
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def _shapes(args):
    if not args.shape:
        return DEFAULT_SHAPES
    out = []
    for s in args.shape:
        parts = s.split(",")
        causal = len(parts) > 4 and parts[4].strip().lower() in ("causal", "1", "true")
        out.append(tuple(int(x) for x in parts[:4]) + (causal,))
    return out


def _event_median_ms(fn, reps, warmup=3):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def bench_kernel(args) -> int:
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        raise SystemExit(f"flashsim bench kernel needs torch with CUDA for the comparison: {e}")
    from ..gpu import runtime as rt
    from ..gpu.launch import prepared_launch
    rt.require_gpu()
    arch = rt.current_arch()
    dev_name = torch.cuda.get_device_name()
    print(f"flashsim bench kernel on {dev_name} ({arch}); TFLOP/s, median of {args.reps} CUDA-event timings")
    print(f"{'B,H,N,d':18} {'causal':6} {'ours f32':>9} {'ours f16':>9} {'FA2':>7} {'cuDNN':>7}  config")
    for (b, h, n, d, causal) in _shapes(args):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn((b, h, n, d), device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        row = {}
        over = {key: val for key, val in (("warps", args.warps), ("m_tiles", args.m_tiles), ("kv_tile", args.kv_tile),
                                          ("stages", args.stages)) if val is not None}
        for acc in ("f32", "f16"):
            cfg = KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc, **over)
            go, _, _ = prepared_launch(q, k, v, config=cfg, causal=causal, pv_accum=acc)
            torch.cuda.synchronize()
            ms = rt.timed(lambda: go(sync=False), warmup=3, reps=args.reps)   # events on the kernel's own stream
            row[acc] = _flops(b, h, n, d, causal) / ms / 1e9
        for name, backend in (("FA2", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    fn()
                    row[name] = _flops(b, h, n, d, causal) / _event_median_ms(fn, args.reps) / 1e9
            except RuntimeError as e:  # backend unavailable for this shape
                row[name] = float("nan")
        print(f"{f'{b},{h},{n},{d}':18} {str(causal):6} {row['f32']:9.1f} {row['f16']:9.1f} {row['FA2']:7.1f} "
              f"{row['cuDNN']:7.1f}  warps={cfg.warps} m_tiles={cfg.m_tiles} kv_tile={cfg.kv_tile} stages={cfg.stages}")
        del q, k, v
        torch.cuda.empty_cache()
    return 0


def bench_emulator(args) -> int:
    from ..emulator import attention
    from .emulate import make_inputs
    ns = args.n or [1024]
    print(f"flashsim bench emulator ({args.backend}): one head, d=128, seconds (best of 1)")
    print(f"{'N':>6} {'float64 numpy':>14} {'emulator f32':>13} {'ratio':>7} {'emulator f16':>13} {'ratio':>7}")
    for n in ns:
        q, k, v = make_inputs(1, 1, n, n, 128, seed=0)
        t0 = time.perf_counter()
        _plain_attention(q, k, v)
        t_ref = time.perf_counter() - t0
        out = []
        for acc in ("f32", "f16"):
            t0 = time.perf_counter()
            attention(q, k, v, pv_accum=acc, backend=args.backend, progress=False)
            out.append(time.perf_counter() - t0)
        print(f"{n:6d} {t_ref:14.3f} {out[0]:13.2f} {out[0] / t_ref:7.1f} {out[1]:13.2f} {out[1] / t_ref:7.1f}")
    return 0


def _plain_attention(q, k, v):
    """The comparison baseline: softmax(q k^T / sqrt(d)) v in float64 numpy, nothing else."""
    q64, k64, v64 = (x[0, 0].astype(np.float64) for x in (q, k, v))
    s = q64 @ k64.T / np.sqrt(q64.shape[-1])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v64


def run(args) -> int:
    return bench_kernel(args) if args.what == "kernel" else bench_emulator(args)
