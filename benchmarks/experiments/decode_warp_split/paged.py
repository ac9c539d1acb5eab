"""On the GPU: why the warp_split decode loses on paged caches (rule_check: 8-15% slower than the split call there,
1-3% faster on contiguous ones). At the serving table's B=8 d=128 shape (bf16, 268 MB), the contiguous cache and
pages of 16 and 256 in shuffled order: the split call and warp_split candidates of deeper rings (more stages, the
same shared memory), L2 zeroed / read; bits of each candidate against the one-warp call with num_splits = W.

    python3 benchmarks/experiments/decode_warp_split/paged.py [--json FILE]
    python3 benchmarks/experiments/decode_warp_split/paged.py --once   (one call of each of three, for ncu)
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

B, NK, HQ, HKV, D = 8, 8192, 32, 8, 128
CANDIDATES = [(6, 32, 2), (4, 32, 3), (8, 16, 3), (6, 16, 3), (3, 64, 2), (2, 64, 3)]  # (W, kv tile, stages)


def config(w, kv, stages, paged):
    return KernelConfig(head_dim=D, dtype="bf16", warps=w, warp_split=w, kv_tile=kv, stages=stages, layout="bnhd",
                        seqlens=True, pack_gqa=True, paged=paged)  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--once", action="store_true")
    a = p.parse_args(argv)
    q, k0, v0 = bs.cache(B, NK, HQ, HKV, D, torch.bfloat16)
    sl = torch.full((B,), NK, dtype=torch.int32, device="cuda")
    nbytes = 2 * k0.numel() * k0.element_size()
    if a.once:  # the contiguous and page-16 warp_split calls and the page-16 split call, once each (ncu -k flash_fwd)
        kp, vp, table = bs.paged(k0, v0, 16)
        for kk, vv, t, cfg in ((k0, v0, None, config(6, 32, 2, False)), (kp, vp, table, config(6, 32, 2, True))):
            bs.ours(q, kk, vv, cache_seqlens=sl, block_table=t, config=cfg)[0]()
        bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table)[0]()
        torch.cuda.synchronize()
        return 0
    rows = []
    print(torch.cuda.get_device_name(), flush=True)
    for page in (0, 16, 256):
        k, v, table = (k0, v0, None) if not page else bs.paged(k0, v0, page)
        fns = {"split call": (None, bs.ours(q, k, v, cache_seqlens=sl, block_table=table)[0])}
        for w, kv, st in CANDIDATES:
            cfg = config(w, kv, st, bool(page))
            if cfg.fits("sm_90"):
                fns[f"W={w} kv={kv} st={st}"] = (
                    cfg,
                    bs.ours(q, k, v, cache_seqlens=sl, block_table=table, config=cfg)[0],
                )
        for label, (cfg, fn) in fns.items():
            r = dict(page=page, what=label, smem=cfg.smem_bytes if cfg else None)
            for flush in bs.FLUSHES:
                r[f"us_{flush}"] = bs.timed(fn, flush)[0] * 1e3
            if cfg is not None:
                o, lse = fn()
                one = cfg.with_(warps=1, warp_split=1)
                o1, lse1 = bs.ours(q, k, v, cache_seqlens=sl, block_table=table, config=one, num_splits=cfg.warp_split)[
                    0
                ]()
                r["bits_equal_split_call"] = bool(
                    torch.equal(o.view(torch.int16), o1.view(torch.int16))
                    and torch.equal(lse.view(torch.int32), lse1.view(torch.int32))
                )
            rows.append(r)
            print(f"page {page:3}  {label:18} zero {r['us_zero']:6.1f} us  read {r['us_read']:6.1f} us  "
                  f"({nbytes / 1e6 / r['us_read']:.2f} TB/s read)"
                  + (f"  smem {r['smem'] // 1024} KB  bits {'==' if r['bits_equal_split_call'] else '!='} split call"
                     if cfg else ""), flush=True)  # fmt: skip
        if page:
            del k, v
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
