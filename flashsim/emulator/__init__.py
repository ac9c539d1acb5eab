"""The kernel emulated on the CPU (``attention``) and the float64 reference (``reference_attention``).

kernel_program.py is the kernel's program, written once against an array namespace; engine_numpy.py runs it
eagerly (the default), engine_jax.py jit-compiles it for JAX's CPU or GPU devices and shards it over a Mesh;
engine_serving.py runs it over the serving kernel's grid (serving.py: ``attention_with_kvcache``,
``attention_varlen`` and their float64 references). Each
engine owns its memory estimate (``peak_bytes``), checked before anything is allocated.
"""

from __future__ import annotations

import numpy as np

from ..overflow import OverflowCheck, check_mode, first_flagged, overflow_error, v_head
from ..problem import check_memory, prepare, shape_text, to_bhnd
from ..settings import EngineOptions
from . import engine_jax, engine_numpy, engine_ptx
from .reference import reference_attention
from .serving import (
    attention_varlen,
    attention_with_kvcache,
    reference_attention_varlen,
    reference_attention_with_kvcache,
)

__all__ = [
    "attention",
    "reference_attention",
    "attention_with_kvcache",
    "attention_varlen",
    "reference_attention_with_kvcache",
    "reference_attention_varlen",
    "check_emulator_memory",
    "ENGINES",
]

ENGINES = {"numpy": engine_numpy, "jax": engine_jax, "ptx": engine_ptx}  # backend -> module (run, peak_bytes)


def _engine(backend: str):
    if backend not in ENGINES:
        raise ValueError(f"backend must be one of {', '.join(map(repr, ENGINES))}, got {backend!r}")
    return ENGINES[backend]


def check_emulator_memory(prob, backend: str = "numpy", options: EngineOptions | None = None) -> None:
    """Refuse (ValueError with the estimate) a problem whose emulation by ``backend`` cannot fit in memory: the
    engine's ``peak_bytes`` against ``options.max_bytes`` (default: from the environment), else this machine's."""
    options = options if options is not None else EngineOptions.from_environment()
    need = _engine(backend).peak_bytes(prob)
    check_memory(need, f"emulating {shape_text(prob)} ({backend})", options.max_bytes)


def attention(
    q,
    k,
    v,
    *,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch="sm_90",
    config=None,
    backend="numpy",
    progress=None,
    check_overflow=True,
    engine: EngineOptions | None = None,
):
    """What kernel/flash_fwd.cu returns on ``arch``, bit for bit: (o like q, lse float32 (B, Hq, Nq)).

    q (B, Hq, Nq, d), k and v (B, Hkv, Nk, d), Hq a multiple of Hkv (MQA / GQA); ``layout="bnhd"``: (B, N, H, d) in
    and out, as flash_attn (lse stays (B, Hq, Nq)). All float16 or all ``ml_dtypes.bfloat16`` numpy arrays; d a
    multiple of 32 from 32 to 256. ``causal``: bottom-right aligned; ``window_size=(left, right)``: sliding window
    (FlashAttention-2's meaning, -1 unbounded; flashsim.masking); ``softcap`` > 0: scores s become
    softcap * tanh(s / softcap); ``quant="int8"``: Q K^T in INT8 as SageAttention (K smoothed by its mean over
    tokens, per-16-row / per-16-key symmetric scales: flashsim.emulator.quantize, kernel/quantize.cu), the LSE
    still that of the unsmoothed scores; ``quant="int8-fp8"``: that and P V in FP8 e4m3 (f16 inputs; pv_accum
    "f32", or "f16x2": f16 sums of 64 keys from zero added to an f32 O, V in the range that keeps them finite:
    flashsim.config.FP8_V_RANGE); ``quant="nvfp4"`` (arch "sm_120" only; d 64 or 128): Q and K in NVFP4 on the
    block-scaled FP4 mma, P V as "int8-fp8" (docs/quantized.md). ``config`` (flashsim.KernelConfig) fixes the tiling; by
    default the arch's default configuration for these options. Options left out (None) take the config's values, or the
    defaults; given, they must agree with it (flashsim.problem.resolve_options). ``backend``: "numpy" (default), "jax",
    or "ptx" (the kernel's own PTX in flashsim.ptx, slow: for verification); ``engine``: how the engine runs
    (flashsim.settings.EngineOptions: threads, memory limit, the JAX engine's form; the same bits whatever they are;
    default: from the environment). A problem whose emulation would not fit in memory is refused first (the engine's
    ``peak_bytes`` against ``EngineOptions.max_bytes`` or this machine's).
    With an f16 P@V mma on f16 P and V (pv_accum "f16" or "f16x2" without FP8) a row whose f16 accumulator
    overflowed raises FloatingPointError naming the row and the bound, as the GPU runner does (flashsim.overflow);
    ``check_overflow=False`` returns the kernel's inf / NaN instead; "deferred" returns (o, lse, check) with
    ``check()`` raising the same error when called.
    """
    prob = prepare(
        q,
        k,
        v,
        causal=causal,
        softmax_scale=softmax_scale,
        pv_accum=pv_accum,
        window_size=window_size,
        softcap=softcap,
        layout=layout,
        quant=quant,
        arch=arch,
        config=config,
    )
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise ValueError(f"{name} must be a numpy array (the emulator runs on the CPU), got {type(x).__name__}")
    run = _engine(backend).run
    if engine is not None and not isinstance(engine, EngineOptions):
        raise ValueError(f"engine must be a flashsim.EngineOptions, got {type(engine).__name__}")
    options = engine if engine is not None else EngineOptions.from_environment()
    mode = check_mode(check_overflow)
    check_emulator_memory(prob, backend, options)
    o, lse, rows = run(*(to_bhnd(x, prob.layout) for x in (q, k, v)), prob, progress=progress, options=options)
    o = np.ascontiguousarray(to_bhnd(o, prob.layout))

    def check():
        flat = first_flagged(rows.flag) if prob.config.pv_mma_f16 else None
        if flat is not None:
            vh = v_head(prob, v, flat)
            l = None if rows.l is None else float(rows.l.flat[flat])  # the ptx engine has the kernel's outputs only
            raise overflow_error(prob, flat, float(np.abs(vh.astype(np.float32)).max()), l)

    if mode == "deferred":
        return o, lse, OverflowCheck(check)
    if mode:
        check()
    return o, lse
