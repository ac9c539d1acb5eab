"""GPU: one small launch per kernel variant, meant to run under compute-sanitizer (memcheck, racecheck).

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_kernel.py
Shapes have ragged tails (Nq, Nk not multiples of the tiles) so the zero-fill and masking paths run.
"""
import numpy as np

from flashsim import KernelConfig
from flashsim.gpu import attention

rng = np.random.default_rng(1)
for d, causal, acc, stages in ((128, False, "f32", 2), (128, True, "f16", 3), (64, True, "f32", 3), (64, False, "f16", 2)):
    q = rng.standard_normal((1, 2, 137, d)).astype(np.float16)
    k = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
    v = rng.standard_normal((1, 2, 201, d)).astype(np.float16)
    cfg = KernelConfig(head_dim=d, causal=causal, pv_accum=acc, stages=stages)
    o, lse = attention(q, k, v, config=cfg, causal=causal, pv_accum=acc)
    assert np.isfinite(o).all(), "non-finite output"
    print(f"ran d={d} causal={causal} {acc} stages={stages}: o[0,0,0,:4]={o[0, 0, 0, :4]}")
