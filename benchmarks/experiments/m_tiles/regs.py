"""ptxas registers and spill bytes of tilings with more m16 tiles per warp (3, 4) beside the defaults; no GPU needed.

    PYTHONPATH=. python3 benchmarks/experiments/m_tiles/regs.py [--arch sm_90] > regs.txt

Also prints each tiling's shared-memory bytes per mma FLOP (ldmatrix reads of Q, K and V by every warp, and the
cp.async writes of K and V per block): the count that made two m16 tiles per warp pay (RESULTS.md, first round).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from flashsim.config import KernelConfig
from flashsim.gpu.launch import build_kernel

CANDIDATES = {  # head_dim -> tilings (warps, m_tiles, kv_tile, stages) beside the default
    64: [(4, 3, 64, 2), (4, 3, 64, 3), (4, 4, 32, 3), (8, 4, 32, 2), (4, 4, 64, 2)],
    128: [(4, 2, 32, 2), (4, 3, 32, 2), (4, 3, 32, 3), (4, 4, 16, 3), (4, 4, 32, 2), (4, 3, 64, 2)],
}


def smem_bytes_per_flop(cfg: KernelConfig) -> float:
    """Shared-memory bytes moved per mma FLOP over one KV tile: every warp reads its Q rows (ldmatrix, once per KV
    tile), the whole K and V tile; the block writes K and V once (cp.async). f16 elements."""
    d, rows, kv, r_block = cfg.head_dim, cfg.warp_m, cfg.kv_tile, cfg.block_m
    flops = 4 * r_block * kv * d
    reads = cfg.warps * (rows * d + 2 * kv * d) * 2
    writes = 2 * kv * d * 2
    return (reads + writes) / flops


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    args = p.parse_args()
    for d, tilings in CANDIDATES.items():
        for acc in ("f16", "f32"):
            base = KernelConfig.default(args.arch, head_dim=d, pv_accum=acc)
            default = (base.warps, base.m_tiles, base.kv_tile, base.stages)
            for t in [default] + [t for t in tilings if t != default]:
                cfg = replace(base, **dict(zip(("warps", "m_tiles", "kv_tile", "stages"), t)))
                k = build_kernel(cfg, args.arch)
                tag = "default" if t == default else ""
                print(
                    f"{args.arch} d={d} {acc:<4} {'x'.join(map(str, t)):<9} {tag:<7} registers {k.registers:3d}  "
                    f"spill {k.spill_stores + k.spill_loads:5d} B  smem {cfg.smem_bytes:6d} B  "
                    f"smem B/FLOP {smem_bytes_per_flop(cfg):.4f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
