"""The emulator's engine options, and the one place where flashsim reads the environment for their defaults.

Options of how an engine runs (never of what it computes: every choice here gives the same bits) are arguments of
the call that uses them: ``flashsim.attention(..., engine=EngineOptions(...))``, ``flashsim.mma(..., threads=...)``.
Left out, an option takes its default from the environment variable below if it is set, else the built-in value:

    FLASHSIM_MMA_THREADS    mma_threads             threads of the numpy engine's tensor-core kernel (default: the
                                                    CPUs this process may use, at most 8)
    FLASHSIM_MAX_BYTES      max_bytes               memory a problem may need before the emulator refuses it
                                                    (default: this machine's memory, or the container's limit)
    FLASHSIM_JAX_FUSED      jax_fused               backend="jax" on one GPU runs the fused Pallas kernel (1) or
                                                    the scan engine (0); default 1
    FLASHSIM_PALLAS_PTX     pallas_inline_ptx       the fused kernel runs what PTX defines exactly as inline PTX (1)
                                                    or through Pallas's own lowering (0); default 1
    FLASHSIM_PALLAS_ROWS    pallas_rows             query rows per fused-kernel program (a power of two >= 16);
                                                    default 16
    FLASHSIM_PALLAS_WARPS   pallas_warps            Triton warps per fused-kernel program; default 16
    FLASHSIM_JAX_IEEE_CVT   jax_native_conversions  on GPU devices, f32 <-> f64 conversions are XLA's own (1) or
                                                    integer operations (0); default 1
    FLASHSIM_PTX_EXECUTOR   ptx_executor            backend="ptx" spreads its launches' blocks over a cluster
                                                    engine: "local:N" or a Dask scheduler's address
                                                    (flashsim.ptx.distributed); default none (this process)

FLASHSIM_CACHE (flashsim.calibration: where calibrated SFU tables live) and FLASHSIM_TRACEBACK (flashsim.cli: show a
user error's traceback) are the other two variables flashsim reads. The defaults were measured (docs/engines.md and
benchmarks/RESULTS.md say where). JAX's own compilation cache is JAX's setting: flashsim never changes it (set
``jax.config.update("jax_compilation_cache_dir", ...)`` or $JAX_COMPILATION_CACHE_DIR to keep compiled programs
between processes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

__all__ = ["EngineOptions", "default_mma_threads", "cache_override", "show_tracebacks"]

_MAX_DEFAULT_THREADS = 8


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _int(environ: Mapping, name: str, low: int = 1) -> int | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(float(text)) if name == "FLASHSIM_MAX_BYTES" else int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {text!r}")
    return value


def _flag(environ: Mapping, name: str, default: bool) -> bool:
    text = environ.get(name, "").strip()
    if not text:
        return default
    if text not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {text!r}")
    return text == "1"


@dataclass(frozen=True)
class EngineOptions:
    """How the emulator's engines run (the module docstring lists each option and its environment variable)."""

    mma_threads: int | None = None
    max_bytes: int | None = None
    jax_fused: bool = True
    pallas_inline_ptx: bool = True
    pallas_rows: int = 16
    pallas_warps: int = 16
    jax_native_conversions: bool = True
    ptx_executor: str | None = None

    def __post_init__(self):
        for name in ("mma_threads", "max_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"EngineOptions.{name} must be a positive int or None, got {value!r}")
        for name in ("pallas_rows", "pallas_warps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"EngineOptions.{name} must be a positive int, got {value!r}")
        for name in ("jax_fused", "pallas_inline_ptx", "jax_native_conversions"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"EngineOptions.{name} must be a bool, got {getattr(self, name)!r}")
        if self.ptx_executor is not None and not (isinstance(self.ptx_executor, str) and self.ptx_executor.strip()):
            raise ValueError(
                f"EngineOptions.ptx_executor must be 'local:N', an address or None, got {self.ptx_executor!r}"
            )

    @classmethod
    def from_environment(cls, environ: Mapping | None = None, **overrides) -> EngineOptions:
        """The defaults: each option from its environment variable where set, else the built-in value; keyword
        ``overrides`` win over both."""
        env = os.environ if environ is None else environ
        base = cls()
        values = dict(
            mma_threads=_int(env, "FLASHSIM_MMA_THREADS"),
            max_bytes=_int(env, "FLASHSIM_MAX_BYTES"),
            jax_fused=_flag(env, "FLASHSIM_JAX_FUSED", base.jax_fused),
            pallas_inline_ptx=_flag(env, "FLASHSIM_PALLAS_PTX", base.pallas_inline_ptx),
            pallas_rows=_int(env, "FLASHSIM_PALLAS_ROWS") or base.pallas_rows,
            pallas_warps=_int(env, "FLASHSIM_PALLAS_WARPS") or base.pallas_warps,
            jax_native_conversions=_flag(env, "FLASHSIM_JAX_IEEE_CVT", base.jax_native_conversions),
            ptx_executor=env.get("FLASHSIM_PTX_EXECUTOR", "").strip() or None,
        )
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"EngineOptions has no option {', '.join(sorted(unknown))}")
        return cls(**{**values, **overrides})


def default_mma_threads() -> int:
    """Threads of the tensor-core kernel when the call gives none: $FLASHSIM_MMA_THREADS, else the CPUs this process
    may use, at most 8 (read on every call, so it follows the environment; one lookup, not the whole options)."""
    return _int(os.environ, "FLASHSIM_MMA_THREADS") or max(1, min(_cpus(), _MAX_DEFAULT_THREADS))


def cache_override() -> str | None:
    """$FLASHSIM_CACHE: the user cache folder flashsim.calibration uses instead of the platform's, or None."""
    return os.environ.get("FLASHSIM_CACHE") or None


def show_tracebacks() -> bool:
    """$FLASHSIM_TRACEBACK set (non-empty): the CLI shows a user error's traceback instead of its one line."""
    return bool(os.environ.get("FLASHSIM_TRACEBACK"))
