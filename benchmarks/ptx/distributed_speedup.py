"""kernel/flash_fwd.cu through flashsim.ptx over 1, 2, 4, ... worker processes (launch(..., executor="local:N")):
the speed-up curve, and the same bits at every size.

    python3 benchmarks/ptx/distributed_speedup.py [--batch 1] [--heads 16] [--n 3072] [--head-dim 128]
        [--workers 1,2,4,8,16] [--no-reference] [--out DIR]

The sm_90 default configuration of flash_fwd (f16, f32 P@V) on standard-normal inputs of shape (B, H, N, d). First
the launch in this process (the reference bits, and its time), then for each worker count a LocalCluster of that
many processes (one thread each) is started, warmed up (each worker decodes the module and loads its tables: one
block each), and the launch is timed on it; the cluster is closed before the next count, so that each count has the
machine's cores to itself. Every O and LSE is compared bit for bit with the reference (with --no-reference, with
the first count's). Each worker's CPU time in the launch is measured too: the busiest worker's bounds the wall time
on cores of its own, so its ratio to one worker's says how evenly the launch split even on a machine shared with
other jobs (where the wall time says how much CPU the workers got). The default shape takes about 80 s on one idle
core of the 2-core development machine; the curve on a 16-core machine runs in about 5 minutes. Prints each figure
and writes DIR/distributed_speedup.json and DIR/distributed_speedup.log.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import time

import numpy as np

import flashsim.ptx as P
from flashsim import provenance
from flashsim.gpu import launch as gpu_launch
from flashsim.gpu.build import kernel_dir
from flashsim.problem import prepare
from flashsim.ptx import executor


class Log:
    """Print and keep every line (written to the log file at the end)."""

    def __init__(self):
        self.lines = []

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        self.lines.append(text)


def _cpu_seconds() -> float:
    """This process's CPU time (run on each worker)."""
    t = os.times()
    return t.user + t.system


def setup(batch: int, heads: int, n: int, d: int):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((batch, heads, n, d)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    source = (kernel_dir() / "flash_fwd.cu").read_text()
    kernel = P.compile(source, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_fwd")
    grid = (prob.q_blocks, prob.heads, prob.batch)

    def run(executor=None, blocks=None):
        o = np.zeros_like(q)
        lse = np.zeros((batch, heads, n), np.float32)
        flag = np.full(1, 2**64 - 1, np.uint64)
        args = [q, k, v, o, lse, flag, *gpu_launch.kernel_scalars(prob), *[np.uint64(0)] * 4, np.int32(0)]
        t0 = time.perf_counter()
        report = P.launch(
            kernel, grid, cfg.threads, args, shared_mem=cfg.smem_bytes, executor=executor, blocks=blocks, progress=False
        )
        return time.perf_counter() - t0, o, lse, report

    return run, int(np.prod(grid))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--n", type=int, default=3072, help="sequence length (queries and keys)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts")
    ap.add_argument("--no-reference", action="store_true", help="skip the launch in this process")
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."), help="folder for the JSON and the log")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    log = Log()
    machine = {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    shape = [args.batch, args.heads, args.n, args.head_dim]
    log(f"machine: {machine}")
    log(f"flash_fwd sm_90 default, shape (B, H, N, d) = {tuple(shape)}; worker counts {counts}")
    run, n_blocks = setup(args.batch, args.heads, args.n, args.head_dim)
    run(blocks=range(0, 1))  # NVRTC, decode and tables here before anything is timed
    result = {"machine": machine, "shape": shape, "blocks": n_blocks, "runs": []}
    ref = None
    if not args.no_reference:
        seconds, o, lse, report = run()
        ref = (o, lse)
        result["in_process"] = {"seconds": round(seconds, 2), "warp_instructions": report.instructions}
        log(
            f"in this process: {seconds:.1f} s, {report.instructions:,} warp instructions "
            f"({report.instructions / seconds:,.0f}/s), {n_blocks} blocks in {report.waves} waves"
        )
    ok = True
    for workers in counts:
        t0 = time.perf_counter()
        ex = executor.resolve(f"local:{workers}")
        start = time.perf_counter() - t0
        warm, *_ = run(ex, blocks=range(0, min(n_blocks, workers)))
        before = ex.client.run(_cpu_seconds)
        seconds, o, lse, report = run(ex)
        after = ex.client.run(_cpu_seconds)
        cpu = sorted(after[w] - before[w] for w in after)  # each worker's CPU seconds in the launch
        if ref is None:
            ref = (o, lse)
        equal = bool(np.array_equal(o.view(np.uint16), ref[0].view(np.uint16))) and bool(
            np.array_equal(lse.view(np.uint32), ref[1].view(np.uint32))
        )
        ok = ok and equal
        row = {
            "workers": workers,
            "seconds": round(seconds, 2),
            "cluster_start_s": round(start, 2),
            "warm_up_s": round(warm, 2),
            "warp_instructions": report.instructions,
            "warp_instructions_per_s": round(report.instructions / seconds),
            "workers_used": report.workers,
            "worker_cpu_s": [round(c, 2) for c in cpu],
            "bit_equal": equal,
            "notes": report.notes,
        }
        result["runs"].append(row)
        speedup = result["runs"][0]["seconds"] / seconds
        row["speedup_vs_first_count"] = round(speedup, 2)
        # the busiest worker's CPU time bounds the wall time on cores of its own: on a machine shared with other jobs
        # the wall time says how much CPU the workers got, this ratio how evenly the launch split
        cpu_speedup = result["runs"][0]["worker_cpu_s"][-1] / cpu[-1]
        row["cpu_speedup_vs_first_count"] = round(cpu_speedup, 2)
        log(
            f"{workers:>3} worker(s): {seconds:7.1f} s, speed-up {speedup:5.2f}x, {report.instructions / seconds:,.0f} "
            f"warp instr/s, bit-equal {equal}; busiest worker {cpu[-1]:.1f} CPU s of {sum(cpu):.1f} in all "
            f"(CPU speed-up {cpu_speedup:.2f}x) (cluster start {start:.1f} s, warm-up {warm:.1f} s; "
            f"{'; '.join(report.notes)})"
        )
        executor.close_local(workers)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    log(f"load average at the end: {result['load_average_at_end']}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "distributed_speedup.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "distributed_speedup.log").write_text("\n".join(log.lines) + "\n")
    log(f"wrote {args.out / 'distributed_speedup.json'} and {args.out / 'distributed_speedup.log'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
