"""On the GPU: warp_split forms for paged caches on held-out shapes. forms.py found, at B=8 d=128 (the serving table's
paged rows), two forms faster than the split call on pages of 16 and of 256 under both L2 flushes: 8 warps of
16-key tiles with 3-stage rings, and 2 blocks of 4 warps per row group; the rule's contiguous form (6 warps of 32-key
2-stage rings) lost by 8-15% there. Which of them, as a rule over shapes, holds on shapes that chose nothing? Each
candidate is built from the split call's heuristic count S_h by one rule, never by hand per shape:

  deep    W = min(S_h, 8) warps, 3-stage rings, the widest kv tile whose rings fit a block
  full    W = 8 warps, 3-stage rings, the widest kv tile that fits
  quads   W = 4 warps, 2-stage rings, the widest kv tile that fits

each with S = ceil(S_h / W) blocks per row group (one where S_h <= W), against the split call (one-warp blocks, S_h
splits, then flash_combine; the paged default before), beside the default call (flashsim.tuning's paged rule, "full"
where the heuristic takes 2-8 splits, else the split call) and, on the same cache contiguous, the default call, FA2
and cuDNN; L2 zeroed / read; each candidate's bits against the one-warp call of the same tiles with its S x W
splits.

    python3 benchmarks/experiments/decode_warp_split/paged_check.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

from flashsim.gpu import runtime as rt  # noqa: E402
from flashsim.serving.problem import warp_split_form  # noqa: E402
from flashsim.serving.splits import resident_slots  # noqa: E402

SHAPES = [  # (name, B, Nk, Hq, Hkv, d, page size): none of them a row forms.py or the serving table timed
    ("B=4 Nk=16384 p16", 4, 16384, 32, 8, 128, 16),
    ("B=6 p64", 6, 8192, 32, 8, 128, 64),
    ("B=12 p16", 12, 8192, 32, 8, 128, 16),
    ("B=16 p256", 16, 8192, 32, 8, 128, 256),
    ("B=8 Nk=4096 p16", 8, 4096, 32, 8, 128, 16),
    ("B=8 d=64 p16", 8, 8192, 32, 8, 64, 16),
    ("B=8 d=256 p16", 8, 8192, 32, 8, 256, 16),
    ("B=2 Hkv=32 p64", 2, 8192, 32, 32, 128, 64),
    ("B=1 Nk=32768 p16", 1, 32768, 32, 8, 128, 16),
]


def candidates(one, s_h):
    """{label: (config, S)} of the three rules for the one-warp paged decode ``one`` the heuristic split S_h ways."""
    out = {}
    for label, w, stages in (("deep", min(s_h, 8), 3), ("full", 8, 3), ("quads", 4, 2)):
        s = math.ceil(s_h / w)
        if w < 2:
            continue
        cfg = warp_split_form(one.with_(stages=stages), rt.current_arch(), w)
        if cfg is not None and s * w <= 64:
            out[f"{label} W={w} kv={cfg.kv_tile} st={stages} S={s}"] = (cfg, s)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    print(torch.cuda.get_device_name(), flush=True)
    rows = []
    for name, b, n, hq, hk, d, page in SHAPES:
        q, k, v = bs.cache(b, n, hq, hk, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        nbytes = 2 * k.numel() * k.element_size()
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        ref = {"ours contiguous": bs.ours(q, k, v, cache_seqlens=sl)[0], "FA2 contiguous": bs.sdpa("FA2", qt, kt, vt),
               "cuDNN contiguous": bs.sdpa("cuDNN", qt, kt, vt)}  # fmt: skip
        kp, vp, table = bs.paged(k, v, page)
        s_h = bs.split_call_splits(q, kp, vp, sl, table)
        split_fn, prob = bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table, num_splits=s_h)
        one = prob.config
        fns = {f"split call ({s_h})": (None, s_h, split_fn)}
        default_fn, chosen = bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table)
        c = chosen.config
        fns[f"default (W={c.warp_split} kv={c.kv_tile} st={c.stages} S={chosen.num_splits})"] = (None, 0, default_fn)
        for label, (cfg, s) in candidates(one, s_h).items():
            fns[label] = (cfg, s, bs.ours(q, kp, vp, cache_seqlens=sl, block_table=table, config=cfg, num_splits=s)[0])
        fns.update({lbl: (None, 0, fn) for lbl, fn in ref.items()})
        for label, (cfg, s, fn) in fns.items():
            r = dict(row=name, what=label, shape=dict(B=b, Nk=n, Hq=hq, Hkv=hk, d=d, page=page), split_call_splits=s_h)
            for flush in bs.FLUSHES:
                r[f"us_{flush}"] = bs.timed(fn, flush)[0] * 1e3
            if cfg is not None:
                r.update(smem=cfg.smem_bytes, resident_slots=resident_slots(cfg, rt.current_arch(), rt.sm_count()),
                         blocks=s * b * hk)  # fmt: skip
                r["bits_equal_split_call"] = bs.equals_one_warp_call(fn, q, kp, vp, cfg, s, cache_seqlens=sl,
                                                                     block_table=table)  # fmt: skip
            rows.append(r)
            extra = ""
            if cfg is not None:
                waves = math.ceil(r["blocks"] / r["resident_slots"])
                extra = (f"  smem {r['smem'] // 1024} KB, {r['blocks']} blocks ({waves} wave{'s' * (waves > 1)})"
                         f"  bits {'==' if r['bits_equal_split_call'] else '!='} split call")  # fmt: skip
            print(f"{name:18} {label:28} zero {r['us_zero']:6.1f}  read {r['us_read']:6.1f} us  "
                  f"({nbytes / 1e6 / r['us_read']:.2f} TB/s read){extra}", flush=True)  # fmt: skip
        del q, k, v, kp, vp, qt, kt, vt, ref, fns
        torch.cuda.empty_cache()
    for rule in ("default", "deep", "full", "quads"):
        for flush in bs.FLUSHES:
            ratios = []
            for name in dict.fromkeys(r["row"] for r in rows):
                mine = [r for r in rows if r["row"] == name]
                base = next(r for r in mine if r["what"].startswith("split call"))
                cand = next((r for r in mine if r["what"].startswith(rule + " ")), None)
                if cand is not None:
                    ratios.append((cand[f"us_{flush}"] / base[f"us_{flush}"], name))
            if ratios:
                geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
                worst = max(ratios)
                print(
                    f"{rule:5} {flush}: / split call over {len(ratios)} shapes: geomean {geo:.3f}, "
                    f"worst {worst[0]:.3f} ({worst[1]}), best {min(ratios)[0]:.3f} ({min(ratios)[1]})"
                )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
