"""A Hopper GEMM in flashsim.ptx: Triton's default sm_90a build of a matmul through host TensorDescriptors (TMA loads
into a 3-stage mbarrier ring, wgmma, fence.proxy.async), 256 x 256 x 256 bf16 -> f32, timed on the CPU and checked
bit for bit against flashsim.wgmma chained over K in the kernel's order.

    python benchmarks/ptx/hopper_gemm.py [--reps 5] [--json FILE]      (needs the triton extra)

The reference: Triton's wgmma for a (128, 128, 64) tile issues m64n128k16 steps in K order on one f32 accumulator per
64-row half, so every output is ``c = wgmma(a[:, k:k+16], b[k:k+16, :], c)`` for k = 0, 16, ... from c = 0: the
chain is flashsim.wgmma's (one fused block of 16 products per step), whatever the tiles.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, said so (it warns otherwise)

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import flashsim  # noqa: E402
import flashsim.triton as ft  # noqa: E402

M = N = K = 256
BM, BN, BK = 128, 128, 64


@triton.jit
def matmul_tma(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, num_stages=3):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    offs_m, offs_n = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """flashsim.wgmma chained over K, 64 rows at a time (the batch dimension)."""
    a4 = a.reshape(M // 64, 64, K)
    c = np.zeros((M // 64, 64, N), np.float32)
    for k in range(0, K, 16):
        c = flashsim.wgmma(a4[:, :, k : k + 16], b[None, k : k + 16, :], c)
    return c.reshape(M, N)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(np.float32).astype(ml_dtypes.bfloat16)
    c = np.zeros((M, N), np.float32)
    da, db = ft.tensor_descriptor(a, [BM, BK]), ft.tensor_descriptor(b, [BK, BN])
    grid = (M // BM, N // BN)
    t0 = time.perf_counter()
    report = ft.launch(matmul_tma, grid, da, db, c, M, N, K, BM=BM, BN=BN, BK=BK, target="sm_90", num_warps=4)
    first = time.perf_counter() - t0
    ptx = ft.prepare(matmul_tma, grid, da, db, c, M, N, K, BM=BM, BN=BN, BK=BK, target="sm_90").compiled.ptx
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx, "not a TMA + wgmma build"
    times = []
    for _ in range(args.reps):
        c[:] = 0
        t0 = time.perf_counter()
        report = ft.launch(matmul_tma, grid, da, db, c, M, N, K, BM=BM, BN=BN, BK=BK, target="sm_90", num_warps=4)
        times.append(time.perf_counter() - t0)
    ref = reference(a, b)
    equal = bool(np.array_equal(c.view(np.uint32), ref.view(np.uint32)))
    med = float(np.median(times))
    load = os.getloadavg()
    print(f"Triton sm_90a matmul (TMA + wgmma), {M} x {N} x {K} bf16 -> f32, tiles {BM} x {BN} x {BK}, 4 warps")
    print(f"  first call (Triton compile or its cache, decode): {first:.3f} s")
    print(
        f"  launch: median {med:.3f} s of {args.reps} ({min(times):.3f}-{max(times):.3f}); "
        f"{report.instructions:,} warp instructions, {report.instructions / med:,.0f}/s"
    )
    print(f"  bit-equal to flashsim.wgmma chained over K: {equal}")
    print(f"  machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f}")
    top = sorted(report.counts.items(), key=lambda kv: -kv[1])[:6]
    print("  " + ", ".join(f"{op} {n:,}" for op, n in top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(first_s=first, median_s=med, times_s=times, equal=equal,
                           instructions=report.instructions, load=load), f, indent=1)  # fmt: skip
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
