"""What a causal block's fixed cost is made of, varlen's build beside the dense one, counted by flashsim.ptx (no GPU).

    python3 benchmarks/experiments/varlen_profile/ptx_block_cost.py [--tiles 2 4 8 16] [--json OUT]

Nsight Compute put a varlen block's fixed cost at 16,207 warp instructions, 4.73 KV tiles' worth (ncu_split.py). This
runs the varlen batch's own build (the serving build of bench_serving.py's varlen row: causal, H 16, d 128, f16) on
one block of 128 query rows whose keys span T KV tiles (one sequence, keys bottom-right aligned, so the block visits
all T, the last two across the diagonal), for several T, in flashsim.ptx, and the dense kernel's build (what
bench_serving's varlen row compares with) on the same block, and fits each build's PTX warp instructions, per opcode,
as a T + b (least squares): b is what a block issues whatever its length, a what each tile adds. (ncu_split.py's fit
took one a for both builds; this says whether they differ.) PTX opcodes are not the SASS the GPU counts (ptxas
merges, splits and drops some), but their split says which part of the kernel the fixed cost lives in: the
prologue's copies (cp.async), the epilogue's conversions and stores (cvt, st), the masks (setp, selp), the softmax's
scalar work.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from run import D  # noqa: E402

import flashsim.ptx as P  # noqa: E402
from flashsim import provenance  # noqa: E402
from flashsim.emulator import engine_ptx  # noqa: E402
from flashsim.gpu import launch as plan  # noqa: E402
from flashsim.gpu import serving as gs  # noqa: E402
from flashsim.gpu.build import kernel_dir  # noqa: E402
from flashsim.problem import prepare  # noqa: E402
from flashsim.serving.problem import prepare_varlen, serving_options  # noqa: E402


@functools.lru_cache(maxsize=4)
def _flash_fwd(cfg):
    """flash_fwd of ``cfg``'s build, compiled for sm_90 by flashsim.ptx (once per configuration)."""
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    return P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_fwd")


def run_varlen(lens_q, lens_k, seed: int):
    """The causal varlen call (one head, d = D, f16, random inputs of ``seed``) on sequences of ``lens_q`` query rows
    and ``lens_k`` keys, its flash_fwd run whole in flashsim.ptx: (its Report, the problem)."""
    rng = np.random.default_rng(seed)
    cu_q, cu_k = (np.concatenate([[0], np.cumsum(n)]).astype(np.int32) for n in (lens_q, lens_k))
    q = rng.standard_normal((int(cu_q[-1]), 1, D)).astype(np.float16)
    k, v = (rng.standard_normal((int(cu_k[-1]), 1, D)).astype(np.float16) for _ in range(2))
    opts = serving_options(True, None, None, None, None, None, None, None)
    top_q, top_k = int(max(lens_q)), int(max(lens_k))
    prob = prepare_varlen(q, k, v, cu_q, cu_k, top_q, top_k, opts=opts, arch="sm_90")
    cfg = prob.config
    o, lse = np.zeros_like(q), np.zeros((1, int(cu_q[-1])), np.float32)
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    null = np.uint64(0)
    args = [q, k, v, o, lse, null, *head, cu_q, cu_k, null, *totals, null, *pages, null, null, *lse_strides]
    return P.launch(_flash_fwd(cfg), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes), prob


def run_dense(nq: int, nk: int, seed: int):
    """The dense kernel's causal build (one head, d = D, f16, random inputs of ``seed``) on nq queries and nk keys,
    run whole in flashsim.ptx: (opcode -> warp instructions over its launches, the problem)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, nq, D)).astype(np.float16)
    k, v = (rng.standard_normal((1, 1, nk, D)).astype(np.float16) for _ in range(2))
    prob = prepare(q, k, v, causal=True, arch="sm_90")
    kernel = engine_ptx.modules(prob)["flash_fwd"]
    o, lse = np.zeros_like(q), np.zeros((1, 1, nq), np.float32)
    scratch = np.zeros(max(plan.scratch_bytes(prob), 1), np.uint8)
    counts = {}
    for _, grid, block, smem, args in plan.launch_list(
        prob, *(P.address(x) for x in (q, k, v, o, lse)), 0, P.address(scratch)
    ):
        for op, n in P.launch(kernel, grid, block, list(args), shared_mem=smem).counts.items():
            counts[op] = counts.get(op, 0) + n
    return counts, prob


def block_counts(tiles: int):
    """(opcode -> warp instructions of the one varlen block over T = ``tiles`` KV tiles, the build's config)."""
    rep, prob = run_varlen([128], [64 * tiles], seed=tiles)
    cfg = prob.config
    if cfg.block_m != 128 or cfg.kv_tile != 64 or prob.grid != (1, 1, 1):
        raise SystemExit(f"expected one block of 128 rows and 64-key tiles, got {cfg.describe()}, grid {prob.grid}")
    return dict(rep.counts), cfg


def dense_counts(tiles: int):
    """(opcode -> warp instructions, config) of the dense kernel's causal build on the same one block."""
    counts, prob = run_dense(128, 64 * tiles, seed=tiles)
    return counts, prob.config


def fit_counts(runs: dict, tiles) -> dict:
    """opcode -> (a, b) of warp instructions = a T + b over the runs."""
    ts = np.array(tiles, float)
    design = np.stack([ts, np.ones_like(ts)], axis=1)
    out = {}
    for op in sorted({op for c in runs.values() for op in c}):
        y = np.array([runs[t].get(op, 0) for t in tiles], float)
        (per_tile, fixed), *_ = np.linalg.lstsq(design, y, rcond=None)
        out[op] = (float(per_tile), float(fixed))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiles", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    runs, dense, cfg, dcfg = {}, {}, None, None
    for t in a.tiles:
        runs[t], cfg = block_counts(t)
        dense[t], dcfg = dense_counts(t)
        print(f"T = {t:3d}: varlen build {sum(runs[t].values()):,}, dense build {sum(dense[t].values()):,}", flush=True)
    lines = []
    fits = {}
    for name, c, r in (("varlen (serving) build", cfg, runs), ("dense build", dcfg, dense)):
        fit = fits[name] = fit_counts(r, a.tiles)
        tot_tile, tot_fixed = sum(p for p, _ in fit.values()), sum(f for _, f in fit.values())
        lines += [
            f"{name}: {c.describe()}",
            f"  PTX warp instructions = a T + b: a = {tot_tile:,.0f} a KV tile, b = {tot_fixed:,.0f} a block "
            f"({tot_fixed / tot_tile:.2f} tiles' worth)",
        ]
    fv, fd = fits["varlen (serving) build"], fits["dense build"]
    ops = sorted(set(fv) | set(fd), key=lambda op: -abs(fv.get(op, (0, 0))[1]) - abs(fv.get(op, (0, 0))[0]))
    lines.append(f"{'opcode':28s} {'varlen b':>10s} {'dense b':>10s} {'varlen a':>9s} {'dense a':>9s}")
    for op in ops[:30]:
        (va, vb), (da, db) = fv.get(op, (0.0, 0.0)), fd.get(op, (0.0, 0.0))
        lines.append(f"{op:28s} {vb:10,.0f} {db:10,.0f} {va:9,.1f} {da:9,.1f}")
    print("\n".join(lines))
    if a.json:
        out = {"tiles": a.tiles, "varlen": {"config": cfg.describe(), "runs": runs, "fit": fv}}
        out["dense"] = {"config": dcfg.describe(), "runs": dense, "fit": fd}
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
