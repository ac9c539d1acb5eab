"""The software pipeline (KernelConfig.pipeline) against the plain loop, same tiling, on this GPU:

    git apply benchmarks/experiments/software_pipeline/pipeline.patch      (on commit 2105cf7 or later, before any
                                                                          other kernel change)
    PYTHONPATH=. python3 benchmarks/experiments/software_pipeline/pipeline_probe.py --json OUT.json

For each (head dim, P@V accumulation, tiling) the two builds are timed in alternating rounds at 4 x 16 x 4096 x d
(non-causal and causal), beside the current default configuration; each pipelined build is first checked bit for bit
against the emulator on two small problems (ragged lengths, causal and not).
"""

from __future__ import annotations

import argparse
import json
import statistics

CANDIDATES = {  # (d, pv_accum) -> tilings (warps, m_tiles, kv_tile) that build without spills with the pipeline
    (128, "f32"): [(8, 1, 64)],
    (128, "f16"): [(4, 2, 32), (8, 1, 64), (4, 1, 64), (8, 2, 32)],
    (64, "f32"): [(8, 1, 64), (4, 2, 32), (8, 2, 32)],
    (64, "f16"): [(4, 2, 32), (8, 1, 64), (8, 2, 32), (4, 2, 64)],
}


def main(argv=None):
    import numpy as np
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import cuda_time
    from flashsim.commands.verify import emulator_outputs, gpu_outputs, make_case_inputs
    from flashsim.config import KernelConfig

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    rows = []
    for (d, acc), tilings in CANDIDATES.items():
        q, k, v = (torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.float16) for _ in range(3))
        for causal in (False, True):
            flops = 4.0 * 4 * 16 * 4096 * 4096 * d / (2 if causal else 1)
            default = KernelConfig.default("sm_90", head_dim=d, pv_accum=acc, causal=causal)
            for w, mt, kv in tilings:
                plain = KernelConfig(head_dim=d, warps=w, m_tiles=mt, kv_tile=kv, stages=3, pv_accum=acc, causal=causal)
                piped = plain.with_(pipeline=True)
                same = True
                for shape, kind in (((1, 2, 77, 333), "normal"), ((2, 1, 200, 130), "adversarial")):
                    b, h, nq, nk = shape
                    qq, kk, vv = make_case_inputs(kind, b, h, nq, nk, d, 3)
                    og, lg, _ = gpu_outputs(qq, kk, vv, piped)
                    oe, le, _ = emulator_outputs(qq, kk, vv, piped, "sm_90")
                    same &= bool(
                        np.array_equal(og.view(np.uint16), oe.view(np.uint16))
                        and np.array_equal(lg.view(np.uint32), le.view(np.uint32))
                    )
                gos = [gpu.prepared_launch(q, k, v, config=c)[0] for c in (plain, piped, default)]
                for go in gos:
                    go(sync=False)
                torch.cuda.synchronize()
                ms = [[], [], []]
                for _ in range(args.rounds):
                    for i, go in enumerate(gos):
                        ms[i].append(cuda_time(lambda: go(sync=False), 20, 1, warmup=0)[0])
                tf = [flops / (statistics.median(m) * 1e-3) / 1e12 for m in ms]
                rows.append(
                    dict(
                        d=d,
                        pv_accum=acc,
                        causal=causal,
                        tiling=[w, mt, kv],
                        plain=tf[0],
                        pipelined=tf[1],
                        default=tf[2],
                        default_config=default.describe(),
                        bit_exact=same,
                    )
                )
                print(
                    f"d={d} {acc} {'causal' if causal else 'full  '} {w}x{mt}x{kv} s3: plain {tf[0]:6.1f} "
                    f"pipelined {tf[1]:6.1f} ({tf[1] / tf[0]:.3f}x)  default {tf[2]:6.1f}  "
                    f"bit-exact {same}",
                    flush=True,
                )
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
