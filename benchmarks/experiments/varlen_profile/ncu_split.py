"""Varlen's loss against dense, split from Nsight Compute's counters (ncu.sh's ncu.csv) and the kernel's own grids.

    python3 benchmarks/experiments/varlen_profile/ncu_split.py CSV [--json OUT]

CSV: ncu.sh's raw page (plain or .gz) of its two flash_fwd launches, the varlen batch and the dense sequence of equal
causal work. Prints, varlen over dense: the elapsed cycles, how long the SMs were active (a tail of idle SMs would
show here), the tensor pipe's busy cycles (the tile work, padding and the diagonal included), and the warp
instructions, split by a two-term fit (instructions = a * KV tiles run + b * blocks run, both launches: two equations,
two unknowns) into a per-tile and a per-block cost. Then what of varlen's tile work lies on a sequence's padding rows
(its last q block's rows past the end), and how much of it whole warps (32 rows) or whole m16 tiles (16 rows) own:
the share a build that skipped their work would save. Block and tile counts are model.py's (the kernel's loop
bounds, flashsim.serving.blocks).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from model import problem, varlen_grid  # noqa: E402

METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg",
    "sm__cycles_active.avg",
    "smsp__inst_executed.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
)


def launches(path: Path) -> dict:
    """{"varlen": metrics, "dense": metrics} from the raw CSV (the launch with grid z > 1 is the varlen batch's)."""
    raw = path.read_bytes()
    text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r.get("Kernel Name") == "flash_fwd"]
    if len(rows) != 2:
        raise SystemExit(f"{path}: expected the two flash_fwd launches of ncu.sh, found {len(rows)}")
    out = {}
    for r in rows:
        grid = tuple(int(x) for x in r["Grid Size"].strip("()").split(","))
        out["varlen" if grid[2] > 1 else "dense"] = {m: float(r[m].replace(",", "")) for m in METRICS} | {"grid": grid}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    got = launches(a.csv)
    lens, n = problem()
    v_tiles, v_rows, prob = varlen_grid(lens)
    d_tiles, _, _ = varlen_grid([n])
    bm = prob.config.block_m
    counts = {k: (float(t.sum()), float(t.size)) for k, t in (("varlen", v_tiles), ("dense", d_tiles))}
    (tv, bv), (td, bd) = counts["varlen"], counts["dense"]
    iv, idn = got["varlen"]["smsp__inst_executed.sum"], got["dense"]["smsp__inst_executed.sum"]
    per_tile, per_block = np.linalg.solve([[tv, bv], [td, bd]], [iv, idn])
    tensor = {
        k: g["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"]
        / 100
        * g["sm__cycles_elapsed.avg"]
        for k, g in got.items()
    }
    pad = bm - v_rows
    skip = {
        "padding rows": float(np.sum(v_tiles * pad) / (bm * tv)),
        "padding rows in whole warps (32)": float(np.sum(v_tiles * (pad // 32) * 32) / (bm * tv)),
        "padding rows in whole m16 tiles": float(np.sum(v_tiles * (pad // 16) * 16) / (bm * tv)),
    }
    ratio = lambda m: got["varlen"][m] / got["dense"][m]  # noqa: E731
    res = {
        "launches": got,
        "counts": {k: {"tiles": t, "blocks": b} for k, (t, b) in counts.items()},
        "varlen_over_dense": {
            "elapsed_cycles": ratio("sm__cycles_elapsed.avg"),
            "tensor_pipe_cycles": tensor["varlen"] / tensor["dense"],
            "warp_instructions": ratio("smsp__inst_executed.sum"),
            "tiles": tv / td,
        },
        "sm_active_share": {k: g["sm__cycles_active.avg"] / g["sm__cycles_elapsed.avg"] for k, g in got.items()},
        "fit": {
            "instructions_per_tile": float(per_tile),
            "instructions_per_block": float(per_block),
            "block_in_tiles": float(per_block / per_tile),
        },
        "varlen_tile_work_on": skip,
    }
    r, f = res["varlen_over_dense"], res["fit"]
    lines = [
        f"varlen over dense (equal causal work): elapsed cycles {r['elapsed_cycles']:.3f}x, tensor pipe busy "
        f"{r['tensor_pipe_cycles']:.3f}x, KV tiles run {r['tiles']:.3f}x, warp instructions "
        f"{r['warp_instructions']:.3f}x",
        "SMs active over elapsed: " + ", ".join(f"{k} {v:.3f}" for k, v in res["sm_active_share"].items()),
        f"fit: {f['instructions_per_tile']:.0f} warp instructions a KV tile, {f['instructions_per_block']:.0f} a block "
        f"({f['block_in_tiles']:.2f} tiles' worth)",
        "varlen tile work on: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in skip.items()),
    ]
    print("\n".join(lines))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
