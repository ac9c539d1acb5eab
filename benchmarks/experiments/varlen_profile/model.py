"""Why varlen runs below the dense kernel, from its blocks alone (no GPU): the bench row's grid against the dense
comparator's, priced by the block cost measured on silicon.

    python3 benchmarks/experiments/varlen_profile/model.py [--json out.json]

The grids come from flashsim.serving.blocks.grid_blocks, the kernel's own loop bounds (every block that runs, its KV
tiles), for bench_serving.py's varlen row (16 sequences of lengths drawn from 1..4096 with seed 0, causal, H = 16,
d = 128, the serving build's 128-row blocks and 64-key tiles) and for its comparator (one sequence of
N = sqrt(sum n_i^2), rounded to 128: the same causal work). A block is priced as benchmarks/block_cost.py measured
it on the H200 (benchmarks/logs/2026-11-30g/block_cost.json): x + T tile times for T tiles, x its fixed cost (Q's
load, the pipeline's first tiles, the epilogue), and a causal block costs c tile times more, c fitted from that
log's causal run (33 tiles a block on average, 1.11x the fit). The log's row of the same KV tile (64 keys) is taken:
it was measured with f16 P@V, the serving build accumulates P@V in f32 (the log's f32 row, 32-key tiles, gives
x = 5.71 tiles of 32 keys: 2.86 of 64, within 9%). Each grid's efficiency is its causal pairs over its
price; the model's varlen / dense ratio is then taken apart: tile work alone (rows past a sequence's end, keys past
the diagonal inside a tile), then x, then c. bench_serving measured 0.788x on the H100 (2026-12-01); run.py times
the parts on a GPU. Last, what the 0.9x target asks of a block: the fixed cost per block (x + c together, in tile
times) at which the ratio is 0.9, solved on the same grids, as they are and with the padding rows' work gone (a
sequence's last q block charged only its valid rows' share of its tiles: the most any skip of padding rows gives).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_serving import _pairs_causal as pairs  # noqa: E402  (the bench row's own count of causal pairs)
from bench_serving import dense_equal_work, varlen_lengths  # noqa: E402  (the bench row's own problem)

from flashsim.problem import resolve_options  # noqa: E402
from flashsim.serving.blocks import grid_blocks  # noqa: E402
from flashsim.serving.problem import index_of, prepare_varlen  # noqa: E402

H, D = 16, 128
BLOCK_COST = ROOT / "benchmarks" / "logs" / "2026-11-30g" / "block_cost.json"


def varlen_grid(lens) -> tuple[np.ndarray, np.ndarray, object]:
    """(tiles per block that runs, valid rows per block, the build) of the causal varlen call on ``lens``."""
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total = int(cu[-1])
    shape_only = np.broadcast_to(np.zeros((), np.float16), (total, H, D))  # no memory: the grid needs shapes only
    top = int(max(lens))
    prob = prepare_varlen(
        shape_only, shape_only, shape_only, cu, cu, top, top, opts=resolve_options(True, layout="bnhd")
    )
    blocks = grid_blocks(prob, index_of(cu_seqlens_q=cu, cu_seqlens_k=cu))
    return blocks.tiles, blocks.valid.sum(axis=1), prob


def problem() -> tuple[np.ndarray, int]:
    """bench_serving.py's varlen row: its lengths, and the N of the dense sequence with the same causal work."""
    lens = varlen_lengths()
    return lens, dense_equal_work(lens)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    lens, n = problem()
    v_tiles, v_rows, prob = varlen_grid(lens)
    d_tiles, _, _ = varlen_grid([n])  # one sequence: the dense kernel's causal grid (the same blocks and tiles)
    bm, bc = prob.config.block_m, prob.config.kv_tile
    grid_x = prob.grid[0]

    cost = json.loads(BLOCK_COST.read_text())
    row = next(r for r in cost["rows"] if f"kv_tile={bc}" in r["config"].split(", "))
    x = row["x_tiles"]
    c = (row["causal_over_prediction"] - 1) * (x + row["causal_tiles_mean"])  # extra tile times per causal block

    def efficiency(tiles, work, fixed, causal_extra):
        return work / float(np.sum(fixed + tiles + causal_extra))

    v_work = H * sum(pairs(int(m)) for m in lens) / (bm * bc)  # causal pairs in tile units
    d_work = H * pairs(n) / (bm * bc)
    steps = [("tile work alone", 0.0, 0.0), ("+ fixed cost x", x, 0.0), ("+ causal extra c", x, c)]
    ratios = {name: efficiency(v_tiles, v_work, fx, cx) / efficiency(d_tiles, d_work, fx, cx) for name, fx, cx in steps}
    target = 0.9

    def fixed_for(target, v_tiles_total):
        """b with (v_work / (A_v + b N_v)) / (d_work / (A_d + b N_d)) = target (A: tiles, N: blocks), that is
        A_d + b N_d = k (A_v + b N_v) with k = target d_work / v_work."""
        a_v, n_v, a_d, n_d = v_tiles_total, v_tiles.size, float(d_tiles.sum()), d_tiles.size
        k = target * d_work / v_work
        return (a_d - k * a_v) / (k * n_v - n_d)

    no_padding = float(np.sum(v_tiles * v_rows / bm))
    needs = {"as it is": fixed_for(target, float(v_tiles.sum())), "padding rows gone": fixed_for(target, no_padding)}
    res = {
        "lengths": lens.tolist(),
        "config": prob.config.describe(),
        "block_cost": {"source": str(BLOCK_COST.relative_to(ROOT)), "gpu": cost["gpu"], "x": x, "c": c},
        "varlen": {
            "blocks_run": int(v_tiles.size),
            "blocks_launched": int(grid_x * H * len(lens)),
            "tiles": int(v_tiles.sum()),
            "mean_tiles": float(v_tiles.mean()),
            "rows_valid_fraction": float(v_rows.sum() / (v_tiles.size * bm)),
            "tile_work_used": v_work / float(v_tiles.sum()),
        },
        "dense": {
            "N": n,
            "blocks_run": int(d_tiles.size),
            "tiles": int(d_tiles.sum()),
            "mean_tiles": float(d_tiles.mean()),
            "tile_work_used": d_work / float(d_tiles.sum()),
        },
        "ratio": ratios,
        "fixed_per_block_for_0.9": needs,
        "fixed_per_block_now": x + c,
        "measured": {"vs_dense": 0.788, "log": "benchmarks/logs/2026-12-01-serving/bench_serving.json"},
    }
    v, dn = res["varlen"], res["dense"]
    lines = [
        f"varlen 16 x 1..4096 causal, H={H}, d={D}: {prob.config.describe()}",
        f"block cost ({cost['gpu']}, kv_tile {bc}): fixed x = {x:.2f} tile times, causal extra c = {c:.2f}",
        f"varlen: {v['blocks_run']} blocks run of {v['blocks_launched']} launched, {v['tiles']} tiles, "
        f"{v['mean_tiles']:.1f} a block; rows valid {v['rows_valid_fraction']:.3f}; tile work used "
        f"{v['tile_work_used']:.3f}",
        f"dense N={n}: {dn['blocks_run']} blocks, {dn['tiles']} tiles, {dn['mean_tiles']:.1f} a block; tile work used "
        f"{dn['tile_work_used']:.3f}",
    ]
    lines += [f"model varlen / dense, {name:18s} {r:.3f}" for name, r in ratios.items()]
    lines.append(f"measured (bench_serving, H100, 2026-12-01)   {res['measured']['vs_dense']:.3f}")
    lines += [
        f"0.9x needs a fixed cost per block (x + c, tile times) of at most {b:.2f} ({name}); the model's is {x + c:.2f}"
        for name, b in needs.items()
    ]
    print("\n".join(lines))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
