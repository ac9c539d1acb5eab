"""On the GPU: when each block of the B=8 decode's load path starts and ends (%globaltimer), against plain reads:
is the async-copy kernels' extra fixed cost (streaming_fit.py) the launch's ramp, each block's first fill, or the
spread of the blocks' finishing times at the tail?

    python3 benchmarks/experiments/decode_bulk/block_times.py [--json FILE]

Kernels (B 8, Hkv 8, Nk 8192, d 128, 6 splits where they split): ring.cu's cp.async load path (64 x 2, one warp a
block) with and without its mma, read.cu's decode-partition reads (8 warps a block) and front-to-back reads (16
blocks of 256 threads an SM), each built with TIMES=1 (the same code plus two timer reads and a store a block).
Per kernel, from the last of 5 launches: the span (first start to last end), the starts' spread (the launch's ramp),
a block's median duration, and the ends' spread: when 10 / 50 / 90% and all of the blocks had finished, from the
first start. While blocks run out at the tail, the bytes in flight fall and with them the rate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # benchmarks/, this folder
import bench_serving as bs  # noqa: E402
import kernels  # noqa: E402

_, B, N, D = bs.DECODE_SHAPES[0]
H, SPLITS = 8, 6


def summary(times: np.ndarray) -> dict:
    """us figures of a (blocks, 2) array of start / end ns."""
    t0 = times[:, 0].min()
    start, end = (times[:, 0] - t0) / 1e3, (times[:, 1] - t0) / 1e3
    q = np.percentile(end, [10, 50, 90])
    return dict(blocks=len(times), span=float(end.max()), starts_spread=float(start.max()),
                block_median=float(np.median(end - start)), ends_10=float(q[0]), ends_50=float(q[1]),
                ends_90=float(q[2]), ends_all=float(end.max()))  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    _, k, v = bs.cache(B, N, 32, H, D, torch.float16)
    kp, vp = np.uint64(k.data_ptr()), np.uint64(v.data_ptr())
    blocks = B * H * SPLITS
    runs = {}
    for no_mma in (0, 1):
        ring, smem = kernels.ring(0, 2, 64, TIMES=1, NO_MMA=no_mma)
        out = cp.zeros(blocks * 32 + 4 * blocks, cp.float32)
        args = kernels.ring_args(k, v, out, N, H, SPLITS)  # (no tensor maps: the cp.async form)
        go = lambda ring=ring, args=args, smem=smem: ring((blocks,), (32,), args, shared_mem=smem)  # noqa: E731
        runs[f"ring.cu cp.async 64 x 2{', no mma' if no_mma else ''}"] = (go, out, blocks, 32)
    flat, heads = kernels.read(UNROLL=8, TIMES=1)
    out = cp.zeros(blocks * 256 + 4 * blocks, cp.uint32)
    runs["read, decode blocks of 8 warps"] = (
        lambda out=out: heads((blocks,), (256,), (kp, vp, out, np.int32(N), np.int32(H), np.int32(SPLITS))), out,
        blocks, 256)  # fmt: skip
    fb = sms * 16
    out = cp.zeros(fb * 256 + 4 * fb, cp.uint32)
    runs["read, front to back"] = (
        lambda out=out: flat((fb,), (256,), (kp, vp, np.int64(k.nbytes // 16), out)), out, fb, 256)  # fmt: skip
    rows = []
    print(f"{torch.cuda.get_device_name()}: B {B}, Hkv {H}, Nk {N}, d {D} ({2 * k.nbytes / 1e6:.0f} MB); us from the "
          "first block's start")  # fmt: skip
    print(f"{'kernel':36} {'do_bench':>8} {'span':>7} {'starts':>7} {'block':>7} {'10% end':>8} {'50%':>7} {'90%':>7}")
    for name, (launch, out, n_blocks, threads) in runs.items():
        us = bs._do_bench(launch) * 1e3
        for _ in range(5):
            launch()
        cp.cuda.runtime.deviceSynchronize()
        r = dict(name=name, do_bench_us=us, **summary(kernels.block_times(out, n_blocks, threads)))
        rows.append(r)
        print(f"{name:36} {us:8.1f} {r['span']:7.1f} {r['starts_spread']:7.1f} {r['block_median']:7.1f} "
              f"{r['ends_10']:8.1f} {r['ends_50']:7.1f} {r['ends_90']:7.1f}", flush=True)  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
