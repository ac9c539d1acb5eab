"""ptxas resources of every candidate tiling, per arch, head dim and P@V accumulation (no GPU needed: NVRTC only).

    python tools/register_sweep.py [--out benchmarks/logs/DATE/register_sweep.json] [--quant int8] [--d 64,128]

Candidates: warps 4 / 8, m16 tiles per warp 1 / 2, kv_tile 32 / 64 / 128, two stages (the ring depth changes shared
memory, not registers). Writes, per candidate, registers and spill bytes; flashsim.config.KernelConfig.default's
tables were chosen from this file (no spills, fits the arch's shared memory) and, on sm_90, from the H200 timings
of tools/device_round.sh's tile sweep.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from concurrent.futures import ProcessPoolExecutor

from flashsim.config import SUPPORTED_HEAD_DIMS, KernelConfig, pv_accums


def _one(args):
    arch, d, acc, warps, mt, kv, quant = args
    from flashsim.gpu.launch import build_kernel

    cfg = KernelConfig(head_dim=d, warps=warps, m_tiles=mt, kv_tile=kv, stages=2, pv_accum=acc, quant=quant)
    b = build_kernel(cfg, arch)
    return dict(
        arch=arch,
        head_dim=d,
        pv_accum=acc,
        quant=quant,
        warps=warps,
        m_tiles=mt,
        kv_tile=kv,
        registers=b.registers,
        spill_bytes=b.spill_stores + b.spill_loads,
        smem_stages2=cfg.smem_bytes,
        smem_stages3=cfg.with_(stages=3).smem_bytes,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="-")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--quant", default="none", help="the configurations' quant (none, int8, int8-fp8)")
    p.add_argument(
        "--accs",
        default=None,
        help="P@V accumulations, comma separated (default: every one the quant can run, config.pv_accums)",
    )
    p.add_argument("--d", default=",".join(map(str, SUPPORTED_HEAD_DIMS)), help="head dims, comma separated")
    args = p.parse_args(argv)
    dims = [int(x) for x in args.d.split(",")]
    accs = args.accs.split(",") if args.accs else pv_accums("f16", args.quant)
    # one or two m16 tiles per warp: three and four (config.SUPPORTED_M_TILES) fit only narrow KV tiles with an f16 O
    # and lost 10-28% against the defaults on the H200 (benchmarks/experiments/m_tiles/), so they are no candidates
    jobs = [
        (arch, d, acc, w, mt, kv, args.quant)
        for arch in ("sm_90", "sm_120")
        for d in dims
        for acc in accs
        for w, mt, kv in itertools.product((4, 8), (1, 2), (32, 64, 128))
    ]
    with ProcessPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(_one, jobs, chunksize=4))
    text = json.dumps(rows, indent=0)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
