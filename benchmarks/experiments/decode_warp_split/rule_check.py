"""On the GPU: flashsim.tuning's warp_split decode rule on held-out shapes (none of them a row of the serving table,
which chose the rule): the default call (the rule's warp_split form where it applies) against the call the default
was before (one-warp blocks, the heuristic's splits, then flash_combine), FA2 and cuDNN, under both L2 flushes, with
the default's bits against the one-warp call of the same kv tile with num_splits = W.

    python3 benchmarks/experiments/decode_warp_split/rule_check.py [--json FILE]

Shapes: bf16, Nq 1, cache_seqlens on the GPU; B, Nk, Hq, Hkv, d and the page size vary (pages shuffled).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

SHAPES = [  # (name, B, Nk, Hq, Hkv, d, page size or 0); the rule's choice on 132 SMs in the comment
    ("B=6", 6, 8192, 32, 8, 128, 0),  # 7 warps, 16-key tiles
    ("B=8 Nk=4096", 8, 4096, 32, 8, 128, 0),  # 6 x 32
    ("B=12", 12, 8192, 32, 8, 128, 0),  # 4 x 32
    ("B=16", 16, 8192, 32, 8, 128, 0),  # 3 x 64
    ("B=2 Hkv=32", 2, 8192, 32, 32, 128, 0),  # group 1: 6 x 32
    ("B=8 paged 16", 8, 8192, 32, 8, 128, 16),  # 6 x 32
    ("B=8 paged 256", 8, 8192, 32, 8, 128, 256),  # 6 x 32
    ("B=16 d=64 Nk=4096", 16, 4096, 32, 8, 64, 0),  # 3 x 128
    ("B=12 d=256", 12, 8192, 32, 8, 256, 0),  # 4 x 16
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    rows = []
    print(torch.cuda.get_device_name(), flush=True)
    for name, b, n, hq, hk, d, page in SHAPES:
        q, k, v = bs.cache(b, n, hq, hk, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        nbytes = 2 * k.numel() * k.element_size()
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        sdpa = {"FA2": bs.sdpa("FA2", qt, kt, vt), "cuDNN": bs.sdpa("cuDNN", qt, kt, vt)}
        table = None
        if page:
            k, v, table = bs.paged(k, v, page)
        default, prob = bs.ours(q, k, v, cache_seqlens=sl, block_table=table)
        cfg = prob.config
        splits = bs.split_call_splits(q, k, v, sl, table)
        before, _ = bs.ours(q, k, v, cache_seqlens=sl, block_table=table, num_splits=splits)
        fns = {"default": default, f"split call ({splits})": before, **sdpa}
        r = dict(row=name, shape=dict(B=b, Nk=n, Hq=hq, Hkv=hk, d=d, page=page), config=cfg.describe(),
                 warp_split=cfg.warp_split, kv_tile=cfg.kv_tile, split_call_splits=splits, us={})  # fmt: skip
        if cfg.warp_split > 1:  # the rule applied: its bits are the one-warp call's with num_splits = W
            r["bits_equal_split_call"] = bs.equals_one_warp_call(
                default, q, k, v, cfg, cache_seqlens=sl, block_table=table
            )
        for label, fn in fns.items():
            r["us"][label] = {flush: bs.timed(fn, flush)[0] * 1e3 for flush in bs.FLUSHES}
        rows.append(r)
        rule = f"W={cfg.warp_split} kv={cfg.kv_tile}" if cfg.warp_split > 1 else "rule not applied"
        print(f"{name:18} {rule:18} " + "  ".join(
            f"{label} {t['zero']:.1f}/{t['read']:.1f}" for label, t in r["us"].items())
            + f"  us (zero/read), {nbytes / 1e6:.0f} MB"
            + (f"  bits {'==' if r['bits_equal_split_call'] else '!='} W-split call" if "bits_equal_split_call" in r
               else ""), flush=True)  # fmt: skip
        del q, k, v, qt, kt, vt, sdpa, fns, default, before
        torch.cuda.empty_cache()
    wins = [r for r in rows if r["warp_split"] > 1]
    for flush in bs.FLUSHES:
        ratio = [r["us"]["default"][flush] / r["us"][f"split call ({r['split_call_splits']})"][flush] for r in wins]
        if ratio:
            print(f"{flush}: default / split call over the {len(ratio)} rows the rule took: geomean "
                  f"{float(np.exp(np.mean(np.log(ratio)))):.3f}, worst {max(ratio):.3f}")  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
