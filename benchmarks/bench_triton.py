"""flashsim.triton against Triton's interpreter (TRITON_INTERPRET=1) on the tutorial-style kernels of
tests/triton_kernels.py: which elements differ, and how long each takes on this machine.

    python benchmarks/bench_triton.py compare [--target sm_80 --arch sm_90]   the docs/triton.md table
    python benchmarks/bench_triton.py speed                                    matmul 512^3, attention N=1024 d=64

``compare`` runs each kernel at a small size through flashsim.triton.compare (the same inputs, copies for each run)
and prints one markdown row per output buffer: kernel, target, elements that differ of all, the largest ulp distance,
flashsim's time (the launch, compile cached) and the interpreter's. ``speed`` times the tutorial matmul (f16, 512 x
512 x 512, 128 x 128 x 32 tiles, 4 warps) and the fused attention forward (f16, one head, N = 1024, d = 64, 64 x 32
tiles) once each: flashsim's first call (Triton's compile or its disk cache, flashsim's decode), its second call
(everything cached: the launch alone) and one interpreter run, with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import ml_dtypes  # noqa: E402
import triton  # noqa: E402
import triton_kernels as K  # noqa: E402 - tests/triton_kernels.py

import flashsim.triton as ft  # noqa: E402


def _mm_args(a, b, c):
    M, Kd = a.shape
    N = b.shape[1]
    grid = lambda m: (triton.cdiv(M, m["BM"]) * triton.cdiv(N, m["BN"]),)  # noqa: E731
    return grid, (a, b, c, M, N, Kd, Kd, 1, N, 1, N, 1)


def cases(rng):
    """(label, kernel, grid, args, meta) of the compare table."""
    out = []
    n = 4096
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out.append(("vector add f32", K.add, (n // 1024,), (x, y, np.zeros(n, np.float32), n), dict(BLOCK=1024)))
    s = (rng.standard_normal((64, 200)) * 3).astype(np.float32)
    out.append(("fused softmax f32", K.softmax, (16,), (np.zeros_like(s), s, 200, 200, 64, 200), dict(BLOCK=256)))
    for label, dt, odt in (
        ("matmul f16", np.float16, np.float16),
        ("matmul bf16", ml_dtypes.bfloat16, ml_dtypes.bfloat16),
        ("matmul fp8 e4m3 -> f16", ml_dtypes.float8_e4m3fn, np.float16),
    ):
        a = rng.standard_normal((128, 128)).astype(dt)
        b = rng.standard_normal((128, 128)).astype(dt)
        grid, args = _mm_args(a, b, np.zeros((128, 128), odt))
        out.append((label + " 128^3", K.matmul, grid, args, dict(BM=64, BN=64, BK=32, GROUP=4)))
    xs = (rng.standard_normal((32, 512)) * 2 + 1).astype(np.float16)
    w, bb = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    ln = (xs, np.zeros_like(xs), w, bb, np.zeros(32, np.float32), np.zeros(32, np.float32), 512, 512, 1e-5)
    out.append(("layer norm f16", K.layer_norm, (32,), ln, dict(BLOCK=128)))
    for causal in (False, True):
        H, N, D = 2, 256, 64
        q, k, v = (rng.standard_normal((H, N, D)).astype(np.float16) for _ in range(3))
        args = (q, k, v, np.zeros_like(q), np.zeros((H, N), np.float32), 0.125, N, N * D, D)
        label = f"attention f16 {'causal' if causal else 'full'} H={H} N={N} d={D}"
        out.append((label, K.attention, (N // 64, H), args, dict(CAUSAL=causal, D=D, BM=64, BN=32)))
    return out


def compare_table(target: str, arch: str | None) -> int:
    rng = np.random.default_rng(0)
    print(f"target {target}, run on {arch or target}; load average {os.getloadavg()[0]:.2f}")
    print("| kernel | output | elements that differ | max ulp | flashsim (s) | interpreter (s) |")
    print("|---|---|---|---|---|---|")
    for label, kernel, grid, args, meta in cases(rng):
        if "fp8" in label and target == "sm_80":
            continue
        try:
            ft.compare(kernel, grid, *args, target=target, arch=arch, **meta)  # compile and decode first
            got = ft.compare(kernel, grid, *args, target=target, arch=arch, **meta)
        except Exception as exc:  # noqa: BLE001 - the table says which kernel could not run, and why
            print(f"| {label} | - | not run: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | | |")
            continue
        for name, d in got.outputs.items():
            differ = d.total - d.equal
            print(
                f"| {label} | {name} | {differ:,} of {d.total:,} | {d.max_ulp:,} | {got.seconds['flashsim']:.2f} | "
                f"{got.seconds['interpreter']:.2f} |"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def speed(target: str, arch: str | None) -> int:
    from flashsim.triton.compare import interpret

    rng = np.random.default_rng(1)
    print(f"target {target}, run on {arch or target}; {os.cpu_count()} cores; load average {os.getloadavg()}")
    a = rng.standard_normal((512, 512)).astype(np.float16)
    b = rng.standard_normal((512, 512)).astype(np.float16)
    grid, args = _mm_args(a, b, np.zeros((512, 512), np.float16))
    H, N, D = 1, 1024, 64
    q, k, v = (rng.standard_normal((H, N, D)).astype(np.float16) for _ in range(3))
    attn = (q, k, v, np.zeros_like(q), np.zeros((H, N), np.float32), 0.125, N, N * D, D)
    jobs = [
        ("matmul f16 512x512x512", K.matmul, grid, args, dict(BM=128, BN=128, BK=32, GROUP=8)),
        ("attention f16 N=1024 d=64", K.attention, (N // 64, H), attn, dict(CAUSAL=False, D=D, BM=64, BN=32)),
    ]
    print("| problem | flashsim 1st call (s) | flashsim 2nd call (s) | interpreter (s) | flashsim / interpreter |")
    print("|---|---|---|---|---|")
    for label, kernel, g, a_, meta in jobs:
        times = []
        for _ in range(2):
            copies = [x.copy() if isinstance(x, np.ndarray) else x for x in a_]
            t0 = time.perf_counter()
            ft.launch(kernel, g, *copies, target=target, arch=arch, **meta)
            times.append(time.perf_counter() - t0)
        grid3 = ft.prepare(kernel, g, *a_, target=target, arch=arch, **meta).grid
        copies = [x.copy() if isinstance(x, np.ndarray) else x for x in a_]
        _, _, t_int = interpret(kernel, grid3, copies, meta)
        print(f"| {label} | {times[0]:.2f} | {times[1]:.2f} | {t_int:.2f} | {times[1] / t_int:.2f}x |")
    print(f"load average after: {os.getloadavg()}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("compare", "speed"))
    p.add_argument("--target", default="sm_80")
    p.add_argument("--arch", default="sm_90", help="the GPU the build runs on (default sm_90: the H200)")
    args = p.parse_args(argv)
    return (compare_table if args.what == "compare" else speed)(args.target, args.arch)


if __name__ == "__main__":
    sys.exit(main())
