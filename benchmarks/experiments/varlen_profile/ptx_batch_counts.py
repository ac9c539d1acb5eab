"""The varlen batch and its dense comparator, one head each, run whole by flashsim.ptx on the CPU: their PTX warp
instructions beside what ptx_block_cost.py's per-tile and per-block fit predicts from the grids' tile counts.

    python3 benchmarks/experiments/varlen_profile/ptx_batch_counts.py [--json OUT]      (a few minutes on 2 cores)

Nsight Compute counted 1.228x the dense launch's warp instructions for the varlen batch (ncu_split.py); the fit of
one block (a T + b, both builds alike) predicts less. What is left over is what varlen's blocks issue beyond a
full block of T tiles: the masked tile at a sequence's end when its length is not a multiple of the tile, a diagonal
across three tiles, and the blocks past a sequence's rows that return at once. One head: every head runs the same
blocks (the batch's H = 16 only multiplies both counts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from model import problem, varlen_grid  # noqa: E402
from ptx_block_cost import run_dense, run_varlen  # noqa: E402

FIT = Path(__file__).resolve().parents[3] / "benchmarks" / "logs" / "2026-12-07-varlen" / "ptx_block_cost.json"


def varlen_counts(lens) -> int:
    return run_varlen(lens, lens, seed=1)[0].instructions


def dense_counts(n: int) -> int:
    return sum(run_dense(n, n, seed=2)[0].values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    lens, n = problem()
    fit = json.loads(FIT.read_text())
    res = {"lengths": lens.tolist(), "dense_N": n}
    for name, tiles, run in (
        ("varlen", varlen_grid(lens)[0], lambda: varlen_counts(lens)),
        ("dense", varlen_grid([n])[0], lambda: dense_counts(n)),
    ):
        f = fit["varlen" if name == "varlen" else "dense"]["fit"]
        a_tile, b_block = sum(x for x, _ in f.values()), sum(y for _, y in f.values())
        predicted = a_tile * float(tiles.sum()) / 16 + b_block * tiles.size / 16  # the grids count 16 heads
        got = run()
        res[name] = {
            "ptx_instructions": got,
            "predicted": predicted,
            "over_prediction": got / predicted,
            "blocks": tiles.size // 16,
            "tiles": float(tiles.sum()) / 16,
        }
        print(
            f"{name}: {got:,} PTX warp instructions, {predicted:,.0f} predicted by the one-block fit "
            f"({got / predicted:.3f}x)",
            flush=True,
        )
    print(
        f"varlen / dense: {res['varlen']['ptx_instructions'] / res['dense']['ptx_instructions']:.3f}x PTX warp "
        "instructions (Nsight Compute's SASS count: 1.228x)"
    )
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
