"""The two launches Nsight Compute profiles for the varlen / dense comparison (ncu.sh): bench_serving.py's varlen
batch (16 sequences of 1..4096, causal, H 16, d 128, f16) once, then the dense sequence of equal causal work once, each
its flash_fwd alone (no index check, no split: one kernel each). Prints what each launch is."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from run import D, H, bs, varlen_call  # noqa: E402


def main() -> int:
    import torch

    import flashsim

    lens = bs.varlen_lengths()
    fn, _, flops = varlen_call(lens)
    fn()
    torch.cuda.synchronize()
    n = bs.dense_equal_work(lens)
    dq = torch.randn((1, H, n, D), device="cuda").half()
    go, _, _ = flashsim.gpu.prepared_launch(dq, dq, dq, causal=True)
    go(sync=True)
    print(f"launch 1: varlen {lens.tolist()} causal H={H} d={D}, {flops:.4g} FLOP of causal pairs")
    print(f"launch 2: dense N={n} causal H={H} d={D}, the same causal work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
