"""race_pattern.cu (the serving ring's synchronisation, idle warps in one loop or in two) under a race checker.

    python3 race_pattern.py --gpu     # on the GPU, each case launched once with cupy; run it under
                                      #   compute-sanitizer --tool racecheck (race_pattern.sh does)
    python3 race_pattern.py --ptx     # on the CPU, flashsim.ptx with check="racecheck" (a RaceError is printed)

Cases: TWO_LOOPS 0 / 1 x live warps 1 / 3 (of 4) x STAGES 2 / 3 x KERNEL_PROLOGUE 0 / 1, 4 blocks of 5 tiles, and
three controls (RACY: the live warps read a slot without waiting for its copies), which both checkers must report.
Each case's output is checked against numpy (every live thread's sum of the first words of the chunks it read), so a
run that reads before the copies land is caught by value too (a control's values may differ).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNEL = HERE.parents[3] / "kernel"  # race_pattern.cu includes kernel/async_copy.cuh
THREADS, CHUNKS, BLOCKS, TILES = 128, 4, 4, 5
# (TWO_LOOPS, live warps, STAGES, RACY, KERNEL_PROLOGUE)
CASES = [(*c, 0, p) for p in (0, 1) for c in itertools.product((0, 1), (1, 3), (2, 3))]
CASES += [(0, 3, 2, 1, 0), (1, 1, 2, 1, 0), (1, 1, 2, 1, 1)]


def source() -> str:
    return (HERE / "race_pattern.cu").read_text()


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 20, (BLOCKS, TILES, CHUNKS * THREADS, 4), dtype=np.uint32)


def expected(src, live_warps, prologue=0):
    """What each thread writes: a live thread's sum (mod 2^32) over tiles of the first word of chunks tid, tid + 32
    * live_warps, ...; an idle thread's 0. With the kernel's prologue the last tile's second half is zeros."""
    if prologue:
        src = src.copy()
        src[:, -1, CHUNKS // 2 * THREADS :] = 0
    out = np.zeros((BLOCKS, THREADS), np.uint64)
    for tid in range(32 * live_warps):
        out[:, tid] = src[:, :, tid :: 32 * live_warps, 0].astype(np.uint64).sum(axis=(1, 2))
    return (out & 0xFFFFFFFF).astype(np.uint32)


def name(case) -> str:
    two, live, stages, racy, prologue = case
    text = f"{'two loops' if two else 'one loop '} live warps {live}/4 stages {stages}"
    return text + (" kernel prologue" if prologue else "") + (" RACY" if racy else "")


def options(case) -> dict:
    two, _, stages, racy, prologue = case
    return dict(TWO_LOOPS=two, STAGES=stages, RACY=racy, KERNEL_PROLOGUE=prologue)


def run_gpu(only=None) -> int:
    import cupy as cp

    src = inputs()
    bad = 0
    for case in CASES if only is None else [CASES[only]]:
        live = case[1]
        defines = (f"-D{k}={v}" for k, v in options(case).items())
        mod = cp.RawModule(code=source(), options=("-std=c++17", f"-I{KERNEL}", *defines))
        fn = mod.get_function("race_pattern")
        d_src, out = cp.asarray(src), cp.zeros((BLOCKS, THREADS), cp.uint32)
        fn((BLOCKS,), (THREADS,), (d_src, out, np.int32(TILES), np.int32(live)))
        cp.cuda.runtime.deviceSynchronize()
        ok = np.array_equal(cp.asnumpy(out), expected(src, live, case[4]))
        bad += not ok and not case[3]
        print(f"{name(case)}: values {'equal' if ok else 'DIFFER'}", flush=True)
    return 1 if bad else 0


def run_ptx() -> int:
    import flashsim.ptx as P

    src = inputs()
    bad = 0
    for case in CASES:
        live = case[1]
        kernel = P.compile(source(), arch="sm_90", defines=options(case)).kernel("race_pattern")
        out = np.zeros((BLOCKS, THREADS), np.uint32)
        try:
            P.launch(kernel, BLOCKS, THREADS, [src, out, np.int32(TILES), np.int32(live)], check="racecheck")
            ok = np.array_equal(out, expected(src, live, case[4]))
            verdict = f"racecheck clean, values {'equal' if ok else 'DIFFER'}"
            bad += not ok or case[3]  # a control must be reported
        except P.SimulationError as exc:
            verdict = f"{type(exc).__name__}: {exc}"
            bad += not case[3]
        print(f"{name(case)}: {verdict}", flush=True)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", action="store_true")
    g.add_argument("--ptx", action="store_true")
    p.add_argument("--case", type=int, help="--gpu: this case alone (its index in CASES), so that each gets a report")
    a = p.parse_args(argv)
    return run_gpu(a.case) if a.gpu else run_ptx()


if __name__ == "__main__":
    sys.exit(main())
