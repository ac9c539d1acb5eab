r"""GPU: where flash_fwd's warps stall, instruction by instruction (Nsight Compute's PC sampling).

    ncu --clock-control none --kernel-name flash_fwd --section SourceCounters --section WarpStateStats \
        -o stalls python3 tools/stall_profile.py
    ncu -i stalls.ncu-rep --page source --csv --print-source cuda,sass > stalls_source.csv
    python3 tools/stall_profile.py --summary stalls_source.csv [--region load=104,311-364,499-500]
                                        (no GPU: samples and instructions per reason, region and line)

One launch per variant at 4 x 16 x 4096 x 128 (``--head-dim``: another d), non-causal, default tilings: f16 with
f16 P@V, then f16 with f32 P@V (``--causal``: the same two, causal, after the non-causal f16 P@V one).
The kernels are built with line information (NVRTC --generate-line-info, which leaves the code unchanged) so that
each sampled SASS instruction names its line of kernel/flash_fwd.cu. ``--summary CSV`` (no GPU) adds the samples
up per source line and per stall reason and prints the lines that hold most of them.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict

VARIANTS = ("f16", "f32")


def launches(causal: bool = False) -> list[tuple[str, bool]]:
    """(P@V accumulation, causal) of each launch, in order: the kernels of the profile."""
    return [("f16", False)] + [(acc, True) for acc in VARIANTS] if causal else [(acc, False) for acc in VARIANTS]


def launch_all(causal: bool = False, head_dim: int = 128) -> None:
    import torch

    from flashsim import gpu
    from flashsim.gpu import launch

    plain = launch.build_kernel
    launch.build_kernel = lambda config, arch: plain(config, arch, extra_options=("--generate-line-info",))
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 16, 4096, head_dim, device="cuda", dtype=torch.float16) for _ in range(3))
    for acc, cz in launches(causal):
        run, _, plan = gpu.prepared_launch(q, k, v, pv_accum=acc, causal=cz)
        run(sync=True)
        print(acc, plan.config.describe(), flush=True)


def _parse_ranges(text: str) -> set[int]:
    """ "104,311-364" -> {104, 311, ..., 364}."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def read_source_page(path: str) -> list[dict]:
    """ncu's source page (--print-source cuda,sass, CSV): per profiled kernel, its SASS instructions, each once
    (keyed by address), with the kernel lines it belongs to (an inlined instruction is listed under the call site and
    under the callee's line: it belongs to both), its stall samples, its warp instructions executed and its reasons."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    kernels = []
    for r in rows:
        if r and r[0] == "Line No":
            h = r
            cols = dict(samples=h.index("Warp Stall Sampling (All Samples)"), executed=h.index("Instructions Executed"))
            reasons = [(i, c) for i, c in enumerate(h) if c.startswith("stall_") and "(Not Issued)" not in c]
            kernels.append({"instructions": {}, "cols": cols, "reasons": reasons})
            line = None
        elif kernels and len(r) > 4:
            if r[0].strip().isdigit():
                line = int(r[0])
                continue
            if r[2] in ("...", "-", "") or line is None:
                continue
            k = kernels[-1]
            num = lambda i: float(r[i]) if i < len(r) and r[i] not in ("", "-") else 0.0
            ins = k["instructions"].setdefault(
                r[2],
                {
                    "lines": set(),
                    "sass": r[3].strip(),
                    "samples": num(k["cols"]["samples"]),
                    "executed": num(k["cols"]["executed"]),
                    "reasons": {c: num(i) for i, c in k["reasons"]},
                },
            )
            ins["lines"].add(line)
    return kernels


def summary(
    path: str, top: int, kernel_source: str | None = None, regions: dict | None = None, causal: bool = False
) -> None:
    """Stall samples and warp instructions executed per stall reason, per region of lines and per line of
    kernel/flash_fwd.cu, as shares of the kernel's totals (every SASS instruction counted once in a total or a
    region; in the per-line list an inlined instruction counts for each line it belongs to).
    ``kernel_source``: the flash_fwd.cu the profile ran (default: this checkout's) for the lines' text; ``causal``:
    the profile was launched with --causal (the kernels are named after ``launches``)."""
    from flashsim.gpu.build import kernel_path

    source = open(kernel_source or kernel_path("flash_fwd.cu")).read().splitlines()
    names = [f"{acc} P@V{', causal' if cz else ''}" for acc, cz in launches(causal)]
    for n, k in enumerate(read_source_page(path)):
        ins = list(k["instructions"].values())
        samples = sum(i["samples"] for i in ins) or 1.0
        executed = sum(i["executed"] for i in ins) or 1.0
        print(
            f"kernel {n} ({names[n] if n < len(names) else '?'}): {samples:.0f} stall samples, "
            f"{executed:.0f} warp instructions executed"
        )
        print("  by stall reason (share of the samples):")
        per_reason = defaultdict(float)
        for i in ins:
            for c, v in i["reasons"].items():
                per_reason[c] += v
        for c, v in sorted(per_reason.items(), key=lambda x: -x[1])[:10]:
            print(f"    {100 * v / samples:5.1f}%  {c}")
        for name, lines in (regions or {}).items():
            part = [i for i in ins if i["lines"] & lines]
            print(
                f"  region {name}: {100 * sum(i['samples'] for i in part) / samples:5.1f}% of the samples, "
                f"{100 * sum(i['executed'] for i in part) / executed:5.1f}% of the instructions executed"
            )
        per_line, per_exec = defaultdict(float), defaultdict(float)
        for i in ins:
            for line in i["lines"]:
                per_line[line] += i["samples"]
                per_exec[line] += i["executed"]
        print("  by line of kernel/flash_fwd.cu: stall samples, warp instructions executed")
        for line, v in sorted(per_line.items(), key=lambda x: -x[1])[:top]:
            text = source[line - 1].strip() if 0 < line <= len(source) else "?"
            print(f"    {100 * v / samples:5.1f}%  {100 * per_exec[line] / executed:5.1f}%  {line:4d}  {text[:100]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--summary", metavar="CSV", help="summarise an exported source page instead of launching")
    p.add_argument("--top", type=int, default=30)
    p.add_argument(
        "--causal",
        action="store_true",
        help="launch the causal kernels too (module docstring); with --summary: a profile launched so",
    )
    p.add_argument("--head-dim", type=int, default=128, help="d of the launches (default 128)")
    p.add_argument("--kernel-source", help="the kernel/flash_fwd.cu the profile ran (default: this checkout's)")
    p.add_argument(
        "--region",
        action="append",
        default=[],
        metavar="NAME=LINES",
        help="a set of kernel lines to total, e.g. load=104,311-364,499-500 (repeatable)",
    )
    a = p.parse_args(argv)
    if a.summary:
        regions = {}
        for r in a.region:
            name, _, lines = r.partition("=")
            regions[name] = _parse_ranges(lines)
        summary(a.summary, a.top, a.kernel_source, regions, a.causal)
    else:
        launch_all(a.causal, a.head_dim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
