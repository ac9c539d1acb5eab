"""GPU: the d = 128 f16 P@V default at a long and at short sequences, for the short-launch question of issue 14.

    python3 benchmarks/experiments/short_launch/launches.py --mode profile     (under ncu: one launch per shape)
    python3 benchmarks/experiments/short_launch/launches.py --mode sustain --seconds 4 --json OUT.json

--mode sustain launches each shape back to back for --seconds while nvidia-smi samples the SM clock and the power
(run.sh starts it): whether the shapes run at different clocks, and their rate. Each shape's TFLOP/s is from CUDA
events over the whole stretch.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from sustained import stretch  # noqa: E402

SHAPES = ((4, 16, 4096), (16, 16, 1024), (64, 16, 512))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("profile", "sustain"), required=True)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--json")
    args = p.parse_args()
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import attention_flops

    rows = []
    for b, h, n in SHAPES:
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, n, 128, device="cuda", dtype=torch.float16) for _ in range(3))
        go, _, plan = gpu.prepared_launch(q, k, v, pv_accum="f16")
        go(sync=True)
        if args.mode == "profile":
            print(f"{b},{h},{n} {plan.config.describe()}", flush=True)
            continue
        stretch(
            f"{b},{h},{n}",
            lambda: go(sync=False),
            attention_flops(b, h, n, 128, False),
            args.seconds,
            rows,
            shape=[b, h, n],
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
