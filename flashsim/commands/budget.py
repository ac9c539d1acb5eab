"""Shared memory, registers and occupancy of a kernel configuration (the seed's budget table), with what-ifs.

Prints each shared-memory buffer in KB with its sympy expression, the total against the arch's per-block cap,
the free space, registers per thread (ptxas's count of an NVRTC build when the gpu extra is installed, else a
labelled estimate), blocks per SM and occupancy by the cuda_occupancy.h rules. Exit status: 0 if the
configuration fits the arch, 1 if it does not, 2 on bad arguments.

examples:
  flashsim budget --arch sm_120
  flashsim budget --arch sm_120 --what-if 3-stage --what-if f16-sp --what-if two-blocks --plot budget.png
  flashsim budget --head-dim 64 --warps 4 --kv-tile 32 --stages 3 --arch sm_90
  flashsim budget --arch sm_120 --every-head-dim        (the default configuration of every head dim, 32 to 256)
  flashsim budget --arch sm_120 --every-head-dim --quant int8    (INT8 attention: s8 Q and K tiles)
  flashsim budget --arch sm_120 --every-head-dim --quant nvfp4   (NVFP4 Q K^T: d = 64 and 128, sm_120 only)
  flashsim budget --serving --arch sm_90 --head-dim 128 --decode-rows 4   (decode kernel and flash_combine)
  flashsim budget --serving --arch sm_90 --warp-split 6   (the decode whose 6 warps split the keys: no combine)
  flashsim budget --serving --arch sm_90 --paged --warp-split 8 --stages 3   (the paged decode's default form)
"""

from __future__ import annotations

import argparse

from ..arch import ARCHS, get_arch
from ..config import (
    NVFP4_HEAD_DIMS,
    SUPPORTED_HEAD_DIMS,
    SUPPORTED_M_TILES,
    SUPPORTED_PV_ACCUM,
    SUPPORTED_QUANT,
    SUPPORTED_STAGES,
    KernelConfig,
    pv_accums,
)
from ..tuning import tile_class
from .emulate import check_plot_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", default="sm_120", help=f"architecture ({', '.join(ARCHS)}); default sm_120")
    p.add_argument("--head-dim", type=int, choices=SUPPORTED_HEAD_DIMS, help="head dimension d")
    p.add_argument("--warps", type=int, help="warps per block")
    p.add_argument("--m-tiles", type=int, choices=SUPPORTED_M_TILES, help="m16 tiles (16 query rows each) per warp")
    p.add_argument("--kv-tile", type=int, help="keys per KV tile (B_c), a multiple of 16")
    p.add_argument("--stages", type=int, choices=SUPPORTED_STAGES, help="K/V ring stages")
    p.add_argument("--pv-accum", choices=SUPPORTED_PV_ACCUM, help="P@V accumulator type")
    p.add_argument("--causal", action="store_true", help="causal mask (changes registers, not shared memory)")
    p.add_argument(
        "--quant",
        choices=SUPPORTED_QUANT,
        default="none",
        help="quantized attention: int8 holds Q and K as s8 in shared memory (half their bytes), nvfp4 as e2m1 "
        "(a quarter, plus a ue4m3 scale per 16 elements of K; sm_120 only, d 64 or 128)",
    )
    p.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="NAME",
        choices=("3-stage", "f16-sp", "two-blocks", "all"),
        help="3-stage, f16-sp (an f16 S/P buffer in shared memory, as the seed assumes), two-blocks, "
        "or all; repeatable",
    )
    p.add_argument(
        "--registers",
        default="auto",
        choices=("auto", "compile", "estimate"),
        help="auto: compile with NVRTC when possible, else estimate (default)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw the shared-memory bar figure (needs matplotlib)")
    p.add_argument(
        "--serving",
        action="store_true",
        help="the serving kernels: the default decode configuration (split-KV, GQA packed; --head-dim, "
        "--decode-rows, --paged) and flash_combine, registers by ptxas",
    )
    p.add_argument(
        "--decode-rows",
        type=int,
        default=4,
        help="with --serving: packed query rows per K / V head (Nq x Hq / Hkv), default 4",
    )
    p.add_argument("--paged", action="store_true", help="with --serving: a paged KV cache")
    p.add_argument(
        "--warp-split",
        type=int,
        default=1,
        metavar="W",
        help="with --serving: the decode whose block's W warps split the keys (KernelConfig.warp_split; the widest kv "
        "tile whose W rings fit), no flash_combine; default 1 (the split call)",
    )
    p.add_argument(
        "--fused",
        action="store_true",
        help="with --serving: the build with the index check inside flash_fwd",
    )
    p.add_argument(
        "--every-head-dim",
        action="store_true",
        help="one line per head dim (32..256) and P@V accumulation: the arch's default configuration "
        "(flashsim.config.DEFAULT_TILES), its shared memory, registers and occupancy",
    )


def config_from_args(args) -> KernelConfig:
    """KernelConfig.default(arch) with the options given on the command line."""
    overrides = {
        k: v
        for k, v in (
            ("head_dim", args.head_dim),
            ("warps", args.warps),
            ("m_tiles", args.m_tiles),
            ("kv_tile", args.kv_tile),
            ("stages", args.stages),
            ("pv_accum", args.pv_accum),
        )
        if v is not None
    }
    if args.causal:
        overrides["causal"] = True
    if args.quant != "none":
        overrides["quant"] = args.quant
    return KernelConfig.default(get_arch(args.arch).name, **overrides)


def run(args) -> int:
    """Bad options (ValueError) and a --plot that cannot be written (no matplotlib, no such folder) are raised
    before any work: flashsim.cli prints them in one line with exit status 2."""
    from ..resources import budget
    from ..resources.whatif import WHAT_IFS, what_if

    arch = get_arch(args.arch).name
    if args.every_head_dim:
        return every_head_dim(arch, args.registers, args.quant)
    if getattr(args, "serving", False):
        return serving(
            arch, args.head_dim or 128, args.decode_rows, args.paged, args.fused, args.warp_split, args.stages
        )
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


def serving(
    arch: str, head_dim: int, rows: int, paged: bool, fused: bool = False, warp_split: int = 1, stages=None
) -> int:
    """The decode kernel's and flash_combine's budgets on ``arch`` (``fused``: the decode kernel with the index check
    inside it; ``warp_split`` W > 1: its form with W warps splitting the keys, no combine; ``stages``: its K / V
    rings' depth, default the decode's); 0 when the decode kernel fits."""
    from ..resources.serving import decode_config, serving_budget
    from ..serving.problem import warp_split_form

    if rows < 1:
        raise ValueError(f"--decode-rows must be >= 1, got {rows}")
    config = decode_config(arch, head_dim, rows, paged=paged).with_(fused=fused)
    if stages is not None:
        config = config.with_(stages=stages)
    if warp_split != 1:  # its range is KernelConfig's to check
        if config.warps != 1:
            raise ValueError(
                f"--warp-split {warp_split}: needs a one-warp decode (--decode-rows <= 16), got {config.warps} warps "
                f"for {rows} rows"
            )
        wide = warp_split_form(config, arch, warp_split)
        if wide is None:
            raise ValueError(
                f"--warp-split {warp_split}: no kv tile fits {warp_split} K / V rings in a block of {arch}"
            )
        config = wide
    main, combine = serving_budget(config, arch)
    print(main.table())
    if combine is not None:
        print(combine.table())
    return 0 if main.fits else 1


def every_head_dim(arch: str, registers: str = "auto", quant: str = "none") -> int:
    """The default configuration of every head dim and P@V accumulation on ``arch`` (with ``quant``), one line each;
    0 when every one fits the arch, 1 otherwise (a head dim with no fitting configuration is named)."""
    from ..resources import budget

    if quant == "nvfp4":  # sm_120 only: refused here, before any line is printed
        KernelConfig(quant=quant, head_dim=NVFP4_HEAD_DIMS[0], kv_tile=32).check_arch(arch)
    source = (
        "measured on the H200 (tools/tile_sweep.py)"
        if tile_class(arch) == "sm_90"
        else "predicted from ptxas and occupancy (tools/choose_defaults.py; not run on this arch)"
    )
    print(
        f"{arch}: default configuration per head dim{f', quant={quant}' if quant != 'none' else ''}, {source}; "
        f"cap {get_arch(arch).smem_per_block_optin} B per block"
    )
    print(
        f"{'d':>4} {'P@V':6} {'warps x m16 x kv_tile, stages':30} {'smem KB':>8} {'fits':>5} {'regs':>5} "
        f"{'spill B':>8} {'blocks/SM':>9} {'occupancy':>9}  registers from"
    )
    bad = []
    for d in NVFP4_HEAD_DIMS if quant == "nvfp4" else SUPPORTED_HEAD_DIMS:
        for acc in pv_accums("f16", quant):
            cfg = KernelConfig.default(arch, head_dim=d, pv_accum=acc, quant=quant)
            b = budget(cfg, arch, registers=registers)
            spill = "-" if b.reg.spill_stores is None else str(b.reg.spill_stores + (b.reg.spill_loads or 0))
            tiles = f"{cfg.warps} x {cfg.m_tiles} x {cfg.kv_tile}, {cfg.stages}"
            print(
                f"{d:>4} {acc:6} {tiles:30} {b.smem_bytes / 1024:8.1f} {'yes' if b.fits else 'NO':>5} "
                f"{b.reg.registers:>5} {spill:>8} {b.blocks_per_sm:>9} {b.occupancy:>9.1%}  {b.registers_source}"
            )
            if not b.fits:
                bad.append(f"d={d} {acc}")
    if bad:
        print(f"no fitting configuration on {arch}: {', '.join(bad)}")
    return 1 if bad else 0
