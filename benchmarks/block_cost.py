"""GPU: the fixed cost of one CUDA block of the attention kernel, in KV-tile times, and what a causal tile costs.

    PYTHONPATH=. python3 benchmarks/block_cost.py [--json out.json] [--rounds 7]

Why: short launches (16,16,1024,128) run below the N = 4096 rate and causal below the non-causal rate per FLOP; both
lose to work that does not scale with a block's KV tiles (Q's load, the pipeline's first tiles, the epilogue, the
wave tail) or to what a causal tile adds (the mask, blocks of unequal length).

Method: the same 2048 blocks (4 x 16 heads x 4096 queries, 128-row blocks at d = 128) against Nk = 256 ... 4096 keys,
so that blocks differ only in the KV tiles T each runs (Nk / kv_tile); the kernel alone, timed in alternating
rounds (flashsim.commands.bench.cuda_time_alternating). With dynamic block scheduling the time is the total work
over the concurrency, so it is fitted as time = beta (x + T) (least squares): x is a block's fixed cost in tile times,
beta / 2048 a tile's share. The causal problem 4 x 16 x 4096 x 128 runs blocks of T_i = 1 .. 64 tiles; the fit
predicts it as beta * mean_i(x + T_i), and measured / predicted is what its tiles cost beyond full ones.
"""

from __future__ import annotations

import argparse
import json
import sys

B, H, NQ, D = 4, 16, 4096, 128
NKS = (256, 512, 1024, 2048, 4096)


def main(argv=None) -> int:
    import numpy as np
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import cuda_time_alternating, kernel_alone
    from flashsim.config import KernelConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args(argv)
    torch.manual_seed(0)
    rnd = lambda n: torch.randn(B, H, n, D, device="cuda", dtype=torch.float16)
    q = rnd(NQ)
    report = {"gpu": torch.cuda.get_device_name(), "shape": [B, H, NQ, D], "nk": list(NKS), "rows": []}
    print(
        f"{report['gpu']}: {B} x {H} x {NQ} queries, d = {D}; kernel alone, ms (median of {a.rounds} alternating "
        f"rounds of {a.reps} calls)"
    )
    for acc in ("f16", "f32"):
        cfg = KernelConfig.default("sm_90", head_dim=D, pv_accum=acc)
        gos, tiles = {}, {}
        for nk in NKS:
            k, v = rnd(nk), rnd(nk)
            go, _, prob = gpu.prepared_launch(q, k, v, config=cfg)
            gos[nk] = kernel_alone(go, False)
            tiles[nk] = int(prob.kv_tile_range()[1][0])
        kc, vc = rnd(NQ), rnd(NQ)
        go, _, prob_c = gpu.prepared_launch(q, kc, vc, config=cfg.with_(causal=True))
        gos["causal"] = kernel_alone(go, False)
        causal_tiles = np.asarray(prob_c.kv_tile_range()[1], dtype=np.float64)
        ms = {name: t[0] for name, t in cuda_time_alternating(gos, a.reps, a.rounds).items()}
        T = np.array([tiles[nk] for nk in NKS], dtype=np.float64)
        y = np.array([ms[nk] for nk in NKS])
        beta, alpha = np.polyfit(T, y, 1)  # y = alpha + beta T = beta (x + T)
        x = alpha / beta
        resid = y - (alpha + beta * T)
        predicted = beta * float(np.mean(x + causal_tiles))
        row = dict(
            pv_accum=acc,
            config=cfg.describe(),
            tiles=dict(zip(map(str, NKS), map(int, T))),
            ms={str(k_): v_ for k_, v_ in ms.items()},
            beta_ms_per_tile=beta,
            x_tiles=x,
            fit_max_rel_residual=float(np.max(np.abs(resid) / y)),
            causal_tiles_mean=float(causal_tiles.mean()),
            causal_ms=ms["causal"],
            causal_predicted_ms=predicted,
            causal_over_prediction=ms["causal"] / predicted,
        )
        report["rows"].append(row)
        print(f"{acc} P@V ({cfg.describe()})")
        for nk in NKS:
            print(f"  Nk {nk:5d}: {tiles[nk]:3d} tiles a block  {ms[nk]:8.4f} ms  fit {alpha + beta * tiles[nk]:8.4f}")
        print(
            f"  fit: time = {beta:.5f} ms x ({x:.2f} + T): a block's fixed cost is {x:.2f} tile times "
            f"(max residual {row['fit_max_rel_residual']:.1%})"
        )
        print(
            f"  causal 4 x 16 x 4096: {causal_tiles.mean():.2f} tiles a block on average, {ms['causal']:.4f} ms "
            f"measured, {predicted:.4f} ms predicted by the fit: {row['causal_over_prediction']:.3f}x"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
