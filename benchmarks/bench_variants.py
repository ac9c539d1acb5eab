"""The attention variants on this GPU, beside torch SDPA's FlashAttention-2 and cuDNN backends (issue: bf16, GQA,
head dims, windows, softcap). Kernel alone (flashsim.gpu.prepared_launch launches), CUDA events, medians:

    PYTHONPATH=. python3 benchmarks/bench_variants.py --json OUT.json

Rows (TFLOP/s = 4 B Hq Nq Nk d / time, halved for causal; "per visible key" rows divide by the keys actually visible):
  dtype     f16 vs bf16 (f32 P@V), 4 x 16 x 4096 x 128, non-causal; FA2 / cuDNN in the same dtype
  gqa       Hq = 16 with Hkv = 16 (MHA) and Hkv = 4 (GQA, group 4), 4 x 4096 x 128, f16; SDPA with enable_gqa
  window    N = 8192, d = 128, B = 2, H = 16, window (w, w) for w = 256, 1024, 4096 and unbounded: time per visible
            key and per visited key (whole tiles of whole query blocks: the kernel skips the tiles outside the window)
  headdim   d = 32, 64, 128, 256 at 4 x 16 x 4096, f16 and f32 P@V; FA2 / cuDNN
  softcap   softcap 30 vs none, 4 x 16 x 4096 x 128, f16 (the cost of the modelled tanh: two SFU ops a score)
"""

from __future__ import annotations

import argparse
import json

from flashsim.commands.bench import cuda_time, cuda_time_pair, sdpa_ms

REPS, ROUNDS = 20, 7


def ours(q, k, v, **opts):
    """(ms per launch, configuration) of the kernel alone on these tensors and options."""
    from flashsim import gpu

    go, _, prob = gpu.prepared_launch(q, k, v, **opts)
    return cuda_time(lambda: go(sync=False), REPS, ROUNDS)[0], prob.config.describe()


def ours_pair(a, b):
    """Two launches of ours timed in alternating rounds (flashsim.commands.bench.cuda_time_pair) so that clock drift
    weighs on both: ((ms, config) of a, (ms, config) of b); a and b are (q, k, v, options)."""
    from flashsim import gpu

    gos, cfgs = [], []
    for q, k, v, opts in (a, b):
        go, _, prob = gpu.prepared_launch(q, k, v, **opts)
        gos.append(go)
        cfgs.append(prob.config.describe())
    ta, tb = cuda_time_pair(lambda: gos[0](sync=False), lambda: gos[1](sync=False), REPS, ROUNDS)
    return [(ta[0], cfgs[0]), (tb[0], cfgs[1])]


def visited_keys(q, k, v, **opts):
    """Key-row pairs the kernel visits (whole KV tiles of whole query blocks, per head): its work, skipping
    included (flashsim.problem.Problem.kv_tile_range)."""
    from flashsim.problem import prepare

    prob = prepare(q, k, v, **opts)
    _, tiles = prob.kv_tile_range()
    return int(tiles.sum()) * prob.config.kv_tile * prob.config.block_m


def sdpa(q, k, v, causal=False, gqa=False):
    return sdpa_ms(q, k, v, causal, REPS, ROUNDS, enable_gqa=gqa)


def main(argv=None):
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    rows = []

    def row(group, name, flops, ms, config="", ref=None, **extra):
        tf = flops / (ms * 1e-3) / 1e12
        r = dict(group=group, name=name, ms=ms, tflops=tf, config=config, **extra)
        if ref:
            r.update({f"{k}_tflops": (flops / (t * 1e-3) / 1e12 if t else None) for k, t in ref.items()})
        rows.append(r)
        refs = " ".join(f"{k} {flops / (t * 1e-3) / 1e12:6.1f}" if t else f"{k}    n/a" for k, t in (ref or {}).items())
        extras = " ".join(f"{k}={v}" for k, v in extra.items())
        print(f"{group:8} {name:34} {ms:8.3f} ms {tf:7.1f} TFLOP/s  {refs}  {extras}", flush=True)

    rnd = lambda *s, dt=torch.float16: torch.randn(*s, device="cuda", dtype=dt)
    b, h, n, d = 4, 16, 4096, 128
    flops = 4.0 * b * h * n * n * d
    qkv = {dt: tuple(rnd(b, h, n, d, dt=dt) for _ in range(3)) for dt in (torch.float16, torch.bfloat16)}
    pair = ours_pair((*qkv[torch.float16], {}), (*qkv[torch.bfloat16], {}))
    for (ms, cfg), dt, name in zip(pair, (torch.float16, torch.bfloat16), ("f16", "bf16")):
        row("dtype", f"{name} f32 P@V (alternating rounds)", flops, ms, cfg, sdpa(*qkv[dt]))
    mha = qkv[torch.float16]
    gqa = (mha[0], rnd(b, 4, n, d), rnd(b, 4, n, d))
    for acc in ("f32", "f16"):
        pair = ours_pair((*mha, dict(pv_accum=acc)), (*gqa, dict(pv_accum=acc)))
        for (ms, cfg), hk, x in zip(pair, (16, 4), (mha, gqa)):
            row(
                "gqa",
                f"Hq 16 Hkv {hk} {acc} P@V (alternating)",
                flops,
                ms,
                cfg,
                sdpa(*x, gqa=hk != h) if acc == "f32" else None,
            )
    bw, nw = 2, 8192
    q, k, v = rnd(bw, h, nw, d), rnd(bw, h, nw, d), rnd(bw, h, nw, d)
    for w in (256, 1024, 4096, -1):
        visible = sum(min(nw - 1, i + w) - max(0, i - w) + 1 for i in range(nw)) if w >= 0 else nw * nw
        ms, cfg = ours(q, k, v, window_size=(w, w))
        vflops = 4.0 * bw * h * visible * d
        visited = visited_keys(q, k, v, window_size=(w, w))
        row(
            "window",
            f"N 8192 window ({w}, {w})",
            vflops,
            ms,
            cfg,
            visible_keys=visible,
            visited_keys=visited,
            ns_per_visible_key_row=ms * 1e6 / (bw * h * visible),
            ns_per_visited_key_row=ms * 1e6 / (bw * h * visited),
        )
    for d2 in (32, 64, 128, 256):
        q, k, v = rnd(b, h, n, d2), rnd(b, h, n, d2), rnd(b, h, n, d2)
        f2 = 4.0 * b * h * n * n * d2
        ref = sdpa(q, k, v)
        for acc in ("f32", "f16"):
            ms, cfg = ours(q, k, v, pv_accum=acc)
            row("headdim", f"d {d2} {acc} P@V", f2, ms, cfg, ref if acc == "f32" else None)
    q, k, v = mha
    for acc in ("f32", "f16"):
        pair = ours_pair((q, k, v, dict(pv_accum=acc)), (q, k, v, dict(pv_accum=acc, softcap=30.0)))
        for (ms, cfg), cap in zip(pair, (0, 30)):
            row("softcap", f"softcap {cap:g} {acc} P@V (alternating)", flops, ms, cfg)
    with open(args.json, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
