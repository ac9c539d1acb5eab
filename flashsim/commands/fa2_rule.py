"""FlashAttention-2's own acceptance rule for a forward kernel's f16 output, as a report of `flashsim verify`.

FlashAttention-2's output test accepts a kernel when, on standard-normal f16 q, k, v with softmax scale 1/sqrt(d),

    max |out - out_ref|  <=  2 * max |out_pt - out_ref|

where the maxima run over every element of (batch, heads, Nq, d) and

* ``out_ref`` is attention computed in float32 from the upcast inputs (scores, softmax and P @ V in f32) and, as
  FlashAttention-2's reference returns it, rounded to the inputs' dtype f16 at the end (``reference_f32``). The
  report also gives each ratio against the unrounded f32 result (``ratio_f32_ref`` in the JSON);
* ``out_pt`` is "PyTorch's f16 attention": scores = q @ (k * scale)^T with f16 operands, f32 accumulation, rounded
  to f16 (FlashAttention-2 builds it with its reorder flag set, which scales k rather than q); softmax computed in
  f32 from the f16 scores and rounded to f16; out = P @ v with f16 operands, f32 accumulation, rounded to f16.
  With torch and a CUDA GPU it is computed there, by the very torch operations (``pytorch_f16_torch``; cuBLAS's
  reduced-precision f16 reductions are switched off for it, so both matmuls accumulate in f32 as defined: leaving
  them on, as torch does by default, could only make out_pt less accurate and the rule more lenient). Otherwise a
  numpy emulation of the same steps (``pytorch_f16_numpy``): f16 x f16 products are exact in f32, so an f32 matmul
  of the upcast operands is an f16-input, f32-accumulate matmul; what differs from cuBLAS is the order of the f32
  additions (and numpy's exp against CUDA's expf), so out_pt's error differs from torch's by rounding noise.

Causal masks are aligned bottom-right (key j visible to query i iff j <= i + Nk - Nq), as the kernel does; rows
that see no key are 0 in out_ref and out_pt, as in the kernel.

The grid is FlashAttention-2's: the (Nq, Nk) pairs of ``SEQLENS`` x d in (64, 128) x causal or not = 40 cases, with
batch 4 and 9 heads; ``quick=True`` keeps the cases with both lengths <= 512 (24 cases) with batch 1 and 2 heads,
for the emulator on a CPU. ``run_rule`` evaluates every pv_accum mode of flashsim.config.SUPPORTED_PV_ACCUM on a
case's inputs (out_ref and out_pt are computed once per case), given a callable that produces the kernel's
``out``: the GPU kernel (``gpu_producer``) or the emulator (``emulator_producer``).

This is a report: f16 P @ V is expected to fail some cases. `flashsim verify`'s exit status reflects only its
bit-exactness checks.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from .. import config, gpu
from ..config import KernelConfig
from ..emulator import attention
from ..masking import key_visible

# FlashAttention-2's (seqlen_q, seqlen_k) grid of its output test
SEQLENS = (
    (113, 203),
    (128, 217),
    (113, 211),
    (108, 256),
    (256, 512),
    (512, 256),
    (1024, 1024),
    (1023, 1024),
    (1024, 1023),
    (2048, 2048),
)
HEAD_DIMS = (64, 128)
FULL_BATCH, FULL_HEADS = 4, 9  # FlashAttention-2's test: batch 4, 9 heads
QUICK_BATCH, QUICK_HEADS = 1, 2
QUICK_MAX_SEQLEN = 512
DEFAULT_SEED = 0
RULE = "max|out - out_ref| <= 2 * max|out_pt - out_ref|"
_CHUNK_ELEMS = 1 << 25  # score elements per chunk of heads in the numpy references (128 MiB in f32)


@dataclass(frozen=True)
class Case:
    nq: int
    nk: int
    d: int
    causal: bool

    @property
    def name(self) -> str:
        return f"{self.nq}x{self.nk} d{self.d}{' causal' if self.causal else ''}"


def grid(quick: bool = False) -> list[Case]:
    """The 40 cases of FlashAttention-2's output test (or the 24 with both lengths <= 512 when ``quick``)."""
    return [
        Case(nq, nk, d, causal)
        for nq, nk in SEQLENS
        for d in HEAD_DIMS
        for causal in (False, True)
        if not quick or max(nq, nk) <= QUICK_MAX_SEQLEN
    ]


def make_inputs(case: Case, batch: int, heads: int, seed: int = DEFAULT_SEED):
    """Standard-normal f16 q (B, H, Nq, d), k and v (B, H, Nk, d); the same for a case's causal and non-causal runs
    (as in FlashAttention-2's test, which seeds every case alike)."""
    rng = np.random.default_rng((seed, case.nq, case.nk, case.d, batch, heads))
    shapes = ((batch, heads, case.nq, case.d), (batch, heads, case.nk, case.d), (batch, heads, case.nk, case.d))
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(np.float16) for s in shapes)


def _visible(nq: int, nk: int, causal: bool) -> np.ndarray:
    return key_visible(np.arange(nq)[:, None], np.arange(nk)[None, :], nq, nk, causal)


def _scale32(d: int) -> np.float32:
    """The f32 multiplier torch applies for ``x / math.sqrt(d)`` on a half or float tensor: 1 / f32(sqrt(d)) in f32."""
    return np.float32(1.0) / np.float32(math.sqrt(d))


def _softmax_f32(s: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Row softmax in float32 of f32 scores with invisible keys at -inf; rows that see no key give 0."""
    s = np.where(visible, s, np.float32(-np.inf))
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, np.float32(0.0))
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True, dtype=np.float32)
    return e / np.where(total == 0, np.float32(1.0), total)


def _head_chunks(heads: int, nq: int, nk: int):
    step = max(1, _CHUNK_ELEMS // (nq * nk))
    return [slice(i, min(i + step, heads)) for i in range(0, heads, step)]


def reference_f32(q, k, v, causal: bool) -> np.ndarray:
    """Attention in float32 from the f16 inputs upcast (scores (q / sqrt(d)) k^T, softmax, P v, all f32), as a
    float32 array; FlashAttention-2's out_ref is this rounded to f16."""
    b, h, nq, d = q.shape
    nk = k.shape[2]
    visible = _visible(nq, nk, causal)
    scale = _scale32(d)
    qf, kf, vf = (x.reshape(b * h, -1, d).astype(np.float32) for x in (q, k, v))
    out = np.empty((b * h, nq, d), np.float32)
    for c in _head_chunks(b * h, nq, nk):
        s = np.matmul(qf[c] * scale, kf[c].transpose(0, 2, 1))
        out[c] = np.matmul(_softmax_f32(s, visible), vf[c])
    return out.reshape(b, h, nq, d)


def pytorch_f16_numpy(q, k, v, causal: bool) -> np.ndarray:
    """PyTorch's f16 attention emulated in numpy (module docstring): f16 (B, H, Nq, d)."""
    b, h, nq, d = q.shape
    nk = k.shape[2]
    visible = _visible(nq, nk, causal)
    k_scaled = (k.astype(np.float32) * _scale32(d)).astype(np.float16)  # torch: k / sqrt(d), f16 result
    qf = q.reshape(b * h, nq, d).astype(np.float32)
    kf = k_scaled.reshape(b * h, nk, d).astype(np.float32)
    vf = v.reshape(b * h, nk, d).astype(np.float32)
    out = np.empty((b * h, nq, d), np.float16)
    for c in _head_chunks(b * h, nq, nk):
        scores = np.matmul(qf[c], kf[c].transpose(0, 2, 1)).astype(np.float16)  # exact products, f32 sums
        p = _softmax_f32(scores.astype(np.float32), visible).astype(np.float16)
        out[c] = np.matmul(p.astype(np.float32), vf[c]).astype(np.float16)
    return out.reshape(b, h, nq, d)


def pytorch_f16_torch(q, k, v, causal: bool, device="cuda") -> np.ndarray:
    """PyTorch's f16 attention by torch itself on ``device``: f16 (B, H, Nq, d) numpy."""
    import torch

    d, nq, nk = q.shape[3], q.shape[2], k.shape[2]
    flags = torch.backends.cuda.matmul
    reduced = flags.allow_fp16_reduced_precision_reduction
    flags.allow_fp16_reduced_precision_reduction = False  # f32 accumulation, as defined
    try:
        with torch.no_grad():
            tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(x)).to(device) for x in (q, k, v))
            scores = torch.matmul(tq, (tk / math.sqrt(d)).transpose(-2, -1))
            hidden = torch.from_numpy(~_visible(nq, nk, causal)).to(device)
            if causal:
                scores = scores.masked_fill(hidden, float("-inf"))
            p = torch.softmax(scores, dim=-1)  # f16 in and out, f32 inside
            if causal:
                p = p.masked_fill(hidden.all(dim=-1, keepdim=True), 0.0)
            out = torch.matmul(p, tv)
            return out.cpu().numpy()
    finally:
        flags.allow_fp16_reduced_precision_reduction = reduced


def out_pt_backend(device_id: int | None = None):
    """(callable (q, k, v, causal) -> out_pt, description): torch on the CUDA GPU when torch is importable and sees
    one, else the numpy emulation."""
    try:
        import torch

        cuda, why = torch.cuda.is_available(), "torch sees no CUDA device"
    except Exception as exc:  # not installed, or a broken install: the emulation stands in
        torch, cuda, why = None, False, f"torch not importable: {type(exc).__name__}"
    if cuda:
        dev = f"cuda:{device_id or 0}"
        return (
            lambda q, k, v, causal: pytorch_f16_torch(q, k, v, causal, dev),
            f"torch {torch.__version__} on {dev} ({torch.cuda.get_device_name(device_id or 0)})",
        )
    return pytorch_f16_numpy, f"numpy emulation of torch's f16 steps ({why})"


def max_abs_error(out, ref) -> float:
    """max |out - ref| over every element, in float64; inf if a difference is NaN (a NaN in out)."""
    diff = np.abs(np.asarray(out, np.float64) - np.asarray(ref, np.float64))
    if diff.size == 0:
        return 0.0
    return float("inf") if np.isnan(diff).any() else float(diff.max())


def _ratio(err: float, err_pt: float) -> float:
    if err_pt > 0:
        return err / err_pt
    return 0.0 if err == 0 else float("inf")


def rule(out, out_ref, out_pt) -> dict:
    """FlashAttention-2's acceptance of ``out``: dict(err, err_pt, ratio = err / err_pt, ok = err <= 2 err_pt)."""
    err, err_pt = max_abs_error(out, out_ref), max_abs_error(out_pt, out_ref)
    return dict(err=err, err_pt=err_pt, ratio=_ratio(err, err_pt), ok=bool(err <= 2 * err_pt))


def pv_accum_modes() -> tuple:

    return tuple(config.SUPPORTED_PV_ACCUM)


def run_rule(
    produce_out,
    *,
    cases=None,
    quick=False,
    batch=None,
    heads=None,
    seed=DEFAULT_SEED,
    pv_accums=None,
    out_pt=None,
    out_pt_name=None,
    target="",
    echo=print,
) -> dict:
    """Evaluate the rule on every case x pv_accum mode; returns the report (JSON-ready) and prints its section.

    ``produce_out(q, k, v, causal, pv_accum)`` returns the kernel's f16 output for numpy f16 inputs.
    ``cases`` default to ``grid(quick)``; batch and heads to 4 x 9 (1 x 2 when quick). ``out_pt`` (q, k, v, causal)
    -> f16, default ``pytorch_f16_numpy``. ``echo`` prints the lines (None: silent)."""
    say = echo or (lambda *a, **kw: None)
    cases = grid(quick) if cases is None else list(cases)
    batch = batch or (QUICK_BATCH if quick else FULL_BATCH)
    heads = heads or (QUICK_HEADS if quick else FULL_HEADS)
    modes = tuple(pv_accums or pv_accum_modes())
    if out_pt is None:
        out_pt, out_pt_name = pytorch_f16_numpy, out_pt_name or "numpy emulation of torch's f16 steps"
    out_pt_name = out_pt_name or getattr(out_pt, "__name__", "a given callable")
    say(f"FlashAttention-2 acceptance rule on {target or 'the kernel'}: {RULE}")
    say(
        f"  {len(cases)} cases, batch {batch} x {heads} heads, N(0,1) f16 inputs (seed {seed}), scale 1/sqrt(d); "
        f"out_ref: f32 rounded to f16; out_pt: {out_pt_name}"
    )
    say("  a report: it does not change the exit status (that is the bit-exactness checks' alone)")
    say(f"  {'case':22} {'max|pt-ref|':>11}  " + "  ".join(f"{m + ' ratio':>11}" for m in modes))
    rows, t_start = [], time.perf_counter()
    ref_s = kernel_s = 0.0
    for case in cases:
        q, k, v = make_inputs(case, batch, heads, seed)
        t0 = time.perf_counter()
        ref32 = reference_f32(q, k, v, case.causal)
        ref16 = ref32.astype(np.float16)
        pt = out_pt(q, k, v, case.causal)
        ref_s += time.perf_counter() - t0
        pt_err32 = max_abs_error(pt, ref32)
        row = dict(asdict(case), err_pt=max_abs_error(pt, ref16), err_pt_f32_ref=pt_err32, modes={})
        for mode in modes:
            t0 = time.perf_counter()
            out = np.asarray(produce_out(q, k, v, case.causal, mode))
            kernel_s += time.perf_counter() - t0
            if out.shape != q.shape:
                raise ValueError(f"{case.name} {mode}: the output has shape {out.shape}, expected {q.shape}")
            r = rule(out, ref16, pt)
            r["ratio_f32_ref"] = _ratio(max_abs_error(out, ref32), pt_err32)
            row["modes"][mode] = r
        rows.append(row)
        say(
            f"  {case.name:22} {row['err_pt']:11.3e}  "
            + "  ".join(f"{r['ratio']:8.3f} {'ok' if r['ok'] else 'NO'}" for r in row["modes"].values()),
            flush=True,
        )
    summary = {}
    for mode in modes:
        failing = [
            dict(nq=r["nq"], nk=r["nk"], d=r["d"], causal=r["causal"], ratio=r["modes"][mode]["ratio"])
            for r in rows
            if not r["modes"][mode]["ok"]
        ]
        summary[mode] = dict(passed=len(rows) - len(failing), total=len(rows), failing=failing)
        text = (
            "; failing (Nq, Nk, d, causal) ratio: "
            + ", ".join(f"({f['nq']}, {f['nk']}, {f['d']}, {f['causal']}) {f['ratio']:.3f}" for f in failing)
            if failing
            else ""
        )
        say(f"  pv_accum {mode:6} {len(rows) - len(failing)}/{len(rows)} cases pass{text}")
    total_s = time.perf_counter() - t_start
    say(f"  ({total_s:.1f} s: references {ref_s:.1f} s, kernel {kernel_s:.1f} s)")
    return dict(
        rule=RULE,
        target=target,
        out_ref="float32 attention rounded to f16",
        out_pt=out_pt_name,
        batch=batch,
        heads=heads,
        seed=seed,
        quick=bool(quick),
        pv_accum=list(modes),
        cases=rows,
        summary=summary,
        seconds=dict(total=total_s, references=ref_s, kernel=kernel_s),
    )


# -- the two producers of `out` ---------------------------------------------------------------------------


def _config_for(arch, d, causal, mode, overrides):
    """None (the arch's default configuration) without tile overrides, else the default with them."""
    if not overrides:
        return None

    return KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=mode, **overrides)


def gpu_producer(arch: str, overrides=None):
    """out from the real kernel, flashsim.gpu.attention (numpy in, numpy out, synchronous)."""

    def produce(q, k, v, causal, mode):

        cfg = _config_for(arch, q.shape[3], causal, mode, overrides)
        extra = {} if cfg is None else dict(config=cfg)
        return gpu.attention(q, k, v, causal=causal, pv_accum=mode, **extra)[0]

    return produce


def emulator_producer(arch: str = "sm_90", overrides=None):
    """out from the emulator (bit-identical to the kernel on ``arch``)."""

    def produce(q, k, v, causal, mode):

        cfg = _config_for(arch, q.shape[3], causal, mode, overrides)
        extra = {} if cfg is None else dict(config=cfg)
        return attention(q, k, v, causal=causal, pv_accum=mode, arch=arch, progress=False, **extra)[0]

    return produce


# -- `flashsim verify --fa2-rule` ------------------------------------------------------------------------------

EMULATOR_ARCH = "sm_90"  # the emulator plays the H200's kernel


def add_arguments(p) -> None:
    p.add_argument(
        "--fa2-rule",
        choices=("gpu", "emulator"),
        default=None,
        help="also report FlashAttention-2's acceptance rule (max|out-ref| <= 2 max|out_pt-ref|, "
        "out_pt = PyTorch's f16 attention) on its 40-case grid, for each --pv-accum mode, on the GPU "
        "kernel's output ('gpu', after the bit checks) or the emulator's ('emulator': no GPU "
        f"needed, no bit checks run; emulates {EMULATOR_ARCH}). A report only: failing cases "
        "(expected with f16 P@V) do not change the exit status, which reflects the bit-exactness "
        "checks alone. --warps/--m-tiles/--kv-tile/--stages apply to it too",
    )
    p.add_argument(
        "--fa2-quick",
        action="store_true",
        help="with --fa2-rule: only the 24 cases with both lengths <= 512, batch 1 x 2 heads "
        "(the full grid is batch 4 x 9 heads, up to 2048 x 2048)",
    )


def check_arguments(args) -> None:
    """ValueError for option combinations --fa2-rule cannot honour (before any work)."""
    if getattr(args, "fa2_quick", False) and not getattr(args, "fa2_rule", None):
        raise ValueError("--fa2-quick needs --fa2-rule gpu or --fa2-rule emulator")
    if getattr(args, "fa2_rule", None) == "emulator":
        gpu_only = [
            flag
            for flag, given in (
                ("--shape", args.shape),
                ("--only", args.only),
                ("--replay", args.replay),
                ("--save-cases", args.save_cases),
            )
            if given
        ]
        if gpu_only:
            raise ValueError(
                f"--fa2-rule emulator runs no GPU cases, so {', '.join(gpu_only)} has nothing to do "
                "(use --fa2-rule gpu on a machine with a GPU)"
            )


def _overrides(args) -> dict:
    return {
        key: val
        for key, val in (
            ("warps", args.warps),
            ("m_tiles", args.m_tiles),
            ("kv_tile", args.kv_tile),
            ("stages", args.stages),
        )
        if val is not None
    }


def _modes(args) -> tuple | None:
    acc = getattr(args, "pv_accum", None)
    return None if acc in (None, "all", "both") else (acc,)


def report(args, arch=None) -> dict | None:
    """The --fa2-rule section of `flashsim verify`: None without --fa2-rule; else the report (printed as it goes).
    ``arch``: the GPU's (for --fa2-rule gpu). After the bit checks, a failure here must not lose their results:
    for --fa2-rule gpu an exception is printed (with its traceback, on stderr) and reported as {"error": ...}."""
    mode = getattr(args, "fa2_rule", None)
    if mode is None:
        return None
    print()
    if mode == "emulator":
        out_pt, name = out_pt_backend()
        return run_rule(
            emulator_producer(EMULATOR_ARCH, _overrides(args)),
            quick=args.fa2_quick,
            pv_accums=_modes(args),
            out_pt=out_pt,
            out_pt_name=name,
            target=f"the emulator ({EMULATOR_ARCH})",
        )
    try:
        from ..gpu import runtime as rt

        out_pt, name = out_pt_backend(rt.device_id())
        return run_rule(
            gpu_producer(arch, _overrides(args)),
            quick=args.fa2_quick,
            pv_accums=_modes(args),
            out_pt=out_pt,
            out_pt_name=name,
            target=f"the GPU kernel ({arch})",
        )
    except Exception as exc:
        import sys
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(f"FlashAttention-2 rule: not completed ({type(exc).__name__}: {exc})", flush=True)
        return dict(error=f"{type(exc).__name__}: {exc}")


def run_emulator_only(args) -> int:
    """`flashsim verify --fa2-rule emulator`: the rule's report alone (no GPU, no bit checks); exit status 0."""
    import json

    result = report(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(arch=EMULATOR_ARCH, ok=None, cases=[], fa2_rule=result), f, indent=1)
    return 0
