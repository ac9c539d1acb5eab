"""The public entry points of the tensor-core model: ``mma`` (one instruction), ``mma_chain`` (the kernel's loop of
k16 steps on whole matrices) and ``mma_chain_generic`` (the one generic routine, the definition the fast path is
tested against), with the checks of their operands."""

from __future__ import annotations

import functools

import numpy as np

from ...arch import Arch, get_arch
from .. import xp as X
from ..target import PLAIN, Target
from . import fast, generic
from .blockscale import mma_f8f6f4
from .k32 import mma_k32
from .types import BF16, E4M3, E5M2, F16, F32, S8, check_batch, mma_type


def _check_array(name: str, x, dtypes: tuple, shape: tuple) -> None:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype {' or '.join(str(d) for d in dtypes)}, got {x.dtype}")
    if x.ndim < 2 or x.shape[-2:] != shape:
        raise ValueError(f"{name} must have shape (..., {shape[0]}, {shape[1]}), got {x.shape}")


def mma(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    arch: str | Arch = "sm_90",
    backend: str = "numpy",
    *,
    threads: int | None = None,
    kind: str | None = None,
    a_format: str | None = None,
    b_format: str | None = None,
) -> np.ndarray:
    """d = a @ b + c as ``mma.sync.aligned.m16n8k16.row.col`` computes it on ``arch``, bit for bit (8-bit inputs:
    ``mma.sync.aligned.m16n8k32.row.col``, see ``mma_k32``: a (..., 16, 32) and b (..., 32, 8) int8 with c int32, or
    float8_e4m3fn / float8_e5m2 with c float32 / float16).

    a: (..., 16, 16) float16 or bfloat16 (row-major M x K); b: (..., 16, 8) of a's dtype (K x N); c: (..., 16, 8)
    float32, or float16 with float16 inputs.  Returns d with c's dtype and shape.  The leading (batch) dimensions of
    a and b must broadcast to c's batch shape (numpy rules), so that one B can serve many A's; d always has c's shape.
    Nothing is cast: a wrong dtype, shape or arch raises ValueError naming the argument.
    backend: "numpy" (default) or "jax" (the same generic routine as every engine, ``mma_chain_generic``, compiled
    by jax.jit once per arch and type; needs jax; returns a numpy array too). threads: of the numpy backend's
    compiled kernel (default: flashsim.settings, FLASHSIM_MMA_THREADS or the CPUs this process may use).

    kind="f8f6f4" (sm_120a's ``mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4``, arch "sm_120"): a (..., 16, 32) and
    b (..., 32, 8) uint8, one code per element of ``a_format`` / ``b_format`` (any of "e2m1" 0..15, "e2m3" / "e3m2"
    0..63, "e4m3" / "e5m2" bytes), c float32 or float16 (see ``blockscale.mma_f8f6f4``); the block-scaled kinds are
    ``flashsim.mma_block_scale``. a_format / b_format without kind raise ValueError.
    """
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    if kind is not None or a_format is not None or b_format is not None:
        if kind is None or str(kind).lower().removeprefix("kind::") != "f8f6f4":
            raise ValueError(
                f"flashsim.mma takes kind='f8f6f4' with a_format and b_format (got kind={kind!r}); the block-scaled "
                "kinds mxf8f6f4 / mxf4 / mxf4nvf4 are flashsim.mma_block_scale"
            )
        if a_format is None or b_format is None:
            raise ValueError("kind='f8f6f4' needs a_format and b_format (each one of e2m1, e2m3, e3m2, e4m3, e5m2)")
        return mma_f8f6f4(a, b, c, a_format=a_format, b_format=b_format, arch=arch, backend=backend)
    spec = get_arch(arch)
    target = Target(mma_threads=threads)
    if isinstance(a, np.ndarray) and a.dtype in (S8, E4M3, E5M2):  # 8-bit inputs: m16n8k32 (it checks them)
        for name, x in (("b", b), ("c", c)):
            if not isinstance(x, np.ndarray):
                raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
        run = functools.partial(mma_k32, arch=spec, target=target)
        return X.on_jax(run, a, b, c) if backend == "jax" else run(a, b, c)
    _check_array("a", a, (F16, BF16), (16, 16))
    _check_array("b", b, (a.dtype,), (16, 8))
    _check_array("c", c, (F32, F16), (16, 8))
    mma_type(a.dtype, c.dtype)
    check_batch(c.shape, a=a, b=b)
    if backend == "jax":
        return X.on_jax(_jitted_chain(spec), a, b, c)
    return fast.chain_fast(a, b, c, spec, threads)


_JITTED: dict = {}


def _jitted_chain(spec: Arch):
    """``mma_chain_generic`` for ``spec`` under jax.jit, one per set of tensor-core parameters (sm_80, sm_86 and sm_89
    share one; jit itself then caches one compilation per shapes and dtypes).  Call it under xp.enable_x64()."""
    key = (spec.mma_block_k, spec.mma_fraction_bits, spec.mma_zero_exponent_f32, spec.mma_zero_exponent_f16)
    fn = _JITTED.get(key)
    if fn is None:
        import jax

        fn = _JITTED[key] = jax.jit(functools.partial(mma_chain_generic, arch=spec))
    return fn


def mma_unchecked(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90", out: np.ndarray | None = None
) -> np.ndarray:
    """``mma`` on numpy arrays without validation: a (n,16,16), b (n,16,8), c (n,16,8) -> (n,16,8).

    The caller guarantees the dtypes of ``MMA_TYPES`` and the shapes; ``out`` (n,16,8) of c's dtype may be given.
    """
    d = fast.chain_fast(a, b, c, get_arch(arch))
    if out is None:
        return d
    out[...] = d
    return out


def _check_chain(a, b, c) -> tuple:
    """Validate mma_chain's operands (static properties only: works on tracers); returns the output shape."""
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not hasattr(x, "dtype") or not hasattr(x, "shape") or len(x.shape) < 2:
            raise ValueError(f"{name} must be an array with at least 2 dimensions, got {type(x).__name__}")
    a_dt, b_dt, c_dt = np.dtype(a.dtype), np.dtype(b.dtype), np.dtype(c.dtype)
    if a_dt not in (F16, BF16):
        raise ValueError(f"a must have dtype float16 or bfloat16, got {a_dt}")
    if b_dt != a_dt:
        raise ValueError(f"b must have a's dtype {a_dt}, got {b_dt}")
    if c_dt not in (F32, F16):
        raise ValueError(f"c must have dtype float32 or float16, got {c_dt}")
    mma_type(a_dt, c_dt)
    m, k = a.shape[-2:]
    kb, n = b.shape[-2:]
    if m % 16 or k % 16:
        raise ValueError(f"a must have shape (..., M, K) with M and K multiples of 16, got {tuple(a.shape)}")
    if kb != k or n % 8:
        raise ValueError(f"b must have shape (..., {k}, N) with N a multiple of 8, got {tuple(b.shape)}")
    if tuple(c.shape[-2:]) != (m, n):
        raise ValueError(f"c must have shape (..., {m}, {n}), got {tuple(c.shape)}")
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    except ValueError:
        raise ValueError(
            f"the batch dimensions of a {tuple(a.shape[:-2])}, b {tuple(b.shape[:-2])} and c "
            f"{tuple(c.shape[:-2])} do not broadcast"
        ) from None
    return batch + (m, n)


def mma_chain(a, b, c, arch: str | Arch = "sm_90", target: Target = PLAIN):
    """The kernel's loop of mma.sync.m16n8k16 on whole matrices: for each k16 step s in order, every (m16, n8) tile
    of d gets d = mma(a_tile[:, 16s:16s+16], b_tile[16s:16s+16, :], d), starting from d = c.

    a (..., M, K) float16 / bfloat16 (row-major), b (..., K, N) of a's dtype (row-major K x N, e.g. K^T as a view),
    c (..., M, N) float32, or float16 with float16 inputs; M % 16 == 0, N % 8 == 0, K % 16 == 0; leading dimensions
    broadcast.  Returns d: c's dtype, shape (broadcast batch) + (M, N), bit for bit the hardware's.
    numpy arrays run the numpy engine's fast path; JAX arrays (or tracers) run ``mma_chain_generic`` (inside
    jax.jit, trace under ``flashsim.numerics.xp.enable_x64()``).  A wrong dtype or shape raises ValueError.
    ``target``: how the engine traces it (flashsim.numerics.target).
    """
    spec = get_arch(arch)
    _check_chain(a, b, c)
    return fast.chain(a, b, c, spec, target)


def mma_chain_generic(a, b, c, arch: str | Arch = "sm_90", target: Target = PLAIN):
    """``mma_chain`` computed by the one generic routine, whatever the namespace (numpy or JAX): the definition
    every engine's fast path is tested against."""
    spec = get_arch(arch)
    _check_chain(a, b, c)
    return generic.chain(X.namespace(a, b, c), a, b, c, spec, target)
