"""Profile the serving decode launches under Nsight Compute: what limits each decode row of the serving table.

    ncu --csv --page raw --kernel-name regex:'flash_fwd|combine' --metrics <list> python3 profile.py   (profile.sh)

Each shape of bench_serving's decode rows (and the paged 16 / 256 caches of the B=8 row) is built as the benchmark
builds it (which calls it once), called once to warm up, then once more: ncu profiles every launch of flash_fwd and
of the combine, and the last call's are the shape's. Without ncu it prints each shape's grid, split count, blocks
against the SMs (waves) and the bytes the call must read.
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from bench_serving import cache, ours, paged  # noqa: E402  (the benchmark's own shapes and builders)

SHAPES = [
    ("decode", 8, 8192, 128, None),
    ("decode B=1 Nk=32768", 1, 32768, 128, None),
    ("decode d=64", 8, 8192, 64, None),
    ("decode d=256", 8, 8192, 256, None),
    ("decode paged 16", 8, 8192, 128, 16),
    ("decode paged 256", 8, 8192, 128, 256),
]


def main() -> int:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for name, b, n, d, page in SHAPES:
        q, k, v = cache(b, n, 32, 8, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        kw = dict(cache_seqlens=sl)
        if page:
            k, v, table = paged(k, v, page)
            kw["block_table"] = table
        fn, prob = ours(q, k, v, **kw)
        fn()
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        grid = tuple(int(g) for g in prob.grid)
        blocks = int(grid[0] * grid[1] * grid[2])
        rows.append(
            dict(
                shape=name,
                grid=grid,
                num_splits=int(prob.num_splits),
                config=prob.config.describe(),
                blocks=blocks,
                sms=sms,
                waves_at_1_per_sm=blocks / sms,
                kv_bytes=2 * b * n * 8 * d * 2,
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
