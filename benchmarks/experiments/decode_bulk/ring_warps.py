"""On the GPU: can fewer, wider blocks stream the decode's cache? ring.cu's load path with WARPS warps a block, each
its own ring over a share of the block's keys (a split inside the block), at the serving table's B=8 shape (B 8, Hkv
8, N 8192, d 128, f16: 268 MB of K and V).

    python3 benchmarks/experiments/decode_bulk/ring_warps.py [--json FILE]

A decode without flash_combine at B=8 has 64 row groups (B x Hkv): one block each, or two with two splits. One-warp
blocks stream ~19 GB/s each (unpacked.py), so 64 of them take 220 us; this asks how many warps a block needs, and how
many blocks, for the 98-100 us the 384 one-warp blocks of today's 6 splits take. For each (splits, warps): the time
under both L2 flushes (bench_serving's do_bench loop), TB/s of K and V read, and (TIMES=1) the blocks' span and the
spread of their ends. cp.async and TMA forms, 2 stages; a warp's ring takes 64 KB at 64-key tiles, 32 KB at 32 (a
block may have 227 KB), so the wider blocks take 32-key tiles.
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
H = 8
# (splits, warps a block, key tile): 64 and 128 blocks of 2-6 warps, and today's 384 one-warp blocks as the reference
SHAPES = [(1, 2, 64), (1, 3, 64), (2, 2, 64), (2, 3, 64), (1, 4, 32), (1, 6, 32), (2, 4, 32), (6, 1, 64)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    _, k, v = bs.cache(B, N, 32, H, D, torch.float16)
    nbytes = 2 * k.numel() * k.element_size()
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    rows = []
    print(torch.cuda.get_device_name())
    for bulk in (0, 2):
        for splits, warps, kv_tile in SHAPES:
            tmaps = kernels.tensor_maps(k, v, kv_tile)
            fn, smem = kernels.ring(bulk, 2, kv_tile, WARPS=warps, TIMES=1)
            blocks = B * H * splits
            out = cp.zeros(blocks * warps * 32 + 4 * blocks, cp.float32)
            args = kernels.ring_args(k, v, out, N, H, splits, tmaps)

            def launch():
                fn((blocks,), (32 * warps,), args, shared_mem=smem, stream=stream)

            r = dict(form=("cp.async", "bulk", "tma")[bulk], splits=splits, warps=warps, kv_tile=kv_tile)
            r.update(blocks=blocks, smem=smem)
            for flush in bs.FLUSHES:
                r[f"us_{flush}"] = bs._do_bench(launch, flush) * 1e3
            launch()
            torch.cuda.synchronize()
            t = kernels.block_times(out, blocks, warps * 32).astype(np.float64)
            ends = np.sort(t[:, 1] - t[:, 0].min()) / 1e3
            r.update(span_us=float(ends[-1]), end_10_us=float(ends[len(ends) // 10]))
            rows.append(r)
            print(f"{r['form']:8} splits {splits} x {warps} warps, {kv_tile}-key tiles ({blocks:3d} blocks, "
                  f"{smem // 1024} KB): "
                  f"zero {r['us_zero']:6.1f} us ({nbytes / r['us_zero'] / 1e6:.2f} TB/s), read {r['us_read']:6.1f} us "
                  f"({nbytes / r['us_read'] / 1e6:.2f} TB/s); span {r['span_us']:.1f}, 10% ended {r['end_10_us']:.1f}",
                  flush=True)  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
