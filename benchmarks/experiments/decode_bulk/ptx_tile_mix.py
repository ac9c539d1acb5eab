"""What a decode tile issues, by PTX opcode, counted by flashsim.ptx (no GPU): the serving decode's build (one K / V
head's 4 packed query heads, d 128, f16, contiguous cache, one split) run on T = 2, 4, 8 tiles of 64 keys, each
opcode's warp instructions fitted as a T + b. PTX is not the SASS the GPU runs (ptxas merges and strength-reduces),
but the split says where a tile's work lies beside ring.cu's load path, which has no softmax.

    python3 benchmarks/experiments/decode_bulk/ptx_tile_mix.py
"""

from __future__ import annotations

import numpy as np

import flashsim.ptx as P
from flashsim import provenance
from flashsim.gpu import serving as gs
from flashsim.gpu.build import kernel_dir
from flashsim.serving.problem import prepare_kvcache, serving_options

OPTS = serving_options(None, None, None, None, None, None, None, None)
TILES = (2, 4, 8)


def counts(tiles: int):
    """(opcode -> warp instructions of one decode block over ``tiles`` KV tiles, the build's config)."""
    n = 64 * tiles
    rng = np.random.default_rng(tiles)
    q = rng.standard_normal((1, 1, 4, 128)).astype(np.float16)
    k, v = (rng.standard_normal((1, n, 1, 128)).astype(np.float16) for _ in range(2))
    sl = np.asarray([n], np.int32)
    prob = prepare_kvcache(q, k, v, sl, None, 1, opts=OPTS, arch="sm_90", sm_count=132)
    cfg = prob.config
    module = P.compile((kernel_dir() / "flash_fwd.cu").read_text(), arch="sm_90",
                       defines=provenance.build_defines("flash_fwd", cfg))  # fmt: skip
    o, lse = np.zeros_like(q), np.zeros((1, 4, 1), np.float32)
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    null = np.uint64(0)
    args = [q, k, v, o, lse, null, *head, null, null, sl, *totals, null, *pages, null, null, *lse_strides]
    rep = P.launch(module.kernel("flash_fwd"), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes)
    return dict(rep.counts), cfg


def main() -> int:
    runs = {}
    for t in TILES:
        runs[t], cfg = counts(t)
    print(f"decode build: {cfg.describe()}")
    ts = np.array(TILES, float)
    fits = []
    for op in sorted(set().union(*runs.values())):
        a, b = np.polyfit(ts, [runs[t].get(op, 0) for t in TILES], 1)
        fits.append((a, b, op))
    per_tile = sum(a for a, _, _ in fits)
    print(f"per tile {per_tile:.0f} warp instructions, per block {sum(b for _, b, _ in fits):.0f} more")
    groups = {
        "integer and address arithmetic (add/mul/shl/cvt/selp/setp on integers)": lambda o: (
            o.split(".")[0] in ("add", "mul", "shl", "shr", "cvt", "selp", "setp", "and", "or", "mov", "sub")
            and not o.endswith("f32")
            and "f16" not in o
        ),
        "mma.sync": lambda o: o.startswith("mma"),
        "ldmatrix": lambda o: o.startswith("ldmatrix"),
        "cp.async": lambda o: o.startswith("cp.async"),
        "softmax float work (f32 max/mul/fma/add/ex2/cvt to f16)": lambda o: (
            not o.startswith("mma") and (o.endswith("f32") or "f16x2" in o)
        ),
    }
    for name, test in groups.items():
        n = sum(a for a, _, op in fits if test(op))
        print(f"  {name:74s} {n:6.0f} {n / per_tile:6.1%}")
    print("by opcode (a per tile, b per block):")
    for a, b, op in sorted(fits, reverse=True):
        if a >= 1:
            print(f"  {op:52s} {a:7.1f} {a / per_tile:6.1%} {b:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
