"""Two tilings of the kernel against each other in alternating rounds, on the H200 (kernel alone, CUDA events).

    python tools/tile_ab.py --pair 128,f32,4x2x32x3,4x2x64x2 [--pair ...] [--shapes 4,16,4096,full ...] --json OUT

tools/tile_sweep.py times each candidate once, one after the other, so a clock or thermal drift over its run reads as
a difference between tilings (its figures moved by up to 7% against flashsim bench kernel's in the same session).
Here each pair (head dim, P@V accumulation, tiling A, tiling B as warps x m_tiles x kv_tile x stages) is timed in
alternating rounds (flashsim.commands.bench.cuda_time_pair) at every shape, full and causal: the ratio B / A is what
a change of config.DEFAULT_TILES would gain or lose there. Where A and B share the kv_tile, B's O and LSE must be
bit-identical to A's (warps, m16 tiles and stages change the blocks, not a row's arithmetic; exit 1 otherwise); a
different kv_tile moves the online softmax's rescale points, so its bits differ by design (the emulator follows the
config, and flashsim verify checks each default).
"""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_SHAPES = ("4,16,4096,full", "4,16,4096,causal", "16,16,1024,full")


def parse_tiling(text: str) -> dict:
    w, m, kv, s = (int(x) for x in text.split("x"))
    return dict(warps=w, m_tiles=m, kv_tile=kv, stages=s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pair", action="append", required=True, help="d,acc,A,B with A and B as WxMxKVxS")
    p.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help="B,H,N,full|causal")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)

    import torch

    from flashsim import gpu
    from flashsim.commands.bench import attention_flops, cuda_time_pair, kernel_alone
    from flashsim.config import KernelConfig

    rows = []
    for pair in args.pair:
        d, acc, ta, tb = pair.split(",")
        d = int(d)
        for shape in args.shapes:
            b, h, n, kind = shape.split(",")
            b, h, n, causal = int(b), int(h), int(n), kind == "causal"
            torch.manual_seed(0)
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            outs, fns = [], []
            for t in (ta, tb):
                cfg = KernelConfig(head_dim=d, pv_accum=acc, causal=causal, **parse_tiling(t))
                go, (o, lse), _ = gpu.prepared_launch(q, k, v, config=cfg)
                fns.append(kernel_alone(go, False))
                outs.append((o.clone(), lse.clone()))
            bits = [
                [x.view(torch.int16) if x.dtype == torch.float16 else x.view(torch.int32) for x in out] for out in outs
            ]
            same = (
                None
                if parse_tiling(ta)["kv_tile"] != parse_tiling(tb)["kv_tile"]
                else all(torch.equal(x, y) for x, y in zip(*bits))
            )
            (ms_a, _), (ms_b, _) = cuda_time_pair(fns[0], fns[1], args.reps, args.rounds)
            f = attention_flops(b, h, n, d, causal)
            row = dict(
                head_dim=d,
                pv_accum=acc,
                a=ta,
                b=tb,
                shape=[b, h, n],
                causal=causal,
                ms_a=ms_a,
                ms_b=ms_b,
                tflops_a=f / (ms_a * 1e-3) / 1e12,
                tflops_b=f / (ms_b * 1e-3) / 1e12,
                ratio=ms_a / ms_b,
                bit_identical=same,
            )
            rows.append(row)
            print(
                f"d={d} {acc:<4} {b},{h},{n} {kind:<6}  A {ta:<10} {row['tflops_a']:6.1f}  B {tb:<10} "
                f"{row['tflops_b']:6.1f} TFLOP/s  B/A {row['ratio']:.3f}  "
                + {True: "bit-identical", False: "DIFFERENT", None: "kv_tile differs"}[same],
                flush=True,
            )
    with open(args.json, "w") as fh:
        json.dump(rows, fh, indent=1)
    return 0 if all(r["bit_identical"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
