"""The serving decode rows timed alone, for an A/B of two kernels (varlen_profile/ab.sh runs it alternately with the
checkout's kernel and an earlier one, each in a fresh process):

    RUN="benchmarks/experiments/decode_bulk/decode_ab.py" OUT=DIR BEFORE=<kernel/flash_fwd.cu> \
        bash benchmarks/experiments/varlen_profile/ab.sh

Each row: the unchecked call (flash_fwd and flash_combine) replayed in a CUDA graph (bench_serving.timed), bf16, Hq
32, Hkv 8, the split count of the default heuristic; with --others, FA2 and cuDNN (torch SDPA) on the same caches.
One line per row; --out DIR also writes DIR/decode_ab.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

# (name, B, Nk, d, page size or None): the serving table's decode rows, then its B=8 row in pages of 16
SHAPES = [(*shape, None) for shape in bs.DECODE_SHAPES] + [("decode paged 16", *bs.DECODE_SHAPES[0][1:], 16)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out")
    p.add_argument("--others", action="store_true", help="FA2 and cuDNN beside each row")
    a = p.parse_args(argv)
    rows = []
    for name, b, n, d, page in SHAPES:
        q, k, v = bs.cache(b, n, 32, 8, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        if page:
            kp, vp, table = bs.paged(k, v, page)
            fn, prob = bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table)
        else:
            fn, prob = bs.ours(q, k, v, cache_seqlens=sl)
        r = dict(name=name, splits=prob.num_splits, us=bs.timed(fn)[0] * 1e3)
        line = f"{name:22} {r['us']:7.1f} us (splits {r['splits']})"
        if a.others:
            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            for other in ("FA2", "cuDNN"):
                r[other] = bs.timed(bs.sdpa(other, qt, kt, vt))[0] * 1e3
                line += f"  {other} {r[other]:.1f}"
        rows.append(r)
        print(line, flush=True)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "decode_ab.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
