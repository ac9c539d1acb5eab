"""On the GPU: what flash_combine adds to a decode call, and what a block's fixed work costs.

    python3 benchmarks/experiments/decode_bulk/decode_parts.py [--json FILE]

For each decode row (bf16, Hq 32, Hkv 8; the split count of the default heuristic and two beside it), CUDA-graph
replays (bench_serving.timed) of:
- "call": the unchecked call, flash_fwd then flash_combine (its programmatic dependent), as the serving table times;
- "fwd": flash_fwd alone, the plan's combine left out (its split outputs are written, not merged: the bits of o are
  not the call's, the time is the point);
so call - fwd is what the combine adds at the grid's tail. The fwd times across split counts, whose block counts
differ, give the per-block fixed cost: with T tiles in all and S splits per row, fwd ~ (T * tile + blocks * fixed)
over the SMs; the fit is printed. ring.cu (same folder) has neither the combine nor the per-block work; this says
which of the two holds the kernel's 4-6% gap to it (README).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

from flashsim.gpu import serving_torch  # noqa: E402

# the split counts timed besides the heuristic's, per decode row: its neighbours, so that the block counts differ
OTHER_SPLITS = {"decode": (4, 8), "decode B=1 Nk=32768": (24, 48), "decode d=64": (4, 8)}
SHAPES = [(*shape, OTHER_SPLITS[shape[0]]) for shape in bs.DECODE_SHAPES if shape[0] in OTHER_SPLITS]


@contextlib.contextmanager
def fwd_alone(plan):
    """``plan`` launches flash_fwd alone inside the block (its combine set aside, then put back)."""
    saved = plan.packed_combine, plan.packed_combine_overlap
    plan.packed_combine = plan.packed_combine_overlap = None
    try:
        yield
    finally:
        plan.packed_combine, plan.packed_combine_overlap = saved
        # with ready_counters.patch (README) nobody reset the split's ready counters without the combine: later calls
        # get fresh states
        serving_torch._STATE.clear()
        serving_torch._SLABS.clear()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    rows = []
    print(torch.cuda.get_device_name())
    for name, b, n, d, others in SHAPES:
        q, k, v = bs.cache(b, n, 32, 8, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        fits = []
        for splits in (None, *others):
            fn, prob = bs.ours(q, k, v, cache_seqlens=sl, **({} if splits is None else dict(num_splits=splits)))
            _, plan = bs.kvcache_plan(b, n, d, prob.num_splits)
            call_us = bs.timed(fn)[0] * 1e3
            with fwd_alone(plan):
                fwd_us = bs.timed(fn)[0] * 1e3
            blocks = int(np.prod(prob.grid))
            r = dict(name=name, splits=prob.num_splits, blocks=blocks, call_us=call_us, fwd_us=fwd_us)
            rows.append(r)
            fits.append((blocks, fwd_us))
            print(f"{name:22} splits {prob.num_splits:3d} ({blocks:4d} blocks): call {call_us:7.1f} us, flash_fwd "
                  f"alone {fwd_us:7.1f}, the combine adds {call_us - fwd_us:5.1f}", flush=True)  # fmt: skip
        slope, base = np.polyfit([x for x, _ in fits], [y for _, y in fits], 1)
        # rough: the waves differ between the split counts too
        print(f"{name:22} flash_fwd ~ {base:.1f} us + {slope * 1e3:.1f} ns per block (3 split counts; rough)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
