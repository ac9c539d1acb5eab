"""Emulate the kernel on the CPU and report its error against the float64 reference (f32 and f16 P@V side by side).

With no options it runs an embedded default problem in a few seconds. Inputs are seeded random normals
(or your .npy files); the report gives, per accumulator, the max absolute error of O, its relative L2
error, the distribution of ulp distances to the reference rounded to f16, and the LSE error.
"""
from __future__ import annotations

import time

import numpy as np

DEFAULT = dict(batch=1, heads=2, nq=256, nk=256, head_dim=128)


def add_arguments(p):
    p.add_argument("--batch", type=int, default=DEFAULT["batch"])
    p.add_argument("--heads", type=int, default=DEFAULT["heads"])
    p.add_argument("--nq", type=int, default=DEFAULT["nq"], help="query length")
    p.add_argument("--nk", type=int, default=None, help="key length (default: nq)")
    p.add_argument("--head-dim", type=int, default=DEFAULT["head_dim"], choices=(64, 128))
    p.add_argument("--causal", action="store_true")
    p.add_argument("--pv-accum", choices=("f32", "f16", "both"), default="both")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0, help="standard deviation of the random inputs")
    p.add_argument("--q", help="q.npy (B,H,Nq,d) float16; with --k and --v replaces the random inputs")
    p.add_argument("--k")
    p.add_argument("--v")
    p.add_argument("--backend", choices=("numpy", "jax"), default="numpy")
    p.add_argument("--plot", metavar="FILE.png", help="draw the |error| map of O and the ulp histogram")


def make_inputs(batch, heads, nq, nk, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    shape_q, shape_k = (batch, heads, nq, d), (batch, heads, nk, d)
    q = (rng.standard_normal(shape_q) * scale).astype(np.float16)
    k = (rng.standard_normal(shape_k) * scale).astype(np.float16)
    v = (rng.standard_normal(shape_k) * scale).astype(np.float16)
    return q, k, v


def load_inputs(args):
    if args.q or args.k or args.v:
        if not (args.q and args.k and args.v):
            raise SystemExit("flashsim emulate: give all of --q, --k and --v, or none")
        return tuple(np.load(path) for path in (args.q, args.k, args.v))
    nk = args.nk if args.nk is not None else args.nq
    return make_inputs(args.batch, args.heads, args.nq, nk, args.head_dim, args.seed, args.scale)


def error_summary(o, lse, o_ref, lse_ref):
    """Errors of one emulated run against the float64 reference."""
    o32 = o.astype(np.float64)
    finite = np.isfinite(o_ref)
    err = np.abs(o32 - o_ref)
    rel_l2 = float(np.linalg.norm((o32 - o_ref)[finite]) / max(np.linalg.norm(o_ref[finite]), 1e-300))
    from ..numerics.formats import NAN_DISTANCE, ulp_distance
    ulps = ulp_distance(o, o_ref.astype(np.float16))
    ulps = np.where(ulps == NAN_DISTANCE, -1, ulps)         # -1: NaN against a number
    lse_fin = np.isfinite(lse_ref)
    return {
        "max_abs": float(err[finite].max(initial=0.0)),
        "rel_l2": rel_l2,
        "ulp": ulps,
        "lse_max_abs": float(np.abs(lse.astype(np.float64) - lse_ref)[lse_fin].max(initial=0.0)),
        "lse_inf_match": bool(np.array_equal(np.isinf(lse), ~lse_fin)),
    }


def run(args) -> int:
    from ..emulator import attention, reference_attention
    q, k, v = load_inputs(args)
    accs = ("f32", "f16") if args.pv_accum == "both" else (args.pv_accum,)
    print(f"flashsim emulate: q {q.shape}, k {k.shape}, causal={args.causal}, arch={args.arch}, "
          f"backend={args.backend}")
    t0 = time.perf_counter()
    o_ref, lse_ref = reference_attention(q, k, v, causal=args.causal)
    t_ref = time.perf_counter() - t0
    results = {}
    for acc in accs:
        t0 = time.perf_counter()
        o, lse = attention(q, k, v, causal=args.causal, pv_accum=acc, arch=args.arch, backend=args.backend)
        results[acc] = (time.perf_counter() - t0, o, lse, error_summary(o, lse, o_ref, lse_ref))
    rows = [("emulation time (s)", lambda r: f"{r[0]:.2f}"),
            ("O max |error|", lambda r: f"{r[3]['max_abs']:.3e}"),
            ("O relative L2 error", lambda r: f"{r[3]['rel_l2']:.3e}"),
            ("O ulp = 0 (of f16(ref))", lambda r: f"{np.mean(r[3]['ulp'] == 0):.2%}"),
            ("O ulp <= 1", lambda r: f"{np.mean((r[3]['ulp'] >= 0) & (r[3]['ulp'] <= 1)):.2%}"),
            ("O ulp <= 4", lambda r: f"{np.mean((r[3]['ulp'] >= 0) & (r[3]['ulp'] <= 4)):.2%}"),
            ("O max ulp", lambda r: f"{int(r[3]['ulp'].max())}"),
            ("LSE max |error|", lambda r: f"{r[3]['lse_max_abs']:.3e}"),
            ("empty rows (lse=+inf) agree", lambda r: str(r[3]['lse_inf_match']))]
    print(f"float64 reference: {t_ref:.2f}s")
    header = f"{'':32}" + "".join(f"{'P@V ' + a:>16}" for a in accs)
    print(header)
    for label, fmt in rows:
        print(f"{label:32}" + "".join(f"{fmt(results[a]):>16}" for a in accs))
    if args.plot:
        _plot(args.plot, results, o_ref)
        print(f"plot written to {args.plot}")
    bad = [a for a in accs if not np.isfinite(results[a][3]["max_abs"])]
    return 1 if bad else 0


def _plot(path, results, o_ref):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SystemExit(f"--plot needs matplotlib (pip install 'flashsim[plot]'): {e}")
    accs = list(results)
    fig, axes = plt.subplots(2, len(accs), figsize=(6 * len(accs), 8), squeeze=False)
    for i, acc in enumerate(accs):
        o = results[acc][1].astype(np.float64)
        err = np.abs(o - o_ref)[0, 0]
        im = axes[0, i].imshow(np.log10(err + 1e-12), aspect="auto", cmap="magma")
        axes[0, i].set_title(f"log10 |O - ref|, batch 0 head 0, P@V {acc}")
        axes[0, i].set_xlabel("head dim column")
        axes[0, i].set_ylabel("query row")
        fig.colorbar(im, ax=axes[0, i])
        u = results[acc][3]["ulp"].ravel()
        u = u[u >= 0]
        axes[1, i].hist(np.minimum(u, 16), bins=np.arange(18) - 0.5, log=True)
        axes[1, i].set_title(f"ulp distance to f16(reference), P@V {acc} (16 = 16 or more)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
