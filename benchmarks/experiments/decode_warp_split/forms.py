"""On the GPU: warp_split forms beyond today's rule. (1) Why the warp_split decode loses on paged caches (rule_check:
8-15% slower than the split call there, 1-3% faster on contiguous ones): deeper rings (3 stages) at the same shared
memory. (2) Splits across blocks too (num_splits S with warp_split W: warp w of split s writes part s * W + w and
flash_combine merges the S * W parts): twice the SMs at B=8 (ring_warps: 128 blocks of 4 warps streamed 3 us faster
than 64 of 6) and a way to B=1 Nk=32768. (3) With --rows heads, the same forms at d = 64 and d = 256 (d = 256 is
1.5-3.2 us behind FA2 in the contiguous rule's form). bf16, Hq 32, Hkv 8; B=8 Nk=8192 d=128 contiguous and in
shuffled pages of 16 and 256, and B=1 Nk=32768 (--rows b8, the default); B=8 Nk=8192 at d=64 and d=256 (--rows
heads, with B=1 again); L2 zeroed / read; each candidate's bits against the one-warp (S x W)-split call.

    python3 benchmarks/experiments/decode_warp_split/forms.py [--rows b8|heads|all] [--json FILE]
    python3 benchmarks/experiments/decode_warp_split/forms.py --once   (three calls, each launched twice: ncu -c 6)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

from flashsim import KernelConfig  # noqa: E402

HQ, HKV = 32, 8
ROWS = [  # (name, B, Nk, d, page size)
    ("B=8", 8, 8192, 128, 0),
    ("B=8 paged 16", 8, 8192, 128, 16),
    ("B=8 paged 256", 8, 8192, 128, 256),
    ("B=1 Nk=32768", 1, 32768, 128, 0),
    ("d=64", 8, 8192, 64, 0),
    ("d=256", 8, 8192, 256, 0),
]
B8 = [(6, 32, 2, 1), (4, 32, 3, 1), (8, 16, 3, 1), (3, 64, 2, 1), (4, 32, 2, 2), (3, 32, 3, 2), (6, 16, 2, 2),
      (4, 32, 2, 4)]  # fmt: skip
# (W, kv tile, stages, S) per row: one block per row group (S = 1), deeper rings, then S blocks per row group
CANDIDATES = {
    "B=8": B8,
    "B=8 paged 16": B8,
    "B=8 paged 256": B8,
    "B=1 Nk=32768": [
        (3, 64, 2, 16),
        (4, 32, 2, 12),
        (6, 32, 2, 8),
        (8, 16, 3, 16),
        (4, 32, 2, 10),
        (8, 16, 3, 5),
        (6, 32, 2, 7),
    ],  # the last three: S = ceil(S_h / W) of the heuristic's 40, as a rule would take
    "d=64": [(6, 64, 2, 1), (8, 32, 3, 1), (4, 64, 3, 1), (8, 32, 2, 1), (4, 64, 2, 2), (3, 128, 2, 2)],
    "d=256": [(6, 16, 2, 1), (4, 16, 3, 1), (3, 32, 2, 1), (4, 16, 2, 2), (3, 16, 3, 2), (2, 32, 2, 2)],
}
ROW_SETS = {"b8": ROWS[:4], "heads": ROWS[3:], "all": ROWS}


def config(d, w, kv, stages, paged):
    return KernelConfig(head_dim=d, dtype="bf16", warps=w, warp_split=w, kv_tile=kv, stages=stages, layout="bnhd",
                        seqlens=True, pack_gqa=True, paged=paged)  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--once", action="store_true")
    p.add_argument(
        "--rows", choices=sorted(ROW_SETS), default="b8", help="b8: B=8 d=128 and B=1; heads: B=1, d=64, d=256"
    )
    a = p.parse_args(argv)
    print(torch.cuda.get_device_name(), flush=True)
    if a.once:  # the contiguous and page-16 warp_split calls, the page-16 split call (bs.ours launches each twice)
        q, k0, v0 = bs.cache(8, 8192, HQ, HKV, 128, torch.bfloat16)
        sl = torch.full((8,), 8192, dtype=torch.int32, device="cuda")
        kp, vp, table = bs.paged(k0, v0, 16)
        for kk, vv, t, cfg in (
            (k0, v0, None, config(128, 6, 32, 2, False)),
            (kp, vp, table, config(128, 6, 32, 2, True)),
        ):
            bs.ours(q, kk, vv, cache_seqlens=sl, block_table=t, config=cfg)[0]()
        bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table)[0]()
        torch.cuda.synchronize()
        return 0
    rows = []
    for name, b, n, d, page in ROW_SETS[a.rows]:
        q, k, v = bs.cache(b, n, HQ, HKV, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        nbytes = 2 * k.numel() * k.element_size()
        table = None
        if page:
            k, v, table = bs.paged(k, v, page)
        fns = {"default": (None, 1, bs.ours(q, k, v, cache_seqlens=sl, block_table=table)[0])}
        for w, kv, st, s in CANDIDATES[name]:
            cfg = config(d, w, kv, st, bool(page))
            if cfg.fits("sm_90"):
                fn = bs.ours(q, k, v, cache_seqlens=sl, block_table=table, config=cfg, num_splits=s)[0]
                fns[f"W={w} kv={kv} st={st} S={s}"] = (cfg, s, fn)
        for label, (cfg, s, fn) in fns.items():
            r = dict(row=name, what=label, smem=cfg.smem_bytes if cfg else None)
            for flush in bs.FLUSHES:
                r[f"us_{flush}"] = bs.timed(fn, flush)[0] * 1e3
            if cfg is not None:  # the bits of the one-warp call of the same tiles with S x W splits
                r["bits_equal_split_call"] = bs.equals_one_warp_call(fn, q, k, v, cfg, s, cache_seqlens=sl,
                                                                     block_table=table)  # fmt: skip
            rows.append(r)
            print(f"{name:14} {label:22} zero {r['us_zero']:6.1f} us  read {r['us_read']:6.1f} us  "
                  f"({nbytes / 1e6 / r['us_read']:.2f} TB/s read)"
                  + (f"  smem {r['smem'] // 1024} KB  bits {'==' if r['bits_equal_split_call'] else '!='} split call"
                     if cfg else ""), flush=True)  # fmt: skip
        del q, k, v, fns
        torch.cuda.empty_cache()
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
