r"""GPU: where flash_fwd's warps stall, instruction by instruction (Nsight Compute's PC sampling), for issue 14.

    ncu --clock-control none --kernel-name flash_fwd --section SourceCounters --section WarpStateStats \
        -o stalls python3 tools/stall_profile.py
    ncu -i stalls.ncu-rep --page source --csv --print-source cuda,sass > stalls_source.csv
    python3 tools/stall_profile.py --summary stalls_source.csv      (no GPU: the samples per line and reason)

One launch per variant at 4 x 16 x 4096 x 128, non-causal, default tilings: f16 with f16 P@V, then f16 with f32 P@V.
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


def launch_all() -> None:
    import torch
    from flashsim import gpu
    from flashsim.gpu import launch
    from flashsim.gpu.build import compile_cuda, kernel_path

    def build_with_lines(config, arch):
        return compile_cuda(kernel_path(launch.KERNEL_FILE).read_text(), arch=arch,
                            defines=launch.build_defines(config), extra_options=("--generate-line-info",))
    launch.build_kernel = build_with_lines
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    for acc in VARIANTS:
        run, _, plan = gpu.prepared_launch(q, k, v, pv_accum=acc)
        run(sync=True)
        print(acc, plan.config.describe(), flush=True)


def summary(path: str, top: int, kernel_source: str | None = None) -> None:
    """Stall samples per line of kernel/flash_fwd.cu and per stall reason, from ncu's source page exported as CSV
    (--print-source cuda,sass: a row per source line carries that line's samples, its SASS rows follow it).
    ``kernel_source``: the flash_fwd.cu the profile ran (default: this checkout's) for the lines' text."""
    from flashsim.gpu.build import kernel_path
    source = open(kernel_source or kernel_path("flash_fwd.cu")).read().splitlines()
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    tables = []
    for r in rows:
        if r and r[0] == "Line No":
            tables.append({"header": r, "rows": []})
        elif tables and r and r[0].strip().isdigit():
            tables[-1]["rows"].append(r)
    for n, t in enumerate(tables):
        h = t["header"]
        samp = h.index("Warp Stall Sampling (All Samples)")
        execd = h.index("Instructions Executed")
        reasons = [(i, c) for i, c in enumerate(h) if c.startswith("stall_") and "(Not Issued)" not in c]
        per_line, per_reason, per_exec = defaultdict(float), defaultdict(float), defaultdict(float)
        for r in t["rows"]:
            per_line[int(r[0])] += float(r[samp] or 0)
            per_exec[int(r[0])] += float(r[execd]) if r[execd] not in ("", "-") else 0.0
            for i, c in reasons:
                per_reason[c] += float(r[i] or 0) if r[i] not in ("", "-") else 0.0
        total, total_exec = sum(per_line.values()), sum(per_exec.values()) or 1.0
        print(f"kernel {n} ({VARIANTS[n] if n < len(VARIANTS) else '?'} P@V): {total:.0f} samples")
        print("  by stall reason:")
        for c, s in sorted(per_reason.items(), key=lambda x: -x[1])[:10]:
            print(f"    {100 * s / total:5.1f}%  {c}")
        print("  by line of kernel/flash_fwd.cu: stall samples, warp instructions executed")
        for line, s in sorted(per_line.items(), key=lambda x: -x[1])[:top]:
            text = source[line - 1].strip() if 0 < line <= len(source) else "?"
            print(f"    {100 * s / total:5.1f}%  {100 * per_exec[line] / total_exec:5.1f}%  {line:4d}  {text[:100]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--summary", metavar="CSV", help="summarise an exported source page instead of launching")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--kernel-source", help="the kernel/flash_fwd.cu the profile ran (default: this checkout's)")
    a = p.parse_args(argv)
    if a.summary:
        summary(a.summary, a.top, a.kernel_source)
    else:
        launch_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
