"""Shared memory, registers and occupancy of a kernel configuration (the seed's budget table), with what-ifs.

Prints each shared-memory buffer in KB with its sympy expression, the total against the arch's per-block cap,
the free space, registers per thread (ptxas's count of an NVRTC build when the gpu extra is installed, else a
labelled estimate), blocks per SM and occupancy by the cuda_occupancy.h rules. Exit status: 0 if the
configuration fits the arch, 1 if it does not, 2 on bad arguments.

examples:
  flashsim budget --arch sm_120
  flashsim budget --arch sm_120 --what-if 3-stage --what-if f16-sp --what-if two-blocks --plot budget.png
  flashsim budget --head-dim 64 --warps 4 --kv-tile 32 --stages 3 --arch sm_90
"""
from __future__ import annotations

import argparse

from ..arch import ARCHS, get_arch
from ..config import SUPPORTED_HEAD_DIMS, SUPPORTED_PV_ACCUM, SUPPORTED_STAGES, KernelConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", default="sm_120", help=f"architecture ({', '.join(ARCHS)}); default sm_120")
    p.add_argument("--head-dim", type=int, choices=SUPPORTED_HEAD_DIMS, help="head dimension d")
    p.add_argument("--warps", type=int, help="warps per block")
    p.add_argument("--m-tiles", type=int, help="m16 tiles (16 query rows each) per warp: 1 or 2")
    p.add_argument("--kv-tile", type=int, help="keys per KV tile (B_c), a multiple of 16")
    p.add_argument("--stages", type=int, choices=SUPPORTED_STAGES, help="K/V ring stages")
    p.add_argument("--pv-accum", choices=SUPPORTED_PV_ACCUM, help="P@V accumulator type")
    p.add_argument("--causal", action="store_true", help="causal mask (changes registers, not shared memory)")
    p.add_argument("--what-if", action="append", default=[], metavar="NAME",
                   choices=("3-stage", "f16-sp", "two-blocks", "all"),
                   help="3-stage, f16-sp (an f16 S/P buffer in shared memory, as the seed assumes), two-blocks, "
                        "or all; repeatable")
    p.add_argument("--registers", default="auto", choices=("auto", "compile", "estimate"),
                   help="auto: compile with NVRTC when possible, else estimate (default)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the shared-memory bar figure (needs matplotlib)")


def config_from_args(args) -> KernelConfig:
    """KernelConfig.default(arch) with the options given on the command line."""
    overrides = {k: v for k, v in (("head_dim", args.head_dim), ("warps", args.warps), ("m_tiles", args.m_tiles), ("kv_tile", args.kv_tile),
                                   ("stages", args.stages), ("pv_accum", args.pv_accum)) if v is not None}
    if args.causal:
        overrides["causal"] = True
    return KernelConfig.default(get_arch(args.arch).name, **overrides)


def run(args) -> int:
    """Bad options (ValueError) and a --plot that cannot be written (no matplotlib, no such folder) are raised
    before any work: flashsim.cli prints them in one line with exit status 2."""
    from ..resources import budget
    from ..resources.whatif import WHAT_IFS, what_if
    from .emulate import check_plot_path
    arch = get_arch(args.arch).name
    config = config_from_args(args)
    if args.plot:
        check_plot_path(args.plot)
    main = budget(config, arch, registers=args.registers, label="configuration")
    print(main.table())
    shown = [main]
    names = WHAT_IFS if "all" in args.what_if else list(dict.fromkeys(args.what_if))
    for name in names:
        w = what_if(name, config, arch, registers=args.registers)
        print("\n" + "=" * 100)
        print(w)
        shown += [b for b in w.budgets if b.label != "base configuration"]
    if args.plot:
        from ..resources.report import plot
        plot(shown, args.plot)
        print(f"\nplot written to {args.plot}")
    return 0 if main.fits else 1
