"""flashsim's sm_120a kind::f8f6f4 and block-scaled mma.sync against mmasim's RTX Blackwell models, a million cases
per form (CPU only, one core):

    D=benchmarks/experiments/block_scale_vs_mmasim; PYTHONPATH=. python3 $D/run.py --out $D

A case is one output element of one mma: a K-long dot product (32 or 64 products), its c and, for the block-scaled
kinds, its scales (mmasim's own unit, ``dpa``); each mma has 128 of them. Every form of tests/mmasim_block_scale.py
(79: kind::f8f6f4 25 format pairs x f32 / f16, kind::mxf8f6f4 25 pairs, kind::mxf4 and the three mxf4nvf4 forms)
gets ``--cases`` cases (default 1,000,000, rounded up to whole mmas), split evenly over the operand styles (random,
every code, scale extremes, NaN / inf codes and scales, cancellation, overflow, every class of c, sparse), from
seeds derived from ``--seed`` and the form's name (not the tests' seeds). Writes ``results.json`` (per form: cases,
mmas, mismatching cases, the first mismatch, the share of NaN / inf / zero results, seconds) and ``run.log``.
Exit status 0 only when every case is bit-equal.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import platform
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from mmasim_block_scale import FORMS, STYLES, mmasim_mma, operands  # noqa: E402

from flashsim.numerics.tensorcore.blockscale import block_scale_unchecked  # noqa: E402

CHUNK = 512  # mmas per call (bounds mmasim's (B, 16, 8, K) tensors)


def form_name(form) -> str:
    kind, n, sf, af, bf, acc = form
    return f"{kind}" + (f".scale_vec::{n}X.{sf}" if n else "") + f".{acc}.{af}.{bf}.{acc}"


def check_form(form, cases: int, seed: int, log):
    kind, n, sf, af, bf, acc = form
    rng = np.random.default_rng([seed, zlib.crc32(form_name(form).encode())])
    per_style = math.ceil(cases / 128 / len(STYLES))
    u = np.uint16 if acc == "f16" else np.uint32
    out = dict(form=form_name(form), cases=0, mmas=0, mismatches=0, first_mismatch=None, nan=0, inf=0, zero=0)
    t_flash = t_sim = 0.0
    for style in STYLES:
        left = per_style
        while left:
            batch = min(CHUNK, left)
            left -= batch
            a, b, c, sa, sb = operands(rng, form, batch, style)
            t0 = time.perf_counter()
            d = block_scale_unchecked(a, b, c, sa, sb, kind=kind, a_format=af, b_format=bf, scale_format=sf)
            t1 = time.perf_counter()
            ref = mmasim_mma(form, a, b, c, sa, sb)
            t2 = time.perf_counter()
            t_flash, t_sim = t_flash + t1 - t0, t_sim + t2 - t1
            bad = np.argwhere(d.view(u) != ref.view(u))
            out["cases"] += d.size
            out["mmas"] += batch
            out["mismatches"] += len(bad)
            out["nan"] += int(np.isnan(ref).sum())
            out["inf"] += int(np.isinf(ref).sum())
            out["zero"] += int((ref == 0).sum())
            if len(bad) and out["first_mismatch"] is None:
                i, m, j = (int(x) for x in bad[0])
                out["first_mismatch"] = dict(
                    style=style,
                    a_row=a[i, m].tolist(),
                    b_col=b[i, :, j].tolist(),
                    c_bits=int(c.view(u)[i, m, j]),
                    scale_a=None if sa is None else sa[i, m].tolist(),
                    scale_b=None if sb is None else sb[i, :, j].tolist(),
                    flashsim_bits=int(d.view(u)[i, m, j]),
                    mmasim_bits=int(ref.view(u)[i, m, j]),
                )
    for key in ("nan", "inf", "zero"):
        out[key] = round(out[key] / out["cases"], 4)
    out["seconds_flashsim"], out["seconds_mmasim"] = round(t_flash, 2), round(t_sim, 2)
    line = (
        f"{out['form']:58} {out['cases']:>9} cases ({out['mmas']} mmas) {out['mismatches']} mismatches  "
        f"nan {out['nan']:.3f} inf {out['inf']:.3f} zero {out['zero']:.3f}  "
        f"flashsim {t_flash:.1f} s mmasim {t_sim:.1f} s"
    )
    print(line, file=log, flush=True)
    print(line, flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for results.json and run.log")
    p.add_argument("--cases", type=int, default=1_000_000, help="cases (output elements) per form")
    p.add_argument("--seed", type=int, default=20261206)
    p.add_argument("--forms", default="", help="only forms whose name contains this text")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    forms = [f for f in FORMS if args.forms in form_name(f)]
    started = time.time()
    with open(args.out / "run.log", "w") as log:
        print(f"{len(forms)} forms, {args.cases} cases each, seed {args.seed}", file=log, flush=True)
        results = [check_form(f, args.cases, args.seed, log) for f in forms]
        total = sum(r["mismatches"] for r in results)
        summary = (
            f"{sum(r['cases'] for r in results)} cases in {len(results)} forms, {total} mismatches, "
            f"{time.time() - started:.0f} s"
        )
        print(summary, file=log)
    print(summary)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "flashsim"], cwd=ROOT, capture_output=True, text=True)
    meta = dict(
        commit=commit + (" (flashsim/ modified)" if dirty.stdout.strip() else ""),
        seed=args.seed,
        cases_per_form=args.cases,
        styles=list(STYLES),
        case="one output element of one mma (a K-long dot product, its c and its scales)",
        mmasim_version=importlib.metadata.version("mmasim"),
        torch=torch.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
        seconds=round(time.time() - started, 1),
        forms=len(results),
        total_cases=sum(r["cases"] for r in results),
        total_mismatches=total,
    )
    (args.out / "results.json").write_text(json.dumps(dict(meta=meta, forms=results), indent=1) + "\n")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
