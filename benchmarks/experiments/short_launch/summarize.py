"""No GPU: run.sh's logs summed up per shape (the figures of README.md here and benchmarks/RESULTS.md).

    python3 benchmarks/experiments/short_launch/summarize.py benchmarks/experiments/short_launch/2026-12-01

From sustain.json and smi.csv: each shape's rate and the SM clock / power nvidia-smi sampled while it ran (its first
0.5 s left out); from ncu.txt: SM active cycles over elapsed (1 - the idle tail), tensor-pipe activity, and the SM
cycles per block-tile (active cycles x blocks per SM at once / the KV tiles the SM's blocks run).
"""

from __future__ import annotations

import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from sustained import stretches  # noqa: E402

BLOCKS_PER_SM = 2  # the d = 128 f16 default on sm_90 (flashsim budget --arch sm_90 --pv-accum f16)
SMS = 132
BLOCK_M, KV_TILE = 128, 64
UNIT_US = {"ms": 1000.0, "us": 1.0, "ns": 1e-3}  # gpu__time_duration's units, to microseconds


def ncu_kernels(path):
    """[(grid, {metric: value})] in launch order."""
    kernels = []
    for line in open(path):
        m = re.match(r"\s*flash_fwd \((\d+), (\d+), (\d+)\)", line)
        if m:
            kernels.append(((int(m[1]), int(m[2]), int(m[3])), {}))
            continue
        m = re.match(r"\s*([a-z_]+__[\w.]+)\s+(\S*)\s+([\d,.]+)\s*$", line)
        if m and kernels:
            kernels[-1][1][m[1]] = float(m[3].replace(",", "")) * UNIT_US.get(m[2], 1.0)
    return kernels


def main(folder: str) -> None:
    print("sustained launches (nvidia-smi every 100 ms; a run's first 0.5 s left out):")
    for row in stretches(folder):
        print(
            f"  {','.join(map(str, row['shape'])):<11} {row['tflops']:6.1f} TFLOP/s  "
            f"SM clock {row['clock_min']:.0f}-{row['clock_max']:.0f} MHz (mean {row['clock_mean']:.0f}, "
            f"{row['samples']} samples)  power {row['power_mean']:.0f} W  "
            f"clock event reasons {', '.join(row['reasons'])}"
        )
    print("ncu, one launch each (--clock-control none):")
    for grid, m in ncu_kernels(f"{folder}/ncu.txt"):
        blocks = grid[0] * grid[1] * grid[2]
        n = grid[0] * BLOCK_M  # q blocks x rows: N (non-causal, Nk = Nq)
        tiles = blocks * (n // KV_TILE)
        per_tile = m["sm__cycles_active.avg"] * BLOCKS_PER_SM / (tiles / SMS)
        print(
            f"  grid {grid} N={n:<5} {m['gpu__time_duration.sum']:8.1f} us  SM clock "
            f"{m['sm__cycles_elapsed.avg.per_second']:.2f} GHz  active / elapsed "
            f"{m['sm__cycles_active.avg'] / m['sm__cycles_elapsed.avg']:.3f}  tensor pipe "
            f"{m['sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active']:.1f}% of active  issue "
            f"{m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.1f}%  waves "
            f"{m['launch__waves_per_multiprocessor']:.2f}  SM cycles per block-tile {per_tile:.0f}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
