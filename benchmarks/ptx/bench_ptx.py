"""The PTX simulator's speed on the CPU: a 256^3 mma.sync GEMM and kernel/flash_fwd.cu against the numpy engine.

    python3 benchmarks/ptx/bench_ptx.py [--reps 5] [--flash-n 1024] [--profile 15] [--json out.json]

1. GEMM: kernel/bench/ptx_gemm.cu (256 x 256 x 256, f16 in, f32 out, 16 blocks of 4 warps, cp.async, ldmatrix.x4,
   8,192 mma.sync.m16n8k16) through flashsim.ptx.launch; the first launch (which loads the compiled tensor-core
   kernel) and the median of ``--reps`` launches after it, warp instructions and warp instructions per second.
   The output is checked bit for bit against flashsim.mma chained over K in the kernel's order (16-wide K steps).
2. Attention: kernel/flash_fwd.cu's sm_90 default configuration at B=1 H=1 N=--flash-n d=128 (f32 P@V,
   standard-normal f16 inputs) through flashsim.ptx.launch, against flashsim.attention(q, k, v) (the numpy engine)
   in the same process, each the median of ``--reps`` runs after one untimed warm-up (NVRTC compiles and the
   program decode are charged to neither; they are reported apart). O and LSE are compared bit for bit.
3. ``--profile N``: cProfile of one attention launch, the top N functions by own time.

Prints every figure and writes them as JSON (``--json``); benchmarks/RESULTS.md quotes them with the command.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import time

import numpy as np

import flashsim
import flashsim.ptx as P
from flashsim import provenance
from flashsim.gpu import launch as gpu_launch
from flashsim.gpu.build import kernel_dir
from flashsim.problem import prepare

GEMM = 256


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = A @ B as the kernel computes it: per 16 x 8 tile, mma.m16n8k16 chained over K from k = 0 up."""
    mt, nt, kt = GEMM // 16, GEMM // 8, GEMM // 16
    at = a.reshape(mt, 16, kt, 16).transpose(0, 2, 1, 3)  # (m tile, k step, 16, 16)
    bt = b.reshape(kt, 16, nt, 8).transpose(0, 2, 1, 3)  # (k step, n tile, 16, 8)
    acc = np.zeros((mt, nt, 16, 8), np.float32)
    for k in range(kt):
        acc = flashsim.mma(np.ascontiguousarray(at[:, k, None]), np.ascontiguousarray(bt[k][None]), acc)
    return acc.transpose(0, 2, 1, 3).reshape(GEMM, GEMM)


def bench_gemm(reps: int) -> dict:
    t_build, module = timed(lambda: P.compile((kernel_dir() / "bench/ptx_gemm.cu").read_text(), arch="sm_90"))
    kernel = module.kernel("ptx_gemm")
    t_decode, _ = timed(lambda: kernel.program)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((GEMM, GEMM)).astype(np.float16)
    b = rng.standard_normal((GEMM, GEMM)).astype(np.float16)
    bt = np.ascontiguousarray(b.T)

    def run():
        c = np.zeros((GEMM, GEMM), np.float32)
        report = P.launch(kernel, (GEMM // 64, GEMM // 64), 128, [c, a.view(np.uint16), bt.view(np.uint16)])
        return c, report

    t_first, _ = timed(run)
    times, report, c = [], None, None
    for _ in range(reps):
        t, (c, report) = timed(run)
        times.append(t)
    median = statistics.median(times)
    return {
        "nvrtc_s": round(t_build, 3),
        "decode_s": round(t_decode, 3),
        "first_launch_s": round(t_first, 3),
        "launch_s_median": round(median, 4),
        "launch_s_all": [round(t, 4) for t in times],
        "warp_instructions": report.instructions,
        "mma": report.counts.get("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 0),
        "warp_instructions_per_s": round(report.instructions / median),
        "thread_instructions_per_s": round(32 * report.instructions / median),  # every lane of every warp runs
        "bit_equal_to_flashsim_mma": bool(np.array_equal(c.view(np.uint32), gemm_reference(a, b).view(np.uint32))),
    }


def flash_setup(n: int):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, 128)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    source = (kernel_dir() / "flash_fwd.cu").read_text()
    t_build, module = timed(lambda: P.compile(source, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)))
    kernel = module.kernel("flash_fwd")
    t_decode, _ = timed(lambda: kernel.program)

    def run():
        o = np.zeros_like(q)
        lse = np.zeros((1, 1, n), np.float32)
        flag = np.full(1, 2**64 - 1, np.uint64)
        zeros = [np.uint64(0)] * 4
        args = [q, k, v, o, lse, flag, *gpu_launch.kernel_scalars(prob), *zeros, np.int32(0)]
        grid = (prob.q_blocks, prob.heads, prob.batch)
        report = P.launch(kernel, grid, cfg.threads, args, shared_mem=cfg.smem_bytes)
        return o, lse, report

    return (q, k, v), run, {"nvrtc_s": round(t_build, 3), "decode_s": round(t_decode, 3)}


def bench_flash(n: int, reps: int) -> dict:
    (q, k, v), run, info = flash_setup(n)
    t_first, _ = timed(run)
    flashsim.attention(q, k, v, progress=False)  # warm-up: SFU tables, compiled tensor-core kernels
    sim, engine = [], []
    for _ in range(reps):
        t, (o, lse, report) = timed(run)
        sim.append(t)
        t, (o_ref, lse_ref) = timed(lambda: flashsim.attention(q, k, v, progress=False))
        engine.append(t)
    ts, tn = statistics.median(sim), statistics.median(engine)
    return {
        "shape": [1, 1, n, 128],
        **info,
        "first_launch_s": round(t_first, 3),
        "simulator_s_median": round(ts, 3),
        "simulator_s_all": [round(t, 3) for t in sim],
        "numpy_engine_s_median": round(tn, 4),
        "numpy_engine_s_all": [round(t, 4) for t in engine],
        "ratio": round(ts / tn, 2),
        "warp_instructions": report.instructions,
        "warp_instructions_per_s": round(report.instructions / ts),
        "blocks": int(np.prod(report.grid)),
        "waves": report.waves,
        "bit_equal_o": bool(np.array_equal(o.view(np.uint16), o_ref.view(np.uint16))),
        "bit_equal_lse": bool(np.array_equal(lse.view(np.uint32), lse_ref.view(np.uint32))),
        "top_opcodes": dict(sorted(report.counts.items(), key=lambda kv: -kv[1])[:8]),
    }


def profile_flash(n: int, top: int) -> str:
    _, run, _ = flash_setup(n)
    run()
    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--flash-n", type=int, default=1024)
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile's top N of one attention launch")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    machine = {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine()}
    machine["python"] = platform.python_version()
    machine["numpy"] = np.__version__
    print(f"machine: {machine}")
    gemm = bench_gemm(args.reps)
    print(
        f"GEMM {GEMM}^3 (mma.sync f16 -> f32): first launch {gemm['first_launch_s']} s, then median "
        f"{gemm['launch_s_median']} s of {gemm['launch_s_all']}; {gemm['warp_instructions']:,} warp instructions "
        f"({gemm['mma']:,} mma), {gemm['warp_instructions_per_s']:,} warp instr/s "
        f"({gemm['thread_instructions_per_s']:,} thread instr/s); bit-equal to flashsim.mma: "
        f"{gemm['bit_equal_to_flashsim_mma']} (NVRTC {gemm['nvrtc_s']} s, decode {gemm['decode_s']} s)"
    )
    flash = bench_flash(args.flash_n, args.reps)
    print(
        f"flash_fwd sm_90 default {flash['shape']}: simulator median {flash['simulator_s_median']} s "
        f"(of {flash['simulator_s_all']}), numpy engine {flash['numpy_engine_s_median']} s "
        f"(of {flash['numpy_engine_s_all']}): {flash['ratio']}x; {flash['warp_instructions']:,} warp instructions, "
        f"{flash['warp_instructions_per_s']:,}/s, {flash['blocks']} blocks in {flash['waves']} wave(s); bit-equal "
        f"O {flash['bit_equal_o']} LSE {flash['bit_equal_lse']} (first launch {flash['first_launch_s']} s, NVRTC "
        f"{flash['nvrtc_s']} s, decode {flash['decode_s']} s)"
    )
    print(f"  top opcodes: {flash['top_opcodes']}")
    result = {"machine": machine, "gemm": gemm, "flash": flash}
    if args.profile:
        text = profile_flash(args.flash_n, args.profile)
        print(f"cProfile of one flash_fwd launch, top {args.profile} by own time:\n{text}")
        result["profile"] = text
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    ok = gemm["bit_equal_to_flashsim_mma"] and flash["bit_equal_o"] and flash["bit_equal_lse"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
