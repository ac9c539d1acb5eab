"""GPU: run kernel/flash_fwd.cu on many shapes and configurations and compare with the float64 reference.

Usage (on a GPU machine, repo root): PYTHONPATH=. python3 tools/kernel_vs_reference.py [--quick]
Prints one line per case and exits non-zero if any case exceeds flashsim.emulator.reference.error_bound
(the same bound tests/test_emulator.py holds the emulator to).
"""

import itertools
import sys

import numpy as np

from flashsim import KernelConfig
from flashsim.emulator import reference_attention
from flashsim.emulator.reference import error_bound
from flashsim.gpu import attention
from flashsim.gpu import runtime as rt


def main():
    quick = "--quick" in sys.argv
    rt.require_gpu()
    arch = rt.current_arch()
    shapes = [
        (1, 1, 1, 1, 64),
        (1, 2, 77, 77, 64),
        (2, 3, 128, 128, 128),
        (1, 2, 200, 333, 128),
        (1, 1, 257, 129, 64),
        (2, 1, 129, 257, 128),
        (1, 1, 1000, 1000, 128),
    ]
    bad = 0
    for (b, h, nq, nk, d), causal, acc in itertools.product(shapes, (False, True), ("f32", "f16")):
        cfgs = [KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc)]
        if not quick:
            cfgs += [
                KernelConfig(head_dim=d, causal=causal, pv_accum=acc, warps=4, kv_tile=32, stages=2),
                KernelConfig(head_dim=d, causal=causal, pv_accum=acc, warps=8, kv_tile=64, stages=3),
            ]
        rng = np.random.default_rng(nq * 7 + nk)
        q, k, v = (rng.standard_normal((b, h, n, d)).astype(np.float16) for n in (nq, nk, nk))
        o_ref, lse_ref = reference_attention(q, k, v, causal=causal)
        for cfg in cfgs:
            o, lse = attention(q, k, v, config=cfg, causal=causal, pv_accum=acc)
            err = np.abs(o.astype(np.float64) - o_ref)
            ok_o = bool(np.all(err <= error_bound(o_ref, v, nk, cfg.kv_tile, acc)))
            fin = np.isfinite(lse_ref)
            ok_l = bool(np.array_equal(np.isinf(lse), ~fin)) and bool(
                np.all(np.abs(lse[fin] - lse_ref[fin]) <= 1e-4 * (1 + np.abs(lse_ref[fin])))
            )
            bad += not (ok_o and ok_l)
            print(
                f"{'ok ' if ok_o and ok_l else 'BAD'} {b}x{h}x{nq}x{nk}x{d} causal={causal!s:5} {acc} "
                f"w{cfg.warps} bc{cfg.kv_tile} st{cfg.stages}: max|dO|={err.max():.2e} "
                f"max|dlse|={np.abs(lse[fin] - lse_ref[fin]).max(initial=0):.2e}",
                flush=True,
            )
    print(f"{bad} bad cases")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
