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

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from model import dense_equal_work, varlen_grid, varlen_lengths  # noqa: E402
from ptx_block_cost import D  # noqa: E402

import flashsim.ptx as P  # noqa: E402
from flashsim import provenance  # noqa: E402
from flashsim.emulator import engine_ptx  # noqa: E402
from flashsim.gpu import launch as plan  # noqa: E402
from flashsim.gpu import serving as gs  # noqa: E402
from flashsim.gpu.build import kernel_dir  # noqa: E402
from flashsim.problem import prepare  # noqa: E402
from flashsim.serving.problem import prepare_varlen, serving_options  # noqa: E402

FIT = Path(__file__).resolve().parents[3] / "benchmarks" / "logs" / "2026-12-07-varlen" / "ptx_block_cost.json"


def varlen_counts(lens) -> int:
    rng = np.random.default_rng(1)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total, top = int(cu[-1]), int(max(lens))
    q, k, v = (rng.standard_normal((total, 1, D)).astype(np.float16) for _ in range(3))
    opts = serving_options(True, None, None, None, None, None, None, None)
    prob = prepare_varlen(q, k, v, cu, cu, top, top, opts=opts, arch="sm_90")
    cfg = prob.config
    module = P.compile(
        (kernel_dir() / "flash_fwd.cu").read_text(), arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)
    )
    o, lse = np.zeros_like(q), np.zeros((1, total), np.float32)
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    null = np.uint64(0)
    args = [q, k, v, o, lse, null, *head, cu, cu, null, *totals, null, *pages, null, null, *lse_strides]
    rep = P.launch(module.kernel("flash_fwd"), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes)
    return rep.instructions


def dense_counts(n: int) -> int:
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 1, n, D)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, causal=True, arch="sm_90")
    kernel = engine_ptx.modules(prob)["flash_fwd"]
    o, lse = np.zeros_like(q), np.zeros((1, 1, n), np.float32)
    scratch = np.zeros(max(plan.scratch_bytes(prob), 1), np.uint8)
    total = 0
    for _, grid, block, smem, args in plan.launch_list(
        prob, *(P.address(x) for x in (q, k, v, o, lse)), 0, P.address(scratch)
    ):
        total += P.launch(kernel, grid, block, list(args), shared_mem=smem).instructions
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    lens = varlen_lengths()
    n = dense_equal_work(lens)
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
