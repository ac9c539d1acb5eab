"""On the GPU: how much of a timed decode-sized launch lies outside its blocks' lifetime, and how much of that is the
timing method (triton's do_bench, which bench_serving uses, zeroes a 256 MB buffer before every timed call so that L2
starts cold; the zeroed lines are still in L2, dirty, when the timed kernel starts).

    python3 benchmarks/experiments/decode_bulk/overhead.py [--json FILE]

ring.cu's cp.async load path (B 8, Hkv 8, Nk 8192, d 128, 6 splits; TIMES=1: its blocks' first start and last end by
%globaltimer) timed four ways: do_bench (L2 cleared before each call); one launch between two events after the same
clearing, with its blocks' span read back; 20 launches back to back between two events, no clearing (per launch); and
an empty kernel after the clearing and without it (what the events and a launch cost alone). Last, torch's copy of
the decode's own bytes (134 MB read, 134 MB written) under do_bench, against the 1 GiB copy the serving table uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch
import triton
import triton.testing  # noqa: F401  (do_bench's cache helpers)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # benchmarks/, this folder
import bench_serving as bs  # noqa: E402
import kernels  # noqa: E402

_, B, N, D = bs.DECODE_SHAPES[0]
H, SPLITS = 8, 6


def events_us(fn, clear=None, reps=20, per_call=1):
    """Median us of fn between two events over ``reps`` rounds (each round ``per_call`` calls; after clear() if
    given), per call."""
    times = []
    for _ in range(reps):
        if clear:
            clear()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(per_call):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / per_call)
    return float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    drv = triton.runtime.driver.active
    cache = drv.get_empty_cache_for_benchmark()

    def clear():
        drv.clear_cache(cache)

    _, k, v = bs.cache(B, N, 32, H, D, torch.float16)
    blocks = B * H * SPLITS
    ring, smem = kernels.ring(0, 2, 64, TIMES=1)
    out = cp.zeros(blocks * 32 + 4 * blocks, cp.float32)
    args = kernels.ring_args(k, v, out, N, H, SPLITS)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def launch():
        ring((blocks,), (32,), args, shared_mem=smem, stream=stream)

    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")

    def launch_empty():
        empty((1,), (1,), (), stream=stream)

    def span():
        t = kernels.block_times(out, blocks, 32)
        return (t[:, 1].max() - t[:, 0].min()) / 1e3

    r = {"device": torch.cuda.get_device_name()}
    r["ring_do_bench_us"] = bs._do_bench(launch) * 1e3
    spans, cleared = [], []
    for _ in range(20):
        cleared.append(events_us(launch, clear, reps=1))
        spans.append(span())
    r["ring_cleared_events_us"], r["ring_cleared_span_us"] = float(np.median(cleared)), float(np.median(spans))
    r["ring_back_to_back_us"] = events_us(launch, reps=5, per_call=20)
    r["ring_back_to_back_span_us"] = float(span())
    r["empty_cleared_us"] = events_us(launch_empty, clear)
    r["empty_us"] = events_us(launch_empty)
    nbytes = 2 * k.nbytes  # the decode's K and V
    src = torch.empty(nbytes // 4, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    r["copy_decode_bytes_us"] = bs._do_bench(lambda: dst.copy_(src)) * 1e3
    r["copy_decode_bytes_tb_s"] = nbytes / (r["copy_decode_bytes_us"] * 1e-6) / 1e12
    r["copy_1gib_tb_s"] = bs.copy_bandwidth()
    r["ring_tb_s_do_bench"] = nbytes / (r["ring_do_bench_us"] * 1e-6) / 1e12
    for key, val in r.items():
        print(f"{key:28} {val if isinstance(val, str) else f'{val:8.2f}'}")
    if a.json:
        Path(a.json).write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
