"""On the GPU: where the paged rule's form (8 warps of 16-key 3-stage rings, one block per row group) beats the split
call, over the number of row groups. paged_check.py found it faster at 64 row groups (B=8, and B=2 with 32 KV heads)
and at 128 with pages of 256, but slower at 48 (B=6 pages of 64: 7% / 14%) and at 96 (B=12 pages of 16: 5% / 3%),
where 4 warps of 32-key 3-stage rings were the fastest form. This sweeps B (row groups = B x 8 KV heads) at pages of
16, 64 and 256, Nk 8192 and 4096, d=128 bf16, timing the split call (the heuristic's S_h one-warp splits, then
flash_combine), the two forms (S = 1 block a row group) and the default on the same cache contiguous; L2 zeroed /
read; each form's bits against the one-warp call with W splits. Then d=256 on contiguous caches (forms.py --rows
heads: 2 blocks of 4 warps of 16-key tiles a row group, 191.1 / 180.4 us at B=8 against the rule's 6 warps in one
block, 194.2 / 183.9): that form beside the default and the split call at B 4 / 8 / 12 / 16.

    python3 benchmarks/experiments/decode_warp_split/paged_sweep.py [--json FILE]
    python3 benchmarks/experiments/decode_warp_split/paged_sweep.py --once B   (for ncu: at pages of 16, Nk 8192, the
        split call, the default, 8x16x3 and 4x32x3 built, which launches each once: four flash_fwd launches)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

from flashsim.gpu import runtime as rt  # noqa: E402
from flashsim.serving.problem import warp_split_form  # noqa: E402

SHAPES = [  # (B, Nk, page size); Hq 32, Hkv 8, d 128
    *[(b, 8192, 16) for b in (5, 6, 7, 8, 9, 10, 11, 12, 14, 16)],
    *[(b, 8192, 256) for b in (6, 8, 10, 12, 16)],
    *[(b, 8192, 64) for b in (8, 10, 12)],
    *[(b, 4096, 16) for b in (6, 10, 12, 16)],
]
FORMS = (("8x16x3", 8, 3), ("4x32x3", 4, 3))  # (label, warps, stages): the widest kv tile whose rings fit
D256 = [(4, 16384), (8, 8192), (12, 8192), (16, 8192)]  # (B, Nk), contiguous, d=256


def time_forms(rows, name, fns, chosen, q, k, v, meta, **kw):
    """Time each of ``fns`` ({label: (warp_split config or None, S, fn)}) under both flushes into ``rows``, each
    form's bits against the one-warp call with its S x W splits (``kw``: cache_seqlens / block_table), one line
    printed."""
    line = f"{name:16} S_h {meta['split_call_splits']:2}  {meta['row_groups']:3} row groups"
    for label, (cfg, s, fn) in fns.items():
        r = dict(row=name, what=label, **meta)
        r.update({f"us_{f}": bs.timed(fn, f)[0] * 1e3 for f in bs.FLUSHES})
        if label == "default":
            c = chosen.config
            r["default_form"] = f"W={c.warp_split} kv={c.kv_tile} st={c.stages} S={chosen.num_splits}"
        if cfg is not None:
            r["bits_equal_split_call"] = bs.equals_one_warp_call(fn, q, k, v, cfg, s, **kw)
        rows.append(r)
        bits = "" if cfg is None else ("" if r["bits_equal_split_call"] else " BITS DIFFER")
        line += f" | {label.split(' (')[0]} {r['us_zero']:.1f} / {r['us_read']:.1f}{bits}"
    print(line, flush=True)


def paged_forms(q, kp, vp, sl, table):
    """(S_h, the default call's problem, {label: (config or None, S, fn)}): the split call, the default and FORMS on
    the paged cache."""
    s_h = bs.split_call_splits(q, kp, vp, sl, table)
    split_fn, prob = bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table, num_splits=s_h)
    default_fn, chosen = bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table)
    fns = {f"split call ({s_h})": (None, 1, split_fn), "default": (None, 1, default_fn)}
    for label, w, stages in FORMS:
        cfg = warp_split_form(prob.config.with_(stages=stages), rt.current_arch(), w)
        if cfg is not None:
            fns[label] = (cfg, 1, bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table, config=cfg, num_splits=1)[0])
    return s_h, chosen, fns


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--once", type=int, metavar="B")
    a = p.parse_args(argv)
    print(torch.cuda.get_device_name(), flush=True)
    if a.once:
        q, k, v = bs.cache(a.once, 8192, 32, 8, 128, torch.bfloat16)
        sl = torch.full((a.once,), 8192, dtype=torch.int32, device="cuda")
        kp, vp, table = bs.paged(k, v, 16)
        _, chosen, fns = paged_forms(q, kp, vp, sl, table)  # bs.ours launches each call once as it builds it
        c = chosen.config
        print(f"B={a.once} p16: launched {', '.join(fns)} (the default: W={c.warp_split} kv={c.kv_tile} st={c.stages})")
        return 0
    rows = []
    for b, n, page in SHAPES:
        q, k, v = bs.cache(b, n, 32, 8, 128, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        kp, vp, table = bs.paged(k, v, page)
        s_h, chosen, fns = paged_forms(q, kp, vp, sl, table)
        fns["contiguous default"] = (None, 1, bs.ours(q, k, v, cache_seqlens=sl)[0])
        meta = dict(B=b, Nk=n, page=page, d=128, split_call_splits=s_h, row_groups=b * 8)
        time_forms(rows, f"B={b} Nk={n} p{page}", fns, chosen, q, kp, vp, meta, cache_seqlens=sl, block_table=table)
        del q, k, v, kp, vp, fns
        torch.cuda.empty_cache()
    for b, n in D256:
        q, k, v = bs.cache(b, n, 32, 8, 256, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        s_h = bs.split_call_splits(q, k, v, sl)
        split_fn, prob = bs.ours(q, k, v, cache_seqlens=sl, num_splits=s_h)
        default_fn, chosen = bs.ours(q, k, v, cache_seqlens=sl)
        cfg = warp_split_form(prob.config, rt.current_arch(), 4)
        fns = {f"split call ({s_h})": (None, 1, split_fn), "default": (None, 1, default_fn)}
        if cfg is not None:
            fns[f"4x{cfg.kv_tile}x2 S2"] = (cfg, 2, bs.ours(q, k, v, cache_seqlens=sl, config=cfg, num_splits=2)[0])
        meta = dict(B=b, Nk=n, page=0, d=256, split_call_splits=s_h, row_groups=b * 8)
        time_forms(rows, f"B={b} Nk={n} d=256", fns, chosen, q, k, v, meta, cache_seqlens=sl)
        del q, k, v, fns
        torch.cuda.empty_cache()
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
