"""On the GPU, small: warp_split decode calls (contiguous and paged, rows of different lengths, an empty row, d 64 /
128 / 256) each against the one-warp call with num_splits = W, bit for bit; small enough to run under
compute-sanitizer (memcheck, racecheck).

    compute-sanitizer --tool racecheck python3 benchmarks/experiments/decode_warp_split/small_calls.py
"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import torch

import flashsim
from flashsim import KernelConfig
from flashsim.emulator import serving as emulated


def host(x):
    """A CUDA tensor as numpy (bf16 through ml_dtypes)."""
    if x.dtype == torch.bfloat16:
        return x.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.cpu().numpy()


def bits(x):
    return np.asarray(x).view(np.uint16 if np.asarray(x).dtype.itemsize == 2 else np.uint32)


CASES = [  # (d, W, kv tile, page size or 0)
    (128, 6, 32, 0),
    (128, 4, 32, 0),
    (128, 2, 64, 0),
    (128, 3, 64, 16),
    (64, 6, 32, 0),  # (a W-split call takes at most one split per key tile: 8 here)
    (256, 3, 32, 256),
]


def main() -> int:
    g = torch.Generator(device="cuda").manual_seed(1)
    lens = torch.tensor([200, 0, 33, 256], dtype=torch.int32, device="cuda")
    b, hq, hk, n = 4, 8, 2, 256
    bad = 0
    for d, w, kv, page in CASES:
        q = torch.randn((b, 1, hq, d), generator=g, device="cuda").to(torch.bfloat16)
        k = torch.randn((b, n, hk, d), generator=g, device="cuda").to(torch.bfloat16)
        v = torch.randn((b, n, hk, d), generator=g, device="cuda").to(torch.bfloat16)
        table = None
        if page:
            per = n // page
            perm = torch.randperm(b * per, generator=g, device="cuda").to(torch.int32)
            table = perm.reshape(b, per)
            kp, vp = (
                torch.empty_like(k.reshape(b * per, page, hk, d)),
                torch.empty_like(v.reshape(b * per, page, hk, d)),
            )
            kp[perm.long()] = k.reshape(b * per, page, hk, d)
            vp[perm.long()] = v.reshape(b * per, page, hk, d)
            k, v = kp, vp
        cfg = KernelConfig(head_dim=d, dtype="bf16", warps=w, warp_split=w, kv_tile=kv, stages=2, layout="bnhd",
                           seqlens=True, pack_gqa=True, paged=bool(page))  # fmt: skip
        o, lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=lens, block_table=table, config=cfg)
        one = cfg.with_(warps=1, warp_split=1)
        o1, lse1 = flashsim.gpu.attention_with_kvcache(
            q, k, v, cache_seqlens=lens, block_table=table, config=one, num_splits=w
        )
        same = torch.equal(o.view(torch.int16), o1.view(torch.int16)) and torch.equal(
            lse.view(torch.int32), lse1.view(torch.int32)
        )
        bad += not same
        print(f"d={d} W={w} kv={kv} page={page}: bits {'==' if same else '!='} the {w}-split call", flush=True)
        eo, el = emulated.attention_with_kvcache(
            host(q),
            host(k),
            host(v),
            cache_seqlens=host(lens),
            block_table=None if table is None else host(table),
            config=cfg,
            arch="sm_90",
        )
        for label, (oo, ll) in (("warp_split", (o, lse)), (f"{w}-split", (o1, lse1))):
            eq = np.array_equal(bits(host(oo)), bits(eo)) and np.array_equal(bits(host(ll)), bits(el))
            print(f"  {label} call {'==' if eq else '!='} the emulator", flush=True)
        if not same:  # where they differ
            diff = (o.float() - o1.float()).abs()
            rows = (diff.amax(dim=(1, 3)) > 0).nonzero().tolist()
            print(
                f"  max |O - O_split| {diff.max().item():.3g}, {int((diff > 0).sum())} elements; (b, h) rows differing "
                f"{rows[:12]}; lse max diff {(lse - lse1).abs().nan_to_num().max().item():.3g}",
                flush=True,
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
