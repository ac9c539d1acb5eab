"""Time every tiling candidate of the kernel on this GPU (kernel alone, CUDA events), per head dim and P@V accumulation.

    python tools/tile_sweep.py --sweep benchmarks/logs/DATE/register_sweep.json --json OUT.json [--d 32,96 ...]

Candidates: the (warps, m_tiles, kv_tile) tilings of tools/register_sweep.py's file for this arch that ptxas builds
without spills (or, where none does, with the fewest spill bytes), each with 2 and 3 stages where they fit the
shared memory. Shape 4 x 16 x 4096 x d, non-causal, f16; TFLOP/s = 4 B H N^2 d / time (median of --rounds timings of
--reps launches). flashsim.config.KernelConfig.default's sm_90 table was read off this file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def candidates(rows, arch, d, acc, cap, max_spill=0, quant="none"):
    mine = [
        r
        for r in rows
        if r["arch"] == arch and r["head_dim"] == d and r["pv_accum"] == acc and r.get("quant", "none") == quant
    ]
    clean = [r for r in mine if r["spill_bytes"] <= max_spill]
    if not clean:
        least = min(r["spill_bytes"] for r in mine)
        clean = [r for r in mine if r["spill_bytes"] == least]
    out = []
    for r in clean:
        for stages, key in ((2, "smem_stages2"), (3, "smem_stages3")):
            if r[key] <= cap:
                out.append(
                    dict(
                        warps=r["warps"],
                        m_tiles=r["m_tiles"],
                        kv_tile=r["kv_tile"],
                        stages=stages,
                        spill_bytes=r["spill_bytes"],
                        registers=r["registers"],
                    )
                )
    return out


def main(argv=None):
    import torch

    from flashsim import gpu
    from flashsim.arch import get_arch
    from flashsim.commands.bench import cuda_time, kernel_alone
    from flashsim.config import KernelConfig
    from flashsim.gpu import runtime as rt

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweep", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--d", default="32,64,96,128,160,192,224,256")
    p.add_argument("--accs", default="f32,f16")
    p.add_argument("--shape", default="4,16,4096")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=float, default=240.0, help="seconds; stops (keeping results) past it")
    p.add_argument("--max-spill", type=int, default=0, help="also time tilings that spill at most this many bytes")
    p.add_argument(
        "--quant",
        default="none",
        help="quant of the configurations (int8: the attention kernel alone is timed, the quantization pass left out)",
    )
    args = p.parse_args(argv)
    rows = json.load(open(args.sweep))
    arch = rt.current_arch()
    cap = get_arch(arch).smem_per_block_optin
    b, h, n = (int(x) for x in args.shape.split(","))
    t_start = time.time()
    results = []
    for d in (int(x) for x in args.d.split(",")):
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        for acc in args.accs.split(","):
            for c in candidates(rows, arch, d, acc, cap, args.max_spill, args.quant):
                if time.time() - t_start > args.budget:
                    print("budget reached", file=sys.stderr)
                    break
                cfg = KernelConfig(
                    head_dim=d,
                    pv_accum=acc,
                    quant=args.quant,
                    **{k_: c[k_] for k_ in ("warps", "m_tiles", "kv_tile", "stages")},
                )
                try:
                    go = kernel_alone(gpu.prepared_launch(q, k, v, config=cfg)[0], args.quant != "none")
                    t = cuda_time(go, args.reps, args.rounds, warmup=2)[0]
                    tf = 4.0 * b * h * n * n * d / (t * 1e-3) / 1e12
                except Exception as exc:  # a candidate that cannot launch is reported, not fatal
                    t, tf = None, None
                    c["error"] = str(exc)[:200]
                results.append(
                    dict(arch=arch, head_dim=d, pv_accum=acc, quant=args.quant, shape=[b, h, n], ms=t, tflops=tf, **c)
                )
                print(
                    f"d={d} {acc} {c['warps']}x{c['m_tiles']}x{c['kv_tile']} s{c['stages']} "
                    f"(spill {c['spill_bytes']}): " + (f"{tf:.1f} TFLOP/s" if tf else c.get("error", "?")),
                    flush=True,
                )
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0)


if __name__ == "__main__":
    main()
