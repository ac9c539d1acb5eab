"""The mma.sync ceiling of this GPU: the rate of CHAINS independent mma.sync chains per warp on every SM, for each
instruction the kernels use or will use. Every kernel figure can then be read as a fraction of it.

    flashsim bench peak [--json out.json]          (or: python3 benchmarks/bench_peak.py [--chains 8] [--iters 4096])

The kernel is kernel/bench/mma_peak.cu, built by NVRTC for the GPU's arch (flashsim.gpu.build.compile_cuda), one
build per instruction (FS_PEAK_KIND). Operands live in registers, so nothing but the tensor cores is measured.
Rate = 2 * M * N * K * mmas / time (TFLOP/s, TOPS for INT8), the median of CUDA-event timings of one launch of
``blocks_per_sm * SMs`` blocks of 4 warps.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from ..arch import get_arch
from . import runtime as rt
from .build import compile_cuda, kernel_path

KINDS = {  # FS_PEAK_KIND -> (name, M*N*K of one mma)
    0: ("m16n8k16 f32.f16.f16.f32", 16 * 8 * 16),
    1: ("m16n8k16 f16.f16.f16.f16", 16 * 8 * 16),
    2: ("m16n8k32 s32.s8.s8.s32", 16 * 8 * 32),
    3: ("m16n8k32 f32.e4m3.e4m3.f32", 16 * 8 * 32),
    4: ("m16n8k32 f16.e4m3.e4m3.f16", 16 * 8 * 32),
}
WARPS = 4


def must_vary(kind: int, arch: str) -> bool:
    """Whether the probe must vary the instruction's operands step by step (FS_PEAK_VARY) to keep its products in
    the loop: where the mma does not accumulate in place, i.e. FP8 on an arch that runs it as f16 HMMA from zero
    plus an add (``Arch.mma8_on_f16_mma``). Elsewhere fixed operands are the cleaner probe (no extra instruction)."""
    return "e4m3" in KINDS[kind][0] and get_arch(arch).mma8_on_f16_mma


def build(kind: int, arch: str, chains: int, iters: int, source: str | None = None, vary: bool | None = None):
    """The NVRTC build of mma_peak.cu (or ``source``, another text of it) for one instruction (works without a
    GPU); ``vary`` None: ``must_vary``."""

    text = kernel_path("bench/mma_peak.cu").read_text() if source is None else source
    vary = must_vary(kind, arch) if vary is None else vary
    return compile_cuda(
        text,
        arch=arch,
        name="mma_peak.cu",
        defines={"FS_PEAK_KIND": kind, "FS_PEAK_CHAINS": chains, "FS_PEAK_ITERS": iters, "FS_PEAK_VARY": int(vary)},
    )


WARM_S = 2.0  # seconds of back-to-back launches before the first timing (``warm``)


def warm(launch, seconds: float) -> None:
    """Launch back to back for ``seconds`` of wall time, so that the GPU has left its idle clocks before anything is
    timed: without it the first ceiling a process measured read 4-5% under the same probe a minute later
    (benchmarks/logs/2026-12-01j/bench.txt against peak.txt; benchmarks/experiments/ceiling_warmup/)."""
    import time

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        launch()
        rt.synchronize()


def measure(
    chains: int = 8,
    iters: int = 4096,
    blocks_per_sm: int = 8,
    reps: int = 10,
    vary: bool | None = None,
    kinds=None,
    warm_s: float = WARM_S,
) -> dict:
    """{instruction: {"tflops": ..., "ms": ..., "vary": ...}} on the current GPU (``vary``: see ``build``), for the
    FS_PEAK_KIND values ``kinds`` (default: every instruction of KINDS); the first instruction's launches run
    ``warm_s`` seconds before its timing (``warm``)."""

    dev = rt.require_gpu()
    arch = rt.current_arch()
    sms = dev.properties.multiprocessor_count
    grid, block = sms * blocks_per_sm, WARPS * 32
    rng = np.random.default_rng(0)
    # random bytes in [1, 31]: small non-zero f16 / e4m3 / s8 values (not zeros, which can run faster), so no
    # accumulator overflows over the run
    seed = rt.to_device(rng.integers(1, 32, 128, dtype=np.uint8).view(np.uint32).copy())
    out = rt.empty((grid * block,), np.uint32)
    result = {"arch": arch, "sms": sms, "grid": grid, "block": block, "chains": chains, "iters": iters}
    for kind, (name, mnk) in KINDS.items():
        if kinds is not None and kind not in kinds:
            continue
        varied = must_vary(kind, arch) if vary is None else vary
        kern = rt.load(build(kind, arch, chains, iters, vary=varied), "mma_peak")

        def launch():
            rt.launch(kern, (grid,), (block,), seed, out, np.uint32(0), sync=False)

        warm(launch, warm_s)
        warm_s = 0.0
        ms = rt.timed(launch, warmup=3, reps=reps)
        mmas = grid * WARPS * chains * iters
        result[name] = {"ms": ms, "tflops": 2.0 * mnk * mmas / (ms * 1e-3) / 1e12, "vary": varied}
    return result


def sweep(
    warps_per_scheduler=(1, 2, 4, 8), chains=(4, 8, 16), iters: int = 2048, vary: bool | None = None
) -> list[dict]:
    """The ceiling against how many warps each scheduler holds (blocks of 4 warps: one warp per scheduler each) and
    how many independent chains a warp runs: what one warp alone can draw from the tensor pipe, the question a
    ping-pong schedule (one warp of a scheduler in its mma phase at a time) raises."""
    rows = []
    warm_s = WARM_S
    for wps in warps_per_scheduler:
        for c in chains:
            r = measure(c, iters, blocks_per_sm=wps, vary=vary, warm_s=warm_s)
            warm_s = 0.0
            rows.append(
                {"warps_per_scheduler": wps, "chains": c, **{name: r[name]["tflops"] for name, _ in KINDS.values()}}
            )
            print(
                f"  {wps} warp(s) per scheduler, {c:2d} chains: "
                + "  ".join(f"{name} {r[name]['tflops']:7.1f}" for name, _ in KINDS.values()),
                flush=True,
            )
    return rows


VARY = {"auto": None, "all": True, "none": False}  # --vary -> ``measure``'s vary


def add_probe_arguments(p, prefix: str = "") -> None:
    """--sweep and --vary, for this module's command line and `flashsim bench peak` (``prefix`` starts the help)."""
    p.add_argument(
        "--sweep",
        action="store_true",
        help=prefix + "the ceiling for 1, 2, 4, 8 warps per scheduler and 4, 8, 16 chains per warp",
    )
    p.add_argument(
        "--vary",
        choices=tuple(VARY),
        default="auto",
        help=prefix + "operands varied step by step: where a product could leave the timed loop (auto: "
        "FP8 run as f16 HMMA), for every instruction (all: FP8 and f16 like for like), or "
        "nowhere (none)",
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chains", type=int, default=8)
    p.add_argument("--iters", type=int, default=4096)
    p.add_argument("--json")
    add_probe_arguments(p)
    a = p.parse_args(argv)
    vary = VARY[a.vary]
    if a.sweep:
        print(
            f"mma.sync rate (TFLOP/s; TOPS for s8) against warps per scheduler and chains per warp "
            f"(operands varied: {a.vary})"
        )
        rows = sweep(vary=vary)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump(rows, fh, indent=1)
        return 0
    r = measure(a.chains, a.iters, vary=vary)
    print(
        f"mma.sync ceiling on {r['arch']} ({r['sms']} SMs; {r['chains']} independent chains per warp, "
        f"{r['grid']} blocks of {WARPS} warps, {r['iters']} steps; operands varied: {a.vary})"
    )
    on_f16 = get_arch(r["arch"]).mma8_on_f16_mma
    for name, _ in KINDS.values():
        unit = "TOPS" if "s8" in name else "TFLOP/s"
        note = "   no FP8 mma in this GPU: ptxas runs two f16 HMMA.16816" if on_f16 and "e4m3" in name else ""
        note += "   (operands varied per step)" if r[name]["vary"] else ""
        print(f"  {name:28s} {r[name]['tflops']:8.1f} {unit}   ({r[name]['ms']:.3f} ms){note}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(r, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
