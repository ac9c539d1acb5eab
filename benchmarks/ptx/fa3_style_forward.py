"""An FA3-style forward in flashsim.ptx: FlashInfer's Hopper single prefill (the FlashAttention-3-derived kernel of
flashinfer-python 0.7.4: TMA producer warpgroup, wgmma consumers, a 2-stage mbarrier pipeline, setmaxnreg) at B=1,
H=1, N=1024, d=128, bf16, not causal, timed on the CPU against flashsim's numpy engine on the same problem.

    python benchmarks/ptx/fa3_style_forward.py [--reps 3] [--json FILE] [--profile N]   (needs nvcc; tests/thirdparty)

The kernel is tests/thirdparty/flashinfer_prefill.py's case flashinfer_sm90_prefill_d128_n1024_normal, built with
FlashInfer's JIT flags (one nvcc run, cached in the user cache) and launched from the parameters FlashInfer's own host
code builds (flashsim.ptx.hostshim). Charged to neither side: the build, the host code's run, the module's load and
decode (the first launch, reported apart), the numpy engine's warm-up. Each figure is the median of ``--reps`` runs,
in wall time and in this process's CPU time (the figure other jobs on a shared machine inflate least).
The simulated O and LSE are checked against a float64 reference within bf16's bound, and bit for bit against the
GPU's where tests/data/thirdparty holds the case's capture. The numpy engine runs flashsim.attention on the same bf16
Q, K, V (its own kernel's program: 128-row tiles, f32 P V), so the ratio compares two simulations of one problem.
``--profile N``: after the timed runs, cProfile of one more launch, the top N functions by own time and by
cumulative time (where the simulator's time goes).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pathlib
import platform
import pstats
import statistics
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # tests/thirdparty: the kernel's build and launch description

from thirdparty import build, capture  # noqa: E402
from thirdparty import flashinfer_prefill as fi  # noqa: E402

import flashsim  # noqa: E402
import flashsim.ptx as fptx  # noqa: E402

CASE = "flashinfer_sm90_prefill_d128_n1024_normal"


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def clocked(fn):
    """(wall seconds, CPU seconds of this process, fn's result): the CPU time is what a shared machine's other jobs
    do not inflate, the wall time what a user waits."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def profile(run, top: int) -> str:
    """cProfile of one ``run()``: the top ``top`` functions by own time, then by cumulative time."""
    prof = cProfile.Profile()
    prof.enable()
    run()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile's top N of one more launch")
    args = ap.parse_args(argv)
    case = fi.CASES[CASE]
    t_build, (program, ptx) = timed(lambda: fi.build(case.build))
    arrays = fi.inputs(case)
    before = {n: a.copy() for n, a in arrays.items()}
    launch, _log, params = fi.describe(case, ptx, program, arrays)
    t_load, module = timed(lambda: fptx.load(ptx, arch=fi.ARCH))
    name, _sizes = fi.entry(ptx)
    kernel = module.kernel(name)
    grid, block, shared = tuple(launch["grid"]), tuple(launch["block"]), launch["shared_bytes"]

    def run():
        arrays["O"][...] = 0
        arrays["LSE"][...] = 0
        return fptx.launch(kernel, grid, block, params, shared_mem=shared)

    t_first, report = timed(run)
    q, k, v = (before[n][None] for n in "QKV")  # (1, N, H, d)
    flashsim.attention(q, k, v, layout="bnhd", progress=False)  # warm-up: SFU tables, tensor-core kernels
    sim, engine, sim_cpu, engine_cpu = [], [], [], []
    for _ in range(args.reps):
        t, c, report = clocked(run)
        sim.append(t)
        sim_cpu.append(c)
        t, c, _ = clocked(lambda: flashsim.attention(q, k, v, layout="bnhd", progress=False))
        engine.append(t)
        engine_cpu.append(c)
    ts, tn = statistics.median(sim), statistics.median(engine)
    cs, cn = statistics.median(sim_cpu), statistics.median(engine_cpu)
    o, o_bound, lse, lse_bound = fi.reference(case, before)
    within = bool((np.abs(arrays["O"].astype(np.float64) - o) <= o_bound).all())
    within &= bool((np.abs(arrays["LSE"].astype(np.float64) - lse) <= lse_bound).all())
    gpu = "no capture"
    path = capture.capture_path(CASE, fi.ARCH)
    if path.is_file():
        _stored_in, stored_out, meta = capture.load(path)
        same_ptx = meta["ptx_sha256"] == build.ptx_sha256(ptx)
        equal = all(stored_out[n].tobytes() == arrays[n].tobytes() for n in ("O", "LSE"))
        gpu = f"bit-equal to {meta['gpu']}: {equal}" + ("" if same_ptx else " (a different PTX)")
    load = os.getloadavg()
    result = {
        "case": CASE,
        "shape": [1, case.heads, case.qo_len, case.build.head_dim],
        "grid": list(grid),
        "block": list(block),
        "build_s": round(t_build, 1),
        "load_s": round(t_load, 3),
        "first_launch_s": round(t_first, 3),
        "simulator_s_median": round(ts, 3),
        "simulator_s_all": [round(t, 3) for t in sim],
        "numpy_engine_s_median": round(tn, 4),
        "numpy_engine_s_all": [round(t, 4) for t in engine],
        "ratio": round(ts / tn, 2),
        "simulator_cpu_s_median": round(cs, 3),
        "numpy_engine_cpu_s_median": round(cn, 4),
        "ratio_cpu": round(cs / cn, 2),
        "warp_instructions": report.instructions,
        "warp_instructions_per_s": round(report.instructions / ts),
        "top_opcodes": dict(sorted(report.counts.items(), key=lambda kv: -kv[1])[:10]),
        "within_reference_bound": within,
        "gpu": gpu,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(), "load": load},
    }
    print(
        f"FlashInfer sm90 prefill (FA3-style), B=1 H={case.heads} N={case.qo_len} d={case.build.head_dim} bf16: "
        f"grid {grid}, {block[0]} threads"
    )
    print(
        f"  simulator median {result['simulator_s_median']} s (of {result['simulator_s_all']}), numpy engine "
        f"{result['numpy_engine_s_median']} s (of {result['numpy_engine_s_all']}): {result['ratio']}x wall; "
        f"CPU time {result['simulator_cpu_s_median']} s against {result['numpy_engine_cpu_s_median']} s: "
        f"{result['ratio_cpu']}x"
    )
    print(
        f"  first launch {result['first_launch_s']} s (load {result['load_s']} s, build {result['build_s']} s); "
        f"{report.instructions:,} warp instructions, {result['warp_instructions_per_s']:,}/s"
    )
    print(f"  within the float64 reference's bf16 bound: {within}; GPU: {gpu}")
    print(f"  top opcodes: {result['top_opcodes']}")
    print(f"  machine: {result['machine']}")
    if args.profile:
        result["profile"] = text = profile(run, args.profile)
        print(f"cProfile of one launch, top {args.profile} by own time, then by cumulative time:\n{text}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
