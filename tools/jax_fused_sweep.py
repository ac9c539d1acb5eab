"""GPU: the JAX engine's fused Pallas kernel (flashsim.emulator.engine_pallas) at several program shapes, beside the
real kernel and the scan engine, on the same input.

Usage (GPU machine with jax[cuda] and cuda-python, repo root):
    PYTHONPATH=. python3 tools/jax_fused_sweep.py [--n 16384] [--d 128] [--shapes 16x4 32x4 ...] [--scan]
        [--small 1024] [--emu-reps 3] [--json FILE]

For each program shape ROWSxWARPS (query rows per program, Triton warps; a trailing "p", as in 16x8p, turns on
the inline PTX form): flashsim.attention(backend="jax") (the first call, Triton's compilation
included; then the median of ``--emu-reps`` compiled calls), wall clock with host arrays in and out, and every bit
of O and LSE against the kernel's. ``--small N`` runs each shape first at N (compile time and bits on a short
problem); ``--scan`` times the scan engine too (EngineOptions(jax_fused=False)). Exit status 0 when every run agrees
with the kernel in every bit, 1 when some bits differ, 2 when a run failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from dataclasses import replace

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jax_gpu_bench import equal_fraction, finish, phase_kernel  # noqa: E402


def timed_emulation(q, k, v, reps: int = 1, engine=None):
    """(o, lse, first call's seconds, median seconds of ``reps`` further calls, the engine's plan); ``engine``: the
    flashsim.EngineOptions of the calls."""
    import flashsim
    from flashsim.emulator import engine_jax

    t0 = time.perf_counter()
    flashsim.attention(q, k, v, backend="jax", progress=False, engine=engine)
    first = time.perf_counter() - t0
    times = []
    for _ in range(max(1, reps)):
        t1 = time.perf_counter()
        o, lse = flashsim.attention(q, k, v, backend="jax", progress=False, engine=engine)
        times.append(time.perf_counter() - t1)
    return o, lse, first, float(np.median(times)), dict(engine_jax.LAST_PLAN)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--shapes", nargs="+", default=["16x4"], help="ROWSxWARPS[p] program shapes (p: inline PTX)")
    ap.add_argument("--small", type=int, default=0, help="run each shape first at this N")
    ap.add_argument("--scan", action="store_true", help="time the scan engine too")
    ap.add_argument("--reps", type=int, default=20, help="timed runs of the CUDA kernel")
    ap.add_argument("--emu-reps", type=int, default=1, help="timed (compiled) emulator runs after the first; median")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import jax

    from flashsim import EngineOptions

    print(f"jax {jax.__version__} on {jax.devices()}", flush=True)
    report: dict = {"n": args.n, "d": args.d, "jax": jax.__version__, "runs": []}
    status = 0
    problems = ([args.small] if args.small else []) + [args.n]
    inputs = {}
    for n in problems:
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, 1, n, args.d)).astype(np.float16) for _ in range(3))
        ko, kl, ms = phase_kernel(q, k, v, args.reps, report.setdefault(f"kernel_{n}", {}))
        inputs[n] = (q, k, v, ko, kl, ms)
    runs = [("fused", s) for s in args.shapes] + ([("scan", None)] if args.scan else [])
    for engine, shape in runs:
        options = EngineOptions(jax_fused=engine == "fused")
        if shape:
            rows, warps = (int(x) for x in shape.rstrip("p").split("x"))
            options = replace(options, pallas_rows=rows, pallas_warps=warps, pallas_inline_ptx=shape.endswith("p"))
        for n in problems:
            q, k, v, ko, kl, ms = inputs[n]
            try:
                o, lse, first, second, plan = timed_emulation(q, k, v, args.emu_reps, options)
            except Exception:
                traceback.print_exc()
                status = 2
                print(f"{engine} {shape} N={n}: FAILED", flush=True)
                break
            fo, fl = equal_fraction(o, ko), equal_fraction(lse, kl)
            if (fo, fl) != (1.0, 1.0):
                status = max(status, 1)
            print(
                f"{engine:5s} {shape or '-':6s} N={n:6d}: first {first:7.2f} s, second {second:7.3f} s, kernel "
                f"{ms:.3f} ms: {second * 1e3 / ms:8,.0f}x; bit-equal O {fo:.6f} LSE {fl:.6f}; {plan}",
                flush=True,
            )
            report["runs"].append(
                dict(
                    engine=engine,
                    shape=shape,
                    n=n,
                    first_s=first,
                    second_s=second,
                    kernel_ms=ms,
                    ratio=second * 1e3 / ms,
                    equal_o=fo,
                    equal_lse=fl,
                    plan={k_: str(v_) for k_, v_ in plan.items()},
                )
            )
    return finish(report, args.json, status)


if __name__ == "__main__":
    sys.exit(main())
