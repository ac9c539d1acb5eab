"""Two versions of flashsim side by side: measure.py's layers in alternating rounds, one process per run.

    python benchmarks/experiments/serving_host_time/compare.py BEFORE_DIR AFTER_DIR [--rounds K] [--calls N]

BEFORE_DIR / AFTER_DIR: trees holding a flashsim package (e.g. ``git archive <commit> flashsim kernel | tar -x -C
DIR``), put first on PYTHONPATH for their runs. On a shared machine one run's medians move by tens of percent with the
other processes' load, so the rounds alternate (before, after, before, ...) and the table gives, per layer and shape,
the median over the rounds of each run's median and the lowest run's median (the quietest moment); every run's
lines are printed first.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"^(decode .+?)\s+splits\s+\d+\s+(.*)$")
CELL = re.compile(r"(\S+(?: x\d)?) +([0-9.]+)")


def run(tree: str, calls: int, repeat: int, wall: bool = False) -> tuple[str, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    cmd = [sys.executable, str(HERE / "measure.py"), "--layers-only", "--calls", str(calls), "--repeat", str(repeat)]
    cmd += ["--wall"] if wall else []
    text = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            rows[m[1].strip()] = {k: float(v) for k, v in CELL.findall(m[2])}
    return text, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--wall", action="store_true", help="measure.py --wall")
    args = ap.parse_args()
    runs = {"before": [], "after": []}
    for i in range(args.rounds):
        for name, tree in (("before", args.before), ("after", args.after)):
            load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else "?"
            text, rows = run(tree, args.calls, args.repeat, args.wall)
            print(f"== round {i + 1} {name} ({tree}), load average {' '.join(load)}")
            print(text.rstrip())
            runs[name].append(rows)
    shapes = list(runs["after"][0])
    layers = list(runs["after"][0][shapes[0]])
    print(f"\nus per call: median over {args.rounds} rounds (lowest round), before -> after")
    print("| shape | " + " | ".join(layers) + " |")
    print("|---" * (len(layers) + 1) + "|")
    for shape in shapes:
        cells = []
        for layer in layers:
            b = [r[shape][layer] for r in runs["before"] if layer in r.get(shape, {})]
            a = [r[shape][layer] for r in runs["after"] if layer in r.get(shape, {})]
            fmt = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f})" if xs else "-"  # noqa: E731
            cells.append(f"{fmt(b)} -> {fmt(a)}")
        print(f"| {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
