"""On the GPU: ring.cu's two load paths on the serving decode's B=8 shape (B 8, Hkv 8, N 8192, d 128, f16: 268 MB of
K and V), beside the copy bandwidth and the real decode (flash_fwd + flash_combine, Hq 32) at the same split counts,
in one run.

    python3 benchmarks/experiments/decode_bulk/ring.py [--json FILE]

Times: triton's do_bench medians (bench_serving's), us; TB/s counts the K and V bytes read; "of copy" against
bench_serving.copy_bandwidth (bytes read plus written), as the serving table's column.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # benchmarks/, this folder
import bench_serving as bs  # noqa: E402
import kernels  # noqa: E402

_, B, N, D = bs.DECODE_SHAPES[0]  # the serving table's B=8 decode row
H = 8  # its K / V heads
SMEM_PER_SM, SMEM_RESERVED = 228 * 1024, 1024  # H100: per SM, and what the system takes per block
# (BULK, STAGES, KV_TILE): the copy forms at the decode's tiling (64 keys, 2 stages: 3 blocks an SM), then 32-key
# tiles in 2-4 stages (4-7 blocks an SM). The per-row bulk copies (BULK 1) lost by 30-50% in the first two runs
# (benchmarks/logs/2026-12-07-device3/decode_bulk/): not timed again.
VARIANTS = [(b, s, t) for b in (0, 2) for s, t in ((2, 64), (3, 64), (2, 32), (3, 32), (4, 32))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    q, k, v = bs.cache(B, N, 32, H, D, torch.float16)
    nbytes = 2 * k.numel() * k.element_size()
    copy = bs.copy_bandwidth()
    rows = [dict(name="copy", tb_s=copy)]
    print(f"{torch.cuda.get_device_name()}; copy {copy:.2f} TB/s (read + written)")
    for splits in (4, 6, 8):
        fn, prob = bs.ours(q, k, v, num_splits=splits)
        us = bs._do_bench(fn) * 1e3
        rows.append(dict(name=f"flash_fwd + combine splits {splits}", splits=splits, us=us, tb_s=nbytes / us / 1e6))
        print(f"{rows[-1]['name']:34} {us:7.1f} us  {rows[-1]['tb_s']:.2f} TB/s ({rows[-1]['tb_s'] / copy:.1%})")
    for bulk, stages, kv_tile in VARIANTS:
        fn, smem = kernels.ring(bulk, stages, kv_tile)
        per_sm = SMEM_PER_SM // (smem + 128 + SMEM_RESERVED)
        tmaps = kernels.tensor_maps(k, v, kv_tile)
        for splits in (4, 6, 8):
            out = cp.empty((B * H * splits * 32,), cp.float32)
            args = kernels.ring_args(k, v, out, N, H, splits, tmaps)
            us = bs._do_bench(lambda: fn((B * H * splits,), (32,), args, shared_mem=smem)) * 1e3
            name = f"ring {('cp.async', 'bulk', 'tma')[bulk]} {kv_tile}x{stages} splits {splits}"
            r = dict(name=name, bulk=bulk, stages=stages, kv_tile=kv_tile, splits=splits, smem=smem)
            r.update(blocks_per_sm=per_sm, us=us, tb_s=nbytes / us / 1e6)
            rows.append(r)
            print(
                f"{r['name']:34} {us:7.1f} us  {r['tb_s']:.2f} TB/s ({r['tb_s'] / copy:.1%}); "
                f"{smem // 1024} KB, {per_sm} per SM",
                flush=True,
            )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
