"""Run the real kernel on this GPU and the emulator on the CPU with the same inputs; diff them bit for bit.

For each case (shape, seed, configuration, input kind) it reports the fraction of bit-equal elements of
O and LSE, the max ulp distance, and for the first mismatch its (batch, head, row, column) and the kernel's
(block, warp, lane, register) that produced it. Exit status 0 only if every bit of every case agrees, 1 on a
mismatch, 2 on a bad option or without a GPU (one line, before any case runs).

--save-cases FILE.npz keeps, per case i, the GPU outputs (c<i>_o, c<i>_lse) and c<i>_meta (json: name, arch,
config, shape, kind, seed, inputs_sha256, and provenance: the kernel source's hash and the build's defines, see
flashsim.provenance). --replay FILE.npz runs exactly the cases of such a file again (same configurations, shapes,
kinds and seeds; the regenerated inputs must hash as recorded), which is how tests/data/attn_sm90_*.npz are
re-captured (tools/device_round.sh captures).

--ptx adds a third witness: the kernel's own PTX run instruction by instruction in flashsim.ptx on the CPU
(backend="ptx"), against the GPU's bits; a case passes only if all three agree (slow: meant for small shapes).

--serving runs the serving cases instead (KV cache contiguous and paged, split-KV and its combine, GQA packing,
variable-length batches: flashsim.commands.verify_serving); --replay of a file they were saved in runs them again.

--fa2-rule gpu|emulator adds a report of FlashAttention-2's own acceptance rule (max|out - out_ref| <= 2 max|out_pt -
out_ref|, out_pt = PyTorch's f16 attention) on FlashAttention-2's 40-case grid for every pv_accum mode
(flashsim.commands.fa2_rule), also under "fa2_rule" in --json. It is a report: its failing cases do not change the
exit status, which reflects the bit-exactness checks alone. 'emulator' needs no GPU and runs no bit checks (exit 0).
"""

from __future__ import annotations

import functools
import json
import os
import time
import types
from dataclasses import dataclass

import numpy as np

from .. import gpu, provenance
from ..config import SUPPORTED_HEAD_DIMS, SUPPORTED_M_TILES, SUPPORTED_PV_ACCUM, KernelConfig, pv_accums
from ..diff import compare, kernel_coordinates
from ..emulator import ENGINES, check_emulator_memory
from ..gpu import runtime as rt
from ..gpu.launch import NO_OVERFLOW
from ..numerics import sfu
from ..numerics.formats import get_format
from ..overflow import first_flagged
from ..problem import prepare, resolve_options, to_bhnd
from ..settings import EngineOptions
from . import fa2_rule, verify_serving
from .case_inputs import INPUT_KINDS, make_case_inputs
from .emulate import parse_window

# (B, H, Nq, Nk, d, causal): odd lengths, N = 1, Nq != Nk both ways, both head dims, batch and heads > 1.
DEFAULT_SHAPES = [
    (1, 1, 1, 1, 64, False),
    (1, 2, 77, 77, 64, False),
    (2, 2, 128, 128, 128, False),
    (1, 2, 200, 333, 128, False),
    (1, 1, 257, 129, 64, True),
    (2, 1, 129, 257, 128, True),
    (1, 2, 190, 190, 128, True),
    (1, 1, 300, 100, 128, True),
]


@dataclass(frozen=True)
class Case:
    """One verify case: shape (B, Hq, Hkv, Nq, Nk, d), the KernelConfig (dtype, causal, pv_accum, tiling), the input
    kind and seed, the options beyond the config (window, softcap, layout) and, for replays, the inputs' sha256."""

    shape: tuple
    config: KernelConfig
    kind: str
    seed: int
    sha: str | None = None
    window: tuple = (-1, -1)
    softcap: float = 0.0
    layout: str = "bhnd"

    def name(self) -> str:
        b, h, hk, nq, nk, d = self.shape
        c = self.config
        extra = [
            f"kv{hk}" if hk != h else "",
            c.dtype if c.dtype != "f16" else "",
            "causal" if c.causal else "",
            c.quant if c.quant != "none" else "",
            f"win{list(self.window)}" if self.window != (-1, -1) and c.local else "",
            f"cap{self.softcap:g}" if self.softcap else "",
            self.layout if self.layout != "bhnd" else "",
        ]
        return " ".join([f"{b}x{h}x{nq}x{nk}x{d}", *[e for e in extra if e], c.pv_accum, self.kind, f"s{self.seed}"])

    def inputs(self):
        b, h, hk, nq, nk, d = self.shape
        return make_case_inputs(
            self.kind, b, h, nq, nk, d, self.seed, heads_kv=hk, dtype=self.config.dtype, layout=self.layout
        )


def variant(
    shape,
    kinds=("normal", "adversarial"),
    arch="sm_90",
    window=(-1, -1),
    softcap=0.0,
    layout="bhnd",
    causal=False,
    dtype="f16",
    accs=("f32",),
    seed=0,
    quant="none",
    **tiling,
):
    """Cases of one variant: the arch's default configuration for its options (``tiling``: warps, m_tiles, kv_tile,
    stages overrides), every kind and P@V accumulation."""

    out = []
    for acc in accs:
        opts = resolve_options(causal, acc, None, None, window, softcap, layout, quant)
        cfg = opts.kernel_config(arch, shape[-1], dtype, **tiling)
        out += [Case(tuple(shape), cfg, kind, seed, None, opts.window_size, float(softcap), layout) for kind in kinds]
    return out


def variant_cases(arch: str) -> list[Case]:
    """The attention variants (--variants): every head dim, bf16, MQA / GQA (groups 1, 2, 8; Hkv = 1), sliding
    windows (rows that see no key included), soft-capping, the (B, N, H, d) layout, and their combinations, on normal
    and adversarial inputs (and wide for a few)."""
    v = functools.partial(variant, arch=arch)
    cases = []
    for i, d in enumerate(range(32, 257, 32)):  # every head dim, odd lengths, GQA group 2
        cases += v((1, 2, 1, 77 + i, 93 + 2 * i, d), accs=("f32", "f16"), causal=bool(i % 2))
    cases += v((1, 2, 2, 65, 130, 160), accs=("f16x2",))
    cases += v(
        (2, 4, 2, 130, 190, 128), dtype="bf16", causal=True, window=(64, 0), kinds=("normal", "adversarial", "wide")
    )
    cases += v((1, 8, 1, 100, 100, 64), dtype="bf16")  # MQA: Hkv = 1, group 8
    cases += v((1, 8, 8, 64, 96, 64), dtype="bf16", causal=True)  # group 1
    cases += v((2, 8, 4, 90, 90, 96), dtype="bf16", softcap=20.0, layout="bnhd")
    cases += v((1, 2, 2, 150, 150, 64), window=(16, 8), accs=("f32", "f16"))
    cases += v((1, 2, 2, 150, 150, 64), window=(0, 0))  # the diagonal only
    cases += v((1, 2, 1, 120, 200, 128), window=(3, -1))
    cases += v((1, 2, 1, 120, 200, 128), window=(-1, 5))
    cases += v((1, 2, 2, 200, 50, 64), window=(5, 5))  # rows whose window holds no key
    cases += v((1, 1, 1, 129, 257, 128), causal=True, window=(31, -1), accs=("f16x2",))
    cases += v((1, 2, 2, 120, 150, 128), softcap=30.0, accs=("f16", "f32"), kinds=("normal", "adversarial", "wide"))
    cases += v((1, 4, 2, 100, 333, 64), softcap=5.0, causal=True, window=(40, 0), accs=("f16x2",))
    cases += v((2, 4, 2, 80, 120, 128), layout="bnhd", accs=("f32", "f16"))
    cases += v((1, 4, 1, 70, 150, 256), layout="bnhd", dtype="bf16", window=(20, 20))
    return cases


def quant_cases(arch: str) -> list[Case]:
    """INT8 attention (--quant), then INT8 with FP8 P@V (quant "int8-fp8", f32 and two-level f16 accumulation):
    every head dim (s8 rows of 2 to 16
    chunks) with f32 and f16 P@V, GQA and MQA,
    causal, windows, bf16, f16x2, (B, N, H, d); keys with a large mean (the smoothing's reason: kind "offset"),
    normal, wide, adversarial (NaN and inf) and specials (inf in q and k) inputs; lengths that are not multiples
    of the 16-row quantization blocks, N = 1, and a long K (the mean's slices wrap many times)."""
    v = functools.partial(variant, arch=arch, quant="int8")
    cases = []
    for i, d in enumerate(range(32, 257, 32)):
        cases += v(
            (1, 2, 1, 70 + 3 * i, 90 + 5 * i, d), accs=("f32", "f16"), causal=bool(i % 2), kinds=("normal", "offset")
        )
    cases += v((2, 4, 2, 130, 190, 128), kinds=("normal", "offset", "wide", "adversarial", "specials"))
    cases += v((1, 8, 1, 100, 100, 64), dtype="bf16", causal=True, kinds=("normal", "offset", "adversarial"))
    cases += v((1, 4, 2, 150, 150, 96), window=(24, 8), accs=("f32", "f16x2"))
    cases += v((2, 4, 4, 80, 120, 128), layout="bnhd", accs=("f32", "f16"))
    cases += v((1, 4, 1, 70, 150, 256), layout="bnhd", dtype="bf16", window=(20, 20))
    cases += v((1, 2, 2, 1, 1, 64), kinds=("normal",)) + v((1, 2, 2, 17, 1, 128), kinds=("normal",))
    cases += v((1, 2, 1, 64, 3000, 128), kinds=("offset",), accs=("f32", "f16"))
    # FP8 P@V (quant "int8-fp8", f16 inputs) with f32 accumulation: head dims, GQA, causal, windows, bnhd, every kind
    f = functools.partial(variant, arch=arch, quant="int8-fp8", accs=("f32",))
    for i, d in enumerate((32, 64, 96, 128, 192, 256)):
        cases += f((1, 2, 1, 70 + 5 * i, 90 + 7 * i, d), causal=bool(i % 2), kinds=("normal", "offset"))
    cases += f((2, 4, 2, 130, 190, 128), kinds=("normal", "wide", "adversarial", "specials"))
    cases += f((1, 4, 2, 150, 150, 64), window=(24, 8), layout="bnhd", kinds=("normal", "adversarial"))
    cases += f((1, 2, 2, 1, 1, 64), kinds=("normal",)) + f((1, 2, 1, 64, 3000, 128), kinds=("offset",))
    # FP8 P@V with two-level f16 accumulation: head dims (groups of 32 and 64 keys, the default tilings' kv_tile, and
    # two groups per 128-key tile), flat inputs (every f16 group sum at 64512, the proved bound), GQA, causal,
    # windows, bnhd
    f = functools.partial(variant, arch=arch, quant="int8-fp8", accs=("f16x2",))
    for i, d in enumerate((32, 64, 128, 256)):
        cases += f((1, 2, 1, 70 + 5 * i, 130 + 7 * i, d), causal=bool(i % 2), kinds=("normal", "flat"))
    cases += f((1, 2, 2, 60, 200, 128), warps=8, m_tiles=1, kv_tile=128, kinds=("normal", "flat"))
    cases += f((2, 4, 2, 130, 190, 128), kinds=("wide", "adversarial", "specials", "offset"))
    cases += f((1, 4, 2, 150, 150, 64), window=(24, 8), layout="bnhd", kinds=("normal", "flat"))
    cases += f((1, 2, 1, 64, 3000, 128), causal=True, kinds=("flat",))
    return cases


def add_arguments(p):
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="B,H,NQ,NK,D[,causal]",
        help="add a case (repeatable); 'causal' as a 6th field makes it causal",
    )
    p.add_argument("--only", action="store_true", help="run only the --shape cases, not the default set")
    p.add_argument(
        "--variants",
        action="store_true",
        help="run the attention variants instead of the default set: every head dim, bf16, MQA/GQA, "
        "sliding windows, softcap, (B, N, H, d) and their combinations (flashsim.commands.verify."
        "variant_cases)",
    )
    p.add_argument(
        "--quant",
        nargs="?",
        const="cases",
        default=None,
        choices=("cases", "int8", "int8-fp8"),
        help="alone: run the quantized-attention cases (flashsim.commands.verify.quant_cases) instead of "
        "the default set; with --shape: quantize those cases (int8, the default, or int8-fp8)",
    )
    p.add_argument(
        "--serving",
        action="store_true",
        help="run the serving cases instead of the default set: KV cache (contiguous and paged, split-KV, GQA "
        "packing) and variable-length batches (flashsim.commands.verify_serving.serving_cases)",
    )
    p.add_argument(
        "--fused",
        action="store_true",
        help="with --serving (or a serving --replay): run each call with its index check inside flash_fwd "
        "(KernelConfig.fused: one launch fewer); the emulator is the same",
    )
    p.add_argument("--seeds", type=int, default=1, help="seeds per case")
    p.add_argument("--dtype", choices=("f16", "bf16"), default="f16", help="element type of the --shape cases")
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads of the --shape cases (MQA / GQA)")
    p.add_argument(
        "--window",
        default=None,
        metavar="LEFT,RIGHT",
        help="sliding window of the --shape cases (-1 unbounded: --window=-1,0)",
    )
    p.add_argument("--softcap", type=float, default=0.0, help="soft-cap of the --shape cases")
    p.add_argument("--layout", choices=("bhnd", "bnhd"), default="bhnd", help="layout of the --shape cases")
    p.add_argument(
        "--pv-accum",
        choices=(*SUPPORTED_PV_ACCUM, "all"),
        default="all",
        help="P@V accumulation to run: %(choices)s (default: all)",
    )
    p.add_argument("--kinds", default="normal,adversarial", help=f"input kinds, from {','.join(INPUT_KINDS)}")
    p.add_argument("--warps", type=int, default=None)
    p.add_argument("--m-tiles", type=int, default=None, choices=SUPPORTED_M_TILES, help="m16 tiles per warp")
    p.add_argument("--kv-tile", type=int, default=None)
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--json", metavar="FILE", help="write the per-case results as JSON")
    p.add_argument(
        "--save-cases",
        metavar="FILE.npz",
        help="save every case's GPU outputs and how to regenerate its inputs in one .npz (offline bit tests)",
    )
    p.add_argument(
        "--replay",
        action="append",
        default=[],
        metavar="FILE.npz",
        help="run the cases saved in FILE by --save-cases (their configurations, shapes, kinds, seeds) instead "
        "of the default set (repeatable; --shape cases are added with the other options)",
    )
    p.add_argument(
        "--ptx",
        action="store_true",
        help="three ways: also run the kernel's own PTX in flashsim.ptx (CPU, slow: small shapes) against the GPU",
    )
    p.add_argument(
        "--executor",
        metavar="ADDRESS",
        help='with --ptx: spread the simulated blocks over a cluster engine: "local:N" or a Dask scheduler address',
    )
    fa2_rule.add_arguments(p)


def trouble_heads(rng, b, h, nq, nk, d):
    """q, k, v (b, h, N, d) f16 whose heads cycle through: normal, large (exp overflows without the max
    subtraction), NaN/inf sprinkled, tiny (subnormal products), exact zeros, wide exponent spread."""
    q = rng.standard_normal((b, h, nq, d))
    k = rng.standard_normal((b, h, nk, d))
    v = rng.standard_normal((b, h, nk, d))
    for i in range(b * h):
        bi, hi = divmod(i, h)
        kind = i % 6
        if kind == 1:
            q[bi, hi] *= 40
            k[bi, hi] *= 40
        elif kind == 2:
            for x in (q, k, v):
                idx = rng.integers(0, x.shape[2], 3)
                x[bi, hi, idx, rng.integers(0, d, 3)] = [np.nan, np.inf, -np.inf]
        elif kind == 3:
            q[bi, hi] *= 1e-4
            k[bi, hi] *= 1e-3
        elif kind == 4:
            k[bi, hi, : nk // 2] = 0
            v[bi, hi, ::3] = 0
        elif kind == 5:
            for x in (q, k, v):
                x[bi, hi] *= 2.0 ** rng.integers(-12, 8, size=x.shape[2:])
    return tuple(x.astype(np.float16) for x in (q, k, v))


def inputs_sha256(q, k, v) -> str:
    """Fingerprint of a case's inputs, so that saved outputs are only compared with the very same inputs."""
    import hashlib

    return hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in (q, k, v))).hexdigest()


CAUSAL_WORDS = {
    "causal": True,
    "1": True,
    "true": True,
    "yes": True,
    "noncausal": False,
    "0": False,
    "false": False,
    "no": False,
}


def parse_shape(text):
    """'B,H,NQ,NK,D[,causal]' -> (b, h, nq, nk, d, causal); ValueError naming what is wrong."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (5, 6):
        raise ValueError(f"--shape {text!r}: expected B,H,NQ,NK,D[,causal] (5 or 6 fields), got {len(parts)}")
    try:
        dims = tuple(int(x) for x in parts[:5])
    except ValueError:
        raise ValueError(f"--shape {text!r}: B, H, NQ, NK and D must be integers") from None
    if min(dims) < 1:
        raise ValueError(f"--shape {text!r}: B, H, NQ, NK and D must be >= 1")
    if dims[4] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"--shape {text!r}: D={dims[4]} is not a head dim the kernel supports {SUPPORTED_HEAD_DIMS}")
    if len(parts) == 6 and parts[5].lower() not in CAUSAL_WORDS:
        raise ValueError(
            f"--shape {text!r}: the 6th field must be 'causal' (or one of "
            f"{', '.join(sorted(CAUSAL_WORDS))}), got {parts[5]!r}"
        )
    return dims + (len(parts) == 6 and CAUSAL_WORDS[parts[5].lower()],)


def check_arguments(args) -> None:
    """Every argument error before the GPU is asked for: ValueError / FileNotFoundError naming the option."""
    if getattr(args, "fused", False) and not (getattr(args, "serving", False) or args.replay):
        raise ValueError(
            "--fused runs the serving calls with their index check inside flash_fwd: it goes with --serving (or a "
            "serving --replay)"
        )
    for s in args.shape:
        parse_shape(s)

    resolve_options(None, None, None, None, parse_window(args.window), args.softcap, args.layout, shape_quant(args))
    variant_options = (
        args.dtype != "f16" or args.kv_heads is not None or args.window or args.softcap or args.layout != "bhnd"
    )
    if variant_options and not args.shape:
        raise ValueError(
            "--dtype, --kv-heads, --window, --softcap and --layout apply to --shape cases: give --shape "
            "(--variants runs the built-in set of variants)"
        )
    if args.kv_heads is not None and args.kv_heads < 1:
        raise ValueError(f"--kv-heads must be >= 1, got {args.kv_heads}")
    if args.only and not args.shape and not args.replay:
        raise ValueError("--only runs only the --shape cases: give at least one --shape")
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in INPUT_KINDS]
    if not kinds or unknown:
        raise ValueError(f"--kinds {args.kinds!r}: give one or more of {','.join(INPUT_KINDS)}")
    for name, value in (
        ("warps", args.warps),
        ("m-tiles", args.m_tiles),
        ("kv-tile", args.kv_tile),
        ("stages", args.stages),
    ):
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value}")
    for path in args.replay:
        if not os.path.isfile(path):
            raise FileNotFoundError(2, "--replay: no such file", path)
    for flag, path in (("--json", args.json), ("--save-cases", args.save_cases)):
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise FileNotFoundError(2, f"{flag}: no such folder", folder)


def shape_quant(args):
    """The quant of the --shape cases: None without --quant, "int8" for a bare --quant, else the value given."""
    q = getattr(args, "quant", None)
    return None if q is None else ("int8" if q == "cases" else q)


def check_cases(cases, arch) -> None:
    """Every case's configuration fits ``arch`` and its emulation fits this machine's memory (checked before the
    first launch, not when the case comes)."""

    for c in cases:
        b, h, hk, nq, nk, d = c.shape
        dt = get_format(c.config.dtype).dtype
        shapes = ((b, h, nq, d), (b, hk, nk, d), (b, hk, nk, d))
        if c.layout == "bnhd":
            shapes = tuple((s[0], s[2], s[1], s[3]) for s in shapes)
        stand_in = [types.SimpleNamespace(shape=s, dtype=dt) for s in shapes]
        opts = resolve_options(config=c.config, window_size=c.window, softcap=c.softcap, layout=c.layout)
        check_emulator_memory(prepare(*stand_in, opts, arch=arch))


def gpu_outputs(q, k, v, config, **options):
    """The kernel's raw (o, lse, overflow row) on the current GPU: no overflow check, so adversarial inputs give
    their inf / NaN; the overflow row is the flag the kernel wrote (flashsim.overflow), None when unset.
    ``options``: window_size, softcap, layout."""

    go, (do, dl), _ = gpu.prepared_launch(q, k, v, config=config, **options)
    flag = go(sync=True)[-1]
    value = None if flag is None else int(flag.to_numpy()[0])
    return do.to_numpy(), dl.to_numpy(), None if value in (None, NO_OVERFLOW) else value


def emulator_outputs(q, k, v, config, arch, backend: str = "numpy", engine=None, **options):
    """The emulator's (o, lse, overflow row): the same three values as ``gpu_outputs``, from the numpy engine (the
    kernel's program) or with ``backend="ptx"`` from the kernel's own PTX run by flashsim.ptx; ``engine``: the
    engine's EngineOptions (None: from the environment)."""

    prob = prepare(q, k, v, config=config, arch=arch, **options)
    bhnd = (to_bhnd(x, prob.layout) for x in (q, k, v))
    o, lse, rows = ENGINES[backend].run(*bhnd, prob, progress=False, options=engine)
    return np.ascontiguousarray(to_bhnd(o, prob.layout)), lse, first_flagged(rows.flag) if config.pv_mma_f16 else None


def verify_case(q, k, v, config, arch, backend: str = "numpy", **options):
    """Run the GPU and the emulator (``backend``); return (o_diff, lse_diff, gpu outputs (o, lse, overflow row),
    timings, overflow rows (gpu, emulator)). O is compared as (B, H, N, d) whatever the layout (mismatch coordinates
    are the kernel's)."""

    layout = options.get("layout") or "bhnd"
    t0 = time.perf_counter()
    o_g, lse_g, f_g = gpu_outputs(q, k, v, config, **options)
    t1 = time.perf_counter()
    o_e, lse_e, f_e = emulator_outputs(q, k, v, config, arch, backend, **options)
    t2 = time.perf_counter()
    od = compare("O", np.ascontiguousarray(to_bhnd(o_g, layout)), np.ascontiguousarray(to_bhnd(o_e, layout)))
    return od, compare("LSE", lse_g, lse_e), (o_g, lse_g, f_g), (t1 - t0, t2 - t1), (f_g, f_e)


def ptx_agrees(q, k, v, config, arch, gpu, executor=None, **options) -> str:
    """The third witness (--ptx): the kernel's own PTX in flashsim.ptx against the GPU's outputs ``gpu`` (o, lse,
    overflow row); "" when every bit agrees, else what differs. ``executor``: the cluster engine its launches'
    blocks spread over (flashsim.ptx.distributed), None for this process."""
    engine = EngineOptions.from_environment(**({"ptx_executor": executor} if executor else {}))
    o, lse, flag = emulator_outputs(q, k, v, config, arch, "ptx", engine, **options)
    bad = [
        name
        for name, a, b in (("O", gpu[0], o), ("LSE", gpu[1], lse))
        if not np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))
    ]
    if gpu[2] != flag:
        bad.append(f"overflow row {flag} (gpu {gpu[2]})")
    return ", ".join(bad)


def case_meta(name, arch, case: Case, q, k, v) -> dict:
    """What --save-cases stores beside a case's outputs: enough to regenerate its inputs (checked by hash) and
    the provenance of the kernel build that ran it (flashsim.provenance, checked by tests/test_drift.py)."""
    cfg = case.config
    return dict(
        name=name,
        arch=arch,
        config=cfg.__dict__,
        shape=list(case.shape),
        kind=case.kind,
        seed=case.seed,
        window=list(case.window),
        softcap=case.softcap,
        layout=case.layout,
        inputs_sha256=inputs_sha256(q, k, v),
        provenance=provenance.fingerprint("flash_fwd", cfg),
    )


def case_of_meta(meta: dict) -> Case:
    """The Case a saved meta describes (shape (B, H, Nq, Nk, d) in files written before GQA: Hkv = H)."""
    shape = tuple(meta["shape"])
    if len(shape) == 5:
        b, h, nq, nk, d = shape
        shape = (b, h, h, nq, nk, d)
    return Case(
        shape,
        KernelConfig(**meta["config"]),
        meta["kind"],
        int(meta["seed"]),
        meta.get("inputs_sha256"),
        tuple(meta.get("window", (-1, -1))),
        float(meta.get("softcap", 0.0)),
        meta.get("layout", "bhnd"),
    )


def replay_cases(path) -> list[Case]:
    """The Case of every case saved in ``path``, in order."""
    out = []
    with np.load(path) as z:
        metas = sorted((k for k in z.files if k.endswith("_meta")), key=lambda k: int(k[1:-5]))
        for key in metas:
            out.append(case_of_meta(json.loads(str(z[key]))))
    return out


def _cases(args, arch) -> list[Case]:
    """Every case to run: the replayed files', --variants', the default set (unless --only, --replay or
    --variants), then the --shape cases with the variant options (--dtype, --kv-heads, --window, --softcap,
    --layout); --warps / --m-tiles / --kv-tile / --stages override the default tiling of the last two."""

    cases = []
    for path in args.replay:
        cases += replay_cases(path)
    if getattr(args, "variants", False):
        cases += variant_cases(arch)
    quant = shape_quant(args) or "none"
    if quant != "none" and not args.shape:
        cases += quant_cases(arch)
    accs = SUPPORTED_PV_ACCUM if args.pv_accum == "all" else (args.pv_accum,)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    over = {
        key: val
        for key, val in (
            ("warps", args.warps),
            ("m_tiles", args.m_tiles),
            ("kv_tile", args.kv_tile),
            ("stages", args.stages),
        )
        if val is not None
    }
    seeds = range(args.seeds)
    if not (args.only or args.replay or getattr(args, "variants", False) or getattr(args, "quant", False)):
        for b, h, nq, nk, d, causal in DEFAULT_SHAPES:
            for acc in accs:
                cfg = KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc, **over)
                cases += [Case((b, h, h, nq, nk, d), cfg, kind, seed) for kind in kinds for seed in seeds]
    accs = tuple(a for a in accs if a in pv_accums(args.dtype, quant)) or ("f32",)
    for b, h, nq, nk, d, causal in [parse_shape(s) for s in args.shape]:
        hk = args.kv_heads if args.kv_heads is not None else h
        for seed in seeds:
            cases += variant(
                (b, h, hk, nq, nk, d),
                kinds=kinds,
                arch=arch,
                causal=causal,
                dtype=args.dtype,
                window=parse_window(args.window) or (-1, -1),
                softcap=args.softcap,
                layout=args.layout,
                accs=accs,
                seed=seed,
                quant=quant,
                **over,
            )
    return cases


def run(args) -> int:

    check_arguments(args)
    fa2_rule.check_arguments(args)
    if args.fa2_rule == "emulator":  # the rule on the emulator alone: no GPU, no bit checks
        return fa2_rule.run_emulator_only(args)
    rt.require_gpu()
    arch = rt.current_arch()
    serving_files = [path for path in args.replay if verify_serving.is_serving_capture(path)]
    if getattr(args, "serving", False) or serving_files:
        return _run_serving(args, arch, serving_files)
    if getattr(args, "fused", False):
        raise ValueError(
            "--fused runs the serving calls with their index check inside flash_fwd: it goes with --serving (or a "
            "serving --replay)"
        )
    cases = _cases(args, arch)
    check_cases(cases, arch)
    for c in cases:  # before any GPU work: replayed inputs must match
        if c.sha is not None and inputs_sha256(*c.inputs()) != c.sha:
            raise SystemExit(
                f"--replay: the inputs of {c.name()} no longer regenerate as recorded "
                "(make_case_inputs changed): this file cannot be re-captured case for case"
            )
    results, all_ok, saved = [], True, {}
    count = lambda f: len({f(c) for c in cases})
    print(
        f"flashsim verify on {arch}: {count(lambda c: c.shape)} shapes x {count(lambda c: c.config.pv_accum)} "
        f"accumulators x {count(lambda c: c.kind)} kinds x {count(lambda c: c.seed)} seeds, {len(cases)} cases"
        + (f" (replayed from {', '.join(args.replay)})" if args.replay else "")
    )
    width = max([44] + [len(c.name()) + 1 for c in cases])
    print(f"{'case':{width}} {'O equal':>9} {'O ulp':>6} {'LSE equal':>10} {'LSE ulp':>8}  first mismatch")
    for case in cases:
        cfg = case.config
        q, k, v = case.inputs()
        case_options = dict(window_size=case.window, softcap=case.softcap, layout=case.layout)
        od, ld, outs, times, flags = verify_case(q, k, v, cfg, arch, **case_options)
        name = case.name()
        where = ""
        for diff, kindname in ((od, "o"), (ld, "lse")):
            if diff.first_index is not None and not where:
                idx = diff.first_index
                col = idx[3] if kindname == "o" else 0
                blk, warp, lane, reg = kernel_coordinates(cfg, idx[0], idx[1], idx[2], col, kindname)
                where = (
                    f"{diff.name}{list(idx)} gpu {diff.first_values[0]} emu {diff.first_values[1]}"
                    f" <- block {blk} warp {warp} lane {lane} {reg}"
                )
        if flags[0] != flags[1]:
            where = f"overflow flag: gpu row {flags[0]}, emulator row {flags[1]}" + (f"; {where}" if where else "")
        ptx_bad = ptx_agrees(q, k, v, cfg, arch, outs, args.executor, **case_options) if args.ptx else ""
        if ptx_bad:
            where = f"flashsim.ptx differs from the GPU in {ptx_bad}" + (f"; {where}" if where else "")
        ok = od.ok and ld.ok and flags[0] == flags[1] and not ptx_bad
        all_ok &= ok
        print(
            f"{name:{width}} {od.bit_equal_fraction:9.4%} {od.max_ulp:6d} {ld.bit_equal_fraction:10.4%} "
            f"{ld.max_ulp:8d}  {where or '-'}"
        )
        results.append(
            dict(
                case=name,
                config=cfg.__dict__,
                o_equal=od.bit_equal_fraction,
                o_max_ulp=od.max_ulp,
                o_hist=od.ulp_hist,
                lse_equal=ld.bit_equal_fraction,
                lse_max_ulp=ld.max_ulp,
                first_mismatch=where,
                overflow_row=flags[0],
                gpu_s=times[0],
                emu_s=times[1],
            )
        )
        if args.save_cases:
            # outputs only: the inputs are regenerated from (kind, shape, seed) and checked by hash
            i = len(saved) // 3
            o_saved = outs[0].view(np.uint16) if outs[0].dtype.name == "bfloat16" else outs[0]  # npz: no bf16
            saved.update(
                {
                    f"c{i}_o": o_saved,
                    f"c{i}_lse": outs[1],
                    f"c{i}_meta": json.dumps(dict(case_meta(name, arch, case, q, k, v), overflow_row=outs[2])),
                }
            )

    note = getattr(sfu, "model_status", lambda arch: "")(arch)
    if note:
        print(f"ex2 model: {note}")
    print(f"verdict: {'every bit agrees' if all_ok else 'MISMATCH'} ({len(results)} cases)")
    if args.save_cases:
        np.savez_compressed(args.save_cases, **saved)
        print(f"saved {len(saved) // 3} cases to {args.save_cases}")
    fa2 = fa2_rule.report(args, arch)  # None without --fa2-rule; a report, not part of the exit status
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(arch=arch, ok=all_ok, cases=results, **({} if fa2 is None else {"fa2_rule": fa2})), f, indent=1
            )
    return 0 if all_ok else 1


def _run_serving(args, arch, serving_files) -> int:
    """--serving, or a --replay of serving captures: those cases alone (a capture file holds one kind of case)."""
    other = [path for path in args.replay if path not in serving_files]
    if other or args.shape or getattr(args, "variants", False) or getattr(args, "quant", None):
        raise ValueError(
            "--serving (or replaying a serving capture) runs the serving cases alone: leave out --shape, "
            "--variants, --quant and the replays of other captures"
        )
    cases = verify_serving.serving_cases() if getattr(args, "serving", False) else []
    for path in serving_files:
        cases += verify_serving.replay_cases(path)
    ok, results = verify_serving.run_serving(
        cases, arch, save_path=args.save_cases, sm_count=rt.sm_count(), fused=args.fused
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(arch=arch, ok=ok, serving=True, cases=results), f, indent=1)
    return 0 if ok else 1
