r"""GPU: one launch of flash_fwd per variant at 4 x 16 x 4096 x 128 (non-causal), meant to run under Nsight Compute, so
that the pipes each variant keeps busy can be compared (why INT8 / FP8 attention is not 1.6x the f16 kernel here):

    ncu --clock-control none --kernel-name flash_fwd \
        --metrics "$METRICS" python3 benchmarks/experiments/quant_profile/profile_quant.py

with METRICS='regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$,'\
'regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$,'\
'sm__issue_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum'

--clock-control none leaves the card's clocks alone. benchmarks/logs/2026-11-30d/ncu_quant.txt was taken without it,
with ncu's default, which locks the clocks to base for each profiled launch and restores them after: its durations
are at base clock; its percentages of peak are what it is for.

Variants (the benchmark's, benchmarks/bench_quant.py, default tilings): f16 with f16 P@V, int8 with f16 P@V, f16
with f32 P@V, int8-fp8 with f32 P@V, one flash_fwd launch each, in this order (the quantization pass is other
kernels, which --kernel-name leaves out).
"""

from __future__ import annotations

import sys

VARIANTS = (("none", "f16"), ("int8", "f16"), ("none", "f32"), ("int8-fp8", "f32"))


def main(argv=None) -> int:
    import torch

    from flashsim import gpu

    b, h, n, d = 4, 16, 4096, 128
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    for quant, acc in VARIANTS:
        run, _, plan = gpu.prepared_launch(q, k, v, pv_accum=acc, quant=quant)
        run(sync=True)
        print(f"launched {quant} {acc}: {plan.config.describe()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
