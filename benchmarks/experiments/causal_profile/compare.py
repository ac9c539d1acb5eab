"""The causal f16 kernel's profile against the full one's, per kernel line (no GPU): which lines execute more warp
instructions per KV tile in the causal launch.

    PYTHONPATH=. python3 benchmarks/experiments/causal_profile/compare.py > causal_vs_full.txt

Input: stalls_source.csv.gz beside this file (run.sh: kernel 0 = full f16 P@V, 1 = causal f16 P@V, 4 x 16 x 4096 x
128, 128 x 64 tiles, so the causal launch runs 1056 / 2048 of the full one's tiles).
"""

import gzip
import pathlib
import sys
import tempfile
from collections import defaultdict

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tools"))
import stall_profile as sp  # noqa: E402

TILE_RATIO = 1056 / 2048


def per_line(kernel):
    """{line: warp instructions} (an instruction listed under several lines split evenly), and the total."""
    out, total = defaultdict(float), 0.0
    for ins in kernel["instructions"].values():
        total += ins["executed"]
        for ln in ins["lines"]:
            out[ln] += ins["executed"] / len(ins["lines"])
    return out, total


def main():
    with tempfile.NamedTemporaryFile(suffix=".csv") as tmp:
        tmp.write(gzip.decompress((HERE / "stalls_source.csv.gz").read_bytes()))
        tmp.flush()
        kernels = sp.read_source_page(tmp.name)
    (a, ta), (b, tb) = per_line(kernels[0]), per_line(kernels[1])
    print(
        f"warp instructions: full {ta / 1e6:.1f}M, causal {tb / 1e6:.1f}M: {tb / ta:.4f} of the full one's for "
        f"{TILE_RATIO:.4f} of its tiles ({tb / ta / TILE_RATIO - 1:+.1%} per tile)"
    )
    src = (HERE.parents[2] / "kernel" / "flash_fwd.cu").read_text().split("\n")
    rows = sorted(((b.get(ln, 0) - a.get(ln, 0) * TILE_RATIO, ln) for ln in set(a) | set(b)), reverse=True)
    print("lines with the most extra instructions (an instruction split evenly over its lines):")
    for x, ln in rows[:8]:
        print(f"  {x / 1e6:6.2f}M ({x / tb:5.1%} of the causal launch)  line {ln}: {src[ln - 1].strip()[:90]}")


if __name__ == "__main__":
    main()
