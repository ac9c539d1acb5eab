"""Each tiling's kernel against the emulator bit for bit (O and LSE), on the H200, before it is timed.

    PYTHONPATH=. python3 benchmarks/experiments/m_tiles/check_bits.py d,acc,WxMxKVxS [...]

A ragged sequence (Nq = 777, Nk = 1000: the last query block partly empty, keys past a tile's end), full, causal and
a sliding window, two heads sharing one K / V head (GQA). Exit 1 on any differing bit.
"""
from __future__ import annotations

import sys

import numpy as np


def main(argv: list[str]) -> int:
    import flashsim
    from flashsim import gpu
    from flashsim.config import KernelConfig

    rng = np.random.default_rng(7)
    bad = 0
    for spec in argv:
        d, acc, tiling = spec.split(",")
        d = int(d)
        w, m, kv, s = (int(x) for x in tiling.split("x"))
        q = rng.standard_normal((1, 2, 777, d)).astype(np.float16)
        k, v = (rng.standard_normal((1, 1, 1000, d)).astype(np.float16) for _ in range(2))
        for name, opts in (("full", {}), ("causal", dict(causal=True)), ("window", dict(window_size=(300, 0)))):
            cfg = KernelConfig(head_dim=d, warps=w, m_tiles=m, kv_tile=kv, stages=s, pv_accum=acc,
                               causal=opts.get("causal", False), local="window_size" in opts)
            og, lg = gpu.attention(q, k, v, config=cfg, **opts)
            oe, le = flashsim.attention(q, k, v, config=cfg, **opts)
            diff_o = int(np.count_nonzero(og.view(np.uint16) != oe.view(np.uint16)))
            diff_l = int(np.count_nonzero(lg.view(np.uint32) != le.view(np.uint32)))
            ok = diff_o == 0 and diff_l == 0
            bad += not ok
            print(f"d={d} {acc:<4} {tiling:<9} {name:<6} O {og.size} elements, {diff_o} differ; LSE {lg.size}, "
                  f"{diff_l} differ: {'bit-exact' if ok else 'DIFFERS'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
