"""The exact fit of the sm_90 ``tanh.approx.f32`` from the whole-binade capture, segment by segment, by linear
programming: ``python3 benchmarks/experiments/tanh_interpolator/solve_lp.py CAPTURE_DIR [--write]``.

What analyse.py found first (README.md, "What the H100 capture says"): per binade the unit reads only the top 17 + k
mantissa bits (k: the segment index bits), X = the 17 bits below the index, and squares X on a folded squarer that
drops the partial products below column 19. Under that structure the sum C0 + C1 X + C2 S (S = Sq(X) >> 19) is
linear in the three coefficients, so for each segment and rounding the coefficient box that reproduces every result
is the feasible set of 2 x 2^17 linear inequalities (the rounding interval of each result): the LP (scipy's HiGHS,
in units where it is well conditioned) gives the range of C1 and C2, every integer pair in it (on a grid of
2^(u - g), u the exponent of the binade's largest result ulp, g = 12 .. 15, the coarsest that has a solution) is
then checked in integers, C0 taking every value its interval allows. analyse.py's heuristic search (C2 candidates
around the least-squares value, products floored at each shift) found none of these: the products here are exact and
the only rounding is the final truncation toward zero.

Prints, per binade, the grid, the number of exact tables per segment, and (``--write``) stores one table per segment
(the smallest C0 of the exact ones: all reproduce every result of the segment) in flashsim/data/sfu/
tanh_interp_sm90.npz after checking flashsim.numerics.sfu_interp's own evaluation against every captured result.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np
from analyse import fitted_range, ignored_low_bits, result_intervals, ulp_exp
from scipy.optimize import linprog

from flashsim.gpu.capture.tanh import read_capture
from flashsim.numerics import sfu_tanh
from flashsim.numerics.sfu_interp import QuadBinade, QuadFormat, folded_square

LOW_BITS, SQ_DROP = sfu_tanh.LOW_BITS, sfu_tanh.SQ_DROP
GUARDS = range(12, 16)
ROUNDING = "rz"  # rn was tried first on E = 126: no segment but one fits it at g = 12


def solve_segment(y, L, Xs, Ss, guard):
    """Every integer (C0, C1, C2) at lsb 2^L with C0 + C1 X + C2 S truncating to ``y`` for every point."""
    lo, hi = result_intervals(y, L, ROUNDING)
    sc = 2.0**-guard  # LP in units of 2^(L + guard), centred on the first result: well conditioned
    ref = lo[0]
    B = np.stack([np.ones(Xs.size), Xs * sc, Ss * sc], 1)
    A = np.vstack([B, -B])
    b = np.concatenate([(hi - ref + 1) * sc, -(lo - ref - 1) * sc])  # one unit of slack: the check below is exact
    bounds = []
    for j in (1, 2):
        for sign in (1, -1):
            c = np.zeros(3)
            c[j] = sign
            r = linprog(c, A_ub=A, b_ub=b, bounds=[(None, None)] * 3, method="highs")
            if r.x is None:
                return []
            bounds.append(r.x[j])
    sols = []
    for c1 in range(int(np.floor(bounds[0])) - 1, int(np.ceil(bounds[1])) + 2):
        for c2 in range(int(np.floor(bounds[2])) - 1, int(np.ceil(bounds[3])) + 2):
            P = c1 * Xs + c2 * Ss
            first, last = int((lo - P).max()), int((hi - P).min())
            sols += [(c0, c1, c2) for c0 in range(first, last + 1)]
    return sols


def fit_binade(E: int, M: int, y: np.ndarray, log=print) -> dict:
    """The per-segment solutions of one binade, and one QuadBinade (or None where a segment has no solution)."""
    full, j = y, ignored_low_bits(y)
    y, M = y[:: 1 << j], M - j
    k = M - LOW_BITS
    lo_m, hi_m = fitted_range(E, M, y)
    top = int(ulp_exp(y[lo_m:hi_m]).max())
    X = np.arange(1 << LOW_BITS, dtype=np.int64)
    S = folded_square(X, SQ_DROP) >> SQ_DROP
    segs = []
    for s in range(1 << k):
        m = np.arange(s << LOW_BITS, (s + 1) << LOW_BITS)
        keep = (m >= lo_m) & (m < hi_m)
        found = (None, [])
        for g in GUARDS:
            sols = solve_segment(y[m[keep]], top - g, X[keep].astype(np.float64), S[keep].astype(np.float64), g)
            if sols:
                found = (g, sols)
                break
        segs.append(found)
    out = {
        "E": E,
        "read_bits": M,
        "index_bits": k,
        "guards": [g for g, _ in segs],
        "solutions": [len(s) for _, s in segs],
    }
    log(f"E={E}: reads {M} bits, k={k}, guard per segment {out['guards']}, exact tables per segment {out['solutions']}")
    if any(g is None for g, _ in segs):
        out["model"] = None
        return out
    g = max(out["guards"])
    c0, c1, c2 = (np.array([min(s)[i] << (g - gs) for gs, s in segs], np.int64) for i in range(3))
    fmt = QuadFormat(k, top - g, SQ_DROP, 0, 0, ROUNDING, M, SQ_DROP)
    q = QuadBinade(fmt, c0, c1, c2)
    # against every captured result, not only one per group of 2^j
    out["mismatches"] = int(np.count_nonzero(q.bits(np.arange(full.size) >> j) != full))
    out["model"] = q
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=pathlib.Path)
    ap.add_argument("--exponents", default="119-129")
    ap.add_argument("--write", action="store_true", help="write flashsim/data/sfu/tanh_interp_sm90.npz")
    ap.add_argument("--json", type=pathlib.Path, default=None, help="write the per-binade record here")
    args = ap.parse_args(argv)
    a, _, b = args.exponents.partition("-")
    want = range(int(a), int(b or a) + 1)
    data = read_capture(args.capture)
    models, record = {}, {}
    for E in want:
        t0 = time.time()
        M, pos, neg = data[E]
        r = fit_binade(E, M, pos)
        q = r.pop("model")
        r["seconds"] = round(time.time() - t0, 1)
        record[E] = {**r, "format": None if q is None else q.fmt.__dict__}
        if q is not None:
            models[E] = q
            print(f"E={E}: {q.fmt}, {r['mismatches']} mismatches of {pos.size}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    if args.write:
        if sorted(models) != list(want) or any(record[E]["mismatches"] for E in want):
            print("not written: not every binade is exact")
            return 1
        sfu_tanh.write_tables(sfu_tanh.TABLES, models)
        print(f"wrote {sfu_tanh.TABLES} ({sfu_tanh.TABLES.stat().st_size} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
