"""The decode profile's table: per shape, the measured call's kernels (the last flash_fwd and combine launches of that
shape in ncu.csv) with time, DRAM throughput, achieved / theoretical occupancy, waves and L2 hit rate.

    python3 benchmarks/experiments/decode_profile/summarize.py DIR     (DIR: profile.sh's $OUT) -> DIR/profile.md
"""

from __future__ import annotations

import csv
import json
import pathlib
import sys

COLUMNS = {
    "gpu__time_duration.sum": "time",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occ. %",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical occ. %",
    "launch__grid_size": "blocks",
    "launch__waves_per_multiprocessor": "waves",
    "lts__t_sector_hit_rate.pct": "L2 hit %",
    "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed": "SMSP active %",
    "launch__registers_per_thread": "regs",
}


def main(folder: str) -> int:
    out = pathlib.Path(folder)
    shapes = [json.loads(line) for line in (out / "shapes.jsonl").read_text().splitlines() if line.startswith("{")]
    rows = list(csv.reader((out / "ncu.csv").open()))
    head = rows[0]
    units = dict(zip(head, rows[1]))
    kernels = [dict(zip(head, r)) for r in rows[2:] if len(r) == len(head)]
    # per shape: the builder's call, the warm-up and the measured call, each flash_fwd (+ combine when split)
    calls_per_shape = 3
    lines = ["| shape | kernel | " + " | ".join(COLUMNS.values()) + " |", "|---" * (len(COLUMNS) + 2) + "|"]
    i = 0
    for s in shapes:
        n = 2 if s["num_splits"] > 1 else 1
        mine = kernels[i : i + calls_per_shape * n]
        i += calls_per_shape * n
        for k in mine[-n:]:
            cells = [f"{k.get(c, '')} {units.get(c, '')}".strip() for c in COLUMNS]
            lines.append(f"| {s['shape']} | {k['Kernel Name'][:24]} | " + " | ".join(cells) + " |")
    (out / "profile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
