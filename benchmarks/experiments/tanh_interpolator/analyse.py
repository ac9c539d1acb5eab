"""Fit the SFU's tanh to a piecewise-quadratic fixed-point interpolator, binade by binade, from a whole-binade capture
(``python3 -m flashsim.gpu.capture.tanh``): ``python3 benchmarks/experiments/tanh_interpolator/analyse.py DIR``.

Per binade (biased input exponent E, results of +x; the capture's summary says whether -x mirrors them):
1. range reduction: result sign and exponents, the runs where the result is x or 1 (left out of the fit when they
   open / close the binade), the coarsest grid the results lie on (trailing zeros);
2. segment width: for every candidate index width k, a least-squares quadratic in X (the low M - k bits) per
   segment, its worst residual in result ulps, and the spread of the second differences (step 2^(n-2)) inside
   segments; the narrowest k whose residual stays within rounding noise is the segment count's log2;
3. exact fit (flashsim.numerics.sfu_interp's family): for each rounding (rn / rz), guard bits g (accumulator lsb =
   g bits below the smallest result ulp of the binade), squarer shift s and product shift t2, the C2 candidates
   around the least-squares value; for each, C0 ranges over what the segment's first result allows and the C1
   product is solved exactly (C0 + floor(C1 X / 2^t1) lies in an interval  <=>  C0 + C1 X / 2^t1 lies in a
   half-open one: a strip per input), giving the narrowest t1. Hypotheses are screened on a few segments, then
   confirmed on every segment; the tables of a confirmed one are checked by flashsim.numerics.sfu_interp's own
   evaluation against every result.

Prints a report and writes ``analysis.json`` (and ``tables_e<E>.npz`` per binade fitted exactly) into ``--out``.
A binade without an exact fit is reported as such, with the best screening result (no tables).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from flashsim.gpu.capture.tanh import inputs, read_capture
from flashsim.numerics.sfu_interp import ONE, ROUNDINGS, QuadBinade, QuadFormat, folded_square

MIN_LOW_BITS = 6  # at least 2^6 inputs per segment in the exact search
NOISE_ULPS = 2.5  # least-squares residual of a true segment: rounding (<= 1 ulp) plus truncations


# -- data ----------------------------------------------------------------------------------------------------------


@dataclass
class Binade:
    E: int
    M: int
    y: np.ndarray  # positive result bits, m = 0 .. 2^M - 1
    lo_m: int  # fitted range [lo_m, hi_m)
    hi_m: int

    @property
    def values(self) -> np.ndarray:
        return self.y.view(np.float32).astype(np.float64)


def ulp_exp(bits: np.ndarray) -> np.ndarray:
    """Exponent of the ulp of positive normal f32 bit patterns."""
    return ((bits >> np.uint32(23)).astype(np.int64) & 255) - 127 - 23


def fitted_range(E: int, M: int, y: np.ndarray) -> tuple[int, int]:
    """[lo, hi): the binade less an opening run of results equal to x and a closing run of results equal to 1."""
    x = inputs(E, M)
    lo = int(np.argmin(y == x)) if (y == x)[0] else 0
    if (y == x).all():
        lo = y.size
    sat = y == ONE
    hi = y.size - (int(np.argmin(sat[::-1])) if sat[-1] else 0)
    if sat.all():
        hi = 0
    return lo, max(lo, hi)


def reduction(E: int, M: int, y: np.ndarray, neg: np.ndarray) -> dict:
    x = inputs(E, M)
    lo, hi = fitted_range(E, M, y)
    r = {
        "fitted": [lo, hi],
        "returns_x": int(np.count_nonzero(y == x)),
        "saturated": int(np.count_nonzero(y == ONE)),
        "not_odd": int(np.count_nonzero(neg != (y ^ np.uint32(0x80000000)))),
        "result_exponents": sorted({int(v) - 127 for v in np.unique((y >> np.uint32(23)) & np.uint32(255))}),
        "decreasing_steps": int(np.count_nonzero(np.diff(y.astype(np.int64)) < 0)),
    }
    if hi > lo:
        mant = (y[lo:hi] & np.uint32(0x7FFFFF)) | np.uint32(1 << 23)
        tz = np.zeros(mant.size, np.int64)
        for b in range(24):
            tz += ((mant >> np.uint32(b)) & 1 == 0) & (tz == b)
        # lowest bit weight any result uses: the accumulator is at least this fine
        r["finest_result_bit_exp"] = int((ulp_exp(y[lo:hi]) + tz).min())
        r["coarsest_trailing_zeros"] = int(tz.min())
    return r


# -- segment width -------------------------------------------------------------------------------------------------


def segment_fit(b: Binade, k: int, degree: int = 2, sq_drop: int = 0):
    """Least-squares polynomials of ``degree`` in u = X / 2^n - 1/2 per segment over the fitted points: (coefficients
    [segments, degree+1] in value units, residuals in result ulps, segment index per point, the point mask). With
    ``sq_drop`` > 0 the quadratic term is the truncated folded squarer's instead (Sq(X) / 2^2n - u - 1/4, which is
    u^2 for the exact square), so that the coefficients convert to per-X / per-Sq ones in the same way."""
    n = b.M - k
    m = np.arange(1 << b.M, dtype=np.int64)
    keep = (m >= b.lo_m) & (m < b.hi_m)
    seg = m >> n
    u = (m & ((1 << n) - 1)) / float(1 << n) - 0.5
    ulp = 2.0 ** ulp_exp(b.y).astype(np.float64)
    scale = ulp[keep].min()
    v = b.values / scale
    nseg = 1 << k
    P = np.stack([u**j for j in range(degree + 1)])
    if sq_drop and degree >= 2:
        X = m & ((1 << n) - 1)
        P[2] = folded_square(X, sq_drop) / 4.0**n - u - 0.25
    G = np.empty((nseg, degree + 1, degree + 1))
    rhs = np.empty((nseg, degree + 1))
    w = keep.astype(np.float64)
    for a in range(degree + 1):
        rhs[:, a] = np.bincount(seg, weights=w * P[a] * v, minlength=nseg)
        for c in range(a, degree + 1):
            G[:, a, c] = G[:, c, a] = np.bincount(seg, weights=w * P[a] * P[c], minlength=nseg)
    count = np.bincount(seg, weights=w, minlength=nseg)
    ok = count > degree
    coef = np.zeros((nseg, degree + 1))
    # pseudo-inverse: a truncated squarer over few low bits can be all zero or linear in X (a singular system)
    coef[ok] = (np.linalg.pinv(G[ok]) @ rhs[ok][..., None])[..., 0]
    fit = (coef[seg] * P.T).sum(axis=1)
    res = np.where(keep, (v - fit) * scale / ulp, 0.0)
    return coef * scale, res, seg, keep & ok[seg]


def second_difference_spread(b: Binade, k: int) -> float:
    """Largest spread (max - min, in units of the binade's smallest result ulp) of the second differences with step
    h = 2^(n-2) whose three points lie in one segment of the fitted range."""
    n = b.M - k
    if n < 2:
        return float("nan")
    h = 1 << (n - 2)
    ulp = 2.0 ** ulp_exp(b.y[b.lo_m : b.hi_m]).min() if b.hi_m > b.lo_m else 1.0
    v = b.values / ulp
    m = np.arange(v.size - 2 * h)
    d2 = v[m + 2 * h] - 2 * v[m + h] + v[m]
    inside = ((m >> n) == ((m + 2 * h) >> n)) & (m >= b.lo_m) & (m + 2 * h < b.hi_m)
    seg = m >> n
    if not inside.any():
        return float("nan")
    nseg = 1 << k
    big = np.full(nseg, -np.inf)
    small = np.full(nseg, np.inf)
    np.maximum.at(big, seg[inside], d2[inside])
    np.minimum.at(small, seg[inside], d2[inside])
    good = np.isfinite(big)
    return float((big[good] - small[good]).max())


def width_scan(b: Binade, ks) -> list[dict]:
    out = []
    for k in ks:
        if b.M - k < 2:
            continue
        _, res, _, keep = segment_fit(b, k)
        r = np.abs(res[keep])
        out.append(
            {
                "k": k,
                "ls_max_ulps": float(r.max()) if r.size else 0.0,
                "ls_p999_ulps": float(np.quantile(r, 0.999)) if r.size else 0.0,
                "second_difference_spread": second_difference_spread(b, k),
            }
        )
    return out


def squarer_scan(b: Binade, k: int, drops) -> dict:
    """Worst least-squares residual (result ulps) per segment width k of a quadratic whose X^2 term is the folded
    squarer with the partial products below column ``drop`` left out (0: the exact square), for each drop: a
    truncated squarer shows as a residual that falls to rounding noise at one drop only (the H100: 19, with X of
    17 bits, from 15 .. 29 ulps with the exact square to 0.5 at E = 126)."""
    out = {}
    for d in drops:
        _, res, _, keep = segment_fit(b, k, sq_drop=d)
        out[int(d)] = float(np.abs(res[keep]).max()) if keep.any() else 0.0
    return out


def choose_k(scan: list[dict], tol: float = NOISE_ULPS):
    """The narrowest k (fewest segments) whose quadratic fits within ``tol`` ulps (or within 1.5 times the best
    residual of the scan, where truncations inside the unit make the floor higher), and every k after it too."""
    if not scan:
        return None
    tol = max(tol, 1.5 * min(s["ls_max_ulps"] for s in scan))
    good = [s["ls_max_ulps"] <= tol for s in scan]
    for i, s in enumerate(scan):
        if all(good[i:]):
            return s["k"]
    return None


# -- exact fit -----------------------------------------------------------------------------------------------------


def result_intervals(y: np.ndarray, L: int, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer accumulator bounds [lo, hi] (units 2^L) of the sums that round to each result ``y`` (positive f32)."""
    v = y.view(np.float32).astype(np.float64)
    up = (y + np.uint32(1)).view(np.float32).astype(np.float64)
    s = 2.0**-L
    if rounding == "rz":
        lo, hi_excl = v * s, up * s
        a, b = np.ceil(lo), np.ceil(hi_excl) - 1
    else:
        down = (y - np.uint32(1)).view(np.float32).astype(np.float64)
        even = (y & np.uint32(1)) == 0
        lo, hi = (down + v) / 2 * s, (v + up) / 2 * s
        a = np.where(even, np.ceil(lo), np.floor(lo) + 1)
        b = np.where(even, np.floor(hi), np.ceil(hi) - 1)
    b = np.where(y == ONE, 2.0**62, b)  # the sum saturates at 1: any larger sum gives 1 too
    return a.astype(np.int64), b.astype(np.int64)


@dataclass(frozen=True)
class Hypothesis:
    rounding: str
    guard: int
    sq_shift: int
    t2: int
    sq_drop: int = 0


def _segment_solve(X, lo, hi, sq_shift, t2, c2_cands, t1_max, sq_drop=0):
    """All (C2, C0, smallest t1, gamma_lo, gamma_hi) that may reproduce one segment: X int64 (> 0 except the first,
    which must be X = 0), lo / hi the accumulator bounds. Returns a list of tuples."""
    S = folded_square(X, sq_drop) >> sq_shift
    out = []
    pos = X > 0
    Xp = X[pos].astype(np.float64)
    for c2 in c2_cands:
        T2 = (np.int64(c2) * S) >> t2
        a, b = lo - T2, hi - T2  # C0 + floor(C1 X / 2^t1) in [a, b]
        if X[0] != 0:
            return out
        c0s = np.arange(a[0], b[0] + 1)
        if c0s.size == 0 or c0s.size > 4096:
            continue
        # C0 + C1 X / 2^t1 in [a, b + 1): gamma = C1 / 2^t1 in [(a - C0) / X, (b + 1 - C0) / X)
        g_lo = ((a[pos][None, :] - c0s[:, None]) / Xp).max(axis=1)
        g_hi = ((b[pos][None, :] + 1 - c0s[:, None]) / Xp).min(axis=1)
        for c0, gl, gh in zip(c0s, g_lo, g_hi):
            if gl >= gh:
                continue
            for t1 in range(0, t1_max + 1):  # the narrowest C1: a multiple of 2^-t1 in [gl, gh)
                first, last = int(np.floor(gl * 2.0**t1)), int(np.ceil(gh * 2.0**t1))
                if last - first < 3:  # near the ends the float ratios decide nothing: check in integers
                    T = c0 + T2
                    if not any(
                        ((A := T + ((np.int64(c) * X) >> t1)) >= lo).all() and (A <= hi).all()
                        for c in range(first, last + 1)
                    ):
                        continue
                out.append((int(c2), int(c0), t1, float(gl), float(gh)))
                break
    return out


def _exact_check(X, lo, hi, sq_shift, t1, t2, c0, c1, c2, sq_drop=0) -> bool:
    A = c0 + ((np.int64(c1) * X) >> t1) + ((np.int64(c2) * (folded_square(X, sq_drop) >> sq_shift)) >> t2)
    return bool(((A >= lo) & (A <= hi)).all())


class ExactFit:
    """The search of the module docstring for one binade at index width k (and a squarer that drops the partial
    products below column ``sq_drop``; 0: the exact square)."""

    def __init__(
        self, b: Binade, k: int, *, guards=range(0, 5), roundings=ROUNDINGS, t1_max: int = 40, sq_drop: int = 0
    ):
        self.b, self.k, self.n = b, k, b.M - k
        self.guards, self.roundings, self.t1_max, self.sq_drop = list(guards), list(roundings), t1_max, sq_drop
        coef, res, seg, keep = segment_fit(b, k, sq_drop=sq_drop)
        m = np.arange(1 << b.M, dtype=np.int64)
        self.m, self.keep = m, keep
        self.base_ulp_exp = int(ulp_exp(b.y[b.lo_m : b.hi_m]).min())
        # value per X and per Sq(X) from the fit in u = X / 2^n - 1/2
        w = float(1 << self.n)
        self.c1 = (coef[:, 1] - coef[:, 2]) / w  # d/dX of c0 + c1 u + c2 u^2 at X = 0
        self.c2 = coef[:, 2] / w**2
        ulp = 2.0**self.base_ulp_exp
        # standard error of the X^2 coefficient: residual noise over the spread of u^2
        sd = max(float(np.std(res[keep])), 0.3) * ulp
        self.c2_err = sd * np.sqrt(180.0) / w**2 / np.sqrt(max(1, 1 << self.n))
        segs = np.arange(1 << k)
        full = np.array([keep[s << self.n : (s + 1) << self.n].all() for s in segs])
        self.segments = segs[full]
        self.partial = segs[~full & (np.bincount(m[keep] >> self.n, minlength=1 << k) > 0)]

    def _seg(self, s, L, rounding):
        sl = slice(s << self.n, (s + 1) << self.n)
        X = self.m[sl] & ((1 << self.n) - 1)
        y = self.b.y[sl]
        keep = self.keep[sl]
        lo, hi = result_intervals(y[keep], L, rounding)
        return X[keep], lo, hi

    def _c2_candidates(self, s, L, sq_shift, t2, radius_max):
        centre = self.c2[s] * 2.0**-L * 2.0 ** (sq_shift + t2)
        # statistical error of the fit, plus the floors' bias (up to about one accumulator unit over the segment,
        # projected on X^2: a few / 2^2n per X^2)
        r = int(np.ceil((5 * self.c2_err * 2.0**-L + 12.0 / 4.0**self.n) * 2.0 ** (sq_shift + t2))) + 2
        if r > radius_max:
            return None
        return np.arange(int(np.rint(centre)) - r, int(np.rint(centre)) + r + 1)

    def screen_segments(self, count: int = 6) -> np.ndarray:
        s = self.segments
        if s.size <= count:
            return s
        return s[np.linspace(0, s.size - 1, count).round().astype(int)]

    def hypotheses(self, sq_shifts=None, t2s=range(0, 40), radius_max: int = 48, sample: int = 2048):
        """Screen (rounding, guard, s, t2) on a few segments, in that order (t2 ascending: the narrowest C2
        first), first on ``sample`` points of each (a necessary condition, cheap), then on all their points; yields
        (Hypothesis, t1). ``self.best_partial``: the most screening segments any hypothesis reproduced, and that
        hypothesis (the evidence when none passes)."""
        n, drop = self.n, self.sq_drop
        # the truncated squarer's output is a multiple of 2^drop: shifts below drop only trade against t2
        sq_shifts = range(drop, 2 * n + 1) if sq_shifts is None else sq_shifts
        screen = self.screen_segments()
        self.best_partial = (0, None)
        for rounding in self.roundings:
            for g in self.guards:
                L = self.base_ulp_exp - g
                full = {s: self._seg(s, L, rounding) for s in screen}
                step = max(1, (1 << n) // sample)
                part = {s: tuple(a[::step] for a in full[s]) for s in screen}
                for sq in sq_shifts:
                    for t2 in t2s:
                        cands = {s: self._c2_candidates(s, L, sq, t2, radius_max) for s in screen}
                        if any(c is None for c in cands.values()):
                            break  # finer t2 only widens the windows
                        t1, passed = 0, 0
                        for s in screen:
                            sol = _segment_solve(*part[s], sq, t2, cands[s], self.t1_max, drop)
                            sol = sol and _segment_solve(*full[s], sq, t2, cands[s], self.t1_max, drop)
                            if not sol:
                                break
                            passed += 1
                            t1 = max(t1, min(x[2] for x in sol))
                        if passed > self.best_partial[0]:
                            self.best_partial = (passed, Hypothesis(rounding, g, sq, t2, drop))
                        if passed == len(screen):
                            yield Hypothesis(rounding, g, sq, t2, drop), t1

    def confirm(self, h: Hypothesis, radius_max: int = 48):
        """Per-segment tables under ``h`` over every full segment, or None with the first failing segment."""
        L = self.base_ulp_exp - h.guard
        sols = {}
        for s in self.segments:
            cands = self._c2_candidates(s, L, h.sq_shift, h.t2, radius_max)
            sol = (
                _segment_solve(*self._seg(s, L, h.rounding), h.sq_shift, h.t2, cands, self.t1_max, h.sq_drop)
                if cands is not None
                else []
            )
            if not sol:
                return None, int(s)
            sols[int(s)] = sol
        if not sols:  # no full segment to solve (e.g. one segment, cut by an opening run of x): no exact fit here
            return None, None
        t1 = max(min(x[2] for x in v) for v in sols.values())
        nseg = 1 << self.k
        c0, c1, c2 = (np.zeros(nseg, np.int64) for _ in range(3))
        ambiguous = 0
        for s, sol in sols.items():
            X, lo, hi = self._seg(s, L, h.rounding)
            found = []
            for c2v, c0v, _, gl, gh in sol:
                first, last = int(np.ceil(gl * 2.0**t1)) - 1, int(np.ceil(gh * 2.0**t1))  # +-1: float ratios
                for c1v in range(first, min(last, first + 64) + 1):
                    if _exact_check(X, lo, hi, h.sq_shift, t1, h.t2, c0v, c1v, c2v, h.sq_drop):
                        found.append((c0v, c1v, c2v))
            if not found:
                return None, s
            ambiguous += len(found) > 1
            want = self.c1[s] * 2.0**-L * 2.0**t1
            c0[s], c1[s], c2[s] = min(found, key=lambda f: (abs(f[1] - want), f))
        fmt = QuadFormat(self.k, L, h.sq_shift, t1, h.t2, h.rounding, self.b.M, h.sq_drop)
        return (QuadBinade(fmt, c0, c1, c2), ambiguous), None


def check(b: Binade, q: QuadBinade, segments) -> int:
    """Results of the fitted range (in ``segments``) that ``q``'s own evaluation does not reproduce."""
    m = np.arange(b.lo_m, b.hi_m, dtype=np.int64)
    m = m[np.isin(m >> q.fmt.low_bits, segments)]
    return int(np.count_nonzero(q.bits(m) != b.y[m]))


# -- driver --------------------------------------------------------------------------------------------------------


def _exact_at(b: Binade, k: int, guards, max_confirm: int, log, sq_drop: int = 0) -> dict:
    """The exact search at one index width: the screening record and (hypothesis, tables, ambiguous, fit) or None."""
    fit = ExactFit(b, k, guards=guards, sq_drop=sq_drop)
    confirmed, screened = [], []
    for h, t1 in fit.hypotheses():  # confirmed lazily: the first exact one in the screening order wins
        screened.append((h, t1))
        if len(screened) > max_confirm:
            break
        res, _ = fit.confirm(h)
        if res is None:
            continue
        q, ambiguous = res
        bad = check(b, q, fit.segments)
        confirmed.append((h, q, ambiguous, bad))
        if bad == 0:
            break
    passed, best = fit.best_partial
    ok = [c for c in confirmed if c[3] == 0]
    log(f"E={b.E}: k={k}: {len(screened)} hypotheses passed the screening segments, exact: {bool(ok)}")
    return {
        "k": k,
        "screened": [{**asdict(h), "t1": t1} for h, t1 in screened[:16]],
        "screening": {
            "segments": fit.screen_segments().tolist(),
            "most_passed": passed,
            "by": asdict(best) if best else None,
        },
        "best_mismatches": min((c[3] for c in confirmed), default=None),
        "result": (ok[0][0], ok[0][1], ok[0][2], fit) if ok else None,
    }


def ignored_low_bits(y: np.ndarray) -> int:
    """The largest j such that the results are constant over every aligned group of 2^j consecutive inputs: the
    unit reads only the top M - j mantissa bits (the H100 reads 17 .. 21 of 23, by binade)."""
    j = 0
    while (1 << (j + 1)) <= y.size:
        g = y.reshape(-1, 1 << (j + 1))
        if not (g == g[:, :1]).all():
            break
        j += 1
    return j


def analyse_binade(
    E, M, y, neg, *, ks=None, guards=range(0, 5), log=print, max_confirm: int = 64, sq_drop=0, scan_squarer=False
) -> dict:
    """The whole analysis of one binade (module docstring). Where the results ignore the low j input bits (step 0),
    everything after runs on the M - j bits read (one result per group) and the reported format reads M - j bits;
    ``sq_drop``: a truncated folded squarer to search (flashsim.numerics.sfu_interp; 0: the exact square);
    ``scan_squarer``: record the least-squares residual at the chosen k for several squarer truncations."""
    t0 = time.time()
    j = ignored_low_bits(y) if y.size > 1 else 0
    if 0 < j < M:
        log(f"E={E}: the results ignore the low {j} input bits: analysing the top {M - j}")
        y, neg, M = y[:: 1 << j], neg[:: 1 << j], M - j
    red = reduction(E, M, y, neg)
    out = {"E": E, "e": E - 127, "M": M, "ignored_low_bits": j, "reduction": red}
    lo, hi = red["fitted"]
    if hi - lo < 16:
        out["verdict"] = "no interpolated range (identity or saturation)"
        return out
    b = Binade(E, M, y, lo, hi)
    scan = width_scan(b, range(0, min(M - 1, 15)) if ks is None else ks)
    out["width_scan"] = scan
    k = choose_k(scan)
    out["k_scan"] = out["k"] = k
    log(f"E={E}: fitted m in [{lo}, {hi}); k scan " + ", ".join(f"{s['k']}:{s['ls_max_ulps']:.2f}" for s in scan))
    if k is None:
        out["verdict"] = "no index width where a quadratic per segment fits within rounding noise"
        return out
    if scan_squarer:
        n = M - k
        sq = squarer_scan(b, k, [0, *range(max(1, n - 2), n + 5)])
        out["squarer_scan"] = sq
        log(
            f"E={E}: k={k}: least-squares worst residual by squarer drop "
            + ", ".join(f"{d}:{v:.2f}" for d, v in sq.items())
        )
    z = red.get("coarsest_trailing_zeros", 0)
    if z > 0:  # every result ends in z zero bits: an accumulator coarser than the result ulp is possible too
        guards = sorted(set(guards) | set(range(-z, 0)))
    # the scan's k is a lower bound (a binade where the unit is far more precise than its rounding hides segments):
    # up to 3 finer widths are tried, never below MIN_LOW_BITS points' bits per segment (a quadratic through a few
    # points proves nothing: finer still, even a cubic unit is reproduced)
    for k_try in range(k, max(k, min(k + 3, M - MIN_LOW_BITS)) + 1):
        r = _exact_at(b, k_try, guards, max_confirm, log, sq_drop)
        out["exact_search"] = out.get("exact_search", []) + [{key: v for key, v in r.items() if key != "result"}]
        if r["result"] is not None:
            break
    if r["result"] is None:
        out["verdict"] = "no exact fit at k = " + ", ".join(str(x["k"]) for x in out["exact_search"])
        return out
    h, q, ambiguous, fit = r["result"]
    out["k"] = k_try
    # segments cut by an opening run of x or a closing run of 1 are not solved (the solve needs X = 0): named here
    out["verdict"] = "exact" if fit.partial.size == 0 else f"exact on full segments; not solved: {fit.partial.tolist()}"
    out["format"] = asdict(q.fmt)
    out["guard_bits"] = h.guard
    out["ambiguous_segments"] = ambiguous
    out["partial_segments"] = fit.partial.tolist()
    out["tables"] = q
    out["seconds"] = round(time.time() - t0, 2)
    log(f"E={E}: exact: {q.fmt} (g={h.guard}), {ambiguous} segments with several tables")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=pathlib.Path, help="folder of flashsim.gpu.capture.tanh's files")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="folder for analysis.json and the tables")
    ap.add_argument("--exponents", default="", help="biased exponents to analyse (default: all captured)")
    ap.add_argument("--guards", default="0-4", help="guard-bit range searched, e.g. 0-6")
    ap.add_argument("--sq-drop", type=int, default=0, help="squarer columns dropped (0: exact square; the H100: 19)")
    ap.add_argument("--ks", default="", help="index widths to scan, e.g. 0-6 (default 0-14)")
    ap.add_argument("--scan-squarer", action="store_true", help="least-squares residual per squarer truncation")
    args = ap.parse_args(argv)
    data = read_capture(args.capture)
    want = {int(e) for e in args.exponents.split(",") if e} or set(data)
    ga, _, gb = args.guards.partition("-")
    out_dir = args.out or args.capture / "analysis"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {}
    for E, (M, y, neg) in data.items():
        if E not in want:
            continue
        ka, _, kb = args.ks.partition("-")
        ks = range(int(ka), int(kb or ka) + 1) if args.ks else None
        r = analyse_binade(
            E,
            M,
            y,
            neg,
            ks=ks,
            guards=range(int(ga), int(gb or ga) + 1),
            sq_drop=args.sq_drop,
            scan_squarer=args.scan_squarer,
        )
        q = r.pop("tables", None)
        if q is not None:
            np.savez(out_dir / f"tables_e{E}.npz", c0=q.c0, c1=q.c1, c2=q.c2, format=json.dumps(asdict(q.fmt)))
        report[E] = r
        print(f"E={E}: {r['verdict']}", flush=True)
    (out_dir / "analysis.json").write_text(json.dumps(report, indent=1, default=str))
    exact = sum(r["verdict"].startswith("exact") for r in report.values())
    print(f"{exact} of {len(report)} binades fitted exactly; report in {out_dir / 'analysis.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
