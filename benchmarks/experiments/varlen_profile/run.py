"""Where varlen loses against the dense kernel (on a GPU): bench_serving.py's varlen row taken apart.

    python3 benchmarks/experiments/varlen_profile/run.py --out DIR

The problem is bench_serving.py's (16 sequences of lengths drawn from 1..4096 with seed 0, causal, H=16, d=128, f16,
bnhd) and its comparator (the dense kernel on one sequence of N = sqrt(sum n_i^2), rounded to 128: the same causal
work). Timed, each a CUDA graph's replay (bench_serving.timed), in one run:
  whole       ours on the whole batch (the public call, indices unchecked as in the bench row)
  fa2         FlashAttention-2's varlen kernel on the same batch: flash_attn_varlen_func where flash_attn is
              importable, else the copy torch builds in (torch.ops.aten._flash_attention_forward with the offsets)
  dense       ours and FA2 (SDPA) on the dense sequence of equal work
  alone       ours on each sequence by itself (a batch of one): their sum is the time without any overlap between
              sequences; the longest alone bounds the whole batch's time from below
  sorted      ours on the same lengths sorted longest first (the kernel's block order is by q block; a change here
              says the order of sequences matters)
  tilings     (--tilings W x M x KV x S,...) the whole batch and the dense sequence under other tilings (warps, m16
              tiles a warp, kv_tile, stages): a 64-row q block halves what a sequence's last block and the diagonal
              leave unused, at twice the blocks
Each row's TFLOP/s counts the causal pairs' work (4 d H per pair). Writes varlen_profile.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import bench_serving as bs  # noqa: E402

H, D = 16, 128


def varlen_call(lens, seed=0, config=None):
    """A function running ours on sequences of ``lens`` (its inputs made once; ``config`` a tiling other than the
    call's default), and the causal work in FLOPs."""
    import torch

    import flashsim

    cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32), device="cuda")
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn((int(sum(lens)), H, D), generator=g, device="cuda").half() for _ in range(3))
    top = int(max(lens))
    kw = dict(causal=True, check_indices=False, check_overflow=False, config=config)

    def fn():
        return flashsim.gpu.attention_varlen(q, k, v, cu, cu, top, top, **kw)

    return fn, (q, k, v, cu, top), 4.0 * D * H * sum(bs._pairs_causal(int(x)) for x in lens)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tilings", default="", help="comma-separated WxMxKVxS tilings to time besides the default")
    ap.add_argument("--quick", action="store_true", help="the whole batch and the dense sequence alone (an A/B round)")
    a = ap.parse_args(argv)
    import torch

    a.out.mkdir(parents=True, exist_ok=True)
    lens = bs.varlen_lengths()
    res = dict(gpu=torch.cuda.get_device_name(), lengths=lens.tolist(), H=H, d=D)

    fn, (q, k, v, cu, top), flops = varlen_call(lens)
    ms, how = bs.timed(fn)
    res["whole"] = dict(us=ms * 1e3, tflops=flops / ms / 1e9, method=how)
    if a.quick:
        return _quick(a, res, lens, flops)
    try:
        from flash_attn import flash_attn_varlen_func

        ms, how = bs.timed(lambda: flash_attn_varlen_func(q, k, v, cu, cu, top, top, causal=True))
        res["fa2"] = dict(us=ms * 1e3, tflops=flops / ms / 1e9, method=how)
    except ImportError:
        # FA2's varlen kernel as torch builds it in (the flash backend of SDPA, called with the sequences' offsets)
        def fa2_aten():
            return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, top, top, 0.0, True, False)[0]

        ms, how = bs.timed(fa2_aten)
        via = "torch.ops.aten._flash_attention_forward"
        res["fa2"] = dict(us=ms * 1e3, tflops=flops / ms / 1e9, method=how, via=via)

    go, n, dense_flops, dq = _dense(lens)
    import flashsim

    ms = bs._do_bench(lambda: go(sync=False))
    res["dense"] = dict(N=n, us=ms * 1e3, tflops=dense_flops / ms / 1e9)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def fa2_dense():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(dq, dq, dq, is_causal=True)

    ms = bs._do_bench(fa2_dense)
    res["dense_fa2"] = dict(N=n, us=ms * 1e3, tflops=dense_flops / ms / 1e9)

    alone = []
    for x in lens:
        f1, _, fl1 = varlen_call([int(x)])
        ms, _ = bs.timed(f1)
        alone.append(dict(n=int(x), us=ms * 1e3, tflops=fl1 / ms / 1e9))
    res["alone"] = alone
    res["alone_sum_us"] = sum(r["us"] for r in alone)
    order = sorted(lens.tolist(), reverse=True)
    fs, _, _ = varlen_call(order)
    ms, how = bs.timed(fs)
    res["sorted"] = dict(us=ms * 1e3, tflops=flops / ms / 1e9, method=how)

    from flashsim.config import KernelConfig

    res["tilings"] = []
    for spec in filter(None, a.tilings.split(",")):
        tiling = dict(zip(("warps", "m_tiles", "kv_tile", "stages"), map(int, spec.split("x"))))
        cfg = KernelConfig.default("sm_90", head_dim=D, causal=True, dtype="f16")
        row = dict(tiling=spec)
        try:
            fv, _, _ = varlen_call(lens, config=cfg.with_(layout="bnhd", **tiling))
            ms, _ = bs.timed(fv)
            row["whole"] = dict(us=ms * 1e3, tflops=flops / ms / 1e9)
            gd, _, _ = flashsim.gpu.prepared_launch(dq, dq, dq, causal=True, config=cfg.with_(**tiling))
            gd(sync=True)
            ms = bs._do_bench(lambda gd=gd: gd(sync=False))
            row["dense"] = dict(us=ms * 1e3, tflops=dense_flops / ms / 1e9)
        except Exception as exc:  # noqa: BLE001 - a tiling the GPU cannot hold is reported, not fatal
            row["error"] = f"{type(exc).__name__}: {exc}"
        res["tilings"].append(row)

    w = res["whole"]
    lines = [
        f"{res['gpu']}: varlen 16 x 1..4096 causal, H={H} d={D} f16 (lengths {lens.tolist()})",
        f"ours, whole batch      {w['us']:9.1f} us  {w['tflops']:6.1f} TFLOP/s  ({w['method']})",
        f"ours, sorted lengths   {res['sorted']['us']:9.1f} us  {res['sorted']['tflops']:6.1f} TFLOP/s",
    ]
    if "us" in res["fa2"]:
        f2 = res["fa2"]
        lines.append(
            f"FA2 varlen             {f2['us']:9.1f} us  {f2['tflops']:6.1f} TFLOP/s  "
            f"(FA2 varlen / FA2 dense: {f2['tflops'] / res['dense_fa2']['tflops']:.3f}x)"
        )
    lines += [
        f"ours dense N={n}      {res['dense']['us']:9.1f} us  {res['dense']['tflops']:6.1f} TFLOP/s  "
        f"(whole / dense: {w['tflops'] / res['dense']['tflops']:.3f}x)",
        f"FA2 dense (SDPA)       {res['dense_fa2']['us']:9.1f} us  {res['dense_fa2']['tflops']:6.1f} TFLOP/s",
        f"ours, each sequence alone: sum {res['alone_sum_us']:.1f} us, longest alone "
        f"{max(r['us'] for r in alone):.1f} us",
    ]
    lines += [
        f"  n={r['n']:5d}  {r['us']:8.1f} us  {r['tflops']:6.1f} TFLOP/s" for r in sorted(alone, key=lambda r: r["n"])
    ]
    for r in res["tilings"]:
        if "error" in r:
            lines.append(f"tiling {r['tiling']}: {r['error']}")
            continue
        lines.append(
            f"tiling {r['tiling']:10s} whole {r['whole']['us']:8.1f} us {r['whole']['tflops']:6.1f} TFLOP/s, dense "
            f"{r['dense']['us']:8.1f} us {r['dense']['tflops']:6.1f}; whole / default dense "
            f"{r['whole']['tflops'] / res['dense']['tflops']:.3f}x"
        )
    text = "\n".join(lines)
    print(text)
    (a.out / "varlen_profile.json").write_text(json.dumps(res, indent=1))
    (a.out / "varlen_profile.txt").write_text(text + "\n")
    return 0


def _dense(lens):
    """(the launch of the dense sequence of equal causal work, its N, its FLOPs, its q = k = v)."""
    import torch

    import flashsim

    n = bs.dense_equal_work(lens)
    dq = torch.randn((1, H, n, D), device="cuda").half()
    go, _, _ = flashsim.gpu.prepared_launch(dq, dq, dq, causal=True)
    go(sync=True)
    return go, n, 4.0 * D * H * bs._pairs_causal(n), dq


def _quick(a, res, lens, flops) -> int:
    go, n, dense_flops, _ = _dense(lens)
    ms = bs._do_bench(lambda: go(sync=False))
    res["dense"] = dict(N=n, us=ms * 1e3, tflops=dense_flops / ms / 1e9)
    w, dn = res["whole"], res["dense"]
    text = (
        f"{res['gpu']}: varlen {w['us']:.1f} us {w['tflops']:.1f} TFLOP/s, dense N={n} {dn['us']:.1f} us "
        f"{dn['tflops']:.1f} TFLOP/s, varlen / dense {w['tflops'] / dn['tflops']:.3f}x"
    )
    print(text)
    (a.out / "varlen_quick.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
