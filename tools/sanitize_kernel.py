"""GPU: one small launch per kernel variant, meant to run under compute-sanitizer (memcheck, racecheck).

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_kernel.py
Shapes have ragged tails (Nq, Nk not multiples of the tiles) so the zero-fill and masking paths run. The
variants: every sm_90 default (4 warps x 2 m16 tiles) and the sm_120 default shape (8 warps x 1 tile).
"""
import itertools

import numpy as np

from flashsim import KernelConfig
from flashsim.gpu import attention

rng = np.random.default_rng(1)
configs = [KernelConfig.default("sm_90", head_dim=d, causal=c, pv_accum=a)
           for d, c, a in itertools.product((64, 128), (False, True), ("f32", "f16"))]
configs += [KernelConfig.default("sm_120", head_dim=d, causal=c, pv_accum=a)
            for d, c, a in ((128, False, "f32"), (128, True, "f16"), (64, True, "f32"))]
for cfg in configs:
    d = cfg.head_dim
    q = rng.standard_normal((1, 2, 137, d)).astype(np.float16)
    k = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
    v = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
    o, lse = attention(q, k, v, config=cfg, causal=cfg.causal, pv_accum=cfg.pv_accum)
    assert np.isfinite(o).all(), "non-finite output"
    print(f"ran {cfg.describe()}")
