"""GPU: one small launch per default kernel variant, meant to run under compute-sanitizer (memcheck, racecheck).

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_kernel.py      (tools/device_round.sh sanitize)
       python3 tools/sanitize_kernel.py --list                                   (the variants; no GPU needed)
Shapes have ragged tails (Nq, Nk not multiples of the tiles) so the zero-fill and masking paths run. The variants:
every default configuration of sm_90 (4 warps x 2 m16 tiles) and of sm_120 (8 warps x 1 tile, the seed's block),
for d 64 / 128 x causal or not x every P@V accumulation (f32, f16, f16x2), each distinct configuration once.
"""
import itertools
import sys

import numpy as np

from flashsim import KernelConfig
from flashsim.config import SUPPORTED_PV_ACCUM


def variants():
    out = []
    for arch, d, causal, acc in itertools.product(("sm_90", "sm_120"), (64, 128), (False, True), SUPPORTED_PV_ACCUM):
        cfg = KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc)
        if cfg not in out:
            out.append(cfg)
    return out


def main(argv):
    configs = variants()
    if "--list" in argv:
        for cfg in configs:
            print(cfg.describe())
        return 0
    from flashsim.gpu import attention
    rng = np.random.default_rng(1)
    for cfg in configs:
        d = cfg.head_dim
        q = rng.standard_normal((1, 2, 137, d)).astype(np.float16)
        k = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
        v = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
        o, lse = attention(q, k, v, config=cfg, causal=cfg.causal, pv_accum=cfg.pv_accum)
        assert np.isfinite(o).all(), f"non-finite output: {cfg.describe()}"
        print(f"ran {cfg.describe()}", flush=True)
    print(f"sanitize_kernel: {len(configs)} variants launched")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
