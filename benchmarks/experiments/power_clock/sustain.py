"""GPU: the mma.sync ceiling probe and the d = 128 kernels, each launched back to back for a few seconds, so that
nvidia-smi (run.sh) can sample the SM clock and power under each: how much of the kernel's distance to the ceiling
is the clock the power cap leaves it, and how much is per clock.

    python3 benchmarks/experiments/power_clock/sustain.py --seconds 4 --json OUT.json

Runs, in order: the ceiling probe (flashsim.gpu.peak's m16n8k16 f16 and f32 instructions, 8 chains per warp, its
default operands, then every operand varied per step), the d = 128 defaults at 4 x 16 x 4096 with f16 and f32 P@V on
standard-normal f16 input (``--inputs const``: every element 1/16; ``--no-ceiling``: the kernels only). Each run's
TFLOP/s is from CUDA events over the whole stretch; one second of idle between.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from sustained import stretch  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--json", required=True)
    p.add_argument(
        "--inputs",
        nargs="+",
        default=["randn"],
        choices=("randn", "const"),
        help="the kernels' inputs: standard normal, and / or every element 1/16 (operands that toggle no bit "
        "from one mma to the next, like the probe's)",
    )
    p.add_argument("--no-ceiling", action="store_true", help="the kernels only")
    a = p.parse_args()
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import attention_flops
    from flashsim.gpu import peak
    from flashsim.gpu import runtime as rt

    torch.zeros(1, device="cuda")
    rows = []
    dev = rt.require_gpu()
    arch, sms = rt.current_arch(), dev.properties.multiprocessor_count
    chains, iters, grid, block = 8, 4096, sms * 8, peak.WARPS * 32
    seed = rt.to_device(np.random.default_rng(0).integers(1, 32, 128, dtype=np.uint8).view(np.uint32).copy())
    out = rt.empty((grid * block,), np.uint32)
    for kind, vary in () if a.no_ceiling else ((1, None), (0, None), (1, True), (0, True)):
        name, mnk = peak.KINDS[kind]
        kern = rt.load(peak.build(kind, arch, chains, iters, vary=vary), "mma_peak")
        flops = 2.0 * mnk * grid * peak.WARPS * chains * iters
        label = f"ceiling {name}{' varied' if vary else ''}"
        stretch(
            label,
            lambda: rt.launch(kern, (grid,), (block,), seed, out, np.uint32(0), sync=False),
            flops,
            a.seconds,
            rows,
        )
    for inputs in a.inputs:
        torch.manual_seed(0)
        if inputs == "randn":
            q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
        else:
            q, k, v = (torch.full((4, 16, 4096, 128), 0.0625, device="cuda", dtype=torch.float16) for _ in range(3))
        for acc in ("f16", "f32"):
            go, _, plan = gpu.prepared_launch(q, k, v, pv_accum=acc)
            go(sync=True)
            label = f"kernel d=128 {acc} P@V 4,16,4096" + ("" if inputs == "randn" else f" {inputs}")
            stretch(label, lambda: go(sync=False), attention_flops(4, 16, 4096, 128, False), a.seconds, rows)
    with open(a.json, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
