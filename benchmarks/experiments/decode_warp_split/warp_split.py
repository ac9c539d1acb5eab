"""On the GPU: the decode with its keys split across a block's warps (KernelConfig.warp_split) instead of across
blocks, so that no flash_combine runs: bits and time against today's split call, FA2 and cuDNN.

    python3 benchmarks/experiments/decode_warp_split/warp_split.py [--json FILE] [--rows decode,decode d=64,...]

For each decode row of bench_serving (bf16, Hq 32, Hkv 8, cache_seqlens on the GPU), in one run: today's default
call (one-warp blocks, the heuristic's splits, then flash_combine), each warp_split candidate (W warps a block over
one ring each, kv tiles that fit W rings in a block's shared memory), FA2 and cuDNN through SDPA; CUDA-graph replays
(bench_serving.timed) under both L2 flushes. Bits: each candidate's O and LSE against the one-warp build of the same
kv tile run with num_splits = W (the call whose bits warp_split promises: flashsim.serving.blocks), bit for bit.
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
from flashsim.arch import get_arch  # noqa: E402

SMEM = get_arch("sm_90").smem_per_block_optin
WARPS = (2, 3, 4, 6, 8)
KV_TILES = (16, 32, 64, 128)
MAX_CANDIDATES = 7  # per row: the ones with the most bytes in flight per block (rings) first


def candidates(d: int) -> list[KernelConfig]:
    """warp_split configurations of head dim ``d`` whose W rings fit a block, widest rings first."""
    out = []
    for w in WARPS:
        for kv in KV_TILES:
            c = KernelConfig(head_dim=d, dtype="bf16", warps=w, warp_split=w, kv_tile=kv, stages=2, layout="bnhd",
                             seqlens=True, pack_gqa=True)  # fmt: skip
            if c.smem_bytes <= SMEM and c.smem_bytes > SMEM // 3:  # a block of at least a third of an SM's
                out.append(c)
    return sorted(out, key=lambda c: -c.smem_bytes)[:MAX_CANDIDATES]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--rows", default="decode,decode d=64,decode d=256")
    a = p.parse_args(argv)
    wanted = a.rows.split(",")
    rows = []
    print(torch.cuda.get_device_name(), flush=True)
    for name, b, n, d in bs.DECODE_SHAPES:
        if name not in wanted:
            continue
        q, k, v = bs.cache(b, n, 32, 8, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        nbytes = 2 * k.numel() * k.element_size()
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        fns = {"default": bs.ours(q, k, v, cache_seqlens=sl)[0], "FA2": bs.sdpa("FA2", qt, kt, vt)}
        fns["cuDNN"] = bs.sdpa("cuDNN", qt, kt, vt)
        for c in candidates(d):
            fns[f"W={c.warp_split} kv={c.kv_tile}"] = (c, bs.ours(q, k, v, cache_seqlens=sl, config=c)[0])
        for label, fn in fns.items():
            cfg = None
            if isinstance(fn, tuple):
                cfg, fn = fn
            r = dict(row=name, what=label, smem=cfg.smem_bytes if cfg else None)
            for flush in bs.FLUSHES:
                r[f"us_{flush}"] = bs.timed(fn, flush)[0] * 1e3
            if cfg is not None:  # bits: the same kv tile, one-warp blocks, num_splits = W
                r["bits_equal_split_call"] = bs.equals_one_warp_call(fn, q, k, v, cfg, cache_seqlens=sl)
            rows.append(r)
            tb = nbytes / 1e6
            print(f"{name:14} {label:14} zero {r['us_zero']:6.1f} us ({tb / r['us_zero']:.2f} TB/s)  read "
                  f"{r['us_read']:6.1f} us ({tb / r['us_read']:.2f} TB/s)"
                  + (f"  smem {r['smem'] // 1024} KB  bits {'==' if r['bits_equal_split_call'] else '!='} split call"
                     if cfg else ""), flush=True)  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
