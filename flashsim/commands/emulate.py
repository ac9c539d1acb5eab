"""Emulate the kernel on the CPU and report its error against the float64 reference (f32 and f16 P@V side by side).

With no options it runs an embedded default problem in a few seconds. Inputs are seeded random normals
(or your .npy files); the report gives, per accumulator, the max absolute error of O (also relative to max |O|),
its relative L2 error, the distribution of ulp distances to the reference rounded to f16, and the LSE error.
Every argument, input file, optional dependency (--backend jax, --plot) and the memory the problem needs are
checked before any work starts.

The attention variants: --dtype bf16, --kv-heads (MQA / GQA), --head-dim 32..256, --window LEFT,RIGHT (sliding
window, -1 unbounded), --softcap C, --layout bnhd (random inputs are made in that layout).

--quant int8: INT8 attention (Q K^T in INT8 as SageAttention, flashsim.emulator.quantize) beside the unquantized
kernel, each with every P@V accumulation: the table adds the cosine similarity of O to the reference, and --plot
draws every run's error map side by side. --k-mean M adds M times a random per-channel mean to the random keys (the
offset that K's smoothing removes; real models' keys have one). --quant nvfp4 (with --arch sm_120: the FP4 mma
exists only there) adds the NVFP4 kernel (Q K^T in NVFP4, P V in FP8), likewise beside the unquantized one.

examples:
  flashsim emulate
  flashsim emulate --heads 4 --nq 1000 --nk 777 --causal --plot error.png
  flashsim emulate --dtype bf16 --heads 8 --kv-heads 2 --head-dim 256 --window 128,0 --softcap 30
  flashsim emulate --q q.npy --k k.npy --v v.npy --pv-accum f32
  flashsim emulate --quant int8 --k-mean 4 --plot int8.png
  flashsim emulate --quant nvfp4 --arch sm_120
"""

from __future__ import annotations

import math
import os
import time
import types
import warnings

import numpy as np

from ..arch import get_arch
from ..config import SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS, SUPPORTED_PV_ACCUM, SUPPORTED_QUANT, pv_accums
from ..emulator import attention, check_emulator_memory, reference_attention
from ..numerics.formats import NAN_DISTANCE, get_format, ulp_distance
from ..problem import check_reference_memory, dims, prepare, resolve_options, to_bhnd

DEFAULT = dict(batch=1, heads=2, nq=256, nk=256, head_dim=128)
PLOT_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")
MAX_HEADS_SHOWN = 8  # --plot: every head up to this many, else the worst head


def add_arguments(p):
    p.add_argument("--batch", type=int, default=DEFAULT["batch"])
    p.add_argument("--heads", type=int, default=DEFAULT["heads"])
    p.add_argument("--nq", type=int, default=DEFAULT["nq"], help="query length")
    p.add_argument("--nk", type=int, default=None, help="key length (default: nq)")
    p.add_argument(
        "--head-dim",
        type=int,
        default=DEFAULT["head_dim"],
        choices=SUPPORTED_HEAD_DIMS,
        metavar="{32,64,...,256}",
        help="head dimension d, a multiple of 32 from 32 to 256",
    )
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads (MQA / GQA; default: --heads)")
    p.add_argument("--dtype", choices=SUPPORTED_DTYPES, default="f16", help="element type of the random inputs")
    p.add_argument("--causal", action="store_true")
    p.add_argument(
        "--window",
        default=None,
        metavar="LEFT,RIGHT",
        help="sliding window (FlashAttention-2's window_size; -1 for unbounded: --window=-1,0)",
    )
    p.add_argument("--softcap", type=float, default=0.0, help="logit soft-cap C > 0: scores become C tanh(s / C)")
    p.add_argument(
        "--layout",
        choices=("bhnd", "bnhd"),
        default="bhnd",
        help="memory layout of q, k, v and o: (B, H, N, d) or (B, N, H, d)",
    )
    p.add_argument(
        "--pv-accum",
        choices=(*SUPPORTED_PV_ACCUM, "all"),
        default="all",
        help="P@V accumulation to emulate: %(choices)s (default: all, side by side; bf16: f32 only)",
    )
    p.add_argument(
        "--quant",
        choices=[x for x in SUPPORTED_QUANT if x != "none"],
        default=None,
        help="also run the quantized kernel (beside the unquantized one, every P@V accumulation)",
    )
    p.add_argument(
        "--k-mean",
        type=float,
        default=0.0,
        metavar="M",
        help="random keys get M x a random per-channel mean (what INT8's smoothing removes)",
    )
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0, help="standard deviation of the random inputs")
    p.add_argument("--q", help="q.npy (B,H,Nq,d) float16; with --k and --v replaces the random inputs")
    p.add_argument("--k", help="k.npy (B,H,Nk,d) float16")
    p.add_argument("--v", help="v.npy (B,H,Nk,d) float16")
    p.add_argument("--backend", choices=("numpy", "jax"), default="numpy")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the |error| map of O per head (the worst head past 8) and the ulp histogram",
    )


def make_inputs(batch, heads, nq, nk, d, seed=0, scale=1.0, kv_heads=None, dtype="f16", layout="bhnd", k_mean=0.0):
    """Seeded normal q (B, H, Nq, d), k and v (B, Hkv, Nk, d) times ``scale``, in ``dtype`` and ``layout``; the keys
    plus ``k_mean`` x scale x a normal per-(head, channel) offset."""
    rng = np.random.default_rng(seed)
    hk = heads if kv_heads is None else kv_heads
    shape_q, shape_k = (batch, heads, nq, d), (batch, hk, nk, d)
    elem = get_format(dtype).dtype
    x = [rng.standard_normal(s) * scale for s in (shape_q, shape_k, shape_k)]
    if k_mean:
        x[1] = x[1] + k_mean * scale * rng.standard_normal((batch, hk, 1, d))
    out = [a.astype(elem) for a in x]
    if layout == "bnhd":
        out = [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in out]
    return tuple(out)


def parse_window(text):
    """--window LEFT,RIGHT -> (left, right) ints (None: no window); ValueError naming the option."""
    if text is None:
        return None
    parts = text.split(",")
    try:
        left, right = (int(x) for x in parts)
    except ValueError:
        raise ValueError(f"--window {text!r}: expected LEFT,RIGHT (two ints, -1 for unbounded)") from None
    return left, right


def options(args) -> dict:
    """The attention options the command line gives (flashsim.attention's keywords beside pv_accum)."""
    return dict(causal=args.causal, window_size=parse_window(args.window), softcap=args.softcap, layout=args.layout)


def _load_array(flag: str, path: str) -> np.ndarray:
    """One input file: an existing .npy holding a float16 array (no pickles, no casting)."""
    if not os.path.exists(path):
        raise FileNotFoundError(2, f"{flag}: no such file", path)
    try:
        x = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"{flag} {path}: not a .npy array file ({str(e).splitlines()[0] if str(e) else e})") from None
    if not isinstance(x, np.ndarray):
        if hasattr(x, "close"):
            x.close()
        raise ValueError(f"{flag} {path}: an .npz archive, not one array: save it with np.save")
    if x.dtype != np.float16:
        raise ValueError(
            f"{flag} {path}: the array is {x.dtype}; the kernel takes float16 and nothing is cast "
            "silently (convert it with x.astype(np.float16) if that is what you mean)"
        )
    if x.ndim != 4:
        raise ValueError(f"{flag} {path}: shape {x.shape}; expected 4 dimensions (B, H, N, d)")
    return x


def load_inputs(args):
    if args.q or args.k or args.v:
        if not (args.q and args.k and args.v):
            raise ValueError("give all of --q, --k and --v, or none")
        return tuple(_load_array(f"--{n}", path) for n, path in (("q", args.q), ("k", args.k), ("v", args.v)))
    nk = args.nk if args.nk is not None else args.nq
    return make_inputs(
        args.batch,
        args.heads,
        args.nq,
        nk,
        args.head_dim,
        args.seed,
        args.scale,
        args.kv_heads,
        args.dtype,
        args.layout,
        args.k_mean,
    )


def check_arguments(args) -> None:
    """Every check that needs no input data, before anything is computed: ValueError / ImportError naming the
    option."""

    get_arch(args.arch)
    if args.q or args.k or args.v:
        random_only = {
            "batch": DEFAULT["batch"],
            "heads": DEFAULT["heads"],
            "nq": DEFAULT["nq"],
            "nk": None,
            "head_dim": DEFAULT["head_dim"],
            "seed": 0,
            "scale": 1.0,
            "kv_heads": None,
            "dtype": "f16",
            "k_mean": 0.0,
        }
        given = [f"--{n.replace('_', '-')}" for n, default in random_only.items() if getattr(args, n) != default]
        if given:
            raise ValueError(
                f"{', '.join(given)} describe the random inputs: with --q, --k and --v files, "
                "the files give the shapes (leave those options out)"
            )
    else:
        for name in (
            ("batch", "heads", "nq")
            + (("nk",) if args.nk is not None else ())
            + (("kv_heads",) if args.kv_heads is not None else ())
        ):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
        if not (math.isfinite(args.scale) and args.scale > 0):
            raise ValueError(f"--scale must be a positive finite number, got {args.scale}")
        if not math.isfinite(args.k_mean):
            raise ValueError(f"--k-mean must be a finite number, got {args.k_mean}")

    resolve_options(args.causal, None, None, None, parse_window(args.window), args.softcap, args.layout, args.quant)
    if args.backend == "jax":
        try:
            import jax  # noqa: F401
        except ImportError as e:
            raise ModuleNotFoundError(
                f"--backend jax needs jax, which is not installed ({e}): pip install 'flashsim[jax]'", name="jax"
            ) from None
    if args.plot:
        check_plot_path(args.plot)


def check_plot_path(path: str) -> None:
    """--plot FILE: matplotlib importable, a format it writes, a folder that exists (checked before the work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise ModuleNotFoundError(
            f"--plot needs matplotlib, which is not installed ({e}): pip install 'flashsim[plot]'", name="matplotlib"
        ) from None
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in PLOT_FORMATS:
        raise ValueError(f"--plot {path}: the file name must end in one of .{', .'.join(PLOT_FORMATS)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "--plot: no such folder", folder)
    if not os.access(folder, os.W_OK):
        raise PermissionError(13, "--plot: folder not writable", folder)


def runs(args, accs) -> list[tuple[str, str, str]]:
    """(label, pv_accum, quant) of every emulated run: each accumulation, then with --quant each again quantized."""
    out = [(f"P@V {a}", a, "none") for a in accs]
    quant = getattr(args, "quant", None)
    if quant:  # with --pv-accum all, the quantized runs take the accumulations it has
        qaccs = [a for a in accs if a in pv_accums(args.dtype, quant)] if args.pv_accum == "all" else accs
        out += [(f"{quant} P@V {a}", a, quant) for a in qaccs]
    return out


def check_problem(shapes, args, accs) -> None:
    """The problem's checks (flashsim.problem.prepare) and its memory, from the shapes alone: before any input is
    generated or any reference computed."""

    dtype = get_format(args.dtype if not args.q else "f16").dtype
    stand_ins = [types.SimpleNamespace(shape=s, dtype=dtype) for s in shapes]
    prob = None
    for _, acc, quant in runs(args, accs):
        prob = prepare(*stand_ins, pv_accum=acc, quant=quant, arch=args.arch, **options(args))
        check_emulator_memory(prob, args.backend)
    check_reference_memory(prob)


def error_summary(o, lse, o_ref, lse_ref):
    """Errors of one emulated run against the float64 reference."""
    o32 = o.astype(np.float64)
    finite = np.isfinite(o_ref)
    with np.errstate(invalid="ignore"):
        err = np.abs(o32 - o_ref)
    rel_l2 = float(np.linalg.norm((o32 - o_ref)[finite]) / max(np.linalg.norm(o_ref[finite]), 1e-300))
    both = finite & np.isfinite(o32)
    norms = float(np.linalg.norm(o32[both]) * np.linalg.norm(o_ref[both]))
    cosine = float(np.dot(o32[both], o_ref[both]) / norms) if norms > 0 else math.nan

    ulps = ulp_distance(o, o_ref.astype(o.dtype))
    ulps = np.where(ulps == NAN_DISTANCE, -1, ulps)  # -1: NaN against a number
    lse_fin = np.isfinite(lse_ref)
    with np.errstate(invalid="ignore"):
        lse_err = np.abs(lse.astype(np.float64) - lse_ref)[lse_fin]
    max_abs = float(err[finite].max(initial=0.0))
    max_ref = float(np.abs(o_ref[finite]).max(initial=0.0))
    return {
        "max_abs": max_abs,
        "max_abs_rel": max_abs / max_ref if max_ref > 0 else (0.0 if max_abs == 0 else math.inf),
        "rel_l2": rel_l2,
        "cosine": cosine,
        "ulp": ulps,
        "lse_max_abs": float(lse_err.max(initial=0.0)),
        "lse_inf_match": bool(np.array_equal(np.isinf(lse), ~lse_fin)),
    }


ULP_NOTE = (
    "ulp = distance from O to the float64 reference rounded to O's type, in its units in the last place.\n"
    "Elements of O near zero have tiny ulps: a large ulp count there can be a tiny error (see max |error| / "
    "max |O|)."
)


def run(args) -> int:

    accs = SUPPORTED_PV_ACCUM if args.pv_accum == "all" else (args.pv_accum,)
    if args.pv_accum == "all" and args.dtype == "bf16" and not args.q:
        accs = ("f32",)  # mma.sync has no bf16 accumulator
    check_arguments(args)
    opts = options(args)
    if not (args.q or args.k or args.v):  # random inputs: check the problem before generating them
        nk = args.nk if args.nk is not None else args.nq
        hk = args.kv_heads if args.kv_heads is not None else args.heads
        shapes = [
            (args.batch, args.heads, args.nq, args.head_dim),
            (args.batch, hk, nk, args.head_dim),
            (args.batch, hk, nk, args.head_dim),
        ]
        check_problem([dims(s, args.layout) for s in shapes], args, accs)
    q, k, v = load_inputs(args)
    check_problem([q.shape, k.shape, v.shape], args, accs)
    extra = ", ".join(f"{k_}={v_}" for k_, v_ in opts.items() if v_ not in (None, 0.0, False, "bhnd"))
    print(
        f"flashsim emulate: q {q.shape} {q.dtype}, k {k.shape}, arch={args.arch}, backend={args.backend}"
        + (f", {extra}" if extra else "")
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        o_ref, lse_ref = reference_attention(q, k, v, **opts)
        t_ref = time.perf_counter() - t0
        results, overflowed = {}, []
        for label, acc, quant in runs(args, accs):
            # one-time set-up (SFU tables, compiled kernels) on a one-row problem first: not in the timing
            attention(
                q[:1, :1, :1],
                k[:1, :1, :1],
                v[:1, :1, :1],
                pv_accum=acc,
                quant=quant,
                arch=args.arch,
                backend=args.backend,
                progress=False,
                check_overflow=False,
                **opts,
            )
            t0 = time.perf_counter()
            # progress=None: the bar shows only on a terminal, and only once the run takes more than a second
            o, lse, check = attention(
                q,
                k,
                v,
                pv_accum=acc,
                quant=quant,
                arch=args.arch,
                backend=args.backend,
                progress=None,
                check_overflow="deferred",
                **opts,
            )
            o, o_ref_h = (np.ascontiguousarray(to_bhnd(x, args.layout)) for x in (o, o_ref))
            results[label] = (time.perf_counter() - t0, o, lse, error_summary(o, lse, o_ref_h, lse_ref))
            try:
                check()
            except FloatingPointError as e:  # reported beside the table: the figures show what it does to O
                overflowed.append(str(e))
    rows = [
        ("emulation time (s, set-up excluded)", lambda r: f"{r[0]:.2f}"),
        ("O max |error|", lambda r: f"{r[3]['max_abs']:.3e}"),
        ("O max |error| / max |O|", lambda r: f"{r[3]['max_abs_rel']:.3e}"),
        ("O relative L2 error", lambda r: f"{r[3]['rel_l2']:.3e}"),
        ("O cosine similarity", lambda r: f"{r[3]['cosine']:.8f}"),
        ("O ulp = 0 (of ref in O's type)", lambda r: f"{np.mean(r[3]['ulp'] == 0):.2%}"),
        ("O ulp <= 1", lambda r: f"{np.mean((r[3]['ulp'] >= 0) & (r[3]['ulp'] <= 1)):.2%}"),
        ("O ulp <= 4", lambda r: f"{np.mean((r[3]['ulp'] >= 0) & (r[3]['ulp'] <= 4)):.2%}"),
        ("O max ulp", lambda r: f"{int(r[3]['ulp'].max())}"),
        ("LSE max |error|", lambda r: f"{r[3]['lse_max_abs']:.3e}"),
        ("empty rows (lse=+inf) agree", lambda r: str(r[3]["lse_inf_match"])),
    ]
    print(f"float64 reference: {t_ref:.2f}s")
    labels = list(results)
    width = max(16, max(len(a) for a in labels) + 2)
    header = f"{'':32}" + "".join(f"{a:>{width}}" for a in labels)
    print(header)
    for label, fmt in rows:
        print(f"{label:32}" + "".join(f"{fmt(results[a]):>{width}}" for a in labels))
    nan_vs_number = {a: int((results[a][3]["ulp"] < 0).sum()) for a in labels}
    if any(nan_vs_number.values()):
        print(
            "NaN where the reference is a number (or the reverse): "
            + ", ".join(f"{a}: {n}" for a, n in nan_vs_number.items())
        )
    print(ULP_NOTE)
    for message in overflowed:
        print(f"overflow: {message}")  # flashsim.overflow: the kernel would flag the same row
    for message in dict.fromkeys(str(w.message) for w in caught if not issubclass(w.category, RuntimeWarning)):
        print(f"note: {message}")  # e.g. no SFU calibration for this arch
    if args.plot:
        _plot(
            args.plot,
            results,
            np.ascontiguousarray(to_bhnd(o_ref, args.layout)),
            args,
            nk=dims(k.shape, args.layout)[2],
        )
        print(f"plot written to {args.plot}")
    bad = [a for a in labels if not np.isfinite(results[a][3]["max_abs"])]
    return 1 if bad else 0


def _heads_to_show(results, o_ref):
    """[(acc, [(b, h, err (Nq, d)), ...])]: every head up to MAX_HEADS_SHOWN, else each accumulator's worst head."""
    out = []
    for acc, r in results.items():
        with np.errstate(invalid="ignore"):
            err = np.abs(r[1].astype(np.float64) - o_ref)  # (B, H, Nq, d); NaN where either is
        B, H = err.shape[:2]
        if B * H <= MAX_HEADS_SHOWN:
            heads = [(b, h) for b in range(B) for h in range(H)]
        else:
            finite = np.where(np.isfinite(err), err, -1.0)
            worst = np.argmax(finite.reshape(B * H, -1).max(axis=1))
            heads = [divmod(int(worst), H)]
        out.append((acc, [(b, h, err[b, h]) for b, h in heads]))
    return out


def _plot(path, results, o_ref, args, nk):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    shown = _heads_to_show(results, o_ref)
    B, H, nq, d = o_ref.shape
    n_rows = len(shown[0][1])
    n_cols = len(shown)
    all_err = np.concatenate([e[np.isfinite(e)].ravel() for _, heads in shown for _, _, e in heads] + [np.zeros(1)])
    top = float(np.log10(max(all_err.max(), 1e-30)))
    positive = all_err[all_err > 0]
    floor = max(top - 6.0, float(np.log10(positive.min())) if positive.size else top - 6.0)
    norm = Normalize(vmin=floor, vmax=max(top, floor + 1e-6))
    cmap = matplotlib.colormaps["magma"].with_extremes(bad="cyan")

    fig = plt.figure(figsize=(max(8.5, 6.2 * n_cols), 2.9 * n_rows + 3.8), layout="constrained")
    grid = fig.add_gridspec(n_rows + 1, n_cols, height_ratios=[1.0] * n_rows + [1.25])
    past = B * H > MAX_HEADS_SHOWN
    fig.suptitle(
        f"flashsim emulate: error of the emulated kernel's O against the float64 reference\n"
        f"B={B} H={H} Nq={nq} Nk={nk} d={d} {args.dtype}{' causal' if args.causal else ''}"
        f"{f' Hkv={args.kv_heads}' if args.kv_heads else ''}{f' window ({args.window})' if args.window else ''}"
        f"{f' softcap {args.softcap:g}' if args.softcap else ''}"
        f"{f' keys with a mean {args.k_mean:g}x their spread' if getattr(args, 'k_mean', 0) else ''}"
        f", arch {args.arch}"
        + (f"\n{B * H} heads: the worst head (largest |error|) of each accumulator is shown" if past else ""),
        fontsize=11,
    )
    image = None
    for col, (acc, heads) in enumerate(shown):
        for row, (b, h, err) in enumerate(heads):
            ax = fig.add_subplot(grid[row, col])
            with np.errstate(divide="ignore"):
                img = np.log10(np.where(np.isfinite(err), np.maximum(err, 10.0**floor), np.nan))
            image = ax.imshow(np.ma.masked_invalid(img), aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
            finite = np.isfinite(err)
            n_bad = int((~finite).sum())
            worst = float(err[finite].max(initial=0.0))
            ax.set_title(
                f"{acc}: batch {b}, head {h}{' (worst)' if past else ''}: max |error| {worst:.2e}"
                + (f"; {n_bad} not finite in O or the reference (cyan)" if n_bad else ""),
                fontsize=9,
            )
            ax.set_ylabel("query row")
            ax.set_xlabel("head-dim column" if row == n_rows - 1 else "")
        hist = fig.add_subplot(grid[n_rows, col])
        u = results[acc][3]["ulp"].ravel()
        n_nan = int((u < 0).sum())
        u = u[u >= 0]
        hist.hist(np.minimum(u, 16), bins=np.arange(18) - 0.5, log=True, color="tab:blue", edgecolor="black")
        hist.set_xticks(range(0, 17, 2), [str(t) for t in range(0, 16, 2)] + ["16+"])
        hist.set_xlabel(f"ulp distance to the float64 reference rounded to {args.dtype}")
        hist.set_ylabel("elements of O (log scale)")
        hist.set_title(
            f"{acc}: ulp distances, all {u.size + n_nan} elements"
            + (f" ({n_nan} NaN vs a number, not shown)" if n_nan else ""),
            fontsize=9,
        )
    bar = fig.colorbar(image, ax=[a for a in fig.axes if a.get_images()], shrink=0.9)
    bar.set_label(
        f"log10 |O - O_ref|  (absolute error, units of V)\nexact elements are drawn at the bottom, {floor:.1f}"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
